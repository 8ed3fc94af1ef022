"""OTLP/JSON spans a reviewer found mishandled: OpenLLMetry (Traceloop) spans, failed calls that a
retry follows, content cut off or of the wrong shape, and parallel tool spans that start out of
order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run

from car.importers import import_file, load_any
from car.trace import Trace

TRACE = "0123456789abcdef0123456789abcdef"
_SPAN0 = "$.resourceSpans[0].scopeSpans[0].spans[0]"


def _otlp(*spans: dict[str, Any]) -> dict[str, Any]:
    return {"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}


def _span(
    sid: int, attrs: dict[str, Any], *, trace: str = TRACE, name: str = "span", **extra: Any
) -> dict[str, Any]:
    """A span starting at `sid` whose attributes are string values (a non-string as JSON text)."""
    return {
        "traceId": trace,
        "spanId": f"{sid:016x}",
        "name": name,
        "startTimeUnixNano": str(sid),
        "attributes": [
            {"key": k, "value": {"stringValue": v if isinstance(v, str) else json.dumps(v)}}
            for k, v in attrs.items()
        ],
        **extra,
    }


def _write(tmp_path: Path, data: Any, name: str = "otel.json") -> Path:
    f = tmp_path / name
    f.write_text(json.dumps(data))
    return f


def _codes(t: Trace) -> set[str]:
    assert t.fidelity is not None
    return {w.code for w in t.fidelity.warnings}


def _warning(t: Trace, code: str) -> str:
    assert t.fidelity is not None
    (warning,) = [w for w in t.fidelity.warnings if w.code == code]
    return warning.message


def _text(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def _chat(sid: int, inputs: Any, outputs: Any, **extra: Any) -> dict[str, Any]:
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
    if inputs is not None:
        attrs["gen_ai.input.messages"] = inputs
    if outputs is not None:
        attrs["gen_ai.output.messages"] = outputs
    return _span(sid, attrs, **extra)


# -- OpenLLMetry (Traceloop) ------------------------------------------------------------------------


def _openllmetry_chat(sid: int, *, trace: str = TRACE) -> dict[str, Any]:
    """A chat call as OpenLLMetry's OpenAI instrumentation writes it: llm.request.type, flattened
    prompt and completion, functions under llm.request.functions, no gen_ai.operation.name."""
    return _span(
        sid,
        {
            "llm.request.type": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.request.temperature": "0.5",
            "llm.request.functions.0.name": "search",
            "llm.request.functions.0.description": "Search the web",
            "llm.request.functions.0.parameters": {
                "type": "object",
                "properties": {"q": {"type": "string"}},
            },
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": "Be brief.",
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": "find x",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.finish_reason": "tool_calls",
            "gen_ai.completion.0.tool_calls.0.id": "call_1",
            "gen_ai.completion.0.tool_calls.0.name": "search",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"q": "x"}',
        },
        trace=trace,
        name="openai.chat",
    )


def test_openllmetry_chat_spans_are_model_calls_with_their_functions(tmp_path: Path) -> None:
    tool = _span(
        2,
        {
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "search",
            "traceloop.entity.input": {"args": [], "kwargs": {"q": "x"}},
            "traceloop.entity.output": '"X found"',
        },
        name="search.tool",
    )
    (t,) = import_file(_write(tmp_path, _otlp(_openllmetry_chat(1), tool)))
    assert t.fidelity is not None and t.fidelity.class_ == "A"
    assert "content-not-captured" not in _codes(t) and "orphan-tool-span" not in _codes(t)
    (step,) = t.steps
    assert [(m.role, m.content) for m in step.context or ()] == [
        ("system", "Be brief."),
        ("user", "find x"),
    ]
    assert [c.signature() for c in step.action.tool_calls] == ['search({"q":"x"})']
    assert [(o.call_id, o.content) for o in step.observations] == [("call_1", '"X found"')]
    assert step.sampling is not None and step.sampling.temperature == 0.5
    assert t.actor("assistant").tools == (
        {
            "name": "search",
            "description": "Search the web",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    )


def test_an_openllmetry_agent_span_names_the_actor(tmp_path: Path) -> None:
    agent = _span(
        1, {"traceloop.span.kind": "agent", "traceloop.entity.name": "planner"}, name="planner.agent"
    )
    call = _openllmetry_chat(2)
    call["parentSpanId"] = agent["spanId"]
    (t,) = import_file(_write(tmp_path, _otlp(agent, call)))
    assert [s.actor for s in t.steps] == ["planner"]


def test_a_file_mixing_openllmetry_and_genai_traces_keeps_both(tmp_path: Path) -> None:
    genai = _chat(1, [_text("user", "q1")], [_text("assistant", "a1")], trace="a" * 32)
    traces = import_file(_write(tmp_path, _otlp(genai, _openllmetry_chat(2, trace="b" * 32))))
    assert [t.id for t in traces] == ["a" * 32, "b" * 32]
    assert [m.content for m in traces[1].steps[0].context or ()] == ["Be brief.", "find x"]


def test_openllmetry_embedding_spans_are_not_model_calls(tmp_path: Path) -> None:
    embedding = _span(2, {"llm.request.type": "embedding", "gen_ai.prompt.0.content": "x"})
    (t,) = import_file(_write(tmp_path, _otlp(_openllmetry_chat(1), embedding)))
    assert len(t.steps) == 1


def _legacy_call(sid: int, prompts: dict[str, str], completions: dict[str, str]) -> dict[str, Any]:
    """A call of OpenAI's legacy function-calling API as OpenLLMetry flattens it: no call ids."""
    attrs = {"llm.request.type": "chat", "gen_ai.request.model": "gpt-3.5-turbo"}
    attrs |= {f"gen_ai.prompt.{k}": v for k, v in prompts.items()}
    attrs |= {f"gen_ai.completion.{k}": v for k, v in completions.items()}
    return _span(sid, attrs, name="openai.chat")


def test_legacy_function_results_answer_the_calls_made_before_them(tmp_path: Path) -> None:
    ask = {"0.role": "user", "0.content": "weather in Paris, then Rome?"}
    paris = {"1.role": "assistant", "2.role": "function", "2.content": "18C"}
    calls = [
        _legacy_call(
            1,
            ask,
            {
                "0.role": "assistant",
                "0.tool_calls.0.name": "weather",  # OpenLLMetry: the function_call, without an id
                "0.tool_calls.0.arguments": '{"city": "Paris"}',
            },
        ),
        _legacy_call(
            2,
            ask | paris,
            {
                "0.role": "assistant",
                "0.function_call.name": "weather",  # its older versions
                "0.function_call.arguments": '{"city": "Rome"}',
            },
        ),
        _legacy_call(
            3,
            ask
            | paris
            | {"3.role": "assistant", "4.role": "function", "4.name": "weather"}
            | {"4.content": "21C"},
            {"0.role": "assistant", "0.content": "18C and 21C."},
        ),
    ]
    (t,) = import_file(_write(tmp_path, _otlp(*calls)))
    assert [[(o.call_id, o.content) for o in s.observations] for s in t.steps] == [
        [("call_0_0_0", "18C")],
        [("call_1_0_0", "21C")],
        [],
    ]
    assert [c.signature() for c in t.steps[1].action.tool_calls] == ['weather({"city":"Rome"})']
    context = t.steps[2].context or ()
    assert [(m.role, m.content, m.tool_call_id) for m in context][2:] == [
        ("tool", "18C", "call_0_0_0"),
        ("assistant", "", None),
        ("tool", "21C", "call_1_0_0"),
    ]
    assert "function results" in _warning(t, "results-paired-by-order")


def _legacy_json_run(tmp_path: Path, *, events: bool) -> Trace:
    """Legacy function calls as OpenAI-style JSON messages (gen_ai.input.messages and
    gen_ai.output.messages without parts), or as the events' bodies: two calls, then their results
    named, the later call's first."""
    ask = {"role": "user", "content": "where is Paris, and its weather?"}

    def asked(name: str, args: str) -> dict[str, Any]:
        return {"role": "assistant", "content": None, "function_call": {"name": name, "arguments": args}}

    search, weather = asked("search", '{"q": "Paris"}'), asked("weather", '{"city": "Paris"}')
    results = [
        {"role": "function", "name": "weather", "content": "18C"},
        {"role": "function", "name": "search", "content": "in France"},
    ]
    said = {"role": "assistant", "content": "France, 18C."}
    turns = [([ask], search), ([ask, search], weather), ([ask, search, weather, *results], said)]
    if not events:
        calls = [_chat(k + 1, inputs, [output]) for k, (inputs, output) in enumerate(turns)]
        (t,) = import_file(_write(tmp_path, _otlp(*calls)))
        return t
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-3.5-turbo"}
    names = {"user": "gen_ai.user.message", "assistant": "gen_ai.assistant.message"}
    spans = []
    for k, (inputs, output) in enumerate(turns):
        body = [{"event.name": names.get(m["role"], "gen_ai.tool.message"), **m} for m in inputs]
        body.append({"event.name": "gen_ai.choice", "index": 0, "message": output})
        spans.append(_span(k + 1, {**chat, "events": json.dumps(body)}))
    (t,) = import_file(_write(tmp_path, _otlp(*spans)))
    return t


