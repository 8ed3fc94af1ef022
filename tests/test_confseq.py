"""Confidence sequences: time-uniform coverage across many seeds, and the bounds' defining property."""

from __future__ import annotations

import math

import numpy as np
import pytest

from car.estimators.confseq import (
    _log_evidence,
    bernoulli_cs,
    bernoulli_log_evidence,
    betting_cs,
    difference_cs,
    mean_cs,
)


@pytest.mark.parametrize("p", [0.02, 0.3, 0.9, 0.99])
def test_bernoulli_cs_covers_uniformly_over_time(p: float) -> None:
    # Miss = the true p leaves the CS at ANY of 400 looks; must happen in at most alpha of the runs.
    rng = np.random.default_rng(7)
    alpha, runs, n = 0.1, 2000, 400
    draws = rng.random((runs, n)) < p
    s = np.cumsum(draws, axis=1)
    t = np.arange(1, n + 1)
    evidence = bernoulli_log_evidence(s, t[None, :], p)
    missed = (evidence >= math.log(1 / alpha)).any(axis=1).mean()
    # alpha plus four binomial standard errors: fails if the CS is not anytime-valid.
    assert missed <= alpha + 4 * math.sqrt(alpha * (1 - alpha) / runs)


def test_peeking_at_fixed_n_intervals_would_fail_the_same_check() -> None:
    # The check above has teeth: a Wald interval watched at every n misses far more than alpha.
    rng = np.random.default_rng(3)
    p, runs, n = 0.3, 1000, 400
    s = np.cumsum(rng.random((runs, n)) < p, axis=1)
    t = np.arange(1, n + 1)
    phat = s / t
    half = 1.645 * np.sqrt(np.maximum(phat * (1 - phat), 1e-9) / t)
    missed = (np.abs(phat - p) > half)[:, 10:].any(axis=1).mean()
    assert missed > 0.3


def test_bernoulli_bounds_sit_on_the_threshold() -> None:
    alpha = 0.05
    for s, n in [(3, 10), (10, 100), (95, 96), (50, 50), (0, 40)]:
        lo, hi = bernoulli_cs(s, n, alpha)
        assert 0 <= lo <= s / n <= hi <= 1
        for bound in (lo, hi):
            if 0 < bound < 1 and bound != s / n:
                assert float(bernoulli_log_evidence(s, n, bound)) == pytest.approx(
                    math.log(1 / alpha), abs=1e-6
                )


def test_the_interval_search_evaluates_the_evidence_bit_for_bit() -> None:
    # bernoulli_cs searches with a scalar form of the evidence: the same number as the array form,
    # to the last bit, at the edges (no successes or failures, p at 0 or 1) and in between.
    rng = np.random.default_rng(0)
    ps = [0.0, 1e-12, 0.5, 1 - 1e-12, 1.0, *rng.random(40)]
    for n in [0, 1, 2, 7, 96, 5000]:
        for s in sorted({0, 1, n // 3, n - 1, n} - {-1, n + 1}):
            for p in ps:
                want = float(bernoulli_log_evidence(s, n, p))
                assert _log_evidence(s, n - s, p) == want, (s, n, p)


def test_one_rescue_excludes_a_certain_failure() -> None:
    assert bernoulli_cs(95, 96, 0.01)[1] < 1.0
    assert bernoulli_cs(96, 96, 0.01)[1] == 1.0


@pytest.mark.slow
def test_betting_cs_covers_at_the_final_look_across_seeds() -> None:
    # Continuous outcomes: the running-intersection CS at n must hold the mean in >= 1 - alpha of runs.
    alpha, runs = 0.1, 300
    misses = 0
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        x = rng.beta(0.5, 2.0, size=150)  # mean 0.2, skewed
        lo, hi = betting_cs(x, alpha, grid=400)
        misses += not (lo <= 0.2 <= hi)
    assert misses / runs <= alpha + 4 * math.sqrt(alpha * (1 - alpha) / runs)


def test_betting_cs_shrinks_and_contains_the_mean() -> None:
    rng = np.random.default_rng(0)
    x = rng.random(2000) * 0.4 + 0.3
    lo, hi = betting_cs(x[:100], 0.05)
    lo2, hi2 = betting_cs(x, 0.05)
    assert lo <= 0.5 <= hi and lo2 <= 0.5 <= hi2
    assert hi2 - lo2 < (hi - lo) / 2


def test_dispatch_and_differences() -> None:
    assert mean_cs(np.array([1.0, 0.0, 1.0]), 0.05) == bernoulli_cs(2, 3, 0.05)
    lo, hi = difference_cs(np.zeros(200), 0.05)
    assert -0.1 < lo <= 0 <= hi < 0.1
    assert difference_cs(np.array([]), 0.05) == (-1.0, 1.0)


def test_betting_cs_on_its_grid_contains_what_a_finer_grid_keeps() -> None:
    # The bounds were the outer kept candidates moved half a cell out, but the CS reaches on to the
    # nearest rejected candidate: at grid 1000, 62 of 100 samples had a mean a grid of 20,000 keeps
    # (inside the CS) outside the interval, by up to 0.0005.
    rng = np.random.default_rng(3)
    fine = 20_000
    for _ in range(30):
        x = rng.beta(2.0, 5.0, size=int(rng.integers(20, 200)))
        lo, hi = betting_cs(x, 0.05)
        fine_lo, fine_hi = betting_cs(x, 0.05, grid=fine)
        # the fine grid's kept candidates are its bounds moved back in by one of its cells
        assert lo <= fine_lo + 1 / fine + 1e-12
        assert fine_hi - 1 / fine - 1e-12 <= hi
