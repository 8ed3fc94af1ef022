"""The bench's pure parts: the paper's estimators and the regression check."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pytest

from bench.suite import fixed_exact_coverage
from bench.targets import PIVOT, check
from car.estimators.contrastive import estimate_contrastive
from car.estimators.paper import paper_contrastive, paper_shapley, paper_shapley_plan
from car.sim.planted import PlantedAnd, Team, shapley_values


@dataclass
class FakeCell:
    case: str
    method: str
    budget: int
    reps: int
    correct: int
    rollouts_max: int
    coverage: float = float("nan")
    certified: float | None = None
    wrong_certified: float | None = None
    exact_coverage: float | None = None


def _pivot(ours: int, ours_max: int = 96) -> list[FakeCell]:
    return [
        FakeCell(PIVOT, "paper", 96, 40, 16, 96),
        FakeCell(PIVOT, "car-rows", 96, 40, ours, ours_max),
        FakeCell("and", "car-fixed", 288, 200, 200, 288, coverage=0.95),
    ]


def test_check_passes_and_fails_on_the_thresholds() -> None:
    assert all(t.passed for t in check(_pivot(38), []) if t.gating)
    failed = [t for t in check(_pivot(37), []) if t.gating and not t.passed]
    assert [t.name.split(" (")[0] for t in failed] == ["pivot locus"]
    over_budget = [t for t in check(_pivot(40, 97), []) if t.gating and not t.passed]
    assert len(over_budget) == 1


def test_coverage_gates_below_and_tracks_above() -> None:
    cells = _pivot(40)
    cells[2].coverage = 0.91
    low = [t for t in check(cells, []) if not t.passed]
    assert any(t.gating and "lower end" in t.name for t in low)
    cells[2].coverage = 0.985
    high = [t for t in check(cells, []) if not t.passed]
    assert high and all(not t.gating for t in high)
    cells[2].exact_coverage = 0.955  # an exact value, where there is one, stands for the measured
    assert all(t.passed for t in check(cells, []))


def test_exact_coverage_of_the_fixed_design_matches_simulated_counts() -> None:
    fail, n = (0.41, 0.95, 1.0), 60
    exact = fixed_exact_coverage(fail, n, 0.1)
    rng = np.random.default_rng(7)
    hits = total = 0
    for _ in range(1500):
        arms = (rng.random((3, n)) < np.array(fail)[:, None]).astype(float)
        res = estimate_contrastive(arms, np.ones(1), factual_exact=True)
        for k in (0, 1):
            iv = res.positions[k].effect
            hits += iv.low <= 1 - fail[k] <= iv.high
            total += 1
    simulated = hits / total
    se = (exact * (1 - exact) / total) ** 0.5
    assert abs(simulated - exact) < 4 * se, (simulated, exact)
    assert 0.93 <= exact <= 0.99


def test_certified_error_rate_gates() -> None:
    ok = FakeCell("and", "car-adaptive", 5000, 200, 200, 100, certified=1.0, wrong_certified=0.02)
    bad = FakeCell("and", "car-adaptive", 5000, 200, 180, 100, certified=1.0, wrong_certified=0.08)
    assert all(t.passed for t in check([], [ok]))
    assert not any(t.passed for t in check([], [bad]))


def test_paper_contrastive_needs_about_four_rescues() -> None:
    # K = 16, observed run = 1: a step is significant only with enough rescues in its arm.
    rng = np.random.default_rng(0)
    for rescues, significant in [(1, False), (2, False), (6, True)]:
        arm = np.ones(16)
        arm[:rescues] = 0
        arms = np.vstack([np.ones(16), arm, np.ones(16)])
        res = paper_contrastive(arms, 1.0, rng)
        assert (res.locus == 1) is significant


def test_paper_shapley_is_exact_on_every_order_with_exact_values() -> None:
    for model, players in [(PlantedAnd(), [[0], [1], [2]]), (Team(), Team().agents())]:
        phi = shapley_values(model, players)
        n = len(players)
        orders = np.array(list(itertools.permutations(range(n))))
        values = np.array(
            [
                [model.expected(frozenset(s for i in o[:j] for s in players[i])) for j in range(n + 1)]
                for o in orders
            ]
        )
        est = paper_shapley(orders, values)
        assert est.values == pytest.approx(phi)


def test_paper_plan_pairs_each_walk_with_its_reverse() -> None:
    orders = paper_shapley_plan(5, 7, np.random.default_rng(1))
    assert len(orders) == 8
    for i in range(0, 8, 2):
        assert list(orders[i + 1]) == list(orders[i][::-1])


@dataclass
class FakeShapley:
    case: str
    method: str
    budget: int
    rmse: float
    rollouts: float


def test_shapley_ratio_target_waits_for_both_methods_then_gates() -> None:
    from bench.targets import shapley_ratio_target

    # The paper's walks overshoot the nominal 960 (1,200 spent): rollouts spent are what count.
    paper = [FakeShapley(c, "paper-1", 960, 0.06, 1200) for c in ("and", "or", "mediated")]
    assert shapley_ratio_target(paper, "car", "paper-1", 4, 0.02) is None
    good = [FakeShapley(c, "car", 960, 0.025, 960) for c in ("and", "or", "mediated")]  # 7.2x
    t = shapley_ratio_target(paper + good, "car", "paper-1", 4, 0.02)
    assert t is not None and t.passed
    poor = [FakeShapley(c, "car", 960, 0.04, 960) for c in ("and", "or", "mediated")]  # 2.8x
    t = shapley_ratio_target(paper + poor, "car", "paper-1", 4, 0.02)
    assert t is not None and not t.passed and t.gating
    assert "2.8x to 2.8x" in t.measured
    tracked = shapley_ratio_target(paper + poor, "car", "paper-1", 4, 0.02, gating=False)
    assert tracked is not None and not tracked.passed and not tracked.gating


@dataclass
class FakeCovered:
    case: str
    method: str
    budget: int
    coverage: float


def test_shapley_coverage_band_is_tracked_per_method() -> None:
    from bench.targets import shapley_coverage

    cells = [
        FakeCovered("and", "car", 320, 0.95),
        FakeCovered("long", "car", 320, 0.99),
        FakeCovered("and", "car", 100, 0.50),  # below 200 rollouts: not held to the band
        FakeCovered("and", "car-shared", 320, 0.92),
        FakeCovered("or", "car-shared", 320, math.nan),
    ]
    car_low, car_high, shared_low, shared_high = shapley_coverage(cells)
    assert car_low.passed and not car_high.passed and "0.950 (and) to 0.990 (long)" in car_low.measured
    assert not shared_low.passed and shared_high.passed and "over 1 cells" in shared_low.measured
    assert not any(t.gating for t in (car_low, car_high, shared_low, shared_high))


def test_shapley_weights_give_exact_values_of_the_and_game() -> None:
    """The ideal exact design's weight matrix applied to every v(S) of planted-and is its exact phi."""
    from bench.credit import _shapley_weights

    model = PlantedAnd()
    groups = [[k] for k in range(model.size())]
    v = [model.expected(frozenset(k for k in range(3) if mask >> k & 1)) for mask in range(2**3)]
    assert np.allclose(np.array(v) @ _shapley_weights(3), shapley_values(model, groups))