@pytest.mark.parametrize("events", [False, True], ids=["messages", "events"])
def test_legacy_function_calls_in_json_messages_pair_by_name(tmp_path: Path, events: bool) -> None:
    t = _legacy_json_run(tmp_path, events=events)
    assert [[c.signature() for c in s.action.tool_calls] for s in t.steps] == [
        ['search({"q":"Paris"})'],
        ['weather({"city":"Paris"})'],
        [],
    ]
    assert [[(o.call_id, o.content) for o in s.observations] for s in t.steps] == [
        [("call_0_0_0", "in France")],
        [("call_1_0_0", "18C")],
        [],
    ]
    context = t.steps[2].context or ()
    assert [(m.role, m.name, m.content, m.tool_call_id) for m in context][3:] == [
        ("tool", "weather", "18C", "call_1_0_0"),
        ("tool", "search", "in France", "call_0_0_0"),
    ]
    assert "function results" in _warning(t, "results-paired-by-order")


def test_a_legacy_function_call_that_is_not_an_object_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = [{"role": "assistant", "function_call": "search"}]
    f = _write(tmp_path, _otlp(_chat(1, [{"role": "user", "content": "q"}], out)))
    assert run(["import", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"car: error: {f}: {_SPAN0}.attributes[3].value.stringValue")
    assert "[0].function_call: expected a function call {name, arguments}" in err


def test_calls_without_ids_get_ids_unique_in_the_trace(tmp_path: Path) -> None:
    # Each step's first call without an id was call_0_0: the results below, paired by function
    # name, then answered the calls by that shared id in order, the weather on the search's step.
    ask = {"0.role": "user", "0.content": "where is Paris, and its weather?"}
    made = {"1.role": "assistant", "2.role": "assistant"}
    results = {"3.role": "function", "3.name": "weather", "3.content": "18C"}
    results |= {"4.role": "function", "4.name": "search", "4.content": "in France"}
    calls = [
        _legacy_call(
            1,
            ask,
            {"0.role": "assistant", "0.tool_calls.0.name": "search", "0.tool_calls.0.arguments": "{}"},
        ),
        _legacy_call(
            2,
            ask | {"1.role": "assistant"},
            {"0.role": "assistant", "0.tool_calls.0.name": "weather", "0.tool_calls.0.arguments": "{}"},
        ),
        _legacy_call(3, ask | made | results, {"0.role": "assistant", "0.content": "France, 18C."}),
    ]
    (t,) = import_file(_write(tmp_path, _otlp(*calls)))
    assert [[c.id for c in s.action.tool_calls] for s in t.steps] == [["call_0_0_0"], ["call_1_0_0"], []]
    assert [[(o.call_id, o.content) for o in s.observations] for s in t.steps] == [
        [("call_0_0_0", "in France")],
        [("call_1_0_0", "18C")],
        [],
    ]
    context = t.steps[2].context or ()
    assert [(m.content, m.tool_call_id) for m in context if m.role == "tool"] == [
        ("18C", "call_1_0_0"),
        ("in France", "call_0_0_0"),
    ]


def _answered_in_context(t: Trace) -> None:
    """Each tool message of every step's context answers a call of an assistant message before it
    in that context, as an OpenAI-style server requires of the messages it is sent."""
    for s in t.steps:
        made: set[str] = set()
        for m in s.context or ():
            if m.role == "tool":
                assert m.tool_call_id in made, (s.index, m)
            made |= {c.id for c in m.tool_calls}


@pytest.mark.parametrize("events", [False, True], ids=["messages", "events"])
def test_an_input_s_calls_without_ids_take_the_ids_of_the_calls_their_results_answer(
    tmp_path: Path, events: bool
) -> None:
    # The input's own calls were call_2_in_1_0 and call_2_in_2_0, while the results after them
    # answered call_0_0_0 and call_1_0_0: no tool message answered a call of its context.
    t = _legacy_json_run(tmp_path, events=events)
    context = t.steps[2].context or ()
    assert [[c.id for c in m.tool_calls] for m in context if m.role == "assistant"] == [
        ["call_0_0_0"],
        ["call_1_0_0"],
    ]
    _answered_in_context(t)


def _function_run(tmp_path: Path, result: dict[str, Any]) -> Trace:
    """One search call, then `result` in the next call's input after the call."""
    ask = {"role": "user", "content": "where is Paris?"}
    search = {"role": "assistant", "function_call": {"name": "search", "arguments": "{}"}}
    calls = [
        _chat(1, [ask], [search]),
        _chat(2, [ask, search, result], [{"role": "assistant", "content": "In France."}]),
    ]
    (t,) = import_file(_write(tmp_path, _otlp(*calls)))
    return t


def test_a_function_result_named_after_no_call_answers_the_first_call_left(tmp_path: Path) -> None:
    # It was left unpaired, without a word: no step's observation, a tool message without an id.
    t = _function_run(tmp_path, {"role": "function", "name": "lookup", "content": "in France"})
    assert [(o.call_id, o.content) for o in t.steps[0].observations] == [("call_0_0_0", "in France")]
    _answered_in_context(t)
    assert _warning(t, "results-paired-by-order").endswith(
        "first at $.resourceSpans[0].scopeSpans[0].spans[1].attributes[2].value.stringValue[2]"
    )


def test_a_result_of_a_call_made_before_the_run_answers_its_call_in_the_input(
    tmp_path: Path,
) -> None:
    # The first request repeats an earlier conversation (a chat server traces each request): the
    # result answers the call before it in that input, which no step made.
    ask = {"role": "user", "content": "where is Paris?"}
    search = {"role": "assistant", "function_call": {"name": "search", "arguments": "{}"}}
    result = {"role": "function", "name": "search", "content": "in France"}
    inputs = [ask, search, result, {"role": "user", "content": "and Rome?"}]
    f = _write(tmp_path, _otlp(_chat(1, inputs, [{"role": "assistant", "content": "In Italy."}])))
    (t,) = import_file(f)
    context = t.steps[0].context or ()
    assert [(m.role, m.tool_call_id) for m in context][1:3] == [
        ("assistant", None),
        ("tool", "call_0_in_1_0"),
    ]
    _answered_in_context(t)
    assert "results-paired-by-order" in _codes(t)


def test_a_result_no_recorded_call_can_answer_is_named(tmp_path: Path) -> None:
    # OpenLLMetry writes neither the function_call of an input's assistant message nor the name of
    # a function message: a result from before the run answers no recorded call. It stays in the
    # context, and was said nowhere.
    prompts = {"0.role": "user", "0.content": "where is Paris?", "1.role": "assistant"}
    prompts |= {"2.role": "function", "2.content": "in France", "3.role": "user"}
    prompts |= {"3.content": "and Rome?"}
    (t,) = import_file(
        _write(tmp_path, _otlp(_legacy_call(1, prompts, {"0.role": "assistant", "0.content": "Italy."})))
    )
    assert [(m.role, m.content) for m in t.steps[0].context or ()][2] == ("tool", "in France")
    message = _warning(t, "orphan-tool-result")
    assert "answer no call recorded before them" in message
    assert message.endswith(f"first at {_SPAN0}.attributes[5].value.stringValue")  # 2.role


def test_openllmetry_tool_events_without_ids_answer_the_calls_before_them(tmp_path: Path) -> None:
    # OpenLLMetry's event mode writes a tool message's content alone, without the id of the call it
    # answers (and a legacy function result as a user message of role function), and a choice's
    # calls beside its message; an assistant message's calls are its body's own tool_calls.
    first, second = _chat(1, None, None), _chat(5, None, None)
    call = {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}
    made = {"tool_calls": [call]}
    records = [
        _log(first, 2, "gen_ai.user.message", {"content": "weather?"}),
        _log(first, 3, "gen_ai.choice", {"index": "0", "message": {"content": None}, **made}),
        _log(second, 6, "gen_ai.user.message", {"content": "weather?"}),
        _log(second, 7, "gen_ai.assistant.message", made),
        _log(second, 8, "gen_ai.tool.message", {"content": "snow"}),
        _log(second, 9, "gen_ai.choice", {"message": {"role": "assistant", "content": "Snow."}}),
    ]
    f = tmp_path / "otel.jsonl"
    f.write_text(f"{json.dumps(_otlp(first, second))}\n{json.dumps(_logs(*records))}\n")
    (t,) = import_file(f)
    assert [(o.call_id, o.content) for o in t.steps[0].observations] == [("c1", "snow")]
    context = t.steps[1].context or ()
    assert [(m.role, m.tool_call_id) for m in context][1:] == [("assistant", None), ("tool", "c1")]
    _answered_in_context(t)
    assert _warning(t, "results-paired-by-order").endswith(
        "first at line 2: $.resourceLogs[0].scopeLogs[0].logRecords[4].body.kvlistValue"
    )


def test_a_result_without_an_id_answers_no_call_a_result_with_one_answered(tmp_path: Path) -> None:
    ask = _text("user", "where is Paris, and its weather?")

    def made(name: str, **id_: str) -> dict[str, Any]:
        return {"role": "assistant", "parts": [{"type": "tool_call", "name": name, **id_}]}

    def result(text: str, **id_: str) -> dict[str, Any]:
        return {"role": "tool", "parts": [{"type": "tool_call_response", "response": text, **id_}]}

    search, found = made("search", id="c1"), result("in France", id="c1")
    weather = made("weather")
    calls = [
        _chat(1, [ask], [search]),
        _chat(2, [ask, search, found], [weather]),
        _chat(3, [ask, search, found, weather, result("18C")], [_text("assistant", "France, 18C.")]),
    ]
    (t,) = import_file(_write(tmp_path, _otlp(*calls)))
    assert [[(o.call_id, o.content) for o in s.observations] for s in t.steps] == [
        [("c1", "in France")],
        [("call_1_0_0", "18C")],
        [],
    ]
    _answered_in_context(t)


# -- failed calls ---------------------------------------------------------------------------------


def _failed(sid: int, inputs: Any) -> dict[str, Any]:
    span = _chat(sid, inputs, None, status={"code": 2, "message": "429 rate limit"})
    span["attributes"].append({"key": "error.type", "value": {"stringValue": "RateLimitError"}})
    return span


def test_a_failed_call_is_left_out_with_a_warning_not_the_capture_hint(tmp_path: Path) -> None:
    user = [_text("user", "q")]
    retried = _chat(2, user, [_text("assistant", "a")])
    (t,) = import_file(_write(tmp_path, _otlp(_failed(1, user), retried)))
    assert [s.action.text for s in t.steps] == ["a"]
    assert t.fidelity is not None and t.fidelity.class_ == "A"
    assert "content-not-captured" not in _codes(t)
    assert _warning(t, "model-call-failed") == (
        "1 model call failed (span status error, no output) and was left out: a failed call made "
        f"no decision (first at {_SPAN0}: 429 rate limit)"
    )


def test_failed_calls_are_counted_and_named_by_error_type_without_a_status_message(
    tmp_path: Path,
) -> None:
    user = [_text("user", "q")]
    first, second = _failed(1, user), _failed(2, user)
    first["status"] = second["status"] = {"code": "STATUS_CODE_ERROR"}
    data = _otlp(first, second, _chat(3, user, [_text("assistant", "a")]))
    (t,) = import_file(_write(tmp_path, data))
    assert len(t.steps) == 1
    message = _warning(t, "model-call-failed")
    assert message.startswith("2 model calls failed") and message.endswith(": RateLimitError)")


def test_a_failed_call_with_an_output_is_kept(tmp_path: Path) -> None:
    span = _chat(1, [_text("user", "q")], [_text("assistant", "partial")], status={"code": 2})
    (t,) = import_file(_write(tmp_path, _otlp(span)))
    assert [s.action.text for s in t.steps] == ["partial"]
    assert "model-call-failed" not in _codes(t)


def test_a_trace_whose_every_call_failed_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _write(tmp_path, _otlp(_failed(1, [_text("user", "q")])))
    assert run(["import", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"car: error: {f}: {_SPAN0}: expected a model call that did not fail")
    assert f"every model call of trace {TRACE} failed" in err and "429 rate limit" in err


# -- content that cannot be read ------------------------------------------------------------------

_INPUT_AT = f"{_SPAN0}.attributes[2].value.stringValue"  # operation, model, then input messages


def test_content_cut_off_by_a_length_limit_is_named_not_the_capture_hint(tmp_path: Path) -> None:
    cut = json.dumps([_text("user", "x" * 50)])[:40]
    (t,) = import_file(_write(tmp_path, _otlp(_chat(1, cut, [_text("assistant", "ok")]))))
    assert "content-not-captured" not in _codes(t)
    assert _warning(t, "content-unparsed") == (
        "recorded message content could not be read, so the calls it belongs to lack those "
        "messages: gen_ai.input.messages is not valid JSON (possibly cut off by an attribute "
        f"length limit) (first at {_INPUT_AT})"
    )
    assert t.fidelity is not None and t.fidelity.class_ == "B"  # the input is still missing


def test_content_with_surrounding_whitespace_is_read(tmp_path: Path) -> None:
    padded = " \n" + json.dumps([_text("user", "hi")]) + "\n "
    (t,) = import_file(_write(tmp_path, _otlp(_chat(1, padded, [_text("assistant", "ok")]))))
    assert t.fidelity is not None and t.fidelity.class_ == "A"
    assert [m.content for m in t.steps[0].context or ()] == ["hi"]
    assert _codes(t) <= {"sampling-missing"}


def test_an_object_where_a_list_of_messages_belongs_is_named(tmp_path: Path) -> None:
    data = _otlp(_chat(1, json.dumps({"role": "user"}), "[]"))
    (t,) = import_file(_write(tmp_path, data))
    assert "content-not-captured" not in _codes(t)  # both were recorded: "[]" is no output
    assert _warning(t, "content-unparsed").endswith(
        f"gen_ai.input.messages is an object, not a list of messages (first at {_INPUT_AT})"
    )


def test_plain_text_where_a_list_of_messages_belongs_is_named(tmp_path: Path) -> None:
    (t,) = import_file(_write(tmp_path, _otlp(_chat(1, "hello", [_text("assistant", "ok")]))))
    assert "gen_ai.input.messages is not JSON (first at" in _warning(t, "content-unparsed")


def test_entries_that_are_not_message_objects_are_named_and_the_rest_kept(tmp_path: Path) -> None:
    inputs = json.dumps(["hello", _text("user", "hi"), 3])
    (t,) = import_file(_write(tmp_path, _otlp(_chat(1, inputs, [_text("assistant", "ok")]))))
    assert [m.content for m in t.steps[0].context or ()] == ["hi"]
    assert _warning(t, "content-unparsed").endswith(
        f"entries of gen_ai.input.messages that are not message objects (first at {_INPUT_AT}[0])"
    )


def test_content_never_recorded_still_gets_the_capture_hint(tmp_path: Path) -> None:
    (t,) = import_file(_write(tmp_path, _otlp(_chat(1, None, None))))
    assert "content-not-captured" in _codes(t) and "content-unparsed" not in _codes(t)


# -- parallel tool spans without call ids ---------------------------------------------------------


def _search_run(arguments_key: str, kind: dict[str, str]) -> dict[str, Any]:
    """One call making two parallel `search` calls (q=x, then q=y); their tool spans, without call
    ids, start in the other order (y, then x)."""
    calls = [
        {"type": "tool_call", "id": f"c_{q}", "name": "search", "arguments": {"q": q}}
        for q in ("x", "y")
    ]
    call = _chat(1, [_text("user", "go")], [{"role": "assistant", "parts": calls}])
    spans = [
        _span(sid, {**kind, "gen_ai.tool.name": "search", arguments_key: {"q": q}, "out": q.upper()})
        for sid, q in ((2, "y"), (3, "x"))
    ]
    for s in spans:  # the result under each convention's key
        result = s["attributes"].pop()["value"]
        for key in ("gen_ai.tool.call.result", "output.value"):
            s["attributes"].append({"key": key, "value": result})
    return _otlp(call, *spans)


@pytest.mark.parametrize(
    ("arguments_key", "kind"),
    [
        ("gen_ai.tool.call.arguments", {"gen_ai.operation.name": "execute_tool"}),
        ("input.value", {"openinference.span.kind": "TOOL"}),
    ],
)
def test_tool_spans_without_ids_answer_the_call_with_their_arguments(
    tmp_path: Path, arguments_key: str, kind: dict[str, str]
) -> None:
    t = load_any(_write(tmp_path, _search_run(arguments_key, kind)))
    results = {o.call_id: o.content for o in t.steps[0].observations}
    assert results == {"c_x": "X", "c_y": "Y"}


def test_tool_spans_whose_arguments_match_no_call_fall_back_to_start_order(tmp_path: Path) -> None:
    data = _search_run("gen_ai.tool.call.arguments", {"gen_ai.operation.name": "execute_tool"})
    for s in data["resourceSpans"][0]["scopeSpans"][0]["spans"][1:]:
        for attr in s["attributes"]:
            if attr["key"] == "gen_ai.tool.call.arguments":
                attr["value"] = {"stringValue": '{"q": "other"}'}
    t = load_any(_write(tmp_path, data))
    assert [(o.call_id, o.content) for o in t.steps[0].observations] == [("c_x", "Y"), ("c_y", "X")]


# -- more of the same paths ------------------------------------------------------------------------


def test_an_openllmetry_tool_span_without_a_name_is_one_line_naming_where_it_looks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before the first model call, the span is a call of its own, and a call needs a name.
    tool = _span(1, {"traceloop.span.kind": "tool", "traceloop.entity.name": ""}, name="")
    f = _write(tmp_path, _otlp(tool, _openllmetry_chat(2)))
    assert run(["import", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(
        f"car: error: {f}: {_SPAN0}: expected a non-empty tool name in gen_ai.tool.name, tool.name, "
        "traceloop.entity.name or the span's name"
    )


def test_a_cut_off_prompt_event_is_named_at_its_event_attribute(tmp_path: Path) -> None:
    span = _chat(1, None, None)
    cut = json.dumps([_text("user", "x" * 50)])[:30]
    span["events"] = [
        {
            "name": "gen_ai.content.prompt",
            "attributes": [{"key": "gen_ai.prompt", "value": {"stringValue": cut}}],
        },
        {
            "name": "gen_ai.content.completion",
            "attributes": [
                {
                    "key": "gen_ai.completion",
                    "value": {"stringValue": json.dumps([_text("assistant", "ok")])},
                }
            ],
        },
    ]
    (t,) = import_file(_write(tmp_path, _otlp(span)))
    assert "content-not-captured" not in _codes(t)
    assert _warning(t, "content-unparsed").endswith(
        "gen_ai.prompt is not valid JSON (possibly cut off by an attribute length limit) (first at "
        f"{_SPAN0}.events[0].attributes[0].value.stringValue)"
    )
    assert [s.action.text for s in t.steps] == ["ok"]


# -- OpenLLMetry content written as JSON text ------------------------------------------------------


def _anthropic_call(sid: int, prompts: dict[str, Any], completions: dict[str, Any]) -> dict[str, Any]:
    """A call as OpenLLMetry's Anthropic instrumentation writes it: a message whose content is a
    list of blocks has that list's JSON text as its content."""
    attrs = {"llm.request.type": "chat", "gen_ai.system": "Anthropic", "gen_ai.request.model": "c"}
    attrs |= {f"gen_ai.prompt.{k}": v for k, v in prompts.items()}
    attrs |= {f"gen_ai.completion.{k}": v for k, v in completions.items()}
    return _span(sid, attrs, name="anthropic.chat")


def test_openllmetry_block_lists_are_read_as_blocks_and_tool_results_answer_their_call(
    tmp_path: Path,
) -> None:
    ask = [{"type": "text", "text": "weather in Paris?"}, {"type": "image", "source": {}}]
    first = _anthropic_call(
        1,
        {"0.role": "user", "0.content": json.dumps(ask)},
        {
            "0.role": "assistant",
            "0.content": "Checking.",
            "0.tool_calls.0.id": "toolu_1",
            "0.tool_calls.0.name": "weather",
            "0.tool_calls.0.arguments": '{"city": "Paris"}',
        },
    )
    turn = [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
    ]
    result = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "gone", "is_error": True}]
    second = _anthropic_call(
        2,
        {
            "0.role": "user",
            "0.content": json.dumps(ask),
            "1.role": "assistant",
            "1.content": json.dumps(turn),
            "1.tool_calls.0.id": "toolu_1",
            "1.tool_calls.0.name": "weather",
            "1.tool_calls.0.arguments": '{"city": "Paris"}',
            "2.role": "user",
            "2.content": json.dumps(result),
        },
        {"0.role": "assistant", "0.content": "No data."},
    )
    (t,) = import_file(_write(tmp_path, _otlp(first, second)))
    assert t.task == "weather in Paris?"
    assert [(o.call_id, o.content, o.is_error) for o in t.steps[0].observations] == [
        ("toolu_1", "gone", True)
    ]
    context = t.steps[1].context or ()
    assert [(m.role, m.content, m.tool_call_id) for m in context] == [
        ("user", "weather in Paris?", None),
        ("assistant", "Checking.", None),
        ("tool", "gone", "toolu_1"),
    ]
    assert [c.signature() for c in context[1].tool_calls] == ['weather({"city":"Paris"})']
    assert "attachments-unresolved" in _codes(t)


def test_openllmetry_part_lists_are_text_and_unknown_parts_are_named(tmp_path: Path) -> None:
    parts = [{"type": "text", "text": "hi"}, {"type": "refusal", "refusal": "no"}, {"type": "x_part"}]
    span = _span(
        1,
        {
            "llm.request.type": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": json.dumps(parts),
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": '["not", "parts"]',
        },
        name="openai.chat",
    )
    (t,) = import_file(_write(tmp_path, _otlp(span)))
    assert [m.content for m in t.steps[0].context or ()] == ["hi\nno"]
    assert t.steps[0].action.text == '["not", "parts"]'  # text that is no part list stays text
    assert "'x_part' (first at " in _warning(t, "items-skipped")


def test_an_openllmetry_refusal_is_what_the_model_said(tmp_path: Path) -> None:
    # OpenLLMetry writes a refusal in place of the content, not beside it.
    span = _span(
        1,
        {
            "llm.request.type": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "pick this lock",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.finish_reason": "stop",
            "gen_ai.completion.0.refusal": "I can't help with that.",
        },
        name="openai.chat",
    )
    (t,) = import_file(_write(tmp_path, _otlp(span)))
    assert t.steps[0].action.text == "I can't help with that."


def test_an_openai_style_refusal_is_what_the_model_said_in_events_and_message_attributes(
    tmp_path: Path,
) -> None:
    # As in OpenLLMetry's flattened style: a message's `refusal` field and a refusal part are the
    # model's text (they were ignored, and the part named as not imported).
    events = _chat(1, None, None)
    events["events"] = [
        {
            "name": "gen_ai.user.message",
            "attributes": [{"key": "content", "value": {"stringValue": "pick this lock"}}],
        },
        {
            "name": "gen_ai.choice",
            "attributes": [
                {
                    "key": "message",
                    "value": _kv({"role": "assistant", "refusal": "I can't help with that."}),
                }
            ],
        },
    ]
    refused = {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]}
    later = [{"role": "user", "content": "pick this lock"}, refused, _text("user", "please")]
    parts = _chat(3, later, [refused])
    (t,) = import_file(_write(tmp_path, _otlp(events, parts)))
    assert [s.action.text for s in t.steps] == ["I can't help with that.", "No."]
    assert [(m.role, m.content) for m in t.steps[1].context or ()] == [
        ("user", "pick this lock"),
        ("assistant", "No."),
        ("user", "please"),
    ]
    assert "items-skipped" not in _codes(t)


def test_an_openllmetry_thinking_completion_is_the_reasoning_of_the_turn(tmp_path: Path) -> None:
    # OpenLLMetry's Anthropic instrumentation writes a thinking block as a completion of role
    # "thinking" before the assistant's; the next call's prompt holds it as a block of that turn.
    first = _anthropic_call(
        1,
        {"0.role": "user", "0.content": "q"},
        {"0.role": "thinking", "0.content": "mull", "1.role": "assistant", "1.content": "a"},
    )
    turn = [{"type": "thinking", "thinking": "mull", "signature": "s"}, {"type": "text", "text": "a"}]
    second = _anthropic_call(
        2,
        {"0.role": "user", "0.content": "q", "1.role": "assistant", "1.content": json.dumps(turn)},
        {"0.role": "assistant", "0.content": "b"},
    )
    (t,) = import_file(_write(tmp_path, _otlp(first, second)))
    assert [s.action.text for s in t.steps] == ["a", "b"]
    assert t.steps[0].action.reasoning == ({"type": "reasoning", "content": "mull"},)
    assert t.steps[0].metadata["thinking"] == "mull"
    assert [(m.role, m.content) for m in t.steps[1].context or ()] == [
        ("user", "q"),
        ("assistant", "a"),
    ]
    assert _warning(t, "thinking-not-replayed").startswith("1 reasoning part is kept verbatim")


# -- content exported as log events --------------------------------------------------------------


def _kv(fields: dict[str, Any]) -> dict[str, Any]:
    """A structured OTLP AnyValue (kvlistValue) from plain values (None an empty AnyValue)."""

    def value(v: Any) -> dict[str, Any]:
        if v is None:
            return {}
        if isinstance(v, dict):
            return _kv(v)
        if isinstance(v, list):
            return {"arrayValue": {"values": [value(x) for x in v]}}
        return {"stringValue": v}

    return {"kvlistValue": {"values": [{"key": k, "value": value(v)} for k, v in fields.items()]}}


def _log(
    span: dict[str, Any], t: int, event: str, body: dict[str, Any], *, system: str = "openai"
) -> dict[str, Any]:
    """A log record as the official GenAI instrumentations emit an event, in `span`."""
    return {
        "timeUnixNano": str(t),
        "traceId": span["traceId"],
        "spanId": span["spanId"],
        "eventName": event,
        "attributes": [{"key": "gen_ai.system", "value": {"stringValue": system}}],
        "body": _kv(body),
    }


def _logs(*records: dict[str, Any]) -> dict[str, Any]:
    return {"resourceLogs": [{"scopeLogs": [{"logRecords": list(records)}]}]}


def test_content_exported_as_log_events_beside_the_spans_is_read(tmp_path: Path) -> None:
    # opentelemetry-instrumentation-openai-v2 with content capture on: the chat spans hold no
    # content, the events gen_ai.user.message, gen_ai.choice, ... are log records in the span.
    first, second = _chat(1, None, None), _chat(5, None, None)
    call = {"id": "c1", "type": "function", "function": {"name": "w", "arguments": '{"city": "Oslo"}'}}
    records = [
        _log(first, 2, "gen_ai.user.message", {"content": "weather?"}),
        _log(first, 3, "gen_ai.choice", {"message": {"role": "assistant", "tool_calls": [call]}}),
        _log(second, 7, "gen_ai.tool.message", {"content": "snow", "id": "c1"}),
        _log(second, 6, "gen_ai.user.message", {"content": "weather?"}),
        _log(second, 8, "gen_ai.choice", {"message": {"role": "assistant", "content": "Snow."}}),
        {"timeUnixNano": "9", "body": {"stringValue": "an application log line"}},
    ]
    f = tmp_path / "otel.jsonl"
    f.write_text(f"{json.dumps(_otlp(first, second))}\n{json.dumps(_logs(*records))}\n")
    (t,) = import_file(f)
    assert t.fidelity is not None and t.fidelity.class_ == "A" and _codes(t) == set()
    assert t.task == "weather?"
    assert [c.signature() for c in t.steps[0].action.tool_calls] == ['w({"city":"Oslo"})']
    assert [(o.call_id, o.content) for o in t.steps[0].observations] == [("c1", "snow")]
    context = t.steps[1].context or ()
    assert [(m.role, m.content) for m in context] == [("user", "weather?"), ("tool", "snow")]
    assert t.steps[1].action.text == "Snow."


def _openllmetry_events(tmp_path: Path, *choices: dict[str, Any], system: str = "openai") -> Path:
    """A call as OpenLLMetry's event mode writes it (log records; no role where the event names it):
    a user message, then the choices given, in an instrumentation of `system`."""
    span = _chat(1, None, None)
    ask = {"content": "weather in Oslo?"}
    records = [_log(span, 2, "gen_ai.user.message", ask, system=system)]
    records += [
        _log(span, 3 + k, "gen_ai.choice", body, system=system) for k, body in enumerate(choices)
    ]
    f = tmp_path / f"otel-{system}.jsonl"
    f.write_text(f"{json.dumps(_otlp(span))}\n{json.dumps(_logs(*records))}\n")
    return f


def _weather(id_: str | None = "c1", name: str = "w") -> dict[str, Any]:
    call = {"type": "function", "function": {"name": name, "arguments": '{"city": "Oslo"}'}}
    return call if id_ is None else {"id": id_, **call}


def test_openllmetry_choice_calls_beside_the_message_are_the_choice_s(tmp_path: Path) -> None:
    # OpenLLMetry's gen_ai.choice body is {index, message: {content}, finish_reason, tool_calls}:
    # the calls sit beside the message, so the step had the text and no call, without a word. A
    # legacy function call is listed there too, without an id.
    opened = {"index": "0", "message": {"content": "Let me look."}, "finish_reason": "tool_calls"}
    legacy = {"name": "w", "arguments": '{"city": "Bergen"}', "type": "function"}
    (t,) = import_file(_openllmetry_events(tmp_path, {**opened, "tool_calls": [_weather(), legacy]}))
    assert t.fidelity is not None and _codes(t) == set()
    assert t.steps[0].action.text == "Let me look."
    assert [(c.id, c.signature()) for c in t.steps[0].action.tool_calls] == [
        ("c1", 'w({"city":"Oslo"})'),
        ("call_0_0_1", 'w({"city":"Bergen"})'),  # entry 1 of output message 0's calls
    ]
    # Its Anthropic instrumentation writes each content block as a choice of its own, a tool_use
    # block's input (an object) as the call's arguments.
    block = {**_weather("toolu_1"), "function": {"name": "w", "arguments": {"city": "Oslo"}}}
    used = {"index": "1", "message": {"content": None}, "finish_reason": "tool_use"}
    text = {**opened, "finish_reason": "tool_use"}
    f = _openllmetry_events(tmp_path, text, {**used, "tool_calls": [block]}, system="anthropic")
    (t,) = import_file(f)
    assert t.fidelity is not None and _codes(t) == set()
    assert t.steps[0].action.text == "Let me look."
    calls = t.steps[0].action.tool_calls
    assert [(c.id, c.signature()) for c in calls] == [("toolu_1", 'w({"city":"Oslo"})')]


@pytest.mark.parametrize(
    ("system", "indexes", "text", "calls"),
    [
        ("openai", ("0", "1"), "Sunny.", []),  # n > 1: alternatives, the first kept
        ("anthropic", ("0", "1"), "Sunny.", ["c1"]),  # one choice per content block: one turn
        ("openai", ("0", "0"), "Sunny.", ["c1"]),  # one index: parts of one turn
    ],
    ids=["alternatives", "anthropic-blocks", "one-index"],
)
def test_choices_of_distinct_index_are_alternatives_save_anthropic_s_blocks(
    tmp_path: Path, system: str, indexes: tuple[str, str], text: str, calls: list[str]
) -> None:
    # A response sampled with n > 1 gives a choice event per alternative, each a whole message
    # with its own index: they were joined into one action, as if the model had said both.
    first = {"index": indexes[0], "message": {"content": "Sunny."}, "finish_reason": "stop"}
    other = {"index": indexes[1], "message": {"content": None}, "tool_calls": [_weather()]}
    (t,) = import_file(_openllmetry_events(tmp_path, first, other, system=system))
    assert t.steps[0].action.text == text
    assert [c.id for c in t.steps[0].action.tool_calls] == calls
    if calls:
        assert "choices-skipped" not in _codes(t)
    else:
        assert _warning(t, "choices-skipped") == (
            "a model call's output (gen_ai.choice events of distinct index) holds 2 choices; only "
            "the first is imported as the assistant's turn (the first skipped at line 2: "
            "$.resourceLogs[0].scopeLogs[0].logRecords[2].body.kvlistValue)"
        )


def test_a_choice_s_calls_in_its_message_and_beside_it_are_one_list(tmp_path: Path) -> None:
    # A call written in both places is one call; the others are calls of their own, and those
    # without an id are numbered after the message's own entries, so no two share an id.
    inside = {"content": "", "tool_calls": [_weather(), _weather(None, "a")]}
    f = _openllmetry_events(
        tmp_path, {"index": "0", "message": inside, "tool_calls": [_weather(), _weather(None, "b")]}
    )
    (t,) = import_file(f)
    assert [(c.id, c.name) for c in t.steps[0].action.tool_calls] == [
        ("c1", "w"),
        ("call_0_0_1", "a"),
        ("call_0_0_3", "b"),  # the fourth entry of the two lists
    ]
    assert "duplicate-call-id" not in _codes(t)


@pytest.mark.parametrize(
    ("as_text", "place"),
    [
        (True, "body.stringValue.tool_calls[0].function.name"),
        (
            False,  # the same place, as the structured value holds it
            "body.kvlistValue.values[2].value.arrayValue.values[0].kvlistValue.values[2].value"
            ".kvlistValue.values[0].value.stringValue",
        ),
    ],
)
def test_a_call_beside_a_choice_s_message_without_a_name_is_refused_at_its_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], as_text: bool, place: str
) -> None:
    body = {"index": "0", "message": {"content": ""}, "tool_calls": [_weather(name="")]}
    f = _openllmetry_events(tmp_path, body)
    if as_text:  # a body written as JSON text
        lines = f.read_text().splitlines()
        logs = json.loads(lines[1])
        logs["resourceLogs"][0]["scopeLogs"][0]["logRecords"][1]["body"] = {
            "stringValue": json.dumps(body)
        }
        f.write_text(f"{lines[0]}\n{json.dumps(logs)}\n")
    assert run(["import", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err == (
        f"car: error: {f}: line 2: $.resourceLogs[0].scopeLogs[0].logRecords[1].{place}: expected "
        'a non-empty tool name, got the string ""\n'
    )


def test_openllmetry_anthropic_input_blocks_are_the_turn_s_calls_and_results(tmp_path: Path) -> None:
    # OpenLLMetry's Anthropic instrumentation in event mode writes each input message's content as
    # recorded: a list of Anthropic blocks. The tool_use block was left out (items-skipped), so the
    # context's assistant turn had no call, and the tool_result block became user text, so the
    # call had no observation.
    first, second = _chat(1, None, None), _chat(5, None, None)

    def event(span: dict[str, Any], t: int, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return _log(span, t, name, body, system="anthropic")

    ask = {"content": "weather in Oslo?"}
    use = {"type": "tool_use", "id": "toolu_1", "name": "w", "input": {"city": "Oslo"}}
    made = {
        "id": "toolu_1",
        "type": "function",
        "function": {"name": "w", "arguments": {"city": "Oslo"}},
    }
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "snow"}
    records = [
        event(first, 2, "gen_ai.user.message", ask),
        event(first, 3, "gen_ai.choice", {"index": "0", "message": {"content": "Checking."}}),
        event(
            first, 4, "gen_ai.choice", {"index": "1", "message": {"content": None}, "tool_calls": [made]}
        ),
        event(second, 6, "gen_ai.user.message", ask),
        event(
            second,
            7,
            "gen_ai.assistant.message",
            {"content": [{"type": "text", "text": "Checking."}, use]},
        ),
        event(second, 8, "gen_ai.user.message", {"content": [result]}),
        event(second, 9, "gen_ai.choice", {"index": "0", "message": {"content": "Snow."}}),
    ]
    f = tmp_path / "otel.jsonl"
    f.write_text(f"{json.dumps(_otlp(first, second))}\n{json.dumps(_logs(*records))}\n")
    (t,) = import_file(f)
    assert _codes(t) == set()
    assert [(o.call_id, o.content) for o in t.steps[0].observations] == [("toolu_1", "snow")]
    context = t.steps[1].context or ()
    assert [(m.role, m.content, m.tool_call_id) for m in context] == [
        ("user", "weather in Oslo?", None),
        ("assistant", "Checking.", None),
        ("tool", "snow", "toolu_1"),
    ]
    assert [(c.id, c.signature()) for c in context[1].tool_calls] == [("toolu_1", 'w({"city":"Oslo"})')]


@pytest.mark.parametrize(
    ("events", "place"),
    [
        (False, f"{_SPAN0}.attributes[2].value.stringValue[1].tool_calls[0]"),
        (True, "line 2: $.resourceLogs[0].scopeLogs[0].logRecords[1].body.stringValue.tool_calls[0]"),
    ],
    ids=["messages", "events"],
)
def test_a_tool_call_entry_that_is_not_an_object_is_refused_at_its_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], events: bool, place: str
) -> None:
    # It was skipped without a word, so the turn lost the call; openai-chat refuses it.
    made = {"role": "assistant", "tool_calls": ["w"]}
    if events:  # an OpenLLMetry choice, its calls beside its message, the body written as JSON
        f = _openllmetry_events(tmp_path, {"index": "0", "message": {"content": ""}})
        lines = f.read_text().splitlines()
        logs = json.loads(lines[1])
        body = {"index": "0", "message": {"content": ""}, "tool_calls": ["w"]}
        logs["resourceLogs"][0]["scopeLogs"][0]["logRecords"][1]["body"] = {
            "stringValue": json.dumps(body)
        }
        f.write_text(f"{lines[0]}\n{json.dumps(logs)}\n")
    else:
        f = _write(tmp_path, _otlp(_chat(1, [{"role": "user", "content": "hi"}, made], [])))
    assert run(["import", str(f)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"car: error: {f}: {place}: expected a tool call {{id, type, function: {{name, arguments}}}}, "
        'got the string "w"\n'
    )


def test_log_events_whose_span_is_not_in_the_file_are_named(tmp_path: Path) -> None:
    # They were dropped without a word: the content of a call whose span was exported elsewhere
    # (or not at all), or of another trace, simply vanished.
    span = _chat(1, None, None)
    stray = _chat(3, None, None)  # a span the file does not hold
    other = _chat(4, None, None, trace="fedcba9876543210fedcba9876543210")
    records = [
        _log(span, 2, "gen_ai.user.message", {"content": "q"}),
        _log(span, 3, "gen_ai.choice", {"message": {"role": "assistant", "content": "a"}}),
        _log(stray, 4, "gen_ai.choice", {"message": {"role": "assistant", "content": "b"}}),
        _log(other, 5, "gen_ai.user.message", {"content": "c"}),
    ]
    f = tmp_path / "otel.jsonl"
    f.write_text(f"{json.dumps(_otlp(span))}\n{json.dumps(_logs(*records))}\n")
    (t,) = import_file(f)
    assert t.steps[0].action.text == "a"
    assert _warning(t, "orphan-log-record") == (
        "GenAI log records whose span is not in the file were not imported: 2 (gen_ai.choice, "
        "gen_ai.user.message), the first at line 2: $.resourceLogs[0].scopeLogs[0].logRecords[2]; "
        "export a run's spans and logs to the same file"
    )


def test_content_in_an_operation_details_event_is_the_call_s(tmp_path: Path) -> None:
    span = _chat(1, None, None)
    details = _log(span, 2, "gen_ai.client.inference.operation.details", {})
    details["attributes"] += [
        {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps([_text("user", "q")])}},
        {
            "key": "gen_ai.output.messages",
            "value": {"stringValue": json.dumps([_text("assistant", "a")])},
        },
    ]
    f = tmp_path / "otel.jsonl"
    f.write_text(f"{json.dumps(_otlp(span))}\n{json.dumps(_logs(details))}\n")
    (t,) = import_file(f)
    assert t.fidelity is not None and t.fidelity.class_ == "A"
    assert [(m.role, m.content) for m in t.steps[0].context or ()] == [("user", "q")]
    assert t.steps[0].action.text == "a"


