"""Interval arithmetic: exactness, edge cases and coverage against known truths."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from car.stats import clopper_pearson, cp_lower, cp_upper, mid_p, paired_difference, tango


def test_clopper_pearson_edges() -> None:
    assert clopper_pearson(0, 10, 0.95)[0] == 0.0
    assert clopper_pearson(10, 10, 0.95)[1] == 1.0
    _lo, hi = clopper_pearson(0, 10, 0.95)
    assert hi == pytest.approx(1 - 0.025 ** (1 / 10))
    assert cp_upper(0, 10, 0.05) == pytest.approx(1 - 0.05 ** (1 / 10))
    assert cp_lower(10, 10, 0.05) == pytest.approx(0.05 ** (1 / 10))


@pytest.mark.parametrize("n", [8, 16, 32, 100])
def test_clopper_pearson_exact_coverage_is_at_least_nominal(n: int) -> None:
    # Exact coverage by summing the binomial pmf over outcomes whose interval covers p.
    for p in np.linspace(0.01, 0.99, 50):
        ks = np.arange(n + 1)
        covered = [lo <= p <= hi for lo, hi in (clopper_pearson(int(k), n, 0.95) for k in ks)]
        coverage = float(sps.binom.pmf(ks, n, p)[covered].sum())
        assert coverage >= 0.95 - 1e-9, (n, p, coverage)


def test_mid_p_solves_its_definition_and_sits_inside_the_exact_interval() -> None:
    n = 40
    for k in range(n + 1):
        lo, hi = mid_p(k, n, 0.95)
        clo, chi = clopper_pearson(k, n, 0.95)
        assert clo <= lo <= k / n <= hi <= chi
        if k > 0:  # P(X > k) + P(X = k) / 2 at the lower bound is the tail
            tail = sps.binom.sf(k, n, lo) + sps.binom.pmf(k, n, lo) / 2
            assert tail == pytest.approx(0.025, abs=1e-9)
        if k < n:
            tail = sps.binom.cdf(k - 1, n, hi) + sps.binom.pmf(k, n, hi) / 2
            assert tail == pytest.approx(0.025, abs=1e-9)


@pytest.mark.parametrize("n", [47, 95, 190])
def test_mid_p_covers_near_nominal_on_average(n: int) -> None:
    # Exact coverage over a grid of true proportions: Clopper-Pearson averages well above 0.95 here,
    # mid-p near it, and its worst case stays within a few points.
    ks = np.arange(n + 1)
    bounds = [mid_p(int(k), n, 0.95) for k in ks]
    exact = [clopper_pearson(int(k), n, 0.95) for k in ks]
    grid = np.linspace(0.02, 0.98, 97)

    def coverage(ivs: list[tuple[float, float]], p: float) -> float:
        covered = [lo <= p <= hi for lo, hi in ivs]
        return float(sps.binom.pmf(ks, n, p)[covered].sum())

    mid = np.array([coverage(bounds, p) for p in grid])
    cp = np.array([coverage(exact, p) for p in grid])
    assert 0.945 <= mid.mean() <= 0.962, mid.mean()
    assert mid.min() >= 0.9, mid.min()
    assert cp.mean() > mid.mean()


def test_paired_interval_coverage_on_correlated_pairs() -> None:
    # Pairs sharing noise (common random numbers): a = u < pa, b = u < pb with one uniform u.
    rng = np.random.default_rng(20261130)
    cases = [(0.9, 0.5), (0.5, 0.45), (1.0, 0.3), (0.98, 0.452), (0.3, 0.3)]
    for pa, pb in cases:
        hits = 0
        reps = 2000
        for _ in range(reps):
            u = rng.random(32)
            a, b = (u < pa).astype(float), (u < pb).astype(float)
            _, lo, hi = paired_difference(a, b, 0.95)
            hits += lo <= pa - pb <= hi
        assert hits / reps >= 0.93, (pa, pb, hits / reps)


def test_paired_identical_arms_cover_zero() -> None:
    x = np.array([1, 0, 1, 1, 0], dtype=float)
    d, lo, hi = paired_difference(x, x, 0.95)
    assert d == 0 and lo < 0 < hi


def test_tango_without_discordant_pairs_keeps_its_width() -> None:
    # No discordant pair among n: the interval is +-z^2/(n+z^2), like a score interval for 0 successes.
    d, lo, hi = tango(0, 0, 32, 0.95)
    z2 = 1.959963984540054**2
    assert d == 0
    assert hi == pytest.approx(z2 / (32 + z2), rel=1e-6)
    assert lo == pytest.approx(-z2 / (32 + z2), rel=1e-6)


def test_tango_exact_coverage_under_monotone_coupling() -> None:
    # With a monotone coupling only "up" pairs occur: up ~ Binomial(n, delta). Exact coverage by the pmf.
    for n in (16, 32, 64):
        for delta in (0.02, 0.05, 0.1, 0.2, 0.5, 0.8):
            ks = np.arange(n + 1)
            covered = [lo <= delta <= hi for _, lo, hi in (tango(int(k), 0, n, 0.95) for k in ks)]
            coverage = float(sps.binom.pmf(ks, n, delta)[covered].sum())
            assert coverage >= 0.92, (n, delta, coverage)
