"""The trace model: loading, validation, migration, schema, and the bundled traces."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from car.errors import InputError
from car.trace import TRACE_VERSION, Action, ToolCall, Trace, load_trace, migrate, parse_trace
from tests.conftest import ROOT, TRACES

BUNDLED = sorted(TRACES.glob("*.json"))


def test_bundled_traces_exist_for_every_bundled_scenario() -> None:
    from car.sim import SCENARIOS

    sys.path.insert(0, str(ROOT))
    try:
        from traces.regenerate import SCENARIOS as bundled
    finally:
        sys.path.remove(str(ROOT))
    assert {p.stem for p in BUNDLED} == set(bundled)
    assert set(bundled) <= set(SCENARIOS)


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_bundled_traces_load_and_fail(path: Path) -> None:
    trace = load_trace(path)
    assert trace.version == TRACE_VERSION
    assert trace.outcome.failed is True
    assert trace.decision_steps, "every bundled trace has decisions to attribute"
    assert [s.index for s in trace.steps] == list(range(len(trace.steps)))


def test_bundled_traces_match_their_generator() -> None:
    sys.path.insert(0, str(ROOT))
    try:
        from traces.regenerate import bundled
    finally:
        sys.path.remove(str(ROOT))
    for name, text in bundled().items():
        assert (TRACES / name).read_text(encoding="utf-8") == text, f"regenerate {name}"


def test_round_trip_is_lossless() -> None:
    trace = load_trace(TRACES / "support-refund.json")
    again = parse_trace(json.loads(trace.to_json()))
    assert again == trace
    assert again.content_hash() == trace.content_hash()


def test_action_signature_is_canonical() -> None:
    a = Action(tool_calls=(ToolCall(id="1", name="f", arguments={"b": 1, "a": [1, 2]}),))
    b = Action(
        tool_calls=(ToolCall(id="2", name="f", arguments={"a": [1, 2], "b": 1}, raw_arguments="x"),)
    )
    assert a.signature() == b.signature()
    assert Action(text="  Hello\n World ").signature() == Action(text="hello world").signature()
    assert Action(text="hello").signature() != Action(text="hello!").signature()


def test_decision_steps_follow_actor_kinds() -> None:
    doc = json.loads((TRACES / "support-refund.json").read_text())
    doc["actors"].append({"id": "user", "kind": "user"})
    doc["steps"].insert(0, {"index": 0, "actor": "user", "action": {"text": "hi"}})
    for i, step in enumerate(doc["steps"]):
        step["index"] = i
    trace = parse_trace(doc)
    assert trace.decision_steps == (1, 2, 3, 4)
    doc["actors"][-1]["stochastic"] = True
    assert parse_trace(doc).decision_steps == (0, 1, 2, 3, 4)


def test_migrate_rejects_unknown_versions() -> None:
    with pytest.raises(InputError, match=r"\$\.version: unknown version 'car\.trace/v9'"):
        migrate({"version": "car.trace/v9"}, source="x.json")
    assert migrate({"version": TRACE_VERSION}) == {"version": TRACE_VERSION}


def test_schema_command_prints_json_schema(run_cli) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("schema")
    assert r.code == 0
    schema = json.loads(r.out)
    assert "steps" in schema["properties"]
    r = run_cli("schema", "report")
    assert r.code == 0 and "locus" in json.loads(r.out)["properties"]


def test_validate_command(run_cli) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("validate", TRACES / "research-team.json")
    assert r.code == 0
    assert "5 steps, 5 decision steps" in r.out


def test_trace_type_is_frozen() -> None:
    trace = load_trace(TRACES / "pivot.json")
    with pytest.raises(Exception):  # noqa: B017 - pydantic raises ValidationError on frozen models
        trace.id = "other"  # type: ignore[misc]
    assert isinstance(trace, Trace)