# -- pydantic-ai ------------------------------------------------------------------------------------


def _pydantic_ai_run() -> tuple[dict[str, Any], ...]:
    """A run as pydantic-ai's instrumentation version 1 records it (Logfire's default then): an
    "agent run" span; chat spans whose events are one JSON attribute, `events`; "running tool"
    spans without gen_ai.operation.name, holding tool_arguments and tool_response."""
    run = _span(1, {"agent_name": "adder", "logfire.msg": "adder run"}, name="agent run")
    call = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": {"x": 1}}}
    asked = [
        {"event.name": "gen_ai.system.message", "content": "You add.", "role": "system"},
        {"event.name": "gen_ai.user.message", "content": "1+2?", "role": "user"},
    ]
    first = [
        *asked,
        {
            "event.name": "gen_ai.choice",
            "index": 0,
            "message": {"role": "assistant", "tool_calls": [call]},
        },
    ]
    second = [
        *asked,
        {"event.name": "gen_ai.assistant.message", "role": "assistant", "tool_calls": [call]},
        {"event.name": "gen_ai.tool.message", "content": "3", "role": "tool", "id": "call_1"},
        {"event.name": "gen_ai.choice", "index": 0, "message": {"role": "assistant", "content": "3"}},
    ]
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}
    tool = {
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "call_1",
        "tool_arguments": '{"x":1}',
        "tool_response": "3",
        "logfire.msg": "running tool: add",
    }
    spans = (
        run,
        _span(2, {**chat, "events": json.dumps(first)}, name="chat gpt-4o"),
        _span(3, tool, name="running tool", status={"code": 2}),
        _span(4, {**chat, "events": json.dumps(second)}, name="chat gpt-4o"),
    )
    for s in spans[1:]:
        s["parentSpanId"] = run["spanId"]
    return spans


