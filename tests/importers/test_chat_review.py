"""Review fixes for the OpenAI importers: a Responses run whose earlier turns the API keeps is flagged,
and an appended chat response's errors name its own place."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from car.errors import InputError
from car.importers import load_any
from car.trace import Trace


def write(tmp_path: Path, data: Any, name: str = "run.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def warnings(t: Trace) -> dict[str, str]:
    assert t.fidelity is not None
    return {w.code: w.message for w in t.fidelity.warnings}


def error(path: Path) -> str:
    with pytest.raises(InputError) as info:
        load_any(path)
    return str(info.value)


# -- 1. openai-responses: earlier turns held server-side -------------------------------------------

ANSWER = [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "42"}]}]


def test_a_response_continuing_a_stored_conversation_says_its_history_is_not_in_the_file(
    tmp_path: Path,
) -> None:
    data = {
        "id": "resp_1",
        "object": "response",
        "previous_response_id": "resp_0",
        "input": [{"type": "function_call_output", "call_id": "c9", "output": "42"}],
        "output": ANSWER,
    }
    codes = warnings(load_any(write(tmp_path, data)))
    assert "orphan-tool-result" in codes  # as before: the call is in the missing turns
    message = codes["inputs-unresolved"]
    assert "previous_response_id 'resp_0'" in message
    assert "held server-side and not in the file" in message
    assert "GET /v1/responses/resp_1/input_items" in message


@pytest.mark.parametrize("conversation", ["conv_7", {"id": "conv_7"}])
def test_a_request_in_a_conversation_object_says_so(tmp_path: Path, conversation: Any) -> None:
    data = {"conversation": conversation, "input": "and now?", "output": ANSWER}
    message = warnings(load_any(write(tmp_path, data)))["inputs-unresolved"]
    assert "conversation 'conv_7'" in message


@pytest.mark.parametrize("inp", [None, []])
def test_a_stored_response_without_its_input_says_the_task_is_missing(tmp_path: Path, inp: Any) -> None:
    data: dict[str, Any] = {"id": "resp_2", "object": "response", "output": ANSWER}
    if inp is not None:
        data["input"] = inp
    message = warnings(load_any(write(tmp_path, data)))["inputs-unresolved"]
    assert "holds no input" in message and "task" in message


def test_a_self_contained_responses_run_has_no_such_warning(tmp_path: Path) -> None:
    data = {"object": "response", "previous_response_id": None, "input": "q", "output": ANSWER}
    assert "inputs-unresolved" not in warnings(load_any(write(tmp_path, data)))


# -- 2. openai-chat: an appended response's place --------------------------------------------------

NAMELESS = {
    "role": "assistant",
    "tool_calls": [{"id": "a", "function": {"name": "", "arguments": "{}"}}],
}
USER = {"role": "user", "content": "q"}


@pytest.mark.parametrize(
    ("data", "place"),
    [
        (
            {"messages": [USER], "response": {"choices": [{"message": NAMELESS}]}},
            "$.response.choices[0].message.tool_calls[0].function.name",
        ),
        (
            {"messages": [USER], "choices": [{"message": NAMELESS}]},
            "$.choices[0].message.tool_calls[0].function.name",
        ),
    ],
)
def test_an_error_in_an_appended_response_names_its_place(
    tmp_path: Path, data: dict[str, Any], place: str
) -> None:
    assert f": {place}: expected a non-empty tool name" in error(write(tmp_path, data))


def test_an_error_in_an_appended_response_of_a_jsonl_line_names_the_line(tmp_path: Path) -> None:
    ok = {"messages": [USER, {"role": "assistant", "content": "a"}]}
    bad = {"messages": [USER], "response": {"choices": [{"message": NAMELESS}]}}
    path = tmp_path / "runs.jsonl"
    path.write_text(f"{json.dumps(ok)}\n{json.dumps(bad)}\n")
    with pytest.raises(InputError, match=r"line 2: \$\.response\.choices\[0\]\.message\.tool_calls"):
        load_any(path, item=0)
