"""Each importer on a small file of its documented shape: steps, actors, calls, observations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from car.importers import Document, detect, formats, import_file, load_any, read_document
from car.importers.inspect_log import convert_log
from car.trace import Trace, parse_trace


def codes(t: Trace) -> set[str]:
    assert t.fidelity is not None
    return {w.code for w in t.fidelity.warnings}


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("openai_chat.json", "openai-chat"),
        ("anthropic.json", "anthropic"),
        ("responses.json", "openai-responses"),
        ("otel_genai.json", "otel"),
        ("otel_events.json", "otel"),
        ("openinference.json", "otel"),
        ("tau_bench.json", "tau-bench"),
        ("tau2.json", "tau-bench"),
        ("inspect_log.json", "inspect"),
        ("anthropic_response_objects.json", "anthropic"),
    ],
)
def test_sniffing_names_the_format(fixtures: Path, name: str, fmt: str) -> None:
    doc = read_document(fixtures / name)
    assert detect(doc.data, doc.path) == fmt


def test_native_traces_still_load_through_load_any() -> None:
    root = Path(__file__).resolve().parents[2]
    t = load_any(root / "traces" / "pivot.json")
    assert t.source is None and t.fidelity is None
    assert detect(json.loads((root / "traces" / "pivot.json").read_text())) == "car"


def test_imported_traces_round_trip_through_the_native_format(fixtures: Path) -> None:
    for path in sorted(fixtures.glob("*.json")):
        if path.name == "inspect_log.json":
            continue
        for t in import_file(path):
            again = parse_trace(json.loads(t.to_json()))
            assert again == t
            assert t.source is not None and t.source.path == str(path)
            assert t.source.content_hash is not None and len(t.source.content_hash) == 64


def test_openai_chat(fixtures: Path) -> None:
    t = load_any(fixtures / "openai_chat.json")
    assert [s.actor for s in t.steps] == ["user", "assistant", "assistant", "assistant"]
    assert t.actor("assistant").system_prompt.startswith("You are a support agent")  # type: ignore[union-attr]
    assert [tool["name"] for tool in t.actor("assistant").tools] == ["get_order", "refund"]
    parallel = t.steps[1]
    assert [c.id for c in parallel.action.tool_calls] == ["call_a", "call_b"]
    # the exact argument string is kept next to the parsed object
    assert parallel.action.tool_calls[1].raw_arguments == '{ "order_id":"B2" }'
    assert parallel.action.tool_calls[1].arguments == {"order_id": "B2"}
    # results answer their own call, whatever their order in the log
    assert {o.call_id: o.content for o in parallel.observations} == {
        "call_a": '{"status": "delivered"}',
        "call_b": '{"status": "in transit"}',
    }
    assert t.steps[1].sampling is not None and t.steps[1].sampling.seed == 11
    assert t.fidelity is not None and t.fidelity.class_ == "B"
    assert t.decision_steps == (1, 2, 3)


def test_anthropic(fixtures: Path) -> None:
    t = load_any(fixtures / "anthropic.json")
    assert t.actor("assistant").system_prompt == "You are a research assistant."
    step = t.steps[1]
    assert step.action.text == "Searching."
    assert [c.arguments for c in step.action.tool_calls] == [
        {"q": "Lyon population 2020"},
        {"q": "Lyon INSEE 2020"},
    ]
    assert [(o.call_id, o.is_error) for o in step.observations] == [
        ("toolu_1", False),
        ("toolu_2", True),
    ]
    assert step.metadata["thinking"] == "Search two sources."
    assert t.steps[-1].action.text == "About 522,000."
    assert "attachments-unresolved" in codes(t)


def test_responses(fixtures: Path) -> None:
    t = load_any(fixtures / "responses.json")
    assert [s.actor for s in t.steps] == ["user", "assistant", "assistant"]
    calls = t.steps[1].action.tool_calls
    assert [(c.id, c.raw_arguments) for c in calls] == [
        ("call_oslo", '{"to":"OSL"}'),
        ("call_bgo", '{"to":"BGO"}'),
    ]
    assert [o.content for o in t.steps[1].observations] == ["SK 4021 at 09:10", "no flights"]
    assert t.steps[1].metadata["reasoning"] == "Two lookups."
    assert t.actor("assistant").system_prompt == "You are a travel agent."
    assert t.steps[2].action.text == "Oslo: SK 4021. Bergen: none."


def test_otel_genai_spans_give_exact_inputs(fixtures: Path) -> None:
    traces = import_file(fixtures / "otel_genai.json")
    assert len(traces) == 2
    t = traces[0]
    assert t.id == "5b8aa5a2d2c872e8321cf37308d69df2"
    assert t.fidelity is not None and t.fidelity.class_ == "A"
    assert [s.actor for s in t.steps] == ["planner", "planner"]
    first = t.steps[0]
    assert isinstance(first.context, tuple)
    assert [m.role for m in first.context] == ["system", "user"]
    assert [c.arguments["city"] for c in first.action.tool_calls] == ["Paris", "Rome"]
    assert {o.call_id: o.content for o in first.observations} == {"call_p": "rain", "call_r": "sun"}
    assert first.sampling is not None
    assert (first.sampling.model, first.sampling.temperature, first.sampling.seed) == ("gpt-4o", 0.0, 42)
    assert first.sampling.max_tokens == 256
    assert t.task == "Weather in Paris and Rome?"
    assert t.steps[1].action.text == "Paris: rain. Rome: sun."


def test_otel_without_content_says_which_variable_enables_it(fixtures: Path) -> None:
    t = import_file(fixtures / "otel_genai.json")[1]
    # base64 ids are normalised to hex
    assert t.id == "0af7651916cd43dd8448eb211c80319c"
    assert t.fidelity is not None and t.fidelity.class_ == "C"
    warning = next(w for w in t.fidelity.warnings if w.code == "content-not-captured")
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in warning.message
    # the tool span is the only record of the call: kept, and said so
    assert [c.name for c in t.steps[0].action.tool_calls] == ["lookup"]
    assert "calls-from-tool-spans" in codes(t)


def test_otel_older_event_style(fixtures: Path) -> None:
    (t,) = import_file(fixtures / "otel_events.json")
    step = t.steps[0]
    assert isinstance(step.context, tuple)
    assert [(m.role, m.content) for m in step.context] == [
        ("system", "Be brief."),
        ("user", "What is 2+2?"),
    ]
    assert step.action.text == "4"
    assert step.sampling is not None and step.sampling.top_p == 0.9


def test_openinference(fixtures: Path) -> None:
    (t,) = import_file(fixtures / "openinference.json")
    assert [s.actor for s in t.steps] == ["researcher", "researcher"]
    call = t.steps[0].action.tool_calls[0]
    assert (call.id, call.name, call.arguments) == (
        "call_1",
        "search",
        {"query": "capital of Australia"},
    )
    assert t.steps[0].observations[0].content == "Sydney is the largest city."
    assert t.steps[0].sampling is not None
    assert (t.steps[0].sampling.temperature, t.steps[0].sampling.max_tokens) == (0.7, 128)
    assert t.actor("researcher").tools[0]["name"] == "search"
    second = t.steps[1].context
    assert isinstance(second, tuple) and second[0].content == "Find the capital of Australia."
    assert second[2].tool_call_id == "call_1"


def test_tau_bench(fixtures: Path) -> None:
    failed, solved = import_file(fixtures / "tau_bench.json")
    assert failed.outcome.failed is True and failed.outcome.score == 1.0
    assert solved.outcome.failed is False and solved.outcome.score == 0.0
    user = failed.actor("user")
    # the simulated user is an LLM: its turns are decisions too
    assert user.kind == "user" and user.decides
    assert [s.actor for s in failed.steps] == ["user", "assistant", "assistant", "user"]
    assert failed.steps[1].observations[0].call_id == "tc1"
    assert failed.actor("assistant").system_prompt == "Retail agent policy: confirm before cancelling."


def test_tau2_user_tool_calls_and_tool_ids(fixtures: Path) -> None:
    (t,) = import_file(fixtures / "tau2.json")
    assert t.id == "tau2/tau2/sim-1"
    user_call = t.steps[4]
    assert user_call.actor == "user"
    assert user_call.action.tool_calls[0].name == "toggle_airplane_mode"
    assert user_call.observations[0].content == "airplane mode on"
    assert t.steps[2].action.tool_calls[0].arguments == {"phone": "555"}
    assert t.steps[2].observations[0].content == '{"data": false}'
    assert t.metadata["termination_reason"] == "user_stop"
    assert t.metadata["task"]["id"] == "t1"


def test_inspect_log_conversion_without_the_extra(fixtures: Path) -> None:
    doc = read_document(fixtures / "inspect_log.json")
    (t,) = convert_log(doc.data, doc)
    assert t.fidelity is not None and t.fidelity.class_ == "A"
    assert [s.actor for s in t.steps] == ["solver_agent", "solver_agent"]
    first = t.steps[0]
    assert isinstance(first.context, tuple) and [m.role for m in first.context] == ["system", "user"]
    assert first.sampling is not None and (first.sampling.seed, first.sampling.temperature) == (7, 0.5)
    assert first.sampling.model == "gpt-4o"  # Inspect's openai/gpt-4o: `openai:` asks for gpt-4o
    assert first.action.tool_calls[0].arguments == {"x": 1, "y": 3}
    assert first.observations[0].content == "4"
    assert t.outcome.failed is True and t.outcome.label == "match: I"
    assert t.actor("solver_agent").tools[0]["name"] == "add"


@pytest.mark.parametrize(
    ("name", "api"),
    [
        ("anthropic/claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("openrouter/anthropic/claude-x", "anthropic/claude-x"),  # OpenRouter's own name for it
        ("vllm/meta-llama/Llama-3-8B", "meta-llama/Llama-3-8B"),
        ("openai-api/deepseek/deepseek-chat", "deepseek-chat"),
        ("meta-llama/Llama-3-8B", "meta-llama/Llama-3-8B"),  # no provider: a model id
        ("gpt-4o", "gpt-4o"),
        ("openai/", "openai/"),
    ],
)
def test_inspect_model_names_become_what_their_api_knows(name: str, api: str) -> None:
    event = {
        "event": "model",
        "model": name,
        "input": [],
        "output": {"choices": [{"message": {"role": "assistant", "content": "x"}}]},
    }
    log = {"version": 2, "eval": {"task": "t"}, "samples": [{"id": 1, "events": [event]}]}
    (t,) = convert_log(log, Document("log.json", b"", "json", log))
    assert t.steps[0].sampling is not None and t.steps[0].sampling.model == api


def test_an_inspect_tool_error_is_the_result_in_the_tool_event_and_in_later_inputs() -> None:
    error = {"type": "parsing", "message": "x must be a number"}
    call = {"id": "c1", "function": "add", "arguments": {"x": "one"}}
    asked = [{"role": "user", "content": "add one"}]
    called = {"role": "assistant", "content": "", "tool_calls": [call]}
    failed = {"role": "tool", "content": "", "tool_call_id": "c1", "function": "add", "error": error}
    events = [
        {"event": "model", "model": "m", "input": asked, "output": {"choices": [{"message": called}]}},
        {"event": "tool", "id": "c1", "function": "add", "result": "", "error": error},
        {
            "event": "model",
            "model": "m",
            "input": [*asked, called, failed],
            "output": {"choices": [{"message": {"role": "assistant", "content": "Sorry."}}]},
        },
    ]
    log = {"version": 2, "eval": {"task": "t"}, "samples": [{"id": 1, "events": events}]}
    (t,) = convert_log(log, Document("log.json", b"", "json", log))
    assert [(o.content, o.is_error) for o in t.steps[0].observations] == [("x must be a number", True)]
    context = t.steps[1].context
    assert isinstance(context, tuple)
    assert (context[2].tool_call_id, context[2].content) == ("c1", "x must be a number")


def test_formats_lists_every_builtin() -> None:
    names = [n for n, _ in formats()]
    for n in (
        "car",
        "who-and-when",
        "tau-bench",
        "inspect",
        "otel",
        "openai-responses",
        "anthropic",
        "openai-chat",
    ):
        assert n in names


def test_jsonl_chat_file_holds_one_run_per_line(tmp_path: Path) -> None:
    lines = [
        {"messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]}
        for i in range(3)
    ]
    f = tmp_path / "chats.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    traces = import_file(f)
    assert [t.steps[1].action.text for t in traces] == ["a0", "a1", "a2"]
    assert traces[2].source is not None and traces[2].source.locator == "line 3: $"


def test_legacy_function_calls_and_mid_run_system_messages(tmp_path: Path) -> None:
    f = tmp_path / "legacy.json"
    f.write_text(
        json.dumps(
            [
                {"role": "system", "content": "Be helpful."},
                {"role": "user", "content": "Weather?"},
                {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                },
                {"role": "function", "name": "weather", "content": "snow"},
                {"role": "system", "content": "Answer in one word."},
                {"role": "assistant", "content": "Snow."},
            ]
        )
    )
    t = load_any(f)
    assert t.actor("assistant").system_prompt == "Be helpful."
    assert t.steps[1].action.tool_calls[0].raw_arguments == '{"city": "Oslo"}'
    assert t.steps[1].observations[0].content == "snow"
    injected = t.steps[2]
    assert (injected.actor, injected.metadata["role"]) == ("user", "system")
    assert t.actor("user").kind == "user"
    assert t.decision_steps == (1, 3)


def _write(tmp_path: Path, name: str, data: Any) -> Path:
    f = tmp_path / name
    f.write_text(json.dumps(data))  # ensure_ascii: "\ud83d" stays a (valid JSON) escape
    return f


def test_jsonl_records_end_at_newlines_only(tmp_path: Path) -> None:
    # U+2028, U+2029 and U+0085 may sit raw inside JSON strings; str.splitlines() splits on them.
    texts = ["one\u2028two", "three\x85four", "five\u2029six"]
    records = [
        json.dumps(
            {"messages": [{"role": "user", "content": t}, {"role": "assistant", "content": "ok"}]},
            ensure_ascii=False,
        )
        for t in texts
    ]
    f = tmp_path / "chats.jsonl"
    f.write_text("\r\n".join([records[0], records[1], "", records[2], ""]), newline="")
    traces = import_file(f)
    assert [t.steps[0].action.text for t in traces] == texts
    assert [t.source.locator for t in traces if t.source] == ["line 1: $", "line 2: $", "line 4: $"]


def test_lone_surrogates_become_u_fffd_with_a_warning(tmp_path: Path) -> None:
    # An emoji cut in half is valid JSON but not text UTF-8 can encode: the trace could not be written.
    args = json.dumps({"note": "cut \ud83d"})  # nested JSON: the escape is parsed only later
    f = _write(
        tmp_path,
        "cut.json",
        {
            "messages": [
                {"role": "user", "content": "emoji cut \ud83d and whole \U0001f600"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": args}}],
                },
            ]
        },
    )
    t = load_any(f)
    assert t.steps[0].action.text == "emoji cut \ufffd and whole \U0001f600"
    assert t.steps[1].action.tool_calls[0].arguments == {"note": "cut \ufffd"}
    assert t.steps[1].action.tool_calls[0].raw_arguments == args  # the exact string, as recorded
    assert t.fidelity is not None
    warning = next(w for w in t.fidelity.warnings if w.code == "invalid-unicode")
    assert warning.message.startswith("2 text values held a lone UTF-16 surrogate")
    assert "$.steps[0].action.text" in warning.message
    t.to_json().encode("utf-8")  # writable
    assert "invalid-unicode" not in codes(load_any(_write(tmp_path, "ok.json", CHAT_WITH_EMOJI)))


def test_numbers_beyond_a_double_keep_their_text_with_a_warning(tmp_path: Path) -> None:
    """1e400 parses as inf, which JSON cannot hold: the trace wrote null, and the value was lost
    without a word. Each is kept as its recorded text, and the warning names the first place."""
    log = (
        '{"question": "How far?", "ground_truth": 1e400, "history": ['
        '{"role": "user", "name": "Planner", "content": "go"},'
        '{"role": "assistant", "name": "Solver", "content": "far", "score": -2.5E+999}],'
        '"mistake_agent": "Solver", "mistake_step": "1", "mistake_reason": "r", '
        '"system_prompt": {"Solver": "Solve."}}'
    )
    f = tmp_path / "ww.json"
    f.write_text(log)
    t = load_any(f)
    assert t.metadata["ground_truth"] == "1e400"
    assert t.metadata["expected"] == "1e400"
    assert t.steps[1].metadata["fields"] == {"score": "-2.5E+999"}
    assert t.fidelity is not None
    warning = next(w for w in t.fidelity.warnings if w.code == "number-out-of-range")
    assert warning.message.startswith("3 numbers beyond the range of a double")
    assert "first at $.steps[1].metadata.fields.score of the trace" in warning.message
    written = json.loads(t.to_json())
    assert written["metadata"]["ground_truth"] == "1e400"  # not null
    # In tool-call arguments too (JSON inside a string); the exact string stays as recorded.
    args = '{"limit": 1e400, "page": 1e300}'
    chat = {
        "messages": [
            {"role": "user", "content": "list"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": args}}],
            },
        ]
    }
    call = load_any(_write(tmp_path, "chat.json", chat)).steps[1].action.tool_calls[0]
    assert call.arguments == {"limit": "1e400", "page": 1e300}
    assert call.raw_arguments == args
    assert "number-out-of-range" not in codes(load_any(_write(tmp_path, "ok.json", CHAT_WITH_EMOJI)))


CHAT_WITH_EMOJI = {
    "messages": [{"role": "user", "content": "\U0001f600"}, {"role": "assistant", "content": "hi"}]
}


def test_anthropic_turns_saved_as_response_objects_are_anthropic(fixtures: Path) -> None:
    t = load_any(fixtures / "anthropic_response_objects.json")
    assert t.source is not None and t.source.format == "anthropic"
    assert [c.name for c in t.steps[1].action.tool_calls] == ["weather"]
    assert [(o.call_id, o.content) for o in t.steps[1].observations] == [("toolu_1", "-3C")]
    assert t.steps[-1].action.text == "It is -3C."
    # without tool blocks, the saved response object (stop_reason) still names the format
    text_only = json.loads((fixtures / "anthropic_response_objects.json").read_text())
    text_only[1] = {**text_only[1], "content": [{"type": "text", "text": "Checking."}]}
    assert detect(text_only[:2]) == "anthropic"


def test_chat_keeps_every_leading_system_message_refusals_and_max_completion_tokens(
    tmp_path: Path,
) -> None:
    f = _write(
        tmp_path,
        "chat.json",
        {
            "model": "gpt-4o",
            "max_completion_tokens": 100,
            "messages": [
                {"role": "system", "content": "S1"},
                {"role": "developer", "content": "S2"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": None, "refusal": "I can't help with that."},
            ],
        },
    )
    t = load_any(f)
    assert t.actor("assistant").system_prompt == "S1\n\nS2"
    assert t.steps[1].action.text == "I can't help with that."
    assert t.steps[1].metadata == {"refusal": True}
    assert t.steps[1].sampling is not None and t.steps[1].sampling.max_tokens == 100


def test_responses_keeps_developer_messages_beside_instructions_and_refusals(tmp_path: Path) -> None:
    f = _write(
        tmp_path,
        "resp.json",
        {
            "instructions": "Be terse.",
            "max_output_tokens": 50,
            "input": [
                {"role": "developer", "content": "Never refund orders over $100."},
                {"role": "user", "content": "refund A7"},
            ],
            "output": [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "refusal", "refusal": "no"}],
                }
            ],
        },
    )
    t = load_any(f)
    assert t.actor("assistant").system_prompt == "Be terse.\n\nNever refund orders over $100."
    assert t.steps[-1].action.text == "no"
    assert t.steps[-1].sampling is not None and t.steps[-1].sampling.max_tokens == 50


def _otlp(*spans: dict[str, Any]) -> dict[str, Any]:
    return {"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}


def _span(sid: int, start: int, attrs: dict[str, Any]) -> dict[str, Any]:
    return {
        "traceId": "0123456789abcdef0123456789abcdef",
        "spanId": f"{sid:016x}",
        "name": str(attrs["gen_ai.operation.name"]),
        "startTimeUnixNano": str(start),
        "attributes": [
            {"key": k, "value": {"stringValue": v if isinstance(v, str) else json.dumps(v)}}
            for k, v in attrs.items()
        ],
    }


def _chat(sid: int, inputs: list[Any], output: dict[str, Any]) -> dict[str, Any]:
    return _span(
        sid,
        sid,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "m",
            "gen_ai.input.messages": inputs,
            "gen_ai.output.messages": [output],
        },
    )


def _tool_span(sid: int, call_id: dict[str, Any], result: str) -> dict[str, Any]:
    """An execute_tool span whose call id is the typed OTLP value given (intValue, boolValue, ...)."""
    span = _span(
        sid,
        sid,
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "f",
            "gen_ai.tool.call.result": result,
        },
    )
    span["attributes"].insert(2, {"key": "gen_ai.tool.call.id", "value": call_id})
    return span


def _msg(role: str, text: str | None = None, call: str | None = None, result: str | None = None) -> Any:
    parts: list[dict[str, Any]] = []
    if text is not None:
        parts.append({"type": "text", "content": text})
    if call is not None:
        parts.append({"type": "tool_call", "id": "c", "name": "f", "arguments": {"n": call}})
    if result is not None:
        parts.append({"type": "tool_call_response", "id": "c", "response": result})
    return {"role": role, "parts": parts}


def test_otel_results_in_later_inputs_answer_the_earliest_open_call(tmp_path: Path) -> None:
    # Call ids repeat across turns ("c" twice); each result answers the call just before it.
    u, a1, t1 = _msg("user", "go"), _msg("assistant", call="1"), _msg("tool", result="r1")
    a2, t2 = _msg("assistant", call="2"), _msg("tool", result="r2")
    f = _write(
        tmp_path,
        "otel.json",
        _otlp(
            _chat(1, [u], a1),
            _chat(2, [u, a1, t1], a2),
            _chat(3, [u, a1, t1, a2, t2], _msg("assistant", "done")),
        ),
    )
    t = load_any(f)
    assert [[(o.call_id, o.content) for o in s.observations] for s in t.steps] == [
        [("c", "r1")],
        [("c", "r2")],
        [],
    ]


def test_otel_tool_span_before_the_first_model_call_is_kept(tmp_path: Path) -> None:
    setup = _span(
        9,
        0,
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "setup",
            "gen_ai.tool.call.arguments": {"env": "prod"},
            "gen_ai.tool.call.result": "ENV READY",
        },
    )
    f = _write(
        tmp_path, "otel.json", _otlp(setup, _chat(1, [_msg("user", "go")], _msg("assistant", "ok")))
    )
    t = load_any(f)
    first = t.steps[0]
    assert first.actor == "environment" and t.actor("environment").kind == "tool"
    assert [(c.name, c.arguments) for c in first.action.tool_calls] == [("setup", {"env": "prod"})]
    assert [o.content for o in first.observations] == ["ENV READY"]
    assert t.decision_steps == (1,)
    assert "orphan-tool-span" in codes(t)


def test_anthropic_server_tool_results_answer_their_call_and_unknown_blocks_are_named(
    tmp_path: Path,
) -> None:
    hits = [{"type": "web_search_result", "title": "T", "url": "https://example.org"}]
    f = _write(
        tmp_path,
        "srv.json",
        {
            "system": "s",
            "messages": [
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "server_tool_use",
                            "id": "s1",
                            "name": "web_search",
                            "input": {"q": "x"},
                        },
                        {"type": "web_search_tool_result", "tool_use_id": "s1", "content": hits},
                        {"type": "future_block", "data": 1},
                        {"type": "text", "text": "done"},
                    ],
                },
            ],
        },
    )
    t = load_any(f)
    step = t.steps[1]
    assert [c.id for c in step.action.tool_calls] == ["s1"]
    assert [(o.call_id, json.loads(o.content)) for o in step.observations] == [("s1", hits)]
    assert t.fidelity is not None
    skipped = next(w for w in t.fidelity.warnings if w.code == "items-skipped")
    assert "'future_block'" in skipped.message


def test_an_orphan_tool_result_before_any_turn_is_kept(tmp_path: Path) -> None:
    f = _write(
        tmp_path,
        "chat.json",
        {
            "messages": [
                {"role": "tool", "tool_call_id": "zz", "content": "orphan"},
                {"role": "user", "content": "x"},
            ]
        },
    )
    t = load_any(f)
    assert t.steps[0].actor == "environment" and t.actor("environment").kind == "tool"
    assert [o.content for o in t.steps[0].observations] == ["orphan"]
    assert t.fidelity is not None
    warning = next(w for w in t.fidelity.warnings if w.code == "orphan-tool-result")
    assert "'environment'" in warning.message


def test_repeated_call_ids_in_one_action_get_their_results_in_order(tmp_path: Path) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    f = _write(
        tmp_path,
        "chat.json",
        {
            "messages": [
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": None, "tool_calls": [call, call]},
                {"role": "tool", "tool_call_id": "c1", "content": "r1"},
                {"role": "tool", "tool_call_id": "c1", "content": "r2"},
            ]
        },
    )
    step = load_any(f).steps[1]
    assert [c.id for c in step.action.tool_calls] == ["c1", "c1#1"]
    assert [(o.call_id, o.content) for o in step.observations] == [("c1", "r1"), ("c1#1", "r2")]


def test_anthropic_thinking_blocks_are_kept_verbatim_and_their_absence_from_replay_is_warned(
    tmp_path: Path,
) -> None:
    # Extended thinking: signed and redacted (encrypted) blocks that the API needs back, verbatim, in
    # a tool-use loop. A replay rebuilds inputs from text and tool calls, so the import must say so.
    signed = {"type": "thinking", "thinking": "Check the cache.", "signature": "EqQBCgIYAhIM"}
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}
    later = {"type": "redacted_thinking", "data": "EmwKAhgBEgzZZZ"}
    f = _write(
        tmp_path,
        "thinking.json",
        {
            "system": "s",
            "messages": [
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": [
                        signed,
                        redacted,
                        {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {}},
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}],
                },
                {"role": "assistant", "content": [later, {"type": "text", "text": "done"}]},
            ],
        },
    )
    t = load_any(f)
    assert list(t.steps[1].action.reasoning) == [signed, redacted]
    assert t.steps[1].metadata["thinking"] == "Check the cache."
    assert list(t.steps[2].action.reasoning) == [later]
    assert "thinking" not in t.steps[2].metadata  # nothing readable: no empty text pretends otherwise
    assert t.fidelity is not None
    warning = next(w for w in t.fidelity.warnings if w.code == "thinking-not-replayed")
    assert "$.messages[1].content[0]" in warning.message
    assert "2 redacted" in warning.message
    assert parse_trace(json.loads(t.to_json())) == t


def test_responses_reasoning_items_are_kept_verbatim_and_their_absence_from_replay_is_warned(
    tmp_path: Path,
) -> None:
    # A reasoning item carries a summary, the raw reasoning text (open-weight models) and the
    # encrypted reasoning a stateless caller must send back; a replay rebuilds inputs without them.
    full = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Look the order up."}],
        "content": [{"type": "reasoning_text", "text": "The user wants order 7; call get."}],
        "encrypted_content": "gAAAAABpF-first",
    }
    sealed = {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAAABzz"}
    f = _write(
        tmp_path,
        "reasoning.json",
        [
            {"role": "user", "content": "where is order 7?"},
            full,
            {"type": "function_call", "call_id": "c1", "name": "get", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "shipped"},
            sealed,
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
        ],
    )
    t = load_any(f)
    assert t.steps[1].action.reasoning == (full,)
    assert t.steps[1].metadata == {
        "thinking": "The user wants order 7; call get.",
        "reasoning": "Look the order up.",  # the summary, as before
    }
    assert t.steps[2].action.reasoning == (sealed,)
    assert t.steps[2].metadata == {}  # nothing readable, no empty text
    assert t.fidelity is not None
    warning = next(w for w in t.fidelity.warnings if w.code == "thinking-not-replayed")
    assert warning.message.startswith("2 reasoning items (2 with encrypted_content: ")
    assert "(first at $[1])" in warning.message
    assert parse_trace(json.loads(t.to_json())) == t


def _inspect_log(events: list[Any]) -> dict[str, Any]:
    return {"version": 2, "eval": {"task": "t"}, "samples": [{"id": 1, "events": events}]}


def test_inspect_reasoning_parts_are_kept_verbatim_and_their_absence_from_replay_is_warned() -> None:
    # Inspect keeps a model's reasoning as `reasoning` content parts (signed, or redacted: the
    # encrypted data in `reasoning`, a readable `summary` beside it when the provider gives one).
    signed = {"type": "reasoning", "reasoning": "Add them.", "signature": "EqQBCgIY"}
    redacted = {"type": "reasoning", "reasoning": "EmwKAhgB", "redacted": True, "summary": "Adding."}
    hidden = {"type": "reasoning", "reasoning": "EmwKAhgZ", "redacted": True}
    first = {
        "role": "assistant",
        "content": [signed, redacted, {"type": "text", "text": "Let me add."}],
        "tool_calls": [{"id": "c1", "function": "add", "arguments": {"x": 1, "y": 2}}],
    }
    user = {"role": "user", "content": "1+2?"}
    answer = {"role": "assistant", "content": [hidden, {"type": "text", "text": "3"}]}
    log = _inspect_log(
        [
            {
                "event": "model",
                "model": "m",
                "input": [user],
                "output": {"choices": [{"message": first}]},
            },
            {"event": "tool", "id": "c1", "result": "3"},
            {
                "event": "model",
                "model": "m",
                "input": [user, first, {"role": "tool", "tool_call_id": "c1", "content": "3"}],
                "output": {"choices": [{"message": answer}]},
            },
        ]
    )
    (t,) = convert_log(log, Document("log.json", b"", "json", log))
    assert t.steps[0].action.text == "Let me add."
    assert t.steps[0].action.reasoning == (signed, redacted)
    assert t.steps[0].metadata == {"thinking": "Add them.\nAdding."}
    assert t.steps[1].action.reasoning == (hidden,)
    assert t.steps[1].metadata == {}
    assert t.fidelity is not None
    (warning,) = [w for w in t.fidelity.warnings if w.code == "thinking-not-replayed"]
    # the later input repeats the first output's parts: counted once, where the model wrote them
    assert warning.message.startswith("3 reasoning parts (2 redacted: ")
    assert "(first at $.samples[0].events[0].output.choices[0].message.content[0])" in warning.message
    assert "recorded inputs" not in warning.message
    assert parse_trace(json.loads(t.to_json())) == t


def test_inspect_reasoning_only_in_a_recorded_input_is_warned() -> None:
    # A sample that starts from a conversation holding reasoning no recorded call produced: only
    # its context message keeps it, and no step's metadata has it, so the warning must say so.
    earlier = {"role": "assistant", "content": [{"type": "reasoning", "reasoning": "Hmm."}, "Hi."]}
    log = _inspect_log(
        [
            {
                "event": "model",
                "model": "m",
                "input": [{"role": "user", "content": "hi"}, earlier, {"role": "user", "content": "?"}],
                "output": {"choices": [{"message": {"role": "assistant", "content": "yes"}}]},
            }
        ]
    )
    (t,) = convert_log(log, Document("log.json", b"", "json", log))
    assert t.steps[0].metadata == {}
    assert t.fidelity is not None
    (warning,) = [w for w in t.fidelity.warnings if w.code == "thinking-not-replayed"]
    assert warning.message.startswith("1 reasoning part in recorded inputs ")
    assert (
        "kept only with its context message: anthropic: sends it back (signed ones)" in warning.message
    )
    assert "(first at $.samples[0].events[0].input[1].content[0])" in warning.message
    context = t.steps[0].context
    assert context is not None and context[1].reasoning == ({"type": "reasoning", "reasoning": "Hmm."},)


def test_otel_reasoning_parts_are_kept_verbatim_and_their_absence_from_replay_is_warned(
    tmp_path: Path,
) -> None:
    # GenAI semantic conventions: {"type": "reasoning", "content"} parts (extra fields allowed, so
    # an emitter may add a signature). Each belongs to the step whose output message holds it;
    # later inputs repeat it, but context messages hold text and tool calls only.
    r1 = {"type": "reasoning", "content": "Look order 7 up.", "signature": "EqQBCgIY"}
    r2 = {"type": "reasoning", "content": "Say it."}
    user = _msg("user", "where is order 7?")
    a1 = {"role": "assistant", "parts": [r1, *_msg("assistant", call="7")["parts"]]}
    a2 = {"role": "assistant", "parts": [r2, {"type": "text", "content": "Shipped."}]}
    f = _write(
        tmp_path,
        "otel.json",
        _otlp(_chat(1, [user], a1), _chat(2, [user, a1, _msg("tool", result="shipped")], a2)),
    )
    t = load_any(f)
    assert t.steps[0].action.reasoning == (r1,)
    assert t.steps[0].metadata == {
        "span_id": "0000000000000001",
        "span_name": "chat",
        "thinking": "Look order 7 up.",
    }
    assert (t.steps[1].action.text, list(t.steps[1].action.reasoning)) == ("Shipped.", [r2])
    warning = _thinking_warning(t)
    # the second input repeats r1: counted once, where the model wrote it
    assert warning.startswith("2 reasoning parts are kept verbatim ")
    first = "$.resourceSpans[0].scopeSpans[0].spans[0].attributes[3].value.stringValue[0].parts[0]"
    assert f"(first at {first})" in warning
    assert "recorded inputs" not in warning
    assert parse_trace(json.loads(t.to_json())) == t


def test_otel_reasoning_in_content_lists_is_not_text_and_input_only_reasoning_is_warned(
    tmp_path: Path,
) -> None:
    # An OpenAI-style {role, content: [...]} message's reasoning part is reasoning, not action text;
    # pydantic-ai writes its parts as "thinking". Reasoning found only in an input, which no recorded
    # call produced, is kept nowhere, and the warning must say so.
    thought = {"type": "reasoning", "content": "Plan: agree."}
    hmm = {"type": "thinking", "content": "Hmm."}
    earlier = {"role": "assistant", "parts": [hmm, {"type": "text", "content": "Hi."}]}
    output = {"role": "assistant", "content": [thought, {"type": "text", "text": "yes"}]}
    f = _write(tmp_path, "otel.json", _otlp(_chat(1, [_msg("user", "hi"), earlier], output)))
    t = load_any(f)
    assert t.steps[0].action.text == "yes"
    assert list(t.steps[0].action.reasoning) == [thought]
    assert t.steps[0].metadata["thinking"] == "Plan: agree."
    warning = _thinking_warning(t)
    assert warning.startswith("1 reasoning part is kept verbatim ")
    assert "; 1 reasoning part in recorded inputs that no recorded call produced " in warning
    assert "stringValue[1].parts[0])" in warning


def _thinking_warning(t: Trace) -> str:
    assert t.fidelity is not None
    (warning,) = [w for w in t.fidelity.warnings if w.code == "thinking-not-replayed"]
    return warning.message


def _warning(t: Trace, code: str) -> str:
    assert t.fidelity is not None
    (warning,) = [w for w in t.fidelity.warnings if w.code == code]
    return warning.message


_SPAN0 = "$.resourceSpans[0].scopeSpans[0].spans[0].attributes"


def _answered_by(tmp_path: Path, answer: dict[str, Any]) -> Trace:
    """A run whose first call's tool call is answered by `answer` in the second call's input."""
    user, call = _msg("user", "where is order 7?"), _msg("assistant", call="7")
    steps = [_chat(1, [user], call), _chat(2, [user, call, answer], _msg("assistant", "ok"))]
    return load_any(_write(tmp_path, "otel.json", _otlp(*steps)))


def test_otel_tool_results_under_result_are_read_and_a_part_without_one_is_warned(
    tmp_path: Path,
) -> None:
    # The current conventions write {"type": "tool_call_response", "response"}; the older ones and
    # pydantic-ai write "result". Either is what the tool returned: never an empty observation.
    older = {"type": "tool_call_response", "id": "c", "result": "shipped"}
    t = _answered_by(tmp_path, {"role": "tool", "parts": [older]})
    assert [(o.call_id, o.content) for o in t.steps[0].observations] == [("c", "shipped")]
    context = t.steps[1].context
    assert isinstance(context, tuple)
    assert (context[-1].role, context[-1].content) == ("tool", "shipped")
    assert "tool-result-missing" not in codes(t)

    # A part that holds neither is imported as an empty result, and said, naming the place.
    t = _answered_by(tmp_path, {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c"}]})
    assert [(o.call_id, o.content) for o in t.steps[0].observations] == [("c", "")]
    warning = _warning(t, "tool-result-missing")
    assert "no 'response' or 'result'" in warning
    place = "$.resourceSpans[0].scopeSpans[0].spans[1].attributes[2].value.stringValue[2].parts[0]"
    assert warning.endswith(f"(first at {place})")


def test_otel_server_and_built_in_tool_results_answer_their_call_inside_the_turn(
    tmp_path: Path,
) -> None:
    # A server tool (the conventions' server_tool_call / server_tool_call_response parts) or a
    # pydantic-ai built-in tool (tool_call and tool_call_response with "builtin": true) runs at the
    # provider: call and result sit in the same assistant message. The result is the observation of
    # the step that made the call, and in later inputs it follows that message, as it happened.
    search = {"type": "web_search", "query": "cats"}
    hits = {"type": "web_search", "results": ["Cats are great"]}
    server = {
        "role": "assistant",
        "parts": [
            {"type": "server_tool_call", "id": "s1", "name": "web_search", "server_tool_call": search},
            {"type": "server_tool_call_response", "id": "s1", "server_tool_call_response": hits},
            {"type": "text", "content": "They are great."},
        ],
    }
    builtin = {
        "role": "assistant",
        "parts": [
            {
                "type": "tool_call",
                "id": "b1",
                "name": "web_fetch",
                "arguments": {"u": "x"},
                "builtin": True,
            },
            {"type": "tool_call_response", "id": "b1", "result": "page", "builtin": True},
            {"type": "text", "content": "Fetched."},
        ],
    }
    user, more, thanks = _msg("user", "cats?"), _msg("user", "and the page?"), _msg("user", "ty")
    calls = [
        _chat(1, [user], server),
        _chat(2, [user, server, more], builtin),
        _chat(3, [user, server, more, builtin, thanks], _msg("assistant", "ok")),
    ]
    t = load_any(_write(tmp_path, "otel.json", _otlp(*calls)))
    first, second, last = t.steps
    assert first.action.text == "They are great."
    assert [(c.id, c.name, c.arguments) for c in first.action.tool_calls] == [
        ("s1", "web_search", search)
    ]
    assert [(o.call_id, json.loads(o.content)) for o in first.observations] == [("s1", hits)]
    assert [(c.id, c.name) for c in second.action.tool_calls] == [("b1", "web_fetch")]
    assert [(o.call_id, o.content) for o in second.observations] == [("b1", "page")]
    assert isinstance(last.context, tuple)
    assert [(m.role, m.tool_call_id or [c.id for c in m.tool_calls]) for m in last.context] == [
        ("user", []),
        ("assistant", ["s1"]),
        ("tool", "s1"),
        ("user", []),
        ("assistant", ["b1"]),
        ("tool", "b1"),
        ("user", []),
    ]
    assert not {"orphan-tool-result", "items-skipped"} & codes(t)


def test_otel_compaction_unknown_and_media_parts_are_named_not_dropped(tmp_path: Path) -> None:
    # The current conventions' compaction part, a part type car does not know, and pydantic-ai's
    # media parts: none can be imported, and each is said, naming where the first one sits.
    compacted = {"type": "compaction", "id": "cmp_1", "content": "Earlier: dogs."}
    user = {
        "role": "user",
        "parts": [
            compacted,
            {"type": "image-url", "url": "https://example.org/cat.png"},
            {"type": "future_part", "data": 1},
            "stray",
            {"type": "text", "content": "and cats?"},
        ],
    }
    f = _write(tmp_path, "otel.json", _otlp(_chat(1, [user], _msg("assistant", "Also great."))))
    t = load_any(f)
    context = t.steps[0].context
    assert isinstance(context, tuple) and [m.content for m in context] == ["and cats?"]
    assert {"compaction", "items-skipped", "attachments-unresolved"} <= codes(t)
    at = f"{_SPAN0}[2].value.stringValue[0].parts"
    assert _warning(t, "compaction").endswith(f"(first at {at}[0])")
    assert _warning(t, "items-skipped") == (
        "message parts car does not import were left out: 'future_part' (first at "
        f"{at}[2]), parts that are not objects (first at {at}[3])"
    )


def test_otel_reasoning_content_of_openai_style_messages_is_kept_as_thinking(
    tmp_path: Path,
) -> None:
    # DeepSeek and other OpenAI-compatible servers put reasoning in the message's reasoning_content.
    output = {"role": "assistant", "content": "yes", "reasoning_content": "They greet; agree."}
    earlier = {"role": "assistant", "content": "Hi.", "reasoning_content": "Greet back."}
    f = _write(
        tmp_path, "otel.json", _otlp(_chat(1, [{"role": "user", "content": "hi"}, earlier], output))
    )
    t = load_any(f)
    assert t.steps[0].action.text == "yes"
    assert list(t.steps[0].action.reasoning) == [{"reasoning_content": "They greet; agree."}]
    assert t.steps[0].metadata["thinking"] == "They greet; agree."
    warning = _thinking_warning(t)
    assert warning.startswith("1 reasoning part is kept verbatim ")
    assert f"(first at {_SPAN0}[3].value.stringValue[0].reasoning_content)" in warning
    assert "; 1 reasoning part in recorded inputs that no recorded call produced " in warning
    assert parse_trace(json.loads(t.to_json())) == t


def test_otel_reasoning_and_reasoning_details_of_openai_style_messages_are_kept_as_thinking(
    tmp_path: Path,
) -> None:
    # vLLM and OpenRouter name the field reasoning; OpenRouter adds reasoning_details, objects to
    # send back unchanged (an encrypted one is unreadable).
    details = [{"type": "reasoning.encrypted", "data": "gAAAAB", "index": 0}]
    output = {"role": "assistant", "content": "yes", "reasoning": "Agree.", "reasoning_details": details}
    f = _write(tmp_path, "otel.json", _otlp(_chat(1, [{"role": "user", "content": "hi"}], output)))
    t = load_any(f)
    assert t.steps[0].action.text == "yes"
    assert list(t.steps[0].action.reasoning) == [
        {"reasoning": "Agree."},
        {"reasoning_details": details},
    ]
    assert t.steps[0].metadata["thinking"] == "Agree."
    warning = _thinking_warning(t)
    assert warning.startswith("2 reasoning parts (1 redacted: encrypted, unreadable) are kept ")
    assert f"(first at {_SPAN0}[3].value.stringValue[0].reasoning)" in warning


def test_openai_chat_reasoning_fields_are_kept_verbatim_as_thinking(tmp_path: Path) -> None:
    # OpenAI-compatible servers put an assistant message's reasoning beside its content: DeepSeek
    # and older vLLM in reasoning_content, vLLM and OpenRouter in reasoning (a string), OpenRouter
    # also in reasoning_details (objects, some signed or encrypted), LiteLLM in thinking_blocks
    # (Anthropic's blocks). Each field is kept verbatim; its readable text is said once.
    details = [
        {"type": "reasoning.text", "text": "Look 7 up.", "signature": "EqQB", "index": 0},
        {"type": "reasoning.encrypted", "data": "gAAAAB", "index": 1},
    ]
    blocks = [
        {"type": "thinking", "thinking": "Refuse.", "signature": "EqoB"},
        {"type": "redacted_thinking", "data": "EmwK"},
    ]
    call = {"id": "c1", "type": "function", "function": {"name": "get", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "9.11 or 9.8?"},
        {"role": "assistant", "content": "9.8", "reasoning_content": "Tenths: 8 > 1."},
        {"role": "user", "content": "and order 7?"},
        {
            "role": "assistant",
            "content": None,
            "reasoning": "Look 7 up.",
            "reasoning_details": details,
            "tool_calls": [call],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "shipped"},
        # vLLM wrote both names while it retired reasoning_content
        {"role": "assistant", "content": "Shipped.", "reasoning": "Say.", "reasoning_content": "Say."},
        {"role": "user", "content": "hack it"},
        {
            "role": "assistant",
            "content": None,
            "refusal": "I can't.",
            "reasoning_content": "Refuse.",
            "thinking_blocks": blocks,
        },
        {"role": "user", "content": "ok"},
        {"role": "assistant", "content": "Bye.", "reasoning_content": None},  # no reasoning
    ]
    last = {"role": "assistant", "content": "Bye!", "reasoning_details": [details[0]]}
    request = {"messages": messages, "response": {"choices": [{"message": last}]}}
    t = load_any(_write(tmp_path, "chat.json", request))
    said = [s for s in t.steps if s.actor == "assistant"]
    assert [list(s.action.reasoning) for s in said] == [
        [{"reasoning_content": "Tenths: 8 > 1."}],
        [{"reasoning": "Look 7 up."}, {"reasoning_details": details}],
        [{"reasoning_content": "Say."}, {"reasoning": "Say."}],
        [{"reasoning_content": "Refuse."}, {"thinking_blocks": blocks}],
        [],
        [{"reasoning_details": [details[0]]}],
    ]
    assert [s.metadata for s in said] == [
        {"thinking": "Tenths: 8 > 1."},
        {"thinking": "Look 7 up."},  # the same reasoning, said once
        {"thinking": "Say."},
        {"refusal": True, "thinking": "Refuse."},
        {},
        {"thinking": "Look 7 up."},
    ]
    assert [s.action.text for s in t.steps if s.actor == "assistant"][1:4] == [
        "",
        "Shipped.",
        "I can't.",
    ]
    warning = _thinking_warning(t)
    assert warning.startswith(
        "8 reasoning fields (2 with encrypted or redacted entries: encrypted, unreadable) are kept "
        "verbatim with their actions (reasoning); only anthropic: sends reasoning back"
    )
    assert warning.endswith("(first at $.messages[1].reasoning_content)")
    assert parse_trace(json.loads(t.to_json())) == t


def test_tau_bench_keeps_the_reasoning_of_litellm_messages(tmp_path: Path) -> None:
    # tau-bench's agents store LiteLLM's message.model_dump(): reasoning_content, thinking_blocks.
    thought = [{"type": "thinking", "thinking": "Cancel it.", "signature": "EqoB"}]
    traj = [
        {"role": "system", "content": "policy"},
        {"role": "user", "content": "cancel order 7"},
        {
            "role": "assistant",
            "content": "Done.",
            "tool_calls": None,
            "function_call": None,
            "reasoning_content": "Cancel it.",
            "thinking_blocks": thought,
        },
    ]
    (t,) = import_file(_write(tmp_path, "tau.json", [{"task_id": 7, "reward": 0.0, "traj": traj}]))
    assert list(t.steps[1].action.reasoning) == [
        {"reasoning_content": "Cancel it."},
        {"thinking_blocks": thought},
    ]
    assert t.steps[1].metadata == {"thinking": "Cancel it."}
    assert _thinking_warning(t).endswith("(first at $[0].traj[2].reasoning_content)")


_NUMBERED_CALLS: list[tuple[str, dict[str, Any]]] = [
    (
        "openai-chat",
        {
            "messages": [
                {"role": "user", "content": "x"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": 17, "type": "function", "function": {"name": "f", "arguments": "{}"}},
                        {"id": 18, "type": "function", "function": {"name": "f", "arguments": "{}"}},
                    ],
                },
                {"role": "tool", "tool_call_id": 18, "content": "r18"},
                {"role": "tool", "tool_call_id": "17", "content": "r17"},
            ]
        },
    ),
    (
        "anthropic",
        {
            "system": "s",
            "messages": [
                {"role": "user", "content": "x"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": 17, "name": "f", "input": {}},
                        {"type": "tool_use", "id": 18, "name": "f", "input": {}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": 18, "content": "r18"},
                        {"type": "tool_result", "tool_use_id": "17", "content": "r17"},
                    ],
                },
            ],
        },
    ),
    (
        "openai-responses",
        [
            {"role": "user", "content": "x"},
            {"type": "function_call", "call_id": 17, "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": 18, "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": 18, "output": "r18"},
            {"type": "function_call_output", "call_id": "17", "output": "r17"},
        ],
    ),
    (
        "tau-bench",
        {
            "simulations": [
                {
                    "id": "s",
                    "task_id": "t",
                    "reward_info": {"reward": 1},
                    "messages": [
                        {"role": "user", "content": "x"},
                        {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {"id": 17, "name": "f", "arguments": {}},
                                {"id": 18, "name": "f", "arguments": {}},
                            ],
                        },
                        {"role": "tool", "id": 18, "content": "r18"},
                        {"role": "tool", "id": "17", "content": "r17"},
                    ],
                }
            ]
        },
    ),
    (
        "otel",
        {
            "resourceSpans": [
                {
                    "scopeSpans": [
                        {
                            "spans": [
                                _chat(
                                    1,
                                    [{"role": "user", "parts": [{"type": "text", "content": "x"}]}],
                                    {
                                        "role": "assistant",
                                        "parts": [
                                            {
                                                "type": "tool_call",
                                                "id": 17,
                                                "name": "f",
                                                "arguments": {},
                                            },
                                            {
                                                "type": "tool_call",
                                                "id": 18,
                                                "name": "f",
                                                "arguments": {},
                                            },
                                        ],
                                    },
                                ),
                                _tool_span(2, {"intValue": "18"}, "r18"),
                                _tool_span(3, {"stringValue": "17"}, "r17"),
                            ]
                        }
                    ]
                }
            ]
        },
    ),
]


@pytest.mark.parametrize(("fmt", "data"), _NUMBERED_CALLS, ids=[n for n, _ in _NUMBERED_CALLS])
def test_integer_tool_call_ids_become_strings_and_results_still_pair(
    tmp_path: Path, fmt: str, data: Any
) -> None:
    # Some frameworks number their calls; a result may write the same id as a number or a string.
    t = load_any(_write(tmp_path, "numbered.json", data), fmt=fmt)
    step = next(s for s in t.steps if s.action.tool_calls)
    assert [c.id for c in step.action.tool_calls] == ["17", "18"]
    assert [(o.call_id, o.content) for o in step.observations] == [("18", "r18"), ("17", "r17")]
    assert "orphan-tool-result" not in codes(t)


def test_openai_chat_custom_tool_calls_keep_their_free_form_input(tmp_path: Path) -> None:
    # OpenAI's custom tools take free-form text: {id, type: "custom", custom: {name, input}}. The
    # input is kept exactly as raw_arguments and read as openai-responses reads a custom_tool_call.
    code = "print('hi')"
    custom = {"type": "custom", "custom": {"name": "code_exec", "description": "Runs Python"}}
    data = {
        "tools": [custom],
        "messages": [
            {"role": "user", "content": "run it"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "type": "custom", "custom": {"name": "code_exec", "input": code}},
                    {"id": "call_2", "type": "custom", "custom": {"name": "grep", "input": '{"q": 1}'}},
                    {"id": "call_3", "type": "custom", "custom": {"name": "noop", "input": ""}},
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "hi"},
        ],
    }
    t = load_any(_write(tmp_path, "chat.json", data), fmt="openai-chat")
    calls = t.steps[1].action.tool_calls
    assert [(c.id, c.name, c.arguments, c.raw_arguments) for c in calls] == [
        ("call_1", "code_exec", {"_unparsed": code}, code),
        ("call_2", "grep", {"q": 1}, '{"q": 1}'),
        ("call_3", "noop", {}, ""),
    ]
    assert [(o.call_id, o.content) for o in t.steps[1].observations] == [("call_1", "hi")]
    assert t.actor("assistant").tools == (custom,)
    assert parse_trace(json.loads(t.to_json())) == t


def test_otel_openai_style_custom_tool_calls_are_read(tmp_path: Path) -> None:
    call = {"id": "c", "type": "custom", "custom": {"name": "code_exec", "input": "1 + 1"}}
    output = {"role": "assistant", "content": None, "tool_calls": [call]}
    f = _write(tmp_path, "otel.json", _otlp(_chat(1, [{"role": "user", "content": "go"}], output)))
    (c,) = load_any(f).steps[0].action.tool_calls
    assert (c.id, c.name, c.arguments, c.raw_arguments) == (
        "c",
        "code_exec",
        {"_unparsed": "1 + 1"},
        "1 + 1",
    )


def _custom_calls_without_input(fmt: str) -> tuple[Any, str]:
    """A run in `fmt` with a custom call that records no input (c1), one whose input is empty
    (c2) and a function call without arguments (c3), and where c1 sits."""
    user = {"role": "user", "content": "go"}
    if fmt == "openai-responses":
        items = [
            user,
            {"type": "custom_tool_call", "call_id": "c1", "name": "shell"},
            {"type": "custom_tool_call", "call_id": "c2", "name": "shell", "input": ""},
            {"type": "function_call", "call_id": "c3", "name": "lookup"},
        ]
        return {"input": items}, "$.input[1]"
    calls = [
        {"id": "c1", "type": "custom", "custom": {"name": "shell"}},
        {"id": "c2", "type": "custom", "custom": {"name": "shell", "input": ""}},
        {"id": "c3", "type": "function", "function": {"name": "lookup"}},
    ]
    output = {"role": "assistant", "content": None, "tool_calls": calls}
    if fmt == "openai-chat":
        return {"messages": [user, output]}, "$.messages[1].tool_calls[0].custom"
    return _otlp(_chat(1, [user], output)), f"{_SPAN0}[3].value.stringValue[0].tool_calls[0].custom"


@pytest.mark.parametrize("fmt", ["openai-chat", "otel", "openai-responses"])
def test_a_custom_call_without_input_is_read_as_empty_input_and_warned(tmp_path: Path, fmt: str) -> None:
    # A function call without arguments is read as no arguments; a custom call without input is
    # read alike, but the API always sends a custom call's input (empty text is text), so its
    # absence is a gap in the record, and a warning names the first such call.
    data, place = _custom_calls_without_input(fmt)
    t = load_any(_write(tmp_path, "run.json", data), fmt=fmt)
    calls = next(s for s in t.steps if s.action.tool_calls).action.tool_calls
    assert [(c.id, c.arguments, c.raw_arguments) for c in calls] == [
        ("c1", {}, None),
        ("c2", {}, ""),
        ("c3", {}, None),
    ]
    assert _warning(t, "tool-input-missing") == (
        "a custom tool call records no input ('input' is missing or null); it is imported as "
        f"empty input, as a function call without arguments is (first at {place})"
    )


def _openinference(sid: int, attrs: dict[str, str]) -> dict[str, Any]:
    """An OpenInference LLM span with these string attributes after its kind (attribute 0)."""
    span = _span(sid, sid, {"gen_ai.operation.name": "chat", **attrs})
    span["attributes"][0] = {"key": "openinference.span.kind", "value": {"stringValue": "LLM"}}
    return span


def test_openinference_reasoning_contents_are_kept_as_thinking_not_text(tmp_path: Path) -> None:
    # OpenInference writes reasoning (Anthropic thinking and redacted_thinking, OpenAI reasoning
    # items) as message_content parts of type "reasoning": readable text in message_content.text,
    # what must go back unchanged in signature, data or encrypted_content.
    out = "llm.output_messages.0.message"
    first = {
        f"{out}.role": "assistant",
        f"{out}.contents.0.message_content.type": "reasoning",
        f"{out}.contents.0.message_content.text": "Look order 7 up.",
        f"{out}.contents.0.message_content.signature": "EqQBCgIY",
        f"{out}.contents.1.message_content.type": "reasoning",
        f"{out}.contents.1.message_content.data": "EmwKAhgB",
        f"{out}.contents.2.message_content.type": "text",
        f"{out}.contents.2.message_content.text": "Checking.",
    }
    earlier = {k.replace("llm.output_messages.0", "llm.input_messages.1"): v for k, v in first.items()}
    second = {
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "where is order 7?",
        **earlier,
        f"{out}.role": "assistant",
        f"{out}.content": "Shipped.",
        f"{out}.contents.0.message_content.type": "reasoning",
        f"{out}.contents.0.message_content.text": "Say it.",
    }
    user = {
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "where is order 7?",
    }
    f = _write(
        tmp_path, "oi.json", _otlp(_openinference(1, {**user, **first}), _openinference(2, second))
    )
    t = load_any(f)
    assert [s.action.text for s in t.steps] == ["Checking.", "Shipped."]
    assert list(t.steps[0].action.reasoning) == [
        {
            "message_content.type": "reasoning",
            "message_content.text": "Look order 7 up.",
            "message_content.signature": "EqQBCgIY",
        },
        {"message_content.type": "reasoning", "message_content.data": "EmwKAhgB"},
    ]
    assert t.steps[0].metadata["thinking"] == "Look order 7 up."
    assert t.steps[1].metadata["thinking"] == "Say it."
    context = t.steps[1].context
    assert isinstance(context, tuple) and context[1].content == "Checking."
    warning = _thinking_warning(t)
    # the second input repeats the first output's parts: each counted once
    assert warning.startswith("3 reasoning parts (1 redacted: encrypted, unreadable) are kept ")
    assert f"(first at {_SPAN0}[4].value.stringValue)" in warning
    assert "recorded inputs" not in warning
    assert parse_trace(json.loads(t.to_json())) == t


def test_openinference_media_tool_use_and_unknown_contents_are_kept_or_named(tmp_path: Path) -> None:
    # OpenInference flattens content parts as message.contents.M.message_content.*: an image or
    # audio part cannot be imported (said, as for the GenAI parts model); a tool_use part (with its
    # call under message.contents.M.tool_call.*) is a tool call, which emitters usually repeat in
    # message.tool_calls: kept once; a part of a type car does not know is named where it sits.
    inp, out = "llm.input_messages", "llm.output_messages.0.message"
    attrs = {
        f"{inp}.0.message.role": "user",
        f"{inp}.0.message.contents.0.message_content.type": "text",
        f"{inp}.0.message.contents.0.message_content.text": "What is on the label?",
        f"{inp}.0.message.contents.1.message_content.type": "image",
        f"{inp}.0.message.contents.1.message_content.image.image.url": "data:image/png;base64,iVBO",
        f"{inp}.0.message.contents.2.message_content.type": "audio",
        f"{inp}.0.message.contents.2.message_content.audio.audio.url": "https://example.org/a.mp3",
        f"{inp}.0.message.contents.3.message_content.type": "future_part",
        f"{inp}.1.message.role": "assistant",
        f"{inp}.1.message.contents.0.message_content.type": "text",
        f"{inp}.1.message.contents.0.message_content.text": "Looking.",
        f"{inp}.1.message.contents.1.message_content.type": "tool_use",
        f"{inp}.1.message.contents.1.tool_call.id": "call_1",
        f"{inp}.1.message.contents.1.tool_call.function.name": "ocr",
        f"{inp}.1.message.contents.1.tool_call.function.arguments": '{"image": 0}',
        f"{inp}.1.message.tool_calls.0.tool_call.id": "call_1",
        f"{inp}.1.message.tool_calls.0.tool_call.function.name": "ocr",
        f"{inp}.1.message.tool_calls.0.tool_call.function.arguments": '{"image": 0}',
        f"{inp}.2.message.role": "tool",
        f"{inp}.2.message.tool_call_id": "call_1",
        f"{inp}.2.message.content": "ACME 7",
        f"{out}.role": "assistant",
        f"{out}.contents.0.message_content.type": "tool_use",
        f"{out}.contents.0.tool_call.id": "call_2",
        f"{out}.contents.0.tool_call.function.name": "lookup",
        f"{out}.contents.0.tool_call.function.arguments": '{"q": "ACME 7"}',
    }
    t = load_any(_write(tmp_path, "oi.json", _otlp(_openinference(1, attrs))))
    (step,) = t.steps
    assert [(c.id, c.name, c.arguments) for c in step.action.tool_calls] == [
        ("call_2", "lookup", {"q": "ACME 7"})
    ]
    context = step.context
    assert isinstance(context, tuple)
    assert [(m.role, m.content) for m in context] == [
        ("user", "What is on the label?"),
        ("assistant", "Looking."),
        ("tool", "ACME 7"),
    ]
    assert [(c.id, c.name, c.arguments) for c in context[1].tool_calls] == [
        ("call_1", "ocr", {"image": 0})
    ]
    assert {"attachments-unresolved", "items-skipped"} <= codes(t)
    image = list(attrs).index(f"{inp}.0.message.contents.1.message_content.type") + 1
    assert _warning(t, "attachments-unresolved") == (
        "images or files in messages were not imported (text only; first at "
        f"{_SPAN0}[{image}].value.stringValue)"
    )
    where = list(attrs).index(f"{inp}.0.message.contents.3.message_content.type") + 1
    assert _warning(t, "items-skipped") == (
        "message parts car does not import were left out: 'future_part' (first at "
        f"{_SPAN0}[{where}].value.stringValue)"
    )


def test_inspect_tool_results_given_as_content_are_their_text() -> None:
    # A tool may return ContentText / ContentImage values (or a list of them): the model was given
    # their text (and the image), not their JSON.
    call = {"role": "assistant", "tool_calls": [{"id": "c1", "function": "shot", "arguments": {}}]}
    calls = {"role": "assistant", "tool_calls": [{"id": "c2", "function": "shot", "arguments": {}}]}
    image = {"type": "image", "image": "data:image/png;base64,AA"}
    log = _inspect_log(
        [
            {"event": "model", "model": "m", "input": [], "output": {"choices": [{"message": call}]}},
            {"event": "tool", "id": "c1", "result": [{"type": "text", "text": "page 1"}, image]},
            {"event": "model", "model": "m", "input": [], "output": {"choices": [{"message": calls}]}},
            {"event": "tool", "id": "c2", "result": {"type": "text", "text": "page 2"}},
        ]
    )
    (t,) = convert_log(log, Document("log.json", b"", "json", log))
    assert [o.content for s in t.steps for o in s.observations] == ["page 1", "page 2"]
    assert "attachments-unresolved" in codes(t)


def test_an_inspect_tool_error_without_a_result_is_its_message() -> None:
    call = {"role": "assistant", "tool_calls": [{"id": "c1", "function": "f", "arguments": {}}]}
    error = {"type": "timeout", "message": "timed out after 30s"}
    log = _inspect_log(
        [
            {"event": "model", "model": "m", "input": [], "output": {"choices": [{"message": call}]}},
            {"event": "tool", "id": "c1", "error": error},  # no result: dumped without None values
        ]
    )
    (t,) = convert_log(log, Document("log.json", b"", "json", log))
    (obs,) = t.steps[0].observations
    assert (obs.content, obs.is_error) == ("timed out after 30s", True)


# -- where the first image or file sits ---------------------------------------------------------

_IMAGE_URL = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}
_ANTHROPIC_IMAGE = {"type": "image", "source": {"type": "base64", "data": "AA"}}


def _attachment_runs() -> list[tuple[str, Any, str]]:
    """(format, document, where its first image sits): one run per importer that warns."""
    chat = {"messages": [{"role": "user", "content": [{"type": "text", "text": "q"}, _IMAGE_URL]}]}
    chat["messages"].append({"role": "assistant", "content": "a"})
    result = {"type": "tool_result", "tool_use_id": "t1", "content": [_ANTHROPIC_IMAGE]}
    anthropic = {
        "messages": [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "shot", "input": {}}],
            },
            {"role": "user", "content": [result, _ANTHROPIC_IMAGE]},
            {"role": "assistant", "content": "a"},
        ]
    }
    atif = {
        "schema_version": "ATIF-v1.6",
        "session_id": "s",
        "agent": {"name": "a"},
        "steps": [
            {
                "step_id": 1,
                "source": "user",
                "message": [{"type": "text", "text": "q"}, _ANTHROPIC_IMAGE],
            },
            {"step_id": 2, "source": "agent", "message": "a"},
        ],
    }
    parts = [
        {"role": "user", "parts": [{"type": "text", "content": "q"}, {"type": "blob", "content": "AA"}]}
    ]
    otel = _otlp(
        _span(
            1,
            1,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps(parts),
                "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": []}]),
            },
        )
    )
    return [
        ("openai-chat", chat, "$.messages[0].content[1]"),
        ("anthropic", anthropic, "$.messages[2].content[0].content[0]"),
        ("atif", atif, "$.steps[0].message[1]"),
        ("otel", otel, ".value.stringValue[0].parts[1]"),
    ]


@pytest.mark.parametrize(("fmt", "data", "where"), _attachment_runs(), ids=lambda v: str(v)[:12])
def test_the_attachments_warning_names_where_the_first_one_sits(
    tmp_path: Path, fmt: str, data: Any, where: str
) -> None:
    """Only openai-responses named the place; the others said only that images were not imported."""
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    message = _warning(load_any(path, fmt), "attachments-unresolved")
    assert message.endswith(f"{where})") and "(text only; first at " in message


def test_inspect_s_attachments_warning_names_where_the_first_one_sits() -> None:
    image = {"type": "image", "image": "data:image/png;base64,AA"}
    user = {"role": "user", "content": [{"type": "text", "text": "q"}, image]}
    answer = {"role": "assistant", "content": "a"}
    log = _inspect_log(
        [{"event": "model", "model": "m", "input": [user], "output": {"choices": [{"message": answer}]}}]
    )
    (t,) = convert_log(log, Document("log.json", b"", "json", log))
    assert _warning(t, "attachments-unresolved").endswith(
        "(text only; first at $.samples[0].events[0].input[0].content[1])"
    )


def test_responses_jsonl_of_stored_responses_holds_one_run_per_line(tmp_path: Path) -> None:
    # A log of Responses API calls, one stored response (with its input) per line: it was refused as
    # no known format.
    def response(i: int) -> dict[str, Any]:
        return {
            "id": f"resp_{i}",
            "object": "response",
            "input": [{"role": "user", "content": f"weather in city {i}?"}],
            "output": [
                {"type": "function_call", "call_id": f"c{i}", "name": "weather", "arguments": "{}"},
            ],
        }

    f = tmp_path / "responses.jsonl"
    f.write_text("\n".join(json.dumps(response(i)) for i in range(3)) + "\n")
    runs = import_file(f)
    assert [t.id for t in runs] == ["resp_0", "resp_1", "resp_2"]
    assert [t.steps[1].action.tool_calls[0].id for t in runs] == ["c0", "c1", "c2"]
    assert runs[2].source is not None and runs[2].source.locator == "line 3: $"


def test_a_responses_list_skips_the_run_that_cannot_be_imported_in_its_place(tmp_path: Path) -> None:
    said = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}
    good = {"input": "hi", "output": [said]}
    bad = {"input": "hi", "output": [{"type": "function_call", "call_id": "c", "arguments": "{}"}]}
    f = _write(tmp_path, "runs.json", [good, bad, good])
    runs = import_file(f)
    assert [t.id for t in runs] == ["runs-0", "runs-2"]
    assert len(runs.skipped) == 1 and runs.skipped[0][0] == 1
    assert "$[1].output[0].name" in str(runs.skipped[0][1])