def test_pydantic_ai_events_in_one_attribute_are_the_calls_content(tmp_path: Path) -> None:
    (t,) = import_file(_write(tmp_path, _otlp(*_pydantic_ai_run())))
    assert t.fidelity is not None and t.fidelity.class_ == "A"
    assert "content-not-captured" not in _codes(t)
    assert t.task == "1+2?" and t.actors[0].system_prompt == "You add."
    assert [c.signature() for c in t.steps[0].action.tool_calls] == ['add({"x":1})']
    assert [(o.call_id, o.content) for o in t.steps[0].observations] == [("call_1", "3")]
    assert [(m.role, m.content) for m in t.steps[1].context or ()][-1] == ("tool", "3")
    assert t.steps[1].action.text == "3"


def test_pydantic_ai_tool_spans_answer_their_call_and_the_agent_run_names_the_actor(
    tmp_path: Path,
) -> None:
    run, first, tool, _ = _pydantic_ai_run()
    (t,) = import_file(_write(tmp_path, _otlp(run, first, tool)))  # the run ends with the tool
    assert [s.actor for s in t.steps] == ["adder"]
    assert [(o.call_id, o.content, o.is_error) for o in t.steps[0].observations] == [
        ("call_1", "3", True)
    ]
    assert "orphan-tool-span" not in _codes(t)


