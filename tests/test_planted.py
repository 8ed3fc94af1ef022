"""Planted-truth models: the enumerated answers against closed forms, and against the replay engine."""

from __future__ import annotations

import asyncio
import itertools
import math

import numpy as np
import pytest

import car
from car.replay import Plan, Replay
from car.sim import SCENARIOS, make, record, scenario_for
from car.sim.mdp import Corridor
from car.sim.planted import (
    PLANTED,
    BinaryModel,
    Chain,
    Graded,
    LongTrace,
    Mediated,
    NoisyJudge,
    PlantedAnd,
    PlantedOr,
    PlantedPivot,
    Team,
    shapley_values,
    truth,
)


def test_pivot_closed_form() -> None:
    for p in (0.3, 0.9):
        t = truth(PlantedPivot(params={"p": p}))
        assert t.fail == pytest.approx((p, p, 1.0))
        assert t.shapley == pytest.approx((0.0, 1 - p, 0.0))
        assert t.locus(0.0) == 1


def test_and_closed_form_matches_the_paper() -> None:
    q = 0.3
    m = PlantedAnd(params={"q": q})
    t = truth(m)
    assert t.v_none == pytest.approx(q * q)
    assert m.expected(frozenset({0})) == pytest.approx(q)
    assert m.expected(frozenset({1})) == pytest.approx(q)
    assert m.expected(frozenset({0, 1})) == pytest.approx(1.0)
    assert t.shapley == pytest.approx(((1 - q * q) / 2, (1 - q * q) / 2, 0.0))
    assert sum(t.shapley) == pytest.approx(0.91)
    assert t.fail == pytest.approx((q * q, q, 1.0))
    assert t.locus(0.1) == 1


def test_or_closed_form() -> None:
    q = 0.3
    t = truth(PlantedOr(params={"q": q}))
    assert t.fail == pytest.approx((1 - (1 - q) ** 2, 1.0, 1.0))
    assert t.shapley[:2] == pytest.approx(((1 - q) ** 2 / 2, (1 - q) ** 2 / 2))
    assert t.locus(0.1) == 0


def test_chain_decision_not_execution() -> None:
    a, s = 0.4, 0.05
    t = truth(Chain(params={"a": a, "s": s}))
    assert t.fail == pytest.approx((a * (1 - s) + (1 - a) * s, 1 - s, 1.0))
    assert t.locus(0.1) == 0  # the execution's slip (5%) is below min_effect: the decision is blamed
    assert t.locus(0.0) == 1


def test_mediated_total_effect() -> None:
    a, hi, lo, c = 0.5, 0.8, 0.1, 0.5
    t = truth(Mediated(params={"a": a, "hi": hi, "lo": lo, "c": c}))
    assert t.fail == pytest.approx(((a * hi + (1 - a) * lo) * c, hi * c, c))
    assert t.locus(0.1) == 2


def test_graded_is_additive() -> None:
    m = Graded()
    t = truth(m)
    assert t.shapley == pytest.approx(tuple(w * (1 - q) for w, q in zip(m.w, m.q, strict=True)))
    assert t.v_all == pytest.approx(0.05 + sum(m.w))
    assert not t.deterministic


def test_noisy_judge_maps_the_and_game() -> None:
    eps = 0.1
    judged = NoisyJudge(params={"q": 0.3, "eps": eps})
    clean = PlantedAnd(params={"q": 0.3})
    for held in itertools.chain.from_iterable(itertools.combinations(range(3), r) for r in range(4)):
        s = frozenset(held)
        assert judged.expected(s) == pytest.approx(eps + (1 - 2 * eps) * clean.expected(s))
    assert truth(judged).shapley == pytest.approx(tuple((1 - 2 * eps) * x for x in truth(clean).shapley))


def test_long_trace_majority_of_three() -> None:
    q = 0.4
    m = LongTrace(params={"n": 50, "q": q})
    t = truth(m)
    _, k2, _ = m.keys()
    assert t.v_none == pytest.approx(3 * q * q * (1 - q) + q**3)
    assert t.fail[k2] == pytest.approx(1 - (1 - q) ** 2)  # key 1 held BAD: one more BAD suffices
    assert t.locus(0.1) == k2
    nonzero = [k for k, x in enumerate(t.shapley) if abs(x) > 1e-12]
    assert nonzero == list(m.keys())
    assert sum(t.shapley) == pytest.approx(t.v_all - t.v_none)


def test_team_agent_game() -> None:
    a, hi, lo, m_ = 0.5, 0.6, 0.1, 0.4
    team = Team(params={"a": a, "hi": hi, "lo": lo, "m": m_})
    players = team.agents()  # planner, coder, reviewer
    for mask in range(8):
        held = frozenset(s for i in range(3) if mask >> i & 1 for s in players[i])
        coder = 1.0 if mask & 2 else (hi if mask & 1 else a * hi + (1 - a) * lo)
        reviewer = 1.0 if mask & 4 else m_
        assert team.expected(held) == pytest.approx(coder * reviewer)
    phi = shapley_values(team, players)
    assert sum(phi) == pytest.approx(1.0 - (a * hi + (1 - a) * lo) * m_)


@pytest.mark.parametrize("cls", PLANTED, ids=lambda c: c.name)
def test_efficiency_and_registration(cls: type[BinaryModel]) -> None:
    model = cls()
    t = truth(model)
    assert sum(t.shapley) == pytest.approx(t.v_all - t.v_none)
    assert SCENARIOS[cls.name] is cls
    trace = record(cls.name)
    assert trace.steps[-1].index == model.size() - 1
    assert truth(scenario_for(cls.name, trace)) == t  # the trace carries the parameters


