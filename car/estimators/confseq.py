"""Anytime-valid confidence sequences for means of outcomes in [0, 1].

A confidence sequence (CS) at level 1 - alpha holds the true mean at *every* sample size at once with
probability at least 1 - alpha, so a caller may look after every batch and stop when decided. Fixed-n
intervals peeked at repeatedly lose their coverage; these do not.

- `bernoulli_cs`: binary outcomes, Robbins' beta-binomial mixture martingale. The CS is the set of p
  whose mixture likelihood ratio stays below 1/alpha (Ville's inequality); it is exact and closed
  form, and one observed rescue against a known-deterministic arm excludes p = 1 at once.
- `betting_cs`: any outcomes in [0, 1], the hedged-capital betting CS of Waudby-Smith and Ramdas
  (2023) with predictable plug-in bets, evaluated on a grid of candidate means and intersected over
  time (a candidate once rejected stays rejected).
- `mean_cs` dispatches on whether the sample is binary; `difference_cs` maps paired differences in
  [-1, 1] onto [0, 1] and back.

All are pure functions of the sample in the order it was observed. Bounds are two-sided; using one
side alone at the same alpha is conservative.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import betaln

from car.stats import is_binary

__all__ = [
    "bernoulli_cs",
    "bernoulli_log_evidence",
    "betting_cs",
    "difference_cs",
    "mean_cs",
]


def bernoulli_log_evidence(
    successes: int | np.ndarray, n: int | np.ndarray, p: float, a: float = 1.0, b: float = 1.0
) -> np.ndarray:
    """log of the beta-binomial mixture martingale against the null mean `p` after n draws.

    Under the null this is a nonnegative martingale with initial value 1, so it exceeds log(1/alpha)
    at any time with probability at most alpha.
    """
    s = np.asarray(successes, dtype=float)
    m = np.asarray(n, dtype=float)
    f = m - s
    with np.errstate(divide="ignore", invalid="ignore"):
        log_null = np.where(s > 0, s * np.log(p) if p > 0 else -np.inf, 0.0) + np.where(
            f > 0, f * np.log1p(-p) if p < 1 else -np.inf, 0.0
        )
    return np.asarray(betaln(a + s, b + f) - betaln(a, b) - log_null)


def _log_evidence(successes: int, failures: int, p: float) -> float:
    """`bernoulli_log_evidence` of one count with a = b = 1, the same arithmetic without the array
    machinery (most of the time of the root search, which calls it a few dozen times a bound)."""
    log_null = 0.0 if successes == 0 else (successes * float(np.log(p)) if p > 0 else -math.inf)
    log_null += 0.0 if failures == 0 else (failures * float(np.log1p(-p)) if p < 1 else -math.inf)
    return float(betaln(1.0 + successes, 1.0 + failures)) - _BETALN_11 - log_null


_BETALN_11 = float(betaln(1.0, 1.0))


def bernoulli_cs(successes: int, n: int, alpha: float) -> tuple[float, float]:
    """The (1 - alpha) anytime-valid interval for a Bernoulli mean after `successes` in `n` draws."""
    if n == 0:
        return 0.0, 1.0
    from scipy import optimize  # here, not at import: scipy.optimize adds most of a second to start-up

    threshold = math.log(1 / alpha)

    def excess(p: float) -> float:
        return _log_evidence(successes, n - successes, p) - threshold

    centre = successes / n
    low = 0.0
    if successes > 0 and excess(0.0) > 0:
        low = float(optimize.brentq(excess, 0.0, centre)) if excess(centre) < 0 else centre
    high = 1.0
    if successes < n and excess(1.0) > 0:
        high = float(optimize.brentq(excess, centre, 1.0)) if excess(centre) < 0 else centre
    return low, high


def betting_cs(x: np.ndarray, alpha: float, grid: int = 1000) -> tuple[float, float]:
    """The hedged-capital betting CS for the mean of `x` (values in [0, 1], in observation order)."""
    x = np.asarray(x, dtype=float)
    n = len(x)
    if n == 0:
        return 0.0, 1.0
    m = (np.arange(grid) + 0.5) / grid
    t = np.arange(1, n + 1)
    # Predictable plug-ins: the mean and variance of the observations before each one.
    csum = np.concatenate(([0.0], np.cumsum(x)[:-1]))
    csq = np.concatenate(([0.0], np.cumsum(x * x)[:-1]))
    mu = (0.5 + csum) / t
    var = (0.25 + csq - 2 * mu * csum + (t - 1) * mu * mu) / t
    lam = np.sqrt(2 * math.log(2 / alpha) / (np.maximum(var, 1e-6) * t * np.log1p(t)))
    log_plus = np.zeros(grid)
    log_minus = np.zeros(grid)
    rejected = np.zeros(grid, dtype=bool)
    threshold = math.log(1 / alpha)
    # Bets stay below 1/m (and 1/(1-m)): capital stays > 0. Capped one observation at a time, not
    # as an (n, grid) array, so memory stays flat in n (that array took 1.6 GB at n = 100,000).
    most_plus, most_minus = 0.5 / m, 0.5 / (1 - m)
    for i in range(n):
        d = x[i] - m
        log_plus += np.log1p(np.minimum(lam[i], most_plus) * d)
        log_minus += np.log1p(-np.minimum(lam[i], most_minus) * d)
        hedged = np.logaddexp(log_plus, log_minus) - math.log(2)
        rejected |= hedged >= threshold
    kept = m[~rejected]
    if len(kept) == 0:  # cannot happen for valid data; fall back to the sample mean
        mean = float(x.mean())
        return mean, mean
    # The CS reaches past the outermost kept candidates up to the nearest rejected ones, anywhere in
    # that cell: half a cell out (the midpoint) left out means a finer grid would still keep.
    cell = 1 / grid
    return max(0.0, float(kept[0]) - cell), min(1.0, float(kept[-1]) + cell)


def mean_cs(x: np.ndarray, alpha: float) -> tuple[float, float]:
    """Anytime-valid interval for the mean of `x` in [0, 1] (mixture CS when binary, else betting)."""
    x = np.asarray(x, dtype=float)
    if is_binary(x):
        return bernoulli_cs(round(float(x.sum())), len(x), alpha)
    return betting_cs(x, alpha)


def difference_cs(d: np.ndarray, alpha: float) -> tuple[float, float]:
    """Anytime-valid interval for the mean of paired differences `d` in [-1, 1]."""
    d = np.asarray(d, dtype=float)
    if len(d) == 0:
        return -1.0, 1.0
    lo, hi = betting_cs((d + 1) / 2, alpha)
    return 2 * lo - 1, 2 * hi - 1