def test_json_text_that_is_no_part_list_stays_text(tmp_path: Path) -> None:
    # A tool's output (or a user's text) may be JSON of typed objects of its own.
    files = json.dumps([{"type": "file", "name": "a.txt"}])
    records = json.dumps([{"type": "row", "id": 1}])
    span = _span(
        1,
        {
            "llm.request.type": "chat",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": records,
            "gen_ai.prompt.1.role": "assistant",
            "gen_ai.prompt.1.tool_calls.0.id": "c1",
            "gen_ai.prompt.1.tool_calls.0.name": "ls",
            "gen_ai.prompt.2.role": "tool",
            "gen_ai.prompt.2.tool_call_id": "c1",
            "gen_ai.prompt.2.content": files,
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "a.txt",
        },
    )
    (t,) = import_file(_write(tmp_path, _otlp(span)))
    assert [m.content for m in t.steps[0].context or ()] == [records, "", files]
    assert _codes(t) == {"sampling-missing"}


def test_nan_and_infinity_in_json_content_keep_their_text_with_their_own_words(
    tmp_path: Path,
) -> None:
    # Python's json module writes NaN and Infinity into JSON text; they are no numbers out of range.
    call = '{"type": "tool_call", "id": "c", "name": "f", "arguments": {"x": NaN, "y": -Infinity}}'
    span = _chat(1, json.dumps([_text("user", "q")]), f'[{{"role": "assistant", "parts": [{call}]}}]')
    (t,) = import_file(_write(tmp_path, _otlp(span)))
    assert t.steps[0].action.tool_calls[0].arguments == {"x": "NaN", "y": "-Infinity"}
    said = _warning(t, "number-out-of-range")
    assert said.startswith("2 NaN or Infinity values (not JSON numbers") and "beyond" not in said
    assert "first at $.steps[0].action.tool_calls[0].arguments.x of the trace" in said
    assert json.loads(t.to_json())["steps"][0]["action"]["tool_calls"][0]["arguments"]["x"] == "NaN"