def _mc_fail(name: str, reps: int, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    trace = record(name)
    spec = f"sim:{name}"
    replay = Replay(
        trace,
        make("policy", name, trace, spec),
        make("env", name, trace, spec),
        make("scorer", name, trace, spec),
        seed=seed,
    )

    async def go() -> tuple[np.ndarray, np.ndarray]:
        arms = np.empty((len(trace.steps), reps))
        for k in range(len(trace.steps)):
            for r in range(reps):
                value = (await replay.run(Plan.resample_from(trace, k), r)).value
                assert value is not None
                arms[k, r] = value
        fact = np.array([(await replay.run(Plan.hold_all(trace), r)).value for r in range(reps)])
        return arms.mean(axis=1), fact

    return asyncio.run(go())


@pytest.mark.parametrize("name", ["mediated", "cascade", "noisy-judge", "graded", "team", "corridor"])
def test_replay_engine_agrees_with_the_enumeration(name: str) -> None:
    # The engine runs the same program the enumeration walks: rescue curves agree within 4.5 SE.
    reps = 500
    mc, fact = _mc_fail(name, reps)
    t = truth(scenario_for(name))
    for k, p in enumerate(t.fail):
        se = math.sqrt(max(p * (1 - p), 0.01) / reps)
        assert abs(mc[k] - p) < 4.5 * se, (k, mc[k], p)
    assert abs(float(fact.mean()) - t.v_all) < 4.5 * math.sqrt(0.25 / reps)


def test_car_blame_finds_the_planted_locus_across_seeds() -> None:
    trace = record("chain")
    want = truth(Chain()).locus(0.1)
    hits = sum(car.blame(trace, seed=s, samples=48, match_samples=0).locus == want for s in range(20))
    assert hits >= 18


def test_corridor_dynamic_programme() -> None:
    m = Corridor()
    t = truth(m)
    moves, cells = m.recorded_path()
    assert cells[-1] == 0 and t.v_all == 1.0  # the recorded run fell: holding everything is the record
    assert sum(t.shapley) == pytest.approx(t.v_all - t.v_none)
    # Hand-check the last live step: from the recorded cell, the failure probability of one move.
    k = len(moves) - 1
    cell = cells[k]
    direct = sum(
        pa * pt * (c2 == 0)
        for a, pa in zip(("left", "stay", "right"), m.policy(cell), strict=True)
        for c2, pt in m.transition(cell, a)
    )
    assert t.fail[k] == pytest.approx(direct)
    assert len({s.action.tool_calls[0].arguments["direction"] for s in record("corridor").steps}) >= 2


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_parameter_has_a_range_its_default_keeps(name: str) -> None:
    cls = SCENARIOS[name]
    assert set(cls.ranges_for(dict(cls.defaults))) == set(cls.defaults)
    assert cls.range_problem({}) is None


@pytest.mark.parametrize(
    ("name", "params", "where", "expected"),
    [
        ("corridor", {"slip": -5}, ("slip",), "expected a probability in [0, 1], got -5"),
        ("corridor", {"length": 5, "start": 4}, ("start",), "expected a cell in [1, 3], got 4"),
        ("corridor", {"horizon": 2.5}, ("horizon",), "expected a whole number >= 1, got 2.5"),
        ("planted-pivot", {"p": 1.7}, ("p",), "expected a probability in [0, 1], got 1.7"),
        ("cascade", {"need": 0}, ("need",), "expected a whole number in [1, 6], got 0"),
        ("cascade", {"gain": -0.1}, ("gain",), "expected a number >= 0, got -0.1"),
        ("long", {"n": 6}, ("n",), "expected a whole number >= 8, got 6"),
        ("long-and", {"steps": 12, "a": 3, "b": 3}, ("b",), "a step index after a in [4, 10]"),
        # A parameter left at its default that no longer fits is named by the object.
        ("long-and", {"steps": 5}, (), "parameter 'a' is not given and its default 3"),
    ],
)
def test_out_of_range_parameters_are_refused_when_the_trace_loads(
    name: str, params: dict[str, float], where: tuple[str, ...], expected: str
) -> None:
    from car.sim import params_problem

    problem = params_problem({"scenario": name, "params": params})
    assert problem is not None
    assert problem[0] == ("sim", "params", *where)
    assert expected in problem[1]
    with pytest.raises(car.errors.SpecError, match="parameter"):
        record(name, **params)


@pytest.mark.parametrize(
    ("name", "params", "expected"),
    [
        ("planted-pivot", {"p": 0}, "scenario 'planted-pivot' (p=0): the recorded choice at step 1 "),
        ("cascade", {"base": 0.432, "need": 4}, "(base=0.432, gain=0.25, need=4): the recorded run "),
        ("corridor", {"length": 10, "horizon": 1, "start": 8}, "no failing run in 10000 attempts"),
    ],
)
def test_parameters_in_range_that_record_no_failure_are_a_spec_error(
    name: str, params: dict[str, float], expected: str
) -> None:
    """In range, but no failing run to record: it was a ValueError or a RuntimeError."""
    with pytest.raises(car.errors.SpecError) as info:
        record(name, **params)
    assert expected in str(info.value)


def test_a_scenario_that_never_fails_its_canonical_way_is_a_spec_error() -> None:
    from car.sim.base import record as sample_record

    scenario = scenario_for("research-team-world", unreliable=1, skip=0)
    with pytest.raises(car.errors.SpecError, match=r"\(unreliable=1, skip=0\): no canonical failure"):
        sample_record(scenario, max_attempts=20)


def test_bundled_traces_keep_loading() -> None:
    from car.trace import load_trace
    from tests.conftest import TRACES

    for path in sorted(TRACES.glob("*.json")):
        load_trace(path)
