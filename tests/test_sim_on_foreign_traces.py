"""A `sim:` spec replays only its own scenario's runs. On another agent's trace its program failed
in every rollout (`IndexError: tuple index out of range` as the first error of 112 of 113), after
spending them all; it is refused before any, saying where the trace leaves the program."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from car.sim import SCENARIOS, record, scenario_for
from car.trace import load_trace
from tests.conftest import TRACES, Result

RunCli = Callable[..., Result]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_s_own_recorded_run_follows_its_program(name: str) -> None:
    trace = record(name, seed=3)
    assert scenario_for(name, trace).departure(trace) is None


Doc = dict[str, list[dict[str, object]]]


def _pivot_with(tmp_path: Path, edit: Callable[[Doc], None]) -> Path:
    doc = json.loads((TRACES / "pivot.json").read_text(encoding="utf-8"))
    edit(doc)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _by_someone_else(doc: Doc) -> None:
    doc["actors"].append({"id": "planner", "kind": "agent"})
    doc["steps"][1]["actor"] = "planner"


def _one_step_more(doc: Doc) -> None:
    doc["steps"].append({**doc["steps"][-1], "index": len(doc["steps"])})


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (_by_someone_else, "(step 1 is by 'planner', where 'agent' acts in it)"),
        (_one_step_more, "(its runs end before step 3, where 'agent' decides)"),
    ],
)
def test_a_sim_policy_on_a_trace_its_scenario_cannot_have_made_is_refused_before_any_rollout(
    run_cli: RunCli,
    tmp_path: Path,
    edit: Callable[[Doc], None],
    says: str,
) -> None:
    path = _pivot_with(tmp_path, edit)
    load_trace(path)  # a valid trace: only the scenario cannot replay it
    r = run_cli("blame", path, "--policy", "sim:pivot", "--scorer", "regex:.", "--no-store")
    assert r.code == 2, r.err
    assert "policy 'sim:pivot': the trace is not a run of scenario 'pivot' " + says in r.err
    assert r.err.count("\n") == 1 and "Traceback" not in r.err
    assert "rollouts" not in r.out
