"""Bad input: one line naming the file, the place inside it and what was expected; exit 2; never a
traceback. A corpus of malformed files, plus property-based fuzzing of every importer."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from car.errors import InputError
from car.importers import Document, get_importer, import_file
from car.importers.base import read_document
from car.importers.inspect_log import convert_log

CHAT = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
BAD_CALLS = {"role": "assistant", "content": "yo", "tool_calls": 5}
OTLP_SPAN = {
    "traceId": "5b8aa5a2d2c872e8321cf37308d69df2",
    "spanId": "0000000000000001",
    "name": "chat",
    "startTimeUnixNano": "1",
    "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}],
}


def otlp(*spans: dict[str, Any]) -> dict[str, Any]:
    return {"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}


def chat_file(*attributes: dict[str, Any]) -> str:
    """A file of one chat span with these attributes after the operation (attribute 0)."""
    return json.dumps(otlp({**OTLP_SPAN, "attributes": [*OTLP_SPAN["attributes"], *attributes]}))


def otlp_output(messages: list[Any]) -> str:
    """A file of one chat span whose gen_ai.output.messages (attribute 1) are `messages`."""
    return chat_file({"key": "gen_ai.output.messages", "value": {"stringValue": json.dumps(messages)}})


def openinference_file(*attributes: dict[str, Any]) -> str:
    """A file of one OpenInference LLM span with these attributes after its kind (attribute 0)."""
    kind = {"key": "openinference.span.kind", "value": {"stringValue": "LLM"}}
    return json.dumps(otlp({**OTLP_SPAN, "attributes": [kind, *attributes]}))


def event_file(*events: dict[str, Any]) -> str:
    """A file of one chat span whose events (the older event style) are a user message (event 0)
    and then `events`."""
    user = {"name": "gen_ai.user.message", "attributes": [string_attr("content", "hi")]}
    return json.dumps(otlp({**OTLP_SPAN, "events": [user, *events]}))


def string_attr(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def kvlist(**values: dict[str, Any]) -> dict[str, Any]:
    """An OTLP kvlistValue AnyValue whose members are these AnyValues, in order."""
    return {"kvlistValue": {"values": [{"key": k, "value": v} for k, v in values.items()]}}


def tool_span(*attributes: dict[str, Any], name: str = "execute_tool") -> dict[str, Any]:
    """An execute_tool span (span 2, named `name`) with these attributes after the operation."""
    operation = {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}}
    return {
        **OTLP_SPAN,
        "spanId": "0000000000000002",
        "name": name,
        "attributes": [operation, *attributes],
    }


CORPUS: list[tuple[str, str, str]] = [
    (
        "ww-history.json",
        json.dumps({"history": [{"role": "a", "content": "x"}], "mistake_step": "3"}),
        "$.mistake_step: expected a step index from 0 to 0 (history has 1 message), got the string",
    ),
    (
        "ww-speaker.json",
        json.dumps({"history": [{"content": "x"}], "mistake_step": "0"}),
        "$.history[0]: expected a speaker in 'name' or 'role'",
    ),
    (
        "ww-content.json",
        json.dumps({"history": [{"role": "a", "content": 5}], "mistake_agent": "a"}),
        "$.history[0].content: expected the message text, got a number",
    ),
    (
        "ww-step-superscript.json",
        json.dumps({"history": [{"role": "a", "content": "x"}], "mistake_step": "²"}),
        "$.mistake_step: expected a step index from 0 to 0 (a 0-based index into history), got the "
        'string "²"',
    ),
    (
        "ww-empty-history.json",
        json.dumps({"history": [], "mistake_step": "0", "mistake_agent": "a"}),
        "$.history: expected at least one message (the history is empty)",
    ),
    (
        "ww-not-list.json",
        json.dumps({"history": {"a": 1}, "mistake_step": "0"}),
        "expected",
    ),
    (
        "chat-role.json",
        json.dumps({"messages": [{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}]}),
        "$.messages[1].role: expected a role (system, developer, user, assistant, tool, function), "
        'got the string "robot"',
    ),
    (
        "chat-tool-id.json",
        json.dumps({"messages": [{"role": "user", "content": "a"}, {"role": "tool", "content": "b"}]}),
        "$.messages[1].tool_call_id: missing; expected the id of the tool call this message answers",
    ),
    (
        "chat-fn-name.json",
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]},
                ]
            }
        ),
        "$.messages[1].tool_calls[0].function.name: missing; expected the tool name",
    ),
    # a key the file holds as null is null, not missing (in JSON Lines and OTel content too)
    (
        "chat-fn-name-null.json",
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": None}}]},
                ]
            }
        ),
        "$.messages[1].tool_calls[0].function.name: expected the tool name, got null",
    ),
    (
        "chats-fn-name.jsonl",
        "\n".join(
            json.dumps({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", **fn}]}]})
            for fn in ({"function": {}}, {"function": {"name": None}})
        ),
        "line 1: $.messages[0].tool_calls[0].function.name: missing; expected the tool name; none",
    ),
    (
        "otel-part-name-null.json",
        otlp_output([{"role": "assistant", "parts": [{"type": "tool_call", "id": "c", "name": None}]}]),
        "$.resourceSpans[0].scopeSpans[0].spans[0].attributes[1].value.stringValue[0].parts[0].name: "
        "expected the tool name, got null",
    ),
    # OpenAI's custom (free-form) tool calls: {id, type: "custom", custom: {name, input}}
    (
        "chat-custom-no-name.json",
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "c", "type": "custom", "custom": {"input": "x"}}],
                    },
                ]
            }
        ),
        "$.messages[1].tool_calls[0].custom.name: missing; expected the tool name",
    ),
    (
        "chat-custom-input-object.json",
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {"id": "c", "type": "custom", "custom": {"name": "t", "input": {"a": 1}}}
                        ],
                    },
                ]
            }
        ),
        "$.messages[1].tool_calls[0].custom.input: expected the custom tool's free-form input (a "
        "string), got an object",
    ),
    (
        "chat-custom-not-object.json",
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "tool_calls": [{"id": "c", "type": "custom"}]},
                ]
            }
        ),
        "$.messages[1].tool_calls[0].custom: missing; expected a custom tool call {name, input}",
    ),
    (
        "otel-custom-call-no-name.json",
        otlp_output(
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "type": "custom", "custom": {"input": "x"}}],
                }
            ]
        ),
        "$.resourceSpans[0].scopeSpans[0].spans[0].attributes[1].value.stringValue[0].tool_calls[0]"
        ".custom.name: missing; expected the tool name",
    ),
    (
        "chat-call-id-bool.json",
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "tool_calls": [{"id": True, "function": {"name": "t"}}]},
                ]
            }
        ),
        "$.messages[1].tool_calls[0].id: expected a tool-call id (a string or an integer), got a "
        "boolean",
    ),
    (
        "chat-result-id-bool.json",
        json.dumps({"messages": [{"role": "tool", "tool_call_id": False, "content": "b"}]}),
        "$.messages[0].tool_call_id: expected the id of the tool call this message answers (a "
        "string or an integer), got a boolean",
    ),
    (
        "anthropic-result-id-float.json",
        json.dumps(
            {
                "system": "s",
                "messages": [
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": 1.5}]},
                ],
            }
        ),
        "$.messages[0].content[0].tool_use_id: expected the tool_use id (a string or an integer), "
        "got a number (1.5 is not an integer)",
    ),
    (
        "responses-call-id-bool.json",
        json.dumps([{"type": "function_call", "call_id": True, "name": "f", "arguments": "{}"}]),
        "$[0].call_id: expected the call_id (a string or an integer), got a boolean",
    ),
    (
        "anthropic-id.json",
        json.dumps(
            {
                "system": "s",
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "content": [{"type": "tool_use", "name": "t", "input": {}}]},
                ],
            }
        ),
        "$.messages[1].content[0].id: missing; expected the tool_use id (a string or an integer)",
    ),
    (
        "responses-call-id.json",
        json.dumps([{"type": "function_call", "name": "f", "arguments": "{}"}]),
        "$[0].call_id: missing; expected the call_id (a string or an integer)",
    ),
    (
        "otel-int.json",
        chat_file({"key": "gen_ai.request.seed", "value": {"intValue": "forty"}}),
        "$.resourceSpans[0].scopeSpans[0].spans[0].attributes[1].value.intValue: expected an integer",
    ),
    (
        "otel-tool-call-id-bool.json",
        json.dumps(
            otlp(OTLP_SPAN, tool_span({"key": "gen_ai.tool.call.id", "value": {"boolValue": True}}))
        ),
        "$.resourceSpans[0].scopeSpans[0].spans[1].attributes[1].value.boolValue: expected the "
        "tool-call id in gen_ai.tool.call.id (a string or an integer), got a boolean",
    ),
    (
        "otel-part-id-bool.json",
        otlp_output([{"role": "assistant", "parts": [{"type": "tool_call", "id": True, "name": "f"}]}]),
        "$.resourceSpans[0].scopeSpans[0].spans[0].attributes[1].value.stringValue[0].parts[0].id: "
        "expected a tool-call id (a string or an integer), got a boolean",
    ),
    (
        "otel-openinference-id-float.json",
        openinference_file(
            {
                "key": "llm.output_messages.0.message.tool_calls.0.tool_call.function.name",
                "value": {"stringValue": "f"},
            },
            {
                "key": "llm.output_messages.0.message.tool_calls.0.tool_call.id",
                "value": {"doubleValue": 1.5},
            },
        ),
        "$.resourceSpans[0].scopeSpans[0].spans[0].attributes[2].value.doubleValue: expected the "
        "tool-call id in llm.output_messages.0.message.tool_calls.0.tool_call.id (a string or an "
        "integer), got a number (1.5 is not an integer)",
    ),
    # When an event's fields are its attributes, each is named where it sits; inside a JSON
    # string, the place in the JSON follows the stringValue.
    (
        "otel-event-attribute-id-bool.json",
        event_file(
            {
                "name": "gen_ai.tool.message",
                "attributes": [string_attr("content", "r"), {"key": "id", "value": {"boolValue": True}}],
            }
        ),
        "$.resourceSpans[0].scopeSpans[0].spans[0].events[1].attributes[1].value.boolValue: expected "
        "the id of the tool call this message answers (a string or an integer), got a boolean",
    ),
    (
        "otel-event-choice-message-id-float.json",
        event_file(
            {
                "name": "gen_ai.choice",
                "attributes": [
                    string_attr(
                        "message",
                        json.dumps(
                            {
                                "role": "assistant",
                                "tool_calls": [
                                    {"id": 2.5, "function": {"name": "f", "arguments": "{}"}}
                                ],
                            }
                        ),
                    ),
                    {"key": "index", "value": {"intValue": "0"}},
                ],
            }
        ),
        "$.resourceSpans[0].scopeSpans[0].spans[0].events[1].attributes[0].value.stringValue"
        ".tool_calls[0].id: expected a tool-call id (a string or an integer), got a number (2.5 is "
        "not an integer)",
    ),
    # Structured content (kvlistValue, arrayValue) is named where each member sits too.
    (
        "otel-event-kvlist-body-id-float.json",
        event_file(
            {
                "name": "gen_ai.tool.message",
                "attributes": [
                    {
                        "key": "body",
                        "value": kvlist(content={"stringValue": "r"}, id={"doubleValue": 1.5}),
                    }
                ],
            }
        ),
        "$.resourceSpans[0].scopeSpans[0].spans[0].events[1].attributes[0].value.kvlistValue"
        ".values[1].value.doubleValue: expected the id of the tool call this message answers (a "
        "string or an integer), got a number (1.5 is not an integer)",
    ),
    (
        "otel-structured-part-id-bool.json",
        chat_file(
            {
                "key": "gen_ai.output.messages",
                "value": {
                    "arrayValue": {
                        "values": [
                            kvlist(
                                role={"stringValue": "assistant"},
                                parts={
                                    "arrayValue": {
                                        "values": [
                                            kvlist(
                                                type={"stringValue": "tool_call"},
                                                id={"boolValue": True},
                                                name={"stringValue": "f"},
                                            )
                                        ]
                                    }
                                },
                            )
                        ]
                    }
                },
            }
        ),
        "$.resourceSpans[0].scopeSpans[0].spans[0].attributes[1].value.arrayValue.values[0]"
        ".kvlistValue.values[1].value.arrayValue.values[0].kvlistValue.values[1].value.boolValue: "
        "expected a tool-call id (a string or an integer), got a boolean",
    ),
    # A tool call without a name cannot be replayed: refused as in every other importer.
    (
        "otel-part-no-name.json",
        otlp_output(
            [
                {
                    "role": "assistant",
                    "parts": [
                        {"type": "text", "content": "calling"},
                        {"type": "tool_call", "id": "c", "arguments": {"q": 1}},
                    ],
                }
            ]
        ),
        "$.resourceSpans[0].scopeSpans[0].spans[0].attributes[1].value.stringValue[0].parts[1].name: "
        "missing; expected the tool name",
    ),
    (
        "otel-openai-style-no-name.json",
        otlp_output(
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "function": {"name": "", "arguments": "{}"}}],
                }
            ]
        ),
        "$.resourceSpans[0].scopeSpans[0].spans[0].attributes[1].value.stringValue[0].tool_calls[0]"
        '.function.name: expected a non-empty tool name, got the string ""',
    ),
    (
        "otel-openinference-no-name.json",
        openinference_file(
            {
                "key": "llm.output_messages.0.message.tool_calls.0.tool_call.id",
                "value": {"stringValue": "c"},
            }
        ),
        "$.resourceSpans[0].scopeSpans[0].spans[0].attributes: expected the tool name in "
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name (the call has no such "
        "attribute)",
    ),
    (
        "otel-flat-genai-no-name.json",
        chat_file(
            {"key": "gen_ai.completion.0.tool_calls.0.id", "value": {"stringValue": "c"}},
            {"key": "gen_ai.completion.0.tool_calls.0.name", "value": {"intValue": "3"}},
        ),
        "$.resourceSpans[0].scopeSpans[0].spans[0].attributes[2].value.intValue: expected the tool "
        "name in gen_ai.completion.0.tool_calls.0.name, got a number",
    ),
    (
        "otel-tool-span-no-name.json",
        # the tool span runs before the first model call: its call is rebuilt from it
        json.dumps(otlp({**tool_span(name=""), "startTimeUnixNano": "0"}, OTLP_SPAN)),
        "$.resourceSpans[0].scopeSpans[0].spans[0]: expected a non-empty tool name in "
        "gen_ai.tool.name, tool.name or the span's name (a tool call is rebuilt from this span), got "
        'the string ""',
    ),
    (
        "otel-trace-id.json",
        json.dumps(otlp({**OTLP_SPAN, "traceId": "xyz"})),
        "$.resourceSpans[0].scopeSpans[0].spans[0].traceId: expected a 16-byte id as 32 hex digits or "
        "base64",
    ),
    (
        "otel-no-llm.json",
        json.dumps(otlp({**OTLP_SPAN, "attributes": []})),
        "$: expected model-call spans",
    ),
    (
        "tau-reward.json",
        json.dumps([{"task_id": 1, "reward": "high", "traj": []}]),
        '$[0].reward: expected a reward between 0 and 1, got the string "high"',
    ),
    (
        "tau2-messages.json",
        json.dumps({"simulations": [{"id": "s", "messages": [5], "reward_info": {"reward": 0}}]}),
        "$.simulations[0].messages[0]: expected a chat message {role, content}, got a number",
    ),
    ("broken.json", '{"messages": [', "line 1 column 15: invalid JSON"),
    ("unknown.json", json.dumps({"hello": "world"}), "car knows: car, who-and-when"),
    ("empty.json", "", "empty file"),
    (
        "chats.jsonl",
        # every run bad (one bad run beside good ones is skipped: test_import_plumbing)
        "\n".join(["", *[json.dumps({"messages": [*CHAT["messages"][:1], BAD_CALLS]})] * 2]),
        "line 2: $.messages[1].tool_calls: expected an array, got a number; none of the file's 2 runs",
    ),
    (
        "trace-broken.json",
        json.dumps({"version": "car.trace/v1", "id": "x", "actors": [], "steps": []}),
        "$.actors",
    ),
]


@pytest.mark.parametrize(("name", "content", "expected"), CORPUS, ids=[c[0] for c in CORPUS])
def test_malformed_files_get_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: str, expected: str
) -> None:
    f = tmp_path / name
    f.write_text(content)
    commands = (["validate"], ["import"], ["blame", "--policy", "sim:pivot"])
    assert_one_located_line(f, commands, expected, capsys)


def assert_one_located_line(
    f: Path, commands: Iterable[list[str]], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each command (its name and options) on `f` exits 2 with one error line naming `f`, which
    says `expected`, and no traceback."""
    for command in commands:
        assert run([command[0], str(f), *command[1:]]) == 2
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith(f"car: error: {f}: "), lines[0]
        assert expected in lines[0], lines[0]
        assert "Traceback" not in err