def test_a_tool_call_s_function_that_is_not_an_object_is_refused_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The entry itself was read as the flat {name, arguments} form, so the error named
    # `tool_calls[0].name: missing`, a key the file never meant to hold; openai-chat names the
    # function.
    made = {"role": "assistant", "tool_calls": [{"id": "c1", "function": "search"}]}
    f = _write(tmp_path, _otlp(_chat(1, [{"role": "user", "content": "hi"}, made], [])))
    assert run(["import", str(f)]) == 2
    assert capsys.readouterr().err == (
        f"car: error: {f}: {_SPAN0}.attributes[2].value.stringValue[1].tool_calls[0].function: "
        'expected {name, arguments}, got the string "search"\n'
    )


# -- OpenLLMetry's Anthropic and Bedrock instrumentations -------------------------------------------


def _anthropic_events(tmp_path: Path, *records: tuple[str, dict[str, Any]]) -> Path:
    """A call whose content OpenLLMetry's Anthropic instrumentation wrote as log events (`records`,
    each an event name and its body), beside the span."""
    span = _chat(1, None, None)
    logs = [_log(span, 2 + k, name, body, system="anthropic") for k, (name, body) in enumerate(records)]
    f = tmp_path / "otel-anthropic.jsonl"
    f.write_text(f"{json.dumps(_otlp(span))}\n{json.dumps(_logs(*logs))}\n")
    return f


