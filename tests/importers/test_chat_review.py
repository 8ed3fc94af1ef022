"""Review fixes for the OpenAI importers: a Responses run whose earlier turns the API keeps is
flagged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from car.importers import load_any
from car.trace import Trace


def write(tmp_path: Path, data: Any, name: str = "run.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def warnings(t: Trace) -> dict[str, str]:
    assert t.fidelity is not None
    return {w.code: w.message for w in t.fidelity.warnings}


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
