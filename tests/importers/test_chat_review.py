"""Review fixes for the OpenAI importers: a Responses run whose earlier turns the API keeps is flagged,
an appended chat response's errors name its own place, id-less tool results (Ollama) pair with the
id-less calls in order, and values nested too deep to write are one located error, exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run, warnings, write

from car.errors import InputError
from car.importers import import_file, load_any
from car.importers.base import MAX_NESTING


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
    place = r"line 2: \$\.response\.choices\[0\]\.message\.tool_calls"
    with pytest.raises(InputError, match=place + r".*item=1 picks this run"):
        load_any(path, item=1)
    (only,) = import_file(path)  # the other line imports; this one is skipped, with that place
    assert only.steps[-1].action.text == "a"


# -- 3. openai-chat: tool results without ids (Ollama) ---------------------------------------------


def ollama_call(name: str, **args: Any) -> dict[str, Any]:
    return {"function": {"name": name, "arguments": args}}


def test_id_less_results_pair_with_id_less_calls_by_name_then_order(tmp_path: Path) -> None:
    data = {
        "model": "llama3.1",
        "messages": [
            USER,
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [ollama_call("f", a=1), ollama_call("g")],
            },
            {"role": "tool", "content": "from g", "tool_name": "g"},  # named: pairs with g
            {"role": "tool", "content": "from f"},  # unnamed: the first call left
            {"role": "assistant", "tool_calls": [ollama_call("h")]},
            {"role": "tool", "content": "from h", "name": "h"},
            {"role": "assistant", "content": "done"},
        ],
    }
    t = load_any(write(tmp_path, data))
    calls = {c.id: c.name for c in t.steps[1].action.tool_calls}
    assert [(calls[o.call_id], o.content) for o in t.steps[1].observations] == [
        ("g", "from g"),
        ("f", "from f"),
    ]
    (h,) = t.steps[2].action.tool_calls
    assert [(o.call_id, o.content) for o in t.steps[2].observations] == [(h.id, "from h")]
    message = warnings(t)["results-paired-by-order"]
    assert "paired with the calls recorded without an id, in order" in message
    assert message.endswith("first at $.messages[2]")


@pytest.mark.parametrize(
    ("extra", "detail"),
    [
        ({}, "no call without an id is left for it to answer"),
        ({"tool_name": "zz"}, "no call of 'zz' without an id is left for it to answer"),
    ],
)
def test_an_id_less_result_that_cannot_be_paired_names_its_place(
    tmp_path: Path, extra: dict[str, Any], detail: str
) -> None:
    data = [
        USER,
        {"role": "assistant", "tool_calls": [ollama_call("f")]},
        {"role": "tool", "content": "r", "tool_name": "f"},
        {"role": "tool", "content": "again", **extra},
    ]
    message = error(write(tmp_path, {"messages": data}))
    assert (
        ": $.messages[3].tool_call_id: missing; expected the id of the tool call this message answers"
        in (message)
    )
    assert detail in message


def test_id_less_results_never_pair_with_calls_that_have_ids(tmp_path: Path) -> None:
    data = [
        USER,
        {"role": "assistant", "tool_calls": [{"id": "c1", **ollama_call("f")}]},
        {"role": "tool", "content": "r"},
    ]
    assert "$.messages[2].tool_call_id: missing; expected the id" in error(
        write(tmp_path, {"messages": data})
    )


# -- 4. values nested too deep to write ------------------------------------------------------------


def nest(n: int) -> dict[str, Any]:
    value: Any = 1
    for _ in range(n):
        value = {"a": value}
    return dict(value)


def deep_chat(arguments: Any) -> dict[str, Any]:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}
    return {"messages": [USER, {"role": "assistant", "tool_calls": [call]}]}


@pytest.mark.parametrize("as_text", [False, True])
def test_arguments_too_deep_to_write_are_one_located_error_in_validate_and_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], as_text: bool
) -> None:
    deep = nest(260)
    path = write(tmp_path, deep_chat(json.dumps(deep) if as_text else deep), "deep.json")
    place = f"car: error: {path}: $.messages[1].tool_calls[0].function.arguments: expected "
    detail = f"nested at most {MAX_NESTING} levels deep (they are nested 260 levels deep"
    for args in (["validate", str(path)], ["import", str(path), "-o", str(tmp_path / "x.json")]):
        assert run(args) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and err.startswith(place) and detail in err
    assert not (tmp_path / "x.json").exists()


def test_arguments_as_deep_as_car_writes_import_and_read_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, deep_chat(nest(MAX_NESTING)), "deep.json")
    out = tmp_path / "x.json"
    assert run(["validate", str(path)]) == 0
    assert run(["import", str(path), "-o", str(out)]) == 0
    capsys.readouterr()
    assert load_any(out).steps[1].action.tool_calls[0].arguments == nest(MAX_NESTING)


def test_other_values_too_deep_to_write_are_refused_at_import(tmp_path: Path) -> None:
    # openai-chat keeps a request's metadata as the trace's: {"metadata": <it>}, one level more
    data = {"metadata": nest(MAX_NESTING), "messages": [USER, {"role": "assistant", "content": "a"}]}
    message = error(write(tmp_path, data))
    assert message.endswith(
        f": $: expected a run car can write (the value at $.metadata of the trace is nested "
        f"{MAX_NESTING + 1} levels deep; car writes at most {MAX_NESTING})"
    )
    data["metadata"] = nest(MAX_NESTING - 1)
    load_any(write(tmp_path, data)).to_json()


def test_a_native_trace_too_deep_to_write_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write(tmp_path, {"messages": [USER, {"role": "assistant", "content": "a"}]}, "chat.json")
    native = json.loads(load_any(src).to_json())
    native["steps"][1]["metadata"] = nest(300)
    path = write(tmp_path, native, "native.json")
    out = tmp_path / "out.json"
    assert run(["import", str(path), "-o", str(out)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"car: error: {path}: $.steps[1].metadata: expected a value nested at most {MAX_NESTING} "
        "levels deep, got one nested 300 levels deep, which car cannot write; flatten it"
    )
    assert not out.exists()
    assert run(["validate", str(path)]) == 2  # refused on reading, as car import does


# -- legacy function definitions --------------------------------------------------------------------


def test_a_legacy_request_s_functions_are_the_assistant_s_tools(tmp_path: Path) -> None:
    # Requests (and fine-tuning lines) of the legacy function-calling API define their functions in
    # `functions`, not `tools`.
    weather = {"name": "weather", "parameters": {"type": "object", "properties": {}}}
    request = {
        "functions": [weather],
        "messages": [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "function_call": {"name": "weather", "arguments": "{}"}},
            {"role": "function", "name": "weather", "content": "snow"},
        ],
    }
    t = load_any(write(tmp_path, request))
    assert t.actor("assistant").tools == (weather,)
    assert "expected a list of tool definitions, got an object" in error(
        write(tmp_path, {**request, "functions": weather})
    )


def test_an_image_in_a_function_call_output_is_warned_about_where_it_sits(tmp_path: Path) -> None:
    # A function_call_output's output may be a list of input_text / input_image / input_file parts.
    output = [
        {"type": "input_text", "text": "chart:"},
        {"type": "input_image", "image_url": "data:image/png;base64,AA"},
    ]
    items = [
        {"type": "message", "role": "user", "content": "plot it"},
        {"type": "function_call", "call_id": "c1", "name": "plot", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": output},
    ]
    t = load_any(write(tmp_path, items))
    assert [(o.call_id, o.content) for o in t.steps[1].observations] == [("c1", "chart:")]
    assert warnings(t)["attachments-unresolved"] == (
        "images or files were not imported (text only; first at $[2].output[1])"
    )


def test_anthropic_tool_result_blocks_car_does_not_read_are_named(tmp_path: Path) -> None:
    # A tool may return search_result blocks ({type, source, title, content: [text blocks]}).
    found = {"type": "search_result", "source": "s", "title": "t", "content": [{"type": "text"}]}
    request = {
        "system": "s",
        "messages": [
            {"role": "user", "content": "find"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [found]}],
            },
        ],
    }
    t = load_any(write(tmp_path, request))
    assert warnings(t)["items-skipped"] == "content blocks of type 'search_result' were not imported"


def test_the_other_choices_of_an_appended_response_are_warned_about(tmp_path: Path) -> None:
    choices = [
        {"index": 0, "message": {"role": "assistant", "content": "a"}},
        {"index": 1, "message": {"role": "assistant", "content": "b"}},
    ]
    t = load_any(write(tmp_path, {"messages": [USER], "response": {"choices": choices}}))
    assert [s.action.text for s in t.steps] == ["q", "a"]
    assert warnings(t)["choices-skipped"] == (
        "the appended response holds 2 choices; only the first is imported as the assistant's turn "
        "(at $.response.choices)"
    )