def test_anthropic_tools_written_as_a_user_message_event_are_the_tool_definitions(
    tmp_path: Path,
) -> None:
    # Its event mode writes the request's tools as one more gen_ai.user.message, after the
    # conversation, whose content is {"tools": [...]}: that was read as the last user turn (its
    # JSON text), and the call had no tool definitions.
    weather = {
        "name": "w",
        "description": "The weather in a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    f = _anthropic_events(
        tmp_path,
        ("gen_ai.system.message", {"content": "Be brief."}),
        ("gen_ai.user.message", {"content": "weather in Oslo?"}),
        ("gen_ai.user.message", {"content": {"tools": [weather]}}),
        ("gen_ai.choice", {"index": "0", "message": {"content": "Snow."}}),
    )
    (t,) = import_file(f)
    assert [(m.role, m.content) for m in t.steps[0].context or ()] == [
        ("system", "Be brief."),
        ("user", "weather in Oslo?"),
    ]
    assert t.actor("assistant").tools == (weather,)
    assert t.steps[0].action.text == "Snow."
    assert _codes(t) == set()


def test_anthropic_streamed_blocks_are_one_turn_its_text_reasoning_and_calls(tmp_path: Path) -> None:
    # Its event mode writes a streamed response a choice per content block, a text or thinking
    # block's content as {type, content}: that object's JSON text was the action's text, the
    # thinking in it too.
    call = {"id": "toolu_1", "function": {"name": "w", "arguments": {"city": "Oslo"}}}
    f = _anthropic_events(
        tmp_path,
        ("gen_ai.user.message", {"content": "weather in Oslo?"}),
        (
            "gen_ai.choice",
            {"index": "0", "message": {"content": {"type": "thinking", "content": "Hm."}}},
        ),
        ("gen_ai.choice", {"index": "1", "message": {"content": {"type": "text", "content": "Look."}}}),
        ("gen_ai.choice", {"index": "2", "message": {"content": None}, "tool_calls": [call]}),
    )
    (t,) = import_file(f)
    action = t.steps[0].action
    assert action.text == "Look."
    assert [(c.id, c.signature()) for c in action.tool_calls] == [("toolu_1", 'w({"city":"Oslo"})')]
    assert action.reasoning == ({"type": "reasoning", "content": "Hm."},)
    assert t.steps[0].metadata["thinking"] == "Hm."
    assert _codes(t) == {"thinking-not-replayed"}


def test_an_anthropic_streamed_block_of_another_type_is_named(tmp_path: Path) -> None:
    # Its older event mode wrote a streamed tool_use block as {type: "tool_use", content: ""},
    # without the call: the call is not in the file, and the block is named, not made text.
    f = _anthropic_events(
        tmp_path,
        ("gen_ai.user.message", {"content": "weather in Oslo?"}),
        ("gen_ai.choice", {"index": "0", "message": {"content": {"type": "text", "content": "Look."}}}),
        ("gen_ai.choice", {"index": "1", "message": {"content": {"type": "tool_use", "content": ""}}}),
    )
    (t,) = import_file(f)
    assert t.steps[0].action.text == "Look."
    assert _warning(t, "items-skipped") == (
        "message parts car does not import were left out: 'tool_use' (first at line 2: "
        "$.resourceLogs[0].scopeLogs[0].logRecords[2].body.kvlistValue.values[1].value.kvlistValue"
        ".values[0].value.kvlistValue)"
    )


def test_anthropic_functions_keep_their_input_schema(tmp_path: Path) -> None:
    # Its Anthropic instrumentation flattens a tool as llm.request.functions.N.name|description|
    # input_schema (the OpenAI one writes parameters): the schema was dropped, so a replay would
    # offer a tool that takes no arguments.
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    span = _anthropic_call(1, {"0.role": "user", "0.content": "q"}, {"0.content": "a"})
    span["attributes"] += [
        {"key": k, "value": {"stringValue": v}}
        for k, v in {
            "llm.request.functions.0.name": "w",
            "llm.request.functions.0.description": "The weather in a city",
            "llm.request.functions.0.input_schema": json.dumps(schema),
        }.items()
    ]
    (t,) = import_file(_write(tmp_path, _otlp(span)))
    assert t.actor("assistant").tools == (
        {"name": "w", "description": "The weather in a city", "input_schema": schema},
    )