def test_a_damaged_inspect_log_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "run.eval"
    f.write_bytes(b"PK\x03\x04 not really a zip")
    assert run(["validate", str(f)]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and line.startswith(f"car: error: {f}: ")
    assert "Inspect AI" in line


def test_missing_inspect_extra_gives_the_install_hint(
    fixtures: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "inspect_ai", None)
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)
    f = fixtures / "inspect_log.json"
    with pytest.raises(
        InputError, match=r"needs the optional extra: pip install 'car-blame\[inspect\]'"
    ):
        import_file(f)
    assert run(["validate", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'car-blame[inspect]'" in err


def test_unknown_format_name_lists_the_known_ones(
    fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["import", str(fixtures / "tau2.json"), "--from", "openai"]) == 2
    err = capsys.readouterr().err
    assert "unknown format 'openai'" in err and "openai-chat" in err


def test_from_car_on_a_foreign_file_does_not_send_the_user_to_car_import(
    fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--from car` forces car's own format: the hint was "foreign formats go through `car
    import`", which `car import --from car` refuses alike."""
    for command in ("import", "validate"):
        assert run([command, str(fixtures / "tau2.json"), "--from", "car"]) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert "$.version: missing; expected 'car.trace/v1'" in line
        assert "car import" not in line and "without --from, car sniffs which format" in line


@pytest.mark.parametrize("name", ["openai_chat.json", "tau_bench.json"])
def test_a_foreign_file_whose_name_is_not_utf8_imports(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """Importers name a run after its file: a name byte that is not UTF-8 made the trace id invalid,
    and a good log was refused with pydantic's own words. The byte is shown escaped instead."""
    import os
    import shutil

    src = tmp_path / os.fsdecode(b"run\xfe" + name.encode()[-5:])
    try:
        shutil.copy(fixtures / name, src)
    except (OSError, UnicodeError):
        pytest.skip("this file system takes only UTF-8 names")
    assert run(["validate", str(src)]) == 0
    assert run(["import", str(src), "-o", f"{tmp_path}/out/"]) == 0
    written = sorted((tmp_path / "out").iterdir())
    assert written and all("\\xfe" in json.loads(p.read_text())["id"] for p in written)
    capsys.readouterr()


def test_validate_dir_reports_each_file_and_fails_only_for_bad_ones(
    tmp_path: Path, fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.json"
    good.write_text((fixtures / "openai_chat.json").read_text())
    assert run(["validate", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "good.json" in out and "openai-chat" in out and "1 files" not in out
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "bad.json").write_text('{"hello": 1}')
    assert run(["validate", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert "good.json" in out
    assert "sub/bad.json" in out and "FAILED" in out
    assert "2 files, 1 run ok, 1 failed" in out


def test_validate_of_several_paths_is_one_table(
    tmp_path: Path,
    fixtures: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`car validate traces/*.json` (the shell names every file) was a usage error: one path only."""
    monkeypatch.chdir(tmp_path)
    Path("good.json").write_text((fixtures / "openai_chat.json").read_text())
    Path("sub").mkdir()
    Path("sub", "bad.json").write_text('{"hello": 1}')
    assert run(["validate", "good.json", "sub", "missing.json"]) == 2
    out = capsys.readouterr().out
    assert "openai-chat" in out and "sub/bad.json" in out and "missing.json: no such file" in out
    assert "3 files, 1 run ok, 2 failed" in out
    assert run(["validate", "good.json", "good.json"]) == 0


# -- property-based fuzzing ----------------------------------------------------------------------------
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["user", "assistant", "tool", "system", "chat", "LLM", "TOOL", "text", "1"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "role",
                    "content",
                    "name",
                    "type",
                    "id",
                    "messages",
                    "history",
                    "mistake_step",
                    "tool_calls",
                    "function",
                    "arguments",
                    "call_id",
                    "traj",
                    "reward",
                    "key",
                    "value",
                    "stringValue",
                    "intValue",
                    "spans",
                    "events",
                    "input",
                    "output",
                    "parts",
                ]
            )
            | st.text(max_size=6),
            children,
            max_size=5,
        )
    ),
    max_leaves=25,
)

FORMATS = ["who-and-when", "tau-bench", "otel", "openai-responses", "anthropic", "openai-chat", "car"]
FIXTURE_OF = {
    "who-and-when": None,
    "tau-bench": "tau_bench.json",
    "otel": "otel_genai.json",
    "openai-responses": "responses.json",
    "anthropic": "anthropic.json",
    "openai-chat": "openai_chat.json",
}


def _convert(fmt: str, data: Any) -> None:
    doc = Document("fuzz.json", b"", "json", data)
    try:
        traces = get_importer(fmt).convert(doc)
    except InputError as exc:
        assert str(exc).startswith("fuzz.json: ") and "\n" not in str(exc)
        return
    for t in traces:
        assert t.steps


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=JSON)
def test_fuzz_random_json_raises_only_input_errors(fmt: str, data: Any) -> None:
    _convert(fmt, data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=JSON)
def test_fuzz_inspect_log_conversion(data: Any) -> None:
    doc = Document("fuzz.json", b"", "json", data)
    try:
        convert_log(data if isinstance(data, dict) else {"samples": data}, doc)
    except InputError as exc:
        assert "\n" not in str(exc)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    value[path[0]] = _replace(value[path[0]], path[1:], new)
    return value


@pytest.mark.parametrize("name", [*(v for v in FIXTURE_OF.values() if v), "inspect_log.json"])
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(choice=st.integers(min_value=0), new=JSON)
def test_fuzz_mutated_fixtures_raise_only_input_errors(name: str, choice: int, new: Any) -> None:
    from tests_fixture_path import FIXTURES

    original = read_document(FIXTURES / name).data
    paths = _paths(original)
    mutated = _replace(copy.deepcopy(original), paths[choice % len(paths)], new)
    if name == "inspect_log.json":
        doc = Document("fuzz.json", b"", "json", mutated)
        try:
            convert_log(mutated if isinstance(mutated, dict) else {}, doc)
        except InputError as exc:
            assert "\n" not in str(exc)
        return
    fmt = next(k for k, v in FIXTURE_OF.items() if v == name)
    _convert(fmt, mutated)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    content=st.one_of(
        JSON.map(lambda v: json.dumps(v).encode()),
        st.binary(max_size=64),
        st.lists(JSON, min_size=2, max_size=4).map(
            lambda vs: "\n".join(json.dumps(v) for v in vs).encode()
        ),
    ),
    fmt=st.sampled_from(["auto", *FORMATS]),
)
@example(content=b'{"input":""}\n{"input":""}', fmt="openai-responses")  # two runs, two lines
def test_fuzz_the_command_line_never_shows_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, fmt: str
) -> None:
    f = tmp_path / "fuzz.json"
    f.write_bytes(content)
    code = run(["validate", str(f), "--from", fmt])
    err = capsys.readouterr().err
    assert code in (0, 2)
    assert "Traceback" not in err
    if code == 2:  # one line, or one per run of a file that holds several, each naming its place
        lines = err.splitlines()
        assert lines and all(line.startswith(f"car: error: {f}") for line in lines)
        assert len(lines) == 1 or all(line.startswith(f"car: error: {f} (") for line in lines)


@pytest.mark.parametrize("name", [*(v for v in FIXTURE_OF.values() if v), "inspect_log.json"])
def test_every_field_of_every_fixture_given_a_wrong_type_is_an_input_error(name: str) -> None:
    """The exhaustive form of the fuzz above: each place in the fixture, each wrong kind of value."""
    from tests_fixture_path import FIXTURES

    original = read_document(FIXTURES / name).data
    for path in _paths(original)[1:]:
        for new in (True, 7, "x", None, {}, [], [True], {"k": True}):
            mutated = _replace(copy.deepcopy(original), path, new)
            try:
                if name == "inspect_log.json":
                    convert_log(mutated, Document("fuzz.json", b"", "json", mutated))
                else:
                    _convert(next(k for k, v in FIXTURE_OF.items() if v == name), mutated)
            except InputError as exc:
                assert "\n" not in str(exc), (path, new)


_GOOD = json.dumps(CHAT)


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        # lines 1-3 are records: the whole-file parse stops at line 2 ("Extra data"), the bad one is 4
        ("chats.jsonl", f'{_GOOD}\n{_GOOD}\n{_GOOD}\n{{"messages": [}}\n', "line 4 column 15"),
        ("chats-crlf.jsonl", f"{_GOOD}\r\n{_GOOD}\r\n\r\n{_GOOD}\r\n  [1, 2\r\n", "line 5 column 9"),
        ("chats.json", f'{_GOOD}\n{_GOOD}\n{_GOOD}\n{{"messages": [}}\n', "line 4 column 15"),
        ("chats.ndjson", f'{_GOOD}\n{_GOOD}\n{{"a": NaN}}\n', "line 3: invalid JSON: NaN"),
        # named JSON Lines, first record broken: the whole-file parse would point past it, at line 3
        ("first.jsonl", f'{{"messages": [\n{_GOOD}\n', "line 1 column 15"),
        # a pretty-printed document keeps the whole-file error, which is where it is broken
        ("pretty.json", '{\n  "messages": [\n    {"role": "user",}\n  ]\n}\n', "line 3 column 21"),
    ],
)
def test_a_broken_json_lines_record_is_named_by_its_own_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: str, expected: str
) -> None:
    f = tmp_path / name
    f.write_bytes(content.encode())
    assert expected in str(read_document(f).problem)
    for command in (
        ["validate", str(f)],
        ["import", str(f)],
        ["blame", str(f), "--policy", "sim:pivot"],
    ):
        assert run(command) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert err.startswith(f"car: error: {f}: {expected}"), err