def test_replicate_values_are_unbiased_and_charge_only_runs_that_leave_the_record() -> None:
    """planted-pivot(p=0.5): over 400 replicates each player's mean exact value is within 4
    standard errors of its phi; a replicate is charged at least one run whenever its values are not
    all 0 (something off the record was seen) and at most the 2^n - 1 coalitions off the record; and
    the ideal exact design's RMSE is variance x charge / budget."""
    from bench.credit import ideal_exact_cell, replicate_values
    from bench.suite import Case, model_truth

    case = Case("planted-pivot", (("p", 0.5),))
    model, _ = model_truth(case)
    phi = np.array(shapley_values(model, [[k] for k in range(model.size())]))
    phis, charges = replicate_values(case, 400)
    se = phis.std(axis=0, ddof=1) / math.sqrt(len(phis))
    assert np.all(np.abs(phis.mean(axis=0) - phi) <= 4 * se + 1e-9)
    moved = np.any(phis != 0, axis=1)
    assert moved.any() and np.all(charges[moved] >= 1) and np.all(charges <= 2**3 - 1)
    cell = ideal_exact_cell(case, 400, budget=320)
    want = phis.var(axis=0, ddof=1).mean() * charges.mean() / 320
    assert cell.rmse == pytest.approx(math.sqrt(want)) and cell.rollouts == 320


def test_a_noisy_judge_is_charged_for_scoring_the_record() -> None:
    """With a stochastic scorer the record's score is a draw of the replicate: every replicate pays
    at least that run, where the deterministic pivot has replicates that cost nothing."""
    from bench.credit import replicate_values
    from bench.suite import Case

    _, noisy = replicate_values(Case("noisy-judge"), 50)
    _, pivot = replicate_values(Case("planted-pivot", (("p", 0.5),)), 50)
    assert noisy.min() >= 1 and pivot.min() == 0