def test_bedrock_claude_responses_are_one_turn(tmp_path: Path) -> None:
    # OpenLLMetry's Bedrock instrumentation writes a Converse response's text blocks each as a
    # completion of its own index (the role on the first only; a toolUse block writes none): they
    # are one turn, not alternatives. Its event mode writes an InvokeModel response as one choice
    # whose content is the list of Anthropic blocks.
    converse = _span(
        1,
        {
            "llm.request.type": "chat",
            "gen_ai.system": "AWS",
            "gen_ai.request.model": "claude-3-7-sonnet-20250219-v1",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "weather in Oslo?",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "Look.",
            "gen_ai.completion.2.content": "Then see.",
        },
        name="bedrock.converse",
    )
    (t,) = import_file(_write(tmp_path, _otlp(converse)))
    assert t.steps[0].action.text == "Look.\nThen see."
    assert "choices-skipped" not in _codes(t)

    span = _chat(1, None, None)
    use = {"type": "tool_use", "id": "toolu_1", "name": "w", "input": {"city": "Oslo"}}
    blocks = [{"type": "text", "text": "Look."}, use]
    records = [
        _log(span, 2, "gen_ai.user.message", {"content": "weather in Oslo?"}, system="aws.bedrock"),
        _log(
            span,
            3,
            "gen_ai.choice",
            {"index": "0", "message": {"content": blocks}},
            system="aws.bedrock",
        ),
    ]
    f = tmp_path / "otel-bedrock.jsonl"
    f.write_text(f"{json.dumps(_otlp(span))}\n{json.dumps(_logs(*records))}\n")
    (t,) = import_file(f)
    action = t.steps[0].action
    assert action.text == "Look."
    assert [(c.id, c.signature()) for c in action.tool_calls] == [("toolu_1", 'w({"city":"Oslo"})')]
    assert _codes(t) == set()


# Bedrock's Converse API writes content blocks without a type, each named by its one key.
_USE = {"toolUse": {"toolUseId": "tooluse_1", "name": "w", "input": {"city": "Oslo"}}}
_THOUGHT = {"reasoningContent": {"reasoningText": {"text": "Hm.", "signature": "sig"}}}


def _converse_call(sid: int, prompts: list[tuple[str, Any]], completion: str) -> dict[str, Any]:
    """A Converse call as OpenLLMetry's Bedrock instrumentation writes it in attribute mode: the
    system prompt's text, then each message's role and the JSON text of its content blocks; of the
    response, the role and each text block's text (a toolUse or reasoningContent block writes
    nothing)."""
    attrs = {
        "llm.request.type": "chat",
        "gen_ai.system": "AWS",
        "gen_ai.request.model": "anthropic.claude-3-7-sonnet-20250219-v1:0",
    }
    for i, (role, content) in enumerate(prompts):
        attrs[f"gen_ai.prompt.{i}.role"] = role
        attrs[f"gen_ai.prompt.{i}.content"] = content if role == "system" else json.dumps(content)
    attrs |= {"gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": completion}
    return _span(sid, attrs, name="bedrock.converse")


def test_converse_blocks_are_read_as_text_calls_results_and_reasoning(tmp_path: Path) -> None:
    # Each message's content was kept as the JSON text of its blocks: the task was that JSON, the
    # assistant turn had no call and the tool result was user text answering nothing.
    ask = ("user", [{"text": "weather in Oslo?"}])
    first = _converse_call(1, [("system", "Be brief."), ask], "Checking.")
    result = {
        "toolUseId": "tooluse_1",
        "content": [{"json": {"temp": -3}}, {"text": "snow"}],
        "status": "success",
    }
    second = _converse_call(
        2,
        [
            ("system", "Be brief."),
            ask,
            ("assistant", [_THOUGHT, {"text": "Checking."}, _USE]),
            ("user", [{"toolResult": result}, {"cachePoint": {"type": "default"}}]),
        ],
        "Snow.",
    )
    (t,) = import_file(_write(tmp_path, _otlp(first, second)))
    assert t.task == "weather in Oslo?"
    # The response's toolUse block is not in the file (the instrumentation writes text blocks
    # only): the first step's action is its text alone, its call known from the later input.
    assert (t.steps[0].action.text, t.steps[0].action.tool_calls) == ("Checking.", ())
    context = t.steps[1].context or ()
    assert [(m.role, m.content, m.tool_call_id) for m in context] == [
        ("system", "Be brief.", None),
        ("user", "weather in Oslo?", None),
        ("assistant", "Checking.", None),
        ("tool", '{"temp": -3}\nsnow', "tooluse_1"),
    ]
    assert [(c.id, c.signature()) for c in context[2].tool_calls] == [
        ("tooluse_1", 'w({"city":"Oslo"})')
    ]
    assert _warning(t, "items-skipped") == (
        "message parts car does not import were left out: 'cachePoint' (first at "
        "$.resourceSpans[0].scopeSpans[0].spans[1].attributes[10].value.stringValue[1])"
    )
    assert _codes(t) == {"items-skipped", "thinking-not-replayed"}


def test_converse_event_blocks_are_the_turn_s_text_calls_results_and_reasoning(
    tmp_path: Path,
) -> None:
    # Its event mode writes each message's and the response's content as the list of blocks: the
    # toolUse block was named in items-skipped and left a newline after the text, so the step had
    # no call, and the toolResult block was user text answering nothing.
    first, second = _chat(1, None, None), _chat(5, None, None)

    def event(span: dict[str, Any], t: int, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return _log(span, t, name, body, system="aws.bedrock")

    ask = {"content": [{"text": "weather in Oslo?"}, {"image": {"format": "png", "source": {}}}]}
    turn = [_THOUGHT, {"text": "Checking."}, _USE]
    failed = {"toolUseId": "tooluse_1", "content": [{"text": "no data"}], "status": "error"}
    records = [
        event(first, 2, "gen_ai.user.message", ask),
        event(first, 3, "gen_ai.choice", {"index": "0", "message": {"content": turn}}),
        event(second, 6, "gen_ai.user.message", ask),
        event(second, 7, "gen_ai.assistant.message", {"content": turn}),
        event(second, 8, "gen_ai.user.message", {"content": [{"toolResult": failed}]}),
        event(second, 9, "gen_ai.choice", {"index": "0", "message": {"content": [{"text": "None."}]}}),
    ]
    f = tmp_path / "otel-bedrock.jsonl"
    f.write_text(f"{json.dumps(_otlp(first, second))}\n{json.dumps(_logs(*records))}\n")
    (t,) = import_file(f)
    assert t.task == "weather in Oslo?"
    action = t.steps[0].action
    assert action.text == "Checking."
    assert [(c.id, c.signature()) for c in action.tool_calls] == [("tooluse_1", 'w({"city":"Oslo"})')]
    assert action.reasoning == ({"type": "reasoning", "content": "Hm."},)
    assert [(o.call_id, o.content, o.is_error) for o in t.steps[0].observations] == [
        ("tooluse_1", "no data", True)
    ]
    context = t.steps[1].context or ()
    assert [(m.role, m.content, m.tool_call_id) for m in context] == [
        ("user", "weather in Oslo?", None),
        ("assistant", "Checking.", None),
        ("tool", "no data", "tooluse_1"),
    ]
    assert t.steps[1].action.text == "None."
    assert _codes(t) == {"attachments-unresolved", "thinking-not-replayed"}


@pytest.mark.parametrize(
    ("use", "place", "expected"),
    [
        ({"toolUseId": "tooluse_1", "input": {}}, "toolUse.name", "missing; expected the tool name"),
        (
            {"toolUseId": True, "name": "w", "input": {}},
            "toolUse.toolUseId",
            "expected a tool-call id (a string or an integer), got a boolean",
        ),
    ],
    ids=["no-name", "boolean-id"],
)
def test_a_converse_tool_use_block_that_cannot_be_a_call_is_refused_at_its_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], use: dict[str, Any], place: str, expected: str
) -> None:
    prompts = [("user", [{"text": "q"}]), ("assistant", [{"toolUse": use}])]
    f = _write(tmp_path, _otlp(_converse_call(1, prompts, "a")))
    assert run(["import", str(f)]) == 2
    err = capsys.readouterr().err
    assert err == (f"car: error: {f}: {_SPAN0}.attributes[6].value.stringValue[0].{place}: {expected}\n")
