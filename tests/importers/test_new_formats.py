"""mini-swe-agent trajectories and ATIF: steps, actors, observations, calls, sniffing, bad input."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_bad_input import JSON, _convert, _paths, _replace, assert_one_located_line
from tests_fixture_path import FIXTURES

from car.importers import detect, import_file, load_any, read_document
from car.trace import Trace


def codes(t: Trace) -> set[str]:
    assert t.fidelity is not None
    return {w.code for w in t.fidelity.warnings}


def _write(tmp_path: Path, name: str, data: Any) -> Path:
    f = tmp_path / name
    f.write_text(json.dumps(data))
    return f


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("mini_swe_agent.traj.json", "mini-swe-agent"),
        ("mini_swe_agent_toolcall.traj.json", "mini-swe-agent"),
        ("atif.json", "atif"),
        # ordinary chat files are still what they were
        ("openai_chat.json", "openai-chat"),
        ("anthropic.json", "anthropic"),
        ("tau2.json", "tau-bench"),
    ],
)
def test_sniffing(fixtures: Path, name: str, fmt: str) -> None:
    doc = read_document(fixtures / name)
    assert detect(doc.data, doc.path) == fmt


def test_plain_chat_lists_are_never_claimed() -> None:
    chat = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    assert detect(chat) == "openai-chat"
    assert detect(chat["messages"]) == "openai-chat"
    # a request with metadata, even one that mentions a trajectory, stays a chat request
    assert detect({**chat, "metadata": {"trajectory_format": "mine"}}) == "openai-chat"
    assert detect({**chat, "trajectory_format": "something-else"}) == "openai-chat"
    assert detect({"schema_version": "1.0", "steps": []}) != "atif"


def test_mini_swe_agent_v1_text_based(fixtures: Path) -> None:
    t = load_any(fixtures / "mini_swe_agent.traj.json")
    assert t.fidelity is not None and t.fidelity.class_ == "B"
    assert t.source is not None and t.source.format == "mini-swe-agent"
    assert t.id == "mini-swe-agent/mini_swe_agent"
    # the first user message is the task; the environment's replies are no human turns
    assert isinstance(t.task, str) and t.task.startswith("Please solve this issue: `paginate")
    assert [a.id for a in t.actors] == ["assistant"]
    assert t.actor("assistant").system_prompt.startswith("You are a helpful assistant")  # type: ignore[union-attr]
    assert t.actor("assistant").tools == ()  # a text-based run offered the model no tools
    assert t.decision_steps == (0, 1, 2, 3, 4)
    raw = json.loads((fixtures / "mini_swe_agent.traj.json").read_text())["messages"]
    first = t.steps[0]
    assert first.action.text == raw[2]["content"]  # kept exactly, THOUGHT and code block
    (call,) = first.action.tool_calls
    assert (call.name, call.arguments) == ("bash", {"command": 'grep -n "def paginate" -r .'})
    assert [(o.call_id, o.content) for o in first.observations] == [(call.id, raw[3]["content"])]
    # two code blocks: mini-swe-agent ran nothing; the format error is the observation
    assert t.steps[1].action.tool_calls == () and t.steps[1].metadata == {"actions_found": 2}
    assert t.steps[1].observations[0].content.startswith("Please always provide EXACTLY ONE")
    # a nonzero <returncode> marks the result as an error
    assert [s.observations[0].is_error for s in t.steps] == [False, False, True, False, False]
    # the submission is what the last command printed
    assert t.steps[4].observations[0].content == t.metadata["submission"]
    assert t.metadata["exit_status"] == "Submitted"
    assert t.metadata["trajectory_format"] == "mini-swe-agent-1"
    assert t.steps[0].sampling is not None
    # LiteLLM's `anthropic/claude-...`: the Messages API knows it without the provider
    assert t.steps[0].sampling.model == "claude-sonnet-4-5-20250929"
    assert t.steps[0].sampling.temperature == 0.0
    assert codes(t) == {"calls-from-text"}


def test_mini_swe_agent_v2_tool_calls(fixtures: Path) -> None:
    t = load_any(fixtures / "mini_swe_agent_toolcall.traj.json")
    assert t.fidelity is not None and t.fidelity.class_ == "B"
    assert [s.actor for s in t.steps] == ["assistant"] * 4
    assert [tool["name"] for tool in t.actor("assistant").tools] == ["bash"]
    first = t.steps[0]
    (call,) = first.action.tool_calls
    assert call.id == "call_k1" and call.raw_arguments == '{"command": "grep -n version cli.py"}'
    assert first.observations[0].call_id == "call_k1" and not first.observations[0].is_error
    assert first.action.reasoning == (
        {"reasoning_content": "The duplicate print is probably in cli.py."},
    )
    assert first.metadata["thinking"] == "The duplicate print is probably in cli.py."
    # the rejected reply is lost (tool-calling models keep it nowhere): an empty step, said
    rejected = t.steps[1]
    assert rejected.action.text == "" and rejected.metadata == {"format_error": True}
    assert rejected.observations[0].content.startswith("Tool call error")
    assert t.steps[2].observations[0].is_error  # returncode 2
    assert t.steps[3].observations == ()  # the exit message is no observation
    assert t.steps[0].sampling is not None and t.steps[0].sampling.seed == 7
    assert t.metadata["exit_status"] == "Submitted" and t.metadata["mini_version"] == "2.0.0"
    assert codes(t) == {"thinking-not-replayed", "model-output-missing"}


def test_mini_swe_agent_v2_text_based_rejected_reply_and_human_turns(tmp_path: Path) -> None:
    block = "```mswea_bash_command\n{}\n```"
    data = {
        "info": {
            "exit_status": "LimitsExceeded",
            "submission": "",
            "config": {"model": {"model_name": "m", "action_regex": r"<cmd>(.*?)</cmd>"}},
        },
        "trajectory_format": "mini-swe-agent-1.1",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "the task"},
            {
                "role": "user",
                "content": "Expected exactly 1 action, found 0.",
                "extra": {"interrupt_type": "FormatError", "n_actions": 0, "model_response": "hmm"},
            },
            {
                "role": "assistant",
                "content": "Look. <cmd> ls </cmd> " + block.format("ignored: not the config's regex"),
                "extra": {"actions": [{"command": "ls -a"}]},
            },
            {
                "role": "user",
                "content": "<returncode>0</returncode>",
                "extra": {"returncode": 0, "raw_output": ""},
            },
            {
                "role": "user",
                "content": "Interrupted by user: use find",
                "extra": {"interrupt_type": "UserInterruption"},
            },
            {
                "role": "user",
                "content": "User command: \n```bash\nfind .\n```",
                "extra": {"actions": [{"command": "find ."}]},
            },
            {"role": "user", "content": "out", "extra": {"returncode": 1}},
            {"role": "assistant", "content": "Now: <cmd>cat a</cmd>"},
            {"role": "exit", "content": "", "extra": {"exit_status": "LimitsExceeded"}},
        ],
    }
    (t,) = import_file(_write(tmp_path, "run.traj.json", data))
    assert t.task == "the task"
    assert [s.actor for s in t.steps] == ["assistant", "assistant", "user", "user", "assistant"]
    assert t.steps[0].action.text == "hmm"
    assert t.steps[0].metadata == {"format_error": True, "actions_found": 0}
    # v2 records the parsed commands; they win over parsing the text again
    assert t.steps[1].action.tool_calls[0].arguments == {"command": "ls -a"}
    assert t.steps[1].observations[0].call_id == t.steps[1].action.tool_calls[0].id
    # the person at the terminal: a comment, then a command whose output answers it
    assert t.steps[2].action.text == "Interrupted by user: use find"
    human = t.steps[3]
    assert human.action.tool_calls[0].arguments == {"command": "find ."}
    assert human.observations[0].is_error and human.observations[0].call_id is not None
    # the config's action_regex parses the text
    assert t.steps[4].action.tool_calls[0].arguments == {"command": "cat a"}
    assert t.actor("user").kind == "user" and not t.actor("user").decides  # type: ignore[union-attr]
    assert t.metadata["exit_status"] == "LimitsExceeded"


def test_atif(fixtures: Path) -> None:
    t = load_any(fixtures / "atif.json")
    assert t.fidelity is not None and t.fidelity.class_ == "B"
    assert t.id == "7f3c2a10-session-demo"
    assert [s.actor for s in t.steps] == [
        "user",
        "inventory-agent",
        "inventory-agent",
        "inventory-agent",
    ]
    agent = t.actor("inventory-agent")
    assert agent is not None and agent.system_prompt is not None
    assert agent.system_prompt.startswith("You manage stock")
    assert [tool["name"] for tool in agent.tools] == ["stock_level", "reorder"]
    assert t.decision_steps == (1, 2, 3)
    parallel = t.steps[1]
    assert [c.id for c in parallel.action.tool_calls] == ["call_a12", "call_b7"]
    assert parallel.action.tool_calls[0].arguments == {"sku": "A-12"}
    assert {o.call_id: o.content for o in parallel.observations} == {
        "call_a12": '{"sku": "A-12", "units": 31}',
        "call_b7": '{"sku": "B-7", "units": 4}',
    }
    assert parallel.action.reasoning == (
        {"reasoning_content": "Two independent lookups; run them together."},
    )
    assert parallel.metadata["step_id"] == 3
    assert parallel.metadata["metrics"] == {
        "prompt_tokens": 412,
        "completion_tokens": 58,
        "cost_usd": 0.0004,
    }
    assert parallel.sampling is not None and parallel.sampling.model == "gpt-4.1-mini"
    assert t.steps[2].observations[0].content == "order 9913 placed: A-12 x 20"
    assert t.metadata["schema_version"] == "ATIF-v1.5"
    assert t.metadata["final_metrics"]["total_steps"] == 5
    assert codes(t) == {"thinking-not-replayed"}


def test_atif_parts_unkeyed_results_orphans_and_subagents(tmp_path: Path) -> None:
    data = {
        "schema_version": "ATIF-v1.7",
        "trajectory_id": "traj-1",
        "agent": {"name": "a", "version": "1"},
        "steps": [
            {
                "step_id": 1,
                "source": "user",
                "message": [
                    {"type": "text", "text": "What is in the picture?"},
                    {"type": "image", "source": {"media_type": "image/png", "path": "p.png"}},
                ],
                "is_copied_context": True,
            },
            {
                "step_id": 2,
                "source": "agent",
                "message": "",
                "tool_calls": [{"tool_call_id": 5, "function_name": "look", "arguments": '{"x": 1}'}],
                "observation": {
                    "results": [
                        {"source_call_id": "5", "content": "a cat"},
                        {"content": "note without a call"},
                        {"source_call_id": "zz", "content": "stray"},
                        {"source_call_id": None, "subagent_trajectory_ref": [{"session_id": "s2"}]},
                    ]
                },
            },
            {"step_id": 3, "source": "system", "message": "Context was compacted."},
        ],
        "subagent_trajectories": [{"schema_version": "ATIF-v1.7", "steps": []}],
    }
    (t,) = import_file(_write(tmp_path, "run.json", data))
    assert t.id == "traj-1"
    assert t.steps[0].action.text == "What is in the picture?"
    assert t.steps[0].metadata["copied_context"] is True
    step = t.steps[1]
    assert step.action.tool_calls[0].id == "5" and step.action.tool_calls[0].raw_arguments == '{"x": 1}'
    assert [(o.call_id, o.content) for o in step.observations] == [
        ("5", "a cat"),
        (None, "note without a call"),
        (None, "stray"),
        (None, '[{"session_id": "s2"}]'),
    ]
    assert t.steps[2].actor == "user" and t.steps[2].metadata["role"] == "system"
    assert codes(t) >= {
        "attachments-unresolved",
        "orphan-tool-result",
        "items-skipped",
        "sampling-missing",
    }


def test_several_atif_trajectories_are_several_runs(tmp_path: Path, fixtures: Path) -> None:
    one = json.loads((fixtures / "atif.json").read_text())
    traces = import_file(_write(tmp_path, "runs.json", [one, {**one, "session_id": "other"}]))
    assert [t.id for t in traces] == ["7f3c2a10-session-demo", "other"]
    assert traces[1].source is not None and traces[1].source.locator == "$[1]"


@pytest.mark.parametrize(
    "name", ["mini_swe_agent.traj.json", "mini_swe_agent_toolcall.traj.json", "atif.json"]
)
def test_validate_and_import(
    tmp_path: Path, fixtures: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["validate", str(fixtures / name)]) == 0
    out = capsys.readouterr().out
    assert "fidelity class B" in out
    target = tmp_path / "trace.json"
    assert run(["import", str(fixtures / name), "-o", str(target)]) == 0
    assert json.loads(target.read_text())["version"] == "car.trace/v1"


BAD: list[tuple[str, Any, str]] = [
    (
        "mini-role.traj.json",
        {"trajectory_format": "mini-swe-agent-1", "info": {}, "messages": [{"role": "robot"}]},
        "$.messages[0].role: expected a role (system, user, assistant, tool or exit), got the string",
    ),
    (
        "mini-item.traj.json",
        {"trajectory_format": "mini-swe-agent-1.1", "info": {}, "messages": [{"type": "message"}]},
        "$.messages[0].role: missing; expected a role (system, user, assistant, tool or exit) "
        "(a Responses API item",
    ),
    (
        "mini-call.traj.json",
        {
            "trajectory_format": "mini-swe-agent-1.1",
            "messages": [
                {"role": "user", "content": "t"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": "c", "function": {"name": ""}}],
                },
            ],
        },
        "$.messages[1].tool_calls[0].function.name: expected a non-empty tool name",
    ),
    (
        "mini-empty.traj.json",
        {"trajectory_format": "mini-swe-agent-1", "messages": [{"role": "user", "content": "t"}]},
        "$: expected at least one turn",
    ),
    (
        "atif-source.json",
        {"schema_version": "ATIF-v1.4", "session_id": "s", "steps": [{"step_id": 1, "source": "bot"}]},
        "$.steps[0].source: expected the step's source ('system', 'user' or 'agent'), got the string",
    ),
    (
        "atif-call.json",
        {
            "schema_version": "ATIF-v1.4",
            "steps": [{"source": "agent", "message": "", "tool_calls": [{"tool_call_id": "c"}]}],
        },
        "$.steps[0].tool_calls[0].function_name: missing; expected the tool name",
    ),
    (
        "atif-results.json",
        {
            "schema_version": "ATIF-v1.4",
            "steps": [{"source": "agent", "message": "x", "observation": {"results": "ok"}}],
        },
        "$.steps[0].observation.results: expected a list of results, got the string",
    ),
    (
        "atif-step-id.json",
        {"schema_version": "ATIF-v1.4", "steps": [{"step_id": "1", "source": "user", "message": ""}]},
        "$.steps[0].step_id: expected the step's ordinal (an integer), got the string",
    ),
]


@pytest.mark.parametrize(("name", "data", "expected"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_located_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, data: Any, expected: str
) -> None:
    f = _write(tmp_path, name, data)
    assert_one_located_line(f, (["validate"], ["import"]), expected, capsys)


# Fuzzed with test_bad_input's helpers (random JSON; every place in a value; one place replaced).
NEW_FIXTURES = {
    "mini_swe_agent.traj.json": "mini-swe-agent",
    "mini_swe_agent_toolcall.traj.json": "mini-swe-agent",
    "atif.json": "atif",
}


@pytest.mark.parametrize("name", sorted(NEW_FIXTURES))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(choice=st.integers(min_value=0), new=JSON)
def test_fuzz_mutated_fixtures_raise_only_input_errors(name: str, choice: int, new: Any) -> None:
    original = read_document(FIXTURES / name).data
    paths = _paths(original)
    _convert(NEW_FIXTURES[name], _replace(copy.deepcopy(original), paths[choice % len(paths)], new))


@pytest.mark.parametrize("name", sorted(NEW_FIXTURES))
def test_every_field_given_a_wrong_type_is_an_input_error(name: str) -> None:
    original = read_document(FIXTURES / name).data
    for path in _paths(original)[1:]:
        for new in (True, 7, "x", None, {}, [], [True], {"k": True}):
            _convert(NEW_FIXTURES[name], _replace(copy.deepcopy(original), path, new))


def test_an_atif_part_that_is_not_an_image_is_not_called_one(tmp_path: Path) -> None:
    """An audio part was warned about as "images in messages or results"."""
    audio = {"type": "audio", "source": {"media_type": "audio/wav", "path": "a.wav"}}
    data = {
        "schema_version": "ATIF-v1.7",
        "trajectory_id": "traj-a",
        "agent": {"name": "a", "version": "1"},
        "steps": [
            {"step_id": 1, "source": "user", "message": [{"type": "text", "text": "Listen"}, audio]},
            {"step_id": 2, "source": "agent", "message": "A dog barks."},
        ],
    }
    (t,) = import_file(_write(tmp_path, "run.json", data))
    assert t.fidelity is not None
    (warning,) = [w for w in t.fidelity.warnings if w.code == "attachments-unresolved"]
    assert warning.message.startswith("audio parts in messages or results were not imported")
