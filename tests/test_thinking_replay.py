"""Thinking through `anthropic:`: a model that thought while recording thinks while replaying, and
its signed blocks travel back with their turns, as the Messages API requires in a tool-use loop."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

import car
from car.backends import http as http_backend
from car.backends.anthropic import AnthropicPolicy
from car.backends.options import BackendOptions, thinking_config
from car.backends.wire import action_from_anthropic, anthropic_messages, anthropic_thinking
from car.cli import main
from car.importers import load_any
from car.importers.base import Document
from car.importers.inspect_log import convert_log
from car.protocols import Decision, Mode, Turn
from car.rng import EventKey
from car.sim import scenario_for
from car.testing import LoopbackServer, ScenarioModel, loopback_thinking
from car.trace import (
    Action,
    Fidelity,
    FidelityWarning,
    Message,
    Sampling,
    Step,
    Trace,
    load_trace,
)
from tests.conftest import ROOT

TRACE = ROOT / "traces" / "support-refund.json"
BUDGET = {"type": "enabled", "budget_tokens": 2048}


def _server() -> LoopbackServer:
    return LoopbackServer({"support-refund": ScenarioModel(scenario_for("support-refund"))})


def _thinking_trace(sampling: Sampling | None) -> Trace:
    """The refund trace as if recorded from the loopback server with thinking on: each turn of the
    agent carries a signed thinking block."""
    trace = load_trace(str(TRACE))
    steps = tuple(
        Step(
            **{
                **s.model_dump(),
                "action": s.action.model_copy(
                    update={"reasoning": (loopback_thinking(f"recorded thought {s.index}"),)}
                ),
                "sampling": sampling,
            }
        )
        for s in trace.steps
    )
    return Trace(**{**trace.model_dump(), "steps": steps})


def _decision(trace: Trace, step: int, history: tuple[Turn, ...] | None = None) -> Decision:
    from car.replay import _copied

    rec = trace.steps[step]
    return Decision(
        step=step,
        actor=trace.actor(rec.actor),
        task=trace.task,
        history=history if history is not None else tuple(_copied(s) for s in trace.steps[:step]),
        sampling=rec.sampling,
        actors=trace.actors,
    )


def _act(trace: Trace, server: LoopbackServer, decision: Decision, **opts: Any) -> Action:
    options = BackendOptions(base_url=server.anthropic_url, backoff_base=0.01, **opts)
    policy = AnthropicPolicy("support-refund", trace, options=options)

    async def main() -> Action:
        try:
            return await policy.act(decision, EventKey(0, 0, decision.step, "policy"))
        finally:
            await policy.aclose()

    return asyncio.run(main())


def test_recorded_blocks_go_back_with_their_turns_and_the_settings_as_recorded() -> None:
    trace = _thinking_trace(Sampling(thinking=BUDGET, max_tokens=1024, temperature=0.7))
    with _server() as server:
        action = _act(trace, server, _decision(trace, 2))
        (_, body), *_ = server.requests
    assert body["thinking"] == BUDGET
    assert body["max_tokens"] == 2048 + 1024  # above the budget, or the API refuses
    assert "temperature" not in body  # 0.7 is refused with thinking on
    turns = [m for m in body["messages"] if m["role"] == "assistant"]
    assert [t["content"][0] for t in turns] == [
        loopback_thinking("recorded thought 0"),
        loopback_thinking("recorded thought 1"),
    ]
    # The draw keeps its own signed block, to send back on the next turn.
    assert action.reasoning and action.reasoning[0]["type"] == "thinking"
    assert anthropic_thinking(action.reasoning) == list(action.reasoning)


def test_a_drawn_turn_sends_its_own_blocks_back() -> None:
    trace = _thinking_trace(Sampling(thinking=BUDGET))
    with _server() as server:
        first = _act(trace, server, _decision(trace, 0))
        drawn = Turn(0, "support", first, trace.steps[0].observations, Mode.RESAMPLED)
        _act(trace, server, _decision(trace, 1, (drawn,)))
        (_, body) = server.requests[-1]
    assert server.outcomes["ok"] == 2
    assert body["messages"][1]["content"][0] == first.reasoning[0]


def test_the_loopback_refuses_what_the_api_refuses() -> None:
    # The checks the tests above rely on have teeth: a tool-use turn without its thinking block,
    # and a block whose text changed, are refused as the Messages API refuses them.
    trace = _thinking_trace(Sampling(thinking=BUDGET))
    _, messages = anthropic_messages(_decision(trace, 2).messages())
    with _server() as server:
        url = f"{server.anthropic_url}/v1/messages"
        body = {"model": "support-refund", "max_tokens": 4096, "thinking": BUDGET}
        stripped = [
            {**m, "content": [b for b in m["content"] if b["type"] != "thinking"]} for m in messages
        ]
        changed = json.loads(json.dumps(messages).replace("recorded thought 1", "edited"))
        answers = [
            httpx.post(url, json={**body, "messages": m}, timeout=10)
            for m in (messages, stripped, changed)
        ]
    assert [a.status_code for a in answers] == [200, 400, 400]
    assert "must start with a thinking block" in answers[1].text
    assert "invalid signature" in answers[2].text


def test_a_trace_that_shows_thinking_without_settings_gets_the_default_and_says_so() -> None:
    trace = _thinking_trace(None)
    with _server() as server:
        options = BackendOptions(base_url=server.anthropic_url, backoff_base=0.01)
        policy = AnthropicPolicy("support-refund", trace, options=options)

        async def main() -> None:
            try:
                await policy.act(_decision(trace, 2), EventKey(0, 0, 2, "policy"))
            finally:
                await policy.aclose()

        asyncio.run(main())
        (_, body), *_ = server.requests
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert any("shows thinking but not its settings" in n for n in policy.notes())


@pytest.mark.parametrize(
    ("value", "sent"),
    [
        ("off", None),
        ("adaptive", {"type": "adaptive"}),
        ("3000", {"type": "enabled", "budget_tokens": 3000}),
    ],
)
def test_the_user_setting_wins(value: str, sent: dict[str, Any] | None) -> None:
    trace = _thinking_trace(Sampling(thinking=BUDGET))
    with _server() as server:
        _act(trace, server, _decision(trace, 0), thinking=value)
        (_, body), *_ = server.requests
    assert body.get("thinking") == sent


def test_a_trace_without_thinking_sends_none() -> None:
    trace = load_trace(str(TRACE))
    with _server() as server:
        _act(trace, server, _decision(trace, 2))
        (_, body), *_ = server.requests
    assert "thinking" not in body
    assert all(b["type"] != "thinking" for m in body["messages"] for b in m["content"])


def test_only_the_apis_own_signed_blocks_are_sent_back() -> None:
    signed = {"type": "thinking", "thinking": "t", "signature": "s"}
    redacted = {"type": "redacted_thinking", "data": "d"}
    reasoning = (
        signed,
        {"type": "thinking", "thinking": "unsigned"},  # the API refuses it
        {"reasoning_content": "DeepSeek's"},
        {"thinking_blocks": [redacted]},  # LiteLLM's copy of Anthropic's blocks
        {"type": "reasoning", "encrypted_content": "openai"},
    )
    assert anthropic_thinking(reasoning) == [signed, redacted]
    _, messages = anthropic_messages(
        [
            Message(role="user", content="hi"),
            Message(role="assistant", content="yo", reasoning=reasoning),
        ]
    )
    assert messages[1]["content"] == [signed, redacted, {"type": "text", "text": "yo"}]
    assert action_from_anthropic([signed, {"type": "text", "text": "x"}]).reasoning == (signed,)


def _inspect_message(m: Message) -> dict[str, Any]:
    """A chat message as Inspect logs it: reasoning as `reasoning` content parts (ContentReasoning:
    the thinking text with its signature, or the redacted data with `redacted`)."""
    if m.role != "assistant":
        return {"role": m.role, "content": m.content, "tool_call_id": m.tool_call_id}
    parts = [
        {"type": "reasoning", "reasoning": b["thinking"], "signature": b["signature"]}
        for b in m.reasoning
    ]
    return {
        "role": "assistant",
        "content": [*parts, {"type": "text", "text": m.content}],
        "tool_calls": [{"id": c.id, "function": c.name, "arguments": c.arguments} for c in m.tool_calls],
    }


def _inspect_log(trace: Trace) -> Trace:
    """The thinking trace as an Inspect log of a model with a reasoning budget, imported."""
    events: list[dict[str, Any]] = []
    for s in trace.steps:
        out = Message(
            role="assistant",
            content=s.action.text,
            tool_calls=s.action.tool_calls,
            reasoning=s.action.reasoning,
        )
        events.append(
            {
                "event": "model",
                "model": "anthropic/support-refund",
                "input": [_inspect_message(m) for m in _decision(trace, s.index).messages()],
                "config": {"reasoning_tokens": BUDGET["budget_tokens"], "max_tokens": 4096},
                "output": {"choices": [{"message": _inspect_message(out)}]},
            }
        )
        events += [{"event": "tool", "id": o.call_id, "result": o.content} for o in s.observations]
    log = {"version": 2, "eval": {"task": "refund"}, "samples": [{"id": 1, "events": events}]}
    (imported,) = convert_log(log, Document("refund.json", b"", "json", log))
    return imported


def test_an_inspect_log_of_a_thinking_model_replays_with_its_thinking() -> None:
    """Inspect keeps Claude's blocks as `reasoning` parts: they were not sent back, so the Messages
    API refused every continued tool-use turn (a turn with thinking on must start with its block)."""
    trace = _thinking_trace(Sampling(thinking=BUDGET))
    imported = _inspect_log(trace)
    recorded = _decision(imported, 2)
    rebuilt = Decision(**{**recorded.__dict__, "recorded_context": imported.steps[2].context})
    with _server() as server:
        options = BackendOptions(base_url=server.anthropic_url)
        assert AnthropicPolicy(None, imported, options=options).sends_reasoning(imported)
        for decision in (recorded, rebuilt):  # from the steps' actions, and from Inspect's inputs
            _act(imported, server, decision)
        bodies = [body for _, body in server.requests]
    assert server.outcomes["ok"] == 2  # neither was refused
    for body in bodies:
        assert body["thinking"] == BUDGET
        turns = [m for m in body["messages"] if m["role"] == "assistant"]
        assert [t["content"][0] for t in turns] == [
            loopback_thinking("recorded thought 0"),
            loopback_thinking("recorded thought 1"),
        ]


def test_inspect_reasoning_parts_become_the_blocks_they_were_made_from() -> None:
    signed = {"type": "reasoning", "reasoning": "t", "signature": "s"}
    redacted = {"type": "reasoning", "reasoning": "EmwK", "redacted": True, "summary": "r"}
    unsigned = {"type": "reasoning", "reasoning": "no signature"}  # the API would refuse it
    otel = {"type": "reasoning", "content": "c", "signature": "s"}  # another shape: not Inspect's
    assert anthropic_thinking((signed, unsigned, redacted, otel)) == [
        {"type": "thinking", "thinking": "t", "signature": "s"},
        {"type": "redacted_thinking", "data": "EmwK"},
    ]


@pytest.mark.parametrize("bad", ["1000", "lots", "-1"])
def test_a_bad_thinking_setting_is_one_line_and_exit_2(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ValueError, match="off, adaptive or a budget of at least 1024"):
        thinking_config(bad)
    with pytest.raises(SystemExit) as exc:
        main(["blame", str(TRACE), "--thinking", bad])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err.count("\n") == 1 and "--thinking" in err and "Traceback" not in err


def test_importers_record_the_thinking_settings(tmp_path: Path) -> None:
    signed = loopback_thinking("plan")
    request = {
        "model": "claude-x",
        "max_tokens": 4096,
        "thinking": BUDGET,
        "system": "help",
        "messages": [
            {"role": "user", "content": "refund A-1"},
            {"role": "assistant", "content": [signed, {"type": "text", "text": "Done."}]},
        ],
    }
    path = tmp_path / "anthropic.json"
    path.write_text(json.dumps(request))
    trace = load_any(path)
    step = trace.steps[-1]
    assert step.sampling is not None and step.sampling.thinking == BUDGET
    assert step.action.reasoning == (signed,)
    assert step.metadata == {"thinking": "plan"}


def test_blame_end_to_end_with_thinking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAR_BACKOFF_BASE", "0.005")
    http_backend._LIMITERS.clear()
    path = tmp_path / "thought.json"
    trace = _thinking_trace(Sampling(thinking=BUDGET, max_tokens=4096))
    unsent = "1 thinking block is kept verbatim; only anthropic: sends reasoning back"
    warnings = (  # as an importer warns on such a record
        FidelityWarning(code="thinking-not-replayed", message=unsent),
        FidelityWarning(code="items-skipped", message="skipped 1 image block"),
    )
    trace = trace.model_copy(update={"fidelity": Fidelity(class_="B", warnings=warnings)})
    path.write_text(trace.to_json())
    with _server() as server:
        try:
            main(
                [
                    "blame",
                    str(path),
                    "--policy",
                    "anthropic:support-refund",
                    "--base-url",
                    server.anthropic_url,
                    "--format",
                    "json",
                    "--samples",
                    "8",
                    "--match-samples",
                    "4",
                ]
            )
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        bodies = [b for _, b in server.requests]
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    # Every drawn turn carries its own signed blocks, so no rollout stands for another arm's (rows
    # share nothing): at 8 samples the point of commitment may land on the lookup (step 0), whose
    # rescue rate equals the plan's, as well as on the plan (step 1).
    assert report["budget"]["errored"] == 0 and report["locus"] in (0, 1)
    assert bodies and all(b["thinking"] == BUDGET for b in bodies)
    assert server.outcomes["ok"] == len(bodies)  # no request was refused
    # The import's warning that replays leave reasoning out does not apply: this one sends it.
    notes = report["notes"]
    assert f"import: {unsent}" not in notes
    sent = "the record's thinking blocks are sent back with their turns, as recorded"
    assert f"anthropic:support-refund: {sent}" in notes
    assert "import: skipped 1 image block" in notes
    # A policy that sends no reasoning back keeps the warning.
    other = car.blame(path, samples=2, match_samples=0)
    assert f"import: {unsent}" in other.notes


def test_what_thinking_changes_is_in_the_reports_notes_not_only_on_stderr() -> None:
    """A recorded temperature the API refuses with thinking on, and max_tokens raised above the
    budget, were said once on stderr: the saved report (JSON, HTML, a later `car report`) did not
    tell that the requests differed from the record."""
    trace = _thinking_trace(Sampling(thinking=BUDGET, max_tokens=1024, temperature=0.7))
    with _server() as server:
        options = BackendOptions(base_url=server.anthropic_url, backoff_base=0.01)
        policy = AnthropicPolicy("support-refund", trace, options=options)
        notes = policy.notes()
        asyncio.run(policy.aclose())
    assert "anthropic:support-refund: max_tokens raised to 3072, above the thinking budget" in notes
    assert (
        "anthropic:support-refund: recorded temperature 0.7 not sent: the API refuses it with "
        "thinking on"
    ) in notes


@pytest.mark.parametrize(("flag", "value"), [("--temperature", "0.5"), ("--top-p", "0.9")])
def test_a_setting_the_user_gives_that_thinking_refuses_is_an_error(
    flag: str, value: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-test")
    with _server() as server:
        with pytest.raises(SystemExit) as exc:
            main(
                [
                    "blame",
                    str(TRACE),
                    "--policy",
                    "anthropic:support-refund",
                    "--base-url",
                    server.anthropic_url,
                    "--thinking",
                    "2048",
                    flag,
                    value,
                    "--no-store",
                ]
            )
        assert server.requests == []
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert f"{flag} {value}: the Messages API refuses it with thinking on" in err


def test_thinking_for_a_policy_without_thinking_settings_is_an_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["blame", str(TRACE), "--thinking", "2048", "--no-store"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert "--thinking 2048: policy 'sim:support-refund' has no thinking settings" in err


def test_thinking_values_are_read_strictly_and_said_plainly() -> None:
    assert thinking_config(" 2048 ") == {"type": "enabled", "budget_tokens": 2048}
    assert thinking_config("ADAPTIVE") == {"type": "adaptive"}
    with pytest.raises(ValueError):
        thinking_config("٢٠٤٨")  # Arabic-Indic digits: str.isdigit() says yes, int() reads them
    trace = _thinking_trace(None)
    with _server() as server:
        options = BackendOptions(base_url=server.anthropic_url, thinking="ADAPTIVE")
        policy = AnthropicPolicy("support-refund", trace, options=options)
        asyncio.run(policy.aclose())
    assert "anthropic:support-refund: thinking adaptive (--thinking)" in policy.notes()
