"""Interval arithmetic for proportions and paired differences of proportions.

`level` is always the two-sided coverage: level=0.95 gives tails of 2.5% each. One-sided bounds take
the tail probability `alpha` directly.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

__all__ = [
    "clopper_pearson",
    "cp_lower",
    "cp_upper",
    "newcombe_paired",
    "wilson",
]


def cp_lower(k: int, n: int, alpha: float) -> float:
    """Exact one-sided lower bound for a binomial proportion: P(bound > p) <= alpha."""
    if n == 0 or k == 0:
        return 0.0
    return float(stats.beta.ppf(alpha, k, n - k + 1))


def cp_upper(k: int, n: int, alpha: float) -> float:
    """Exact one-sided upper bound for a binomial proportion."""
    if n == 0 or k == n:
        return 1.0
    return float(stats.beta.isf(alpha, k + 1, n - k))


def clopper_pearson(k: int, n: int, level: float) -> tuple[float, float]:
    """Exact two-sided interval (coverage >= level for every true proportion)."""
    tail = (1 - level) / 2
    return cp_lower(k, n, tail), cp_upper(k, n, tail)


def wilson(k: int, n: int, level: float) -> tuple[float, float]:
    """Wilson score interval."""
    if n == 0:
        return 0.0, 1.0
    z = float(stats.norm.isf((1 - level) / 2))
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe_paired(a: np.ndarray, b: np.ndarray, level: float) -> tuple[float, float, float]:
    """Difference mean(a) - mean(b) of paired binary samples with Newcombe's hybrid score interval.

    Newcombe (1998), method 10: Wilson intervals for each margin, combined with the estimated
    correlation of the pairs. Returns (estimate, low, high). Fractional values are rounded to 0/1
    only for the margins' counts; callers pass binary outcomes.
    """
    n = len(a)
    if n == 0:
        return math.nan, -1.0, 1.0
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    ka, kb = round(float(a.sum())), round(float(b.sum()))
    p1, p2 = ka / n, kb / n
    l1, u1 = wilson(ka, n, level)
    l2, u2 = wilson(kb, n, level)
    # The phi correlation of the 2x2 table, truncated at zero when negative as Newcombe advises.
    A = float(np.sum((a > 0.5) & (b > 0.5)))
    B = float(np.sum((a > 0.5) & (b <= 0.5)))
    C = float(np.sum((a <= 0.5) & (b > 0.5)))
    D = float(n - A - B - C)
    denom = (A + B) * (C + D) * (A + C) * (B + D)
    phi = 0.0 if denom == 0 else (A * D - B * C) / math.sqrt(denom)
    phi = max(phi, 0.0)
    d = p1 - p2
    dl2 = (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2
    du2 = (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2
    low = d - math.sqrt(max(dl2, 0.0))
    high = d + math.sqrt(max(du2, 0.0))
    return d, max(-1.0, low), min(1.0, high)
