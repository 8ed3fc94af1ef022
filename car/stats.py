"""Interval arithmetic for proportions and paired differences of proportions.

`level` is always the two-sided coverage: level=0.95 gives tails of 2.5% each. One-sided bounds take
the tail probability `alpha` directly.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import special  # light: scipy.stats and scipy.optimize would add a second to start-up

__all__ = [
    "clopper_pearson",
    "cp_lower",
    "cp_upper",
    "is_binary",
    "mid_p",
    "paired_difference",
    "skew_shift",
    "t_upper",
    "tango",
    "z_upper",
]


def is_binary(x: np.ndarray) -> bool:
    """Every value is 0 or 1 (exact binomial methods apply)."""
    return bool(np.all((x == 0) | (x == 1)))


def z_upper(alpha: float) -> float:
    """The standard normal quantile with upper tail `alpha`."""
    return float(-special.ndtri(alpha))


def t_upper(alpha: float, df: int) -> float:
    """Student's t quantile with upper tail `alpha`."""
    return float(special.stdtrit(df, 1 - alpha))


def skew_shift(x: np.ndarray, t: float) -> np.ndarray:
    """Johnson's skewness correction of a t-interval's ends, in standard errors (per column of `x`).

    The Cornish-Fisher expansion of the studentised mean moves both ends by `g (2 t^2 + 1) / (6
    sqrt(n))` standard errors towards the tail, g the sample skewness: where a rare large value makes
    the mean and its standard error move together, the plain t-interval misses on the tail's side
    more often than its level says. 0 where a column has no spread; a column of equal values that
    floating point makes differ by an ulp gets a meaningless g, so callers skip floored columns.
    """
    n = x.shape[0]
    m2 = x.var(axis=0)
    m3 = ((x - x.mean(axis=0)) ** 3).mean(axis=0)
    g = np.divide(m3, m2**1.5, out=np.zeros_like(m2), where=m2 > 0)
    return np.asarray(g * (2 * t * t + 1) / (6 * math.sqrt(n)))


def cp_lower(k: int, n: int, alpha: float) -> float:
    """Exact one-sided lower bound for a binomial proportion: P(bound > p) <= alpha."""
    if n == 0 or k == 0:
        return 0.0
    return float(special.betaincinv(k, n - k + 1, alpha))


def cp_upper(k: int, n: int, alpha: float) -> float:
    """Exact one-sided upper bound for a binomial proportion."""
    if n == 0 or k == n:
        return 1.0
    return float(special.betaincinv(k + 1, n - k, 1 - alpha))


def clopper_pearson(k: int, n: int, level: float) -> tuple[float, float]:
    """Exact two-sided interval (coverage >= level for every true proportion)."""
    tail = (1 - level) / 2
    return cp_lower(k, n, tail), cp_upper(k, n, tail)


@lru_cache(maxsize=8192)  # pure in small integers: estimators ask for the same counts again and again
def mid_p(k: int, n: int, level: float) -> tuple[float, float]:
    """Mid-p exact two-sided interval: Clopper-Pearson with half the observed outcome's probability.

    Clopper-Pearson guarantees `level` for every true proportion, so on average it covers more (about
    0.97 at n = 50-100 for level 0.95) and is wider than it needs to be. Counting only half of
    P(X = k) in each tail brings the average coverage near `level` (Agresti and Gottard 2007); its
    worst case over p dips a little below (about 0.92 at n = 95). Use it to *show* a proportion; use
    the exact bounds where a guarantee is promised (verdicts, certification).
    """
    if n == 0:
        return 0.0, 1.0
    tail = (1 - level) / 2

    def mid_tail(p: float) -> float:  # P(X > k) + P(X = k) / 2, increasing in p
        at_least = float(special.betainc(k, n - k + 1, p)) if k > 0 else 1.0
        above = float(special.betainc(k + 1, n - k, p)) if k < n else 0.0
        return (at_least + above) / 2

    def solve(lo: float, hi: float, target: float) -> float:
        for _ in range(60):
            mid = (lo + hi) / 2
            if mid_tail(mid) < target:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    exact_low, exact_high = clopper_pearson(k, n, level)  # mid-p lies inside the exact interval
    low = 0.0 if k == 0 else solve(exact_low, k / n, tail)
    high = 1.0 if k == n else solve(k / n, exact_high, 1 - tail)
    return low, high


def paired_difference(a: np.ndarray, b: np.ndarray, level: float) -> tuple[float, float, float]:
    """mean(a) - mean(b) for paired binary samples, with Tango's score interval.

    Only the discordant pairs carry information about the difference: with n pairs, `up` pairs where
    a=1, b=0 and `down` pairs where a=0, b=1, the estimate is (up - down) / n. Tango's (1998) score
    interval inverts the score test of H0: difference = d, using the constrained maximum-likelihood
    estimate of the discordant cell probabilities. Unlike Wald or Newcombe's hybrid intervals it keeps
    its width when there are no discordant pairs at all, which is common with common random numbers
    (two arms that share noise often agree on every replicate). Returns (estimate, low, high).
    """
    a = np.asarray(a, dtype=float) > 0.5
    b = np.asarray(b, dtype=float) > 0.5
    n = len(a)
    if n == 0:
        return math.nan, -1.0, 1.0
    up = int(np.sum(a & ~b))
    down = int(np.sum(~a & b))
    return tango(up, down, n, level)


def _tango_z(d: float, up: int, down: int, n: int) -> float:
    """Score statistic for H0: p(up) - p(down) = d."""
    lin = up + down - 2 * n * d + d * (up - down)
    q = (lin + math.sqrt(max(lin * lin + 8 * n * down * d * (1 - d), 0.0))) / (4 * n)
    var = n * (2 * q + d * (1 - d))
    num = up - down - n * d
    if var <= 0:
        return 0.0 if num == 0 else math.copysign(math.inf, num)
    return num / math.sqrt(var)


@lru_cache(maxsize=8192)
def tango(up: int, down: int, n: int, level: float) -> tuple[float, float, float]:
    """Tango's score interval for a paired difference of proportions from discordant counts."""
    z = z_upper((1 - level) / 2)
    d_hat = (up - down) / n
    eps = 1e-12

    def bound(lo: float, hi: float, target: float) -> float:
        def f(d: float) -> float:
            return _tango_z(d, up, down, n) - target

        f_lo, f_hi = f(lo), f(hi)
        if f_lo * f_hi > 0:
            return lo if abs(f_lo) < abs(f_hi) else hi
        for _ in range(60):  # bisection: the score statistic is monotone in d on each side
            mid = (lo + hi) / 2
            f_mid = f(mid)
            if f_mid == 0:
                return mid
            if (f_mid > 0) == (f_lo > 0):
                lo, f_lo = mid, f_mid
            else:
                hi = mid
        return (lo + hi) / 2

    low = -1.0 if d_hat <= -1 + eps else bound(-1 + eps, d_hat, z)
    high = 1.0 if d_hat >= 1 - eps else bound(d_hat, 1 - eps, -z)
    return d_hat, max(-1.0, low), min(1.0, high)
