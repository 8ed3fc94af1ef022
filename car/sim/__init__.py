"""Simulated scenarios (`sim:NAME`): agents with exact answers, driven through the real replay engine.

    pivot           CAR's pivot model: only step 1 matters (BAD with probability p)
    and             CAR's AND model: failure iff steps 0 and 1 are both BAD
    or              overdetermination: failure if step 0 or step 1 is BAD
    support-refund  a support agent swayed by a prompt injection decides, then executes, a refund
    research-team   four agents; a wrong answer needs an unreliable source AND a skipped check
    long-and        12 steps, two of which matter (AND): for the permutation Shapley estimator
    research-team-world  research-team scored on the world: searcher and verifier share the blame

Planted-truth models (`car.sim.planted`, exact answers by enumeration; see docs/validation.md):
    planted-pivot, planted-and, planted-or, chain, mediated, graded, cascade, noisy-judge, long, team
    corridor        a tabular stochastic gridworld (three actions, slippery moves), exact by DP

`record(name, seed=..., **params)` runs a scenario until it fails and returns that run as a trace; the
trace names the scenario in its default specs and its parameters in `metadata.sim.params`.
"""

from __future__ import annotations

import math
from typing import Any

from car.errors import SpecError
from car.jsonfile import kind_of
from car.sim.base import Scenario, SimEnvironment, SimPolicy, SimScorer
from car.sim.base import record as _record
from car.sim.mdp import Corridor
from car.sim.planted import PLANTED, BinaryModel
from car.sim.scenarios import And, Or, Pivot, ResearchTeam, SupportRefund
from car.sim.shared import LongAnd, ResearchTeamWorld
from car.trace import Trace

__all__ = ["SCENARIOS", "Scenario", "make", "params_problem", "record", "scenario_for"]

SCENARIOS: dict[str, type[Scenario]] = {
    s.name: s for s in (Pivot, And, Or, SupportRefund, ResearchTeam, LongAnd, ResearchTeamWorld)
}
SCENARIOS.update({s.name: s for s in PLANTED})
SCENARIOS[Corridor.name] = Corridor


def params_problem(meta: Any) -> tuple[tuple[str | int, ...], str] | None:
    """Why a trace's `metadata.sim` cannot parameterise the scenario it names (the JSON path below
    `$.metadata` and what is wrong), or None. Checked when a trace loads, so `car validate` and
    every `car blame` (one trace or a batch) refuse it in the same words, naming the file."""
    if not isinstance(meta, dict) or not isinstance(meta.get("scenario"), str):
        return None
    cls = SCENARIOS.get(meta["scenario"])
    params = meta.get("params")
    if cls is None or params is None:
        return None
    if not isinstance(params, dict):
        return ("sim", "params"), f"expected an object of parameter values, got {kind_of(params)}"
    for key, value in params.items():
        if key not in cls.defaults:
            known = ", ".join(cls.defaults) or "none"
            return ("sim", "params", key), (
                f"scenario {cls.name!r} has no parameter {key!r}; parameters: {known}"
            )
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            got = value if isinstance(value, float) else kind_of(value)
            return ("sim", "params", key), f"expected a finite number, got {got}"
    out_of_range = cls.range_problem(params)
    if out_of_range is not None:
        key, problem = out_of_range
        return ("sim", "params", *((key,) if key in params else ())), problem
    return None


def scenario_for(name: str, trace: Trace | None = None, **params: float) -> Scenario:
    """The scenario `name`, with parameters from the trace's `metadata.sim.params`, then `params`."""
    cls = SCENARIOS.get(name)
    if cls is None:
        import difflib

        close = difflib.get_close_matches(name, list(SCENARIOS), n=1)
        hint = f"; did you mean 'sim:{close[0]}'?" if close else f"; known: {', '.join(SCENARIOS)}"
        raise SpecError(f"unknown simulated scenario {name!r}{hint}")
    merged: dict[str, float] = {}
    meta: Any = trace.metadata.get("sim") if trace is not None else None
    if isinstance(meta, dict) and meta.get("scenario") == name:
        merged.update({k: float(v) for k, v in dict(meta.get("params") or {}).items()})
    merged.update(params)
    unknown = set(merged) - set(cls.defaults)
    if unknown:
        raise SpecError(
            f"scenario {name!r} has no parameter {sorted(unknown)[0]!r}; "
            f"parameters: {', '.join(cls.defaults)}"
        )
    out_of_range = cls.range_problem(merged)
    if out_of_range is not None:
        raise SpecError(f"scenario {name!r}, parameter {out_of_range[0]!r}: {out_of_range[1]}")
    return cls(params=merged)


def make(kind: str, name: str, trace: Trace, spec: str) -> Any:
    """Build the scenario's policy, environment or scorer (`kind`) for `trace`."""
    scenario = scenario_for(name, trace)
    departure = scenario.departure(trace)
    if departure is not None:
        from car.specs import KIND_WORDS  # local: specs builds sim: components through here

        raise SpecError(
            f"{KIND_WORDS[kind]} {spec!r}: the trace is not a run of scenario {name!r} "
            f"({departure}); a sim: spec replays only its own scenario's traces (car plugins lists "
            "them)"
        )
    factory = {"policy": SimPolicy, "env": SimEnvironment, "scorer": SimScorer}[kind]
    return factory(scenario, spec)


def record(name: str, *, seed: int = 0, **params: float) -> Trace:
    """A recorded failing run of scenario `name` (deterministic for a given seed and parameters)."""
    scenario = scenario_for(name, None, **params)
    if isinstance(scenario, BinaryModel | Corridor):  # planted models state their recorded run
        return scenario.recorded_trace(seed)
    return _record(scenario, seed=seed)
