"""Shapley estimators over players 0..n-1: pure functions of coalition outcomes (plan, then estimate).

Coalitions are bitmasks: bit i set means player i is held. Two estimators:

- **Exact.** Every coalition S gets its own independent outcomes; `phi_i = sum_S c_iS v(S)` with
  `c_iS = w(|S|-1)` when i is in S and `-w(|S|)` when it is not, `w(s) = s!(n-s-1)!/n!`. Because
  phi is linear in independent means, `Var phi_i = sum_S c_iS^2 Var v(S)` exactly, and efficiency
  (`sum phi = v(N) - v(empty)`) holds to float precision whatever the noise. `c_iS` depends only on
  |S| and on membership, so every sum is size-grouped and costs O(n 2^n) time and O(2^n) memory.
  `plan_exact` allocates rollouts in proportion to `sqrt(sum_i c_iS^2) * sd(S)` (Neyman allocation
  for the summed variance of phi), after an optional pilot that estimates `sd(S)`.
- **Permutation walks.** Orders come in antithetic pairs (an order and its reverse). A walk gives one
  marginal per player; the two walks of a pair are dependent, so the independent unit is the pair's
  mean marginal. The interval is Student-t across pairs with a variance floor: with coupled rollouts
  many marginals are exactly 0, and a plain interval would claim certainty the data do not carry.

Outcomes are in [0, 1]; NaN marks a rollout that errored or could not be scored (it is dropped).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from car.stats import t_upper, z_upper

__all__ = [
    "ShapleyEstimate",
    "coalition_moments",
    "coefficient_norms",
    "estimate_exact",
    "estimate_walks",
    "exact_sd",
    "plan_exact",
    "plan_walks",
    "popcounts",
    "shapley_weights",
    "walk_marginals",
]

PSEUDO = 0.25  # pseudo-count per side when a coalition's variance is estimated
MAX_EXACT_PLAYERS = 20  # 2^20 coalitions: beyond this exact enumeration is never affordable


@dataclass(frozen=True)
class ShapleyEstimate:
    """phi per player with a two-sided interval at `level`; `total` is the sum of phi."""

    values: np.ndarray
    low: np.ndarray
    high: np.ndarray
    se: np.ndarray
    total: float
    v_all: float
    v_none: float
    level: float
    units: int  # rollouts used (exact) or independent pairs of walks (permutation)
    v_none_se: float = math.nan
    v_none_n: int = 0

    @property
    def half_width(self) -> np.ndarray:
        return np.asarray((self.high - self.low) / 2)


def shapley_weights(n: int) -> np.ndarray:
    """`w[s] = s!(n-s-1)!/n!` for s = 0..n-1: the weight of a marginal at a coalition of size s."""
    if n < 1:
        raise ValueError("a game needs at least one player")
    s = np.arange(n)
    # lgamma keeps the ratio finite for any n.
    logs = [math.lgamma(k + 1) + math.lgamma(n - k) - math.lgamma(n + 1) for k in s]
    return np.asarray(np.exp(np.array(logs)))


def popcounts(n: int) -> np.ndarray:
    """The size |S| of every coalition mask 0..2^n-1."""
    masks = np.arange(1 << n, dtype=np.int64)
    sizes = np.zeros(1 << n, dtype=np.int64)
    for b in range(n):
        sizes += (masks >> b) & 1
    return sizes


def _check_n(n: int) -> None:
    if not 1 <= n <= MAX_EXACT_PLAYERS:
        raise ValueError(f"exact Shapley takes 1..{MAX_EXACT_PLAYERS} players, got {n}")


def _coefficients(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-size coefficients: `plus[s]` for i in S (|S| = s), `minus[s]` for i not in S."""
    w = shapley_weights(n)
    plus = np.zeros(n + 1)
    minus = np.zeros(n + 1)
    plus[1:] = w  # i in S, |S| = s: the marginal at S \ {i}, size s - 1
    minus[:n] = w  # i not in S, |S| = s: the marginal at S
    return plus, minus


def coefficient_norms(n: int) -> np.ndarray:
    """`sum_i c_iS^2` for every coalition mask: how much v(S)'s noise feeds the variance of phi."""
    _check_n(n)
    plus, minus = _coefficients(n)
    sizes = popcounts(n)
    return np.asarray(sizes * plus[sizes] ** 2 + (n - sizes) * minus[sizes] ** 2, dtype=float)


def exact_sd(means: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """A cautious outcome standard deviation per coalition for allocation: Bernoulli at a shrunken mean.

    A coalition whose pilot rollouts all agreed still gets a positive sd, so it keeps some rollouts.
    """
    k = np.nan_to_num(means) * counts
    shrunk = (k + 0.5) / (counts + 1)
    return np.asarray(np.sqrt(shrunk * (1 - shrunk)))


def plan_exact(
    n: int,
    budget: int,
    *,
    known: Sequence[int] = (),
    sd: np.ndarray | None = None,
    minimum: int = 2,
    already: np.ndarray | None = None,
) -> np.ndarray:
    """Rollouts per coalition mask (length 2^n) summing to at most `budget` (on top of `already`).

    The optimum of `sum_S C_S sd_S^2 / n_S` under `sum_S n_S = B` is `n_S ∝ sqrt(C_S) sd_S` with
    `C_S = sum_i c_iS^2`. Masks in `known` (exact values, e.g. the record replayed with a deterministic
    scorer) get none. Every other mask gets at least `minimum` in total. `sd=None` assumes equal sd.
    Raises ValueError when the budget cannot pay the minimum.
    """
    _check_n(n)
    size = 1 << n
    have = np.zeros(size, dtype=np.int64) if already is None else np.asarray(already, dtype=np.int64)
    free = np.ones(size, dtype=bool)
    free[list(known)] = False
    floor = np.where(free, np.maximum(minimum - have, 0), 0)
    if floor.sum() > budget:
        raise ValueError(f"the budget {budget} cannot pay {int(floor.sum())} rollouts")
    weight = np.sqrt(coefficient_norms(n)) * (np.ones(size) if sd is None else np.asarray(sd))
    weight = np.where(free, np.maximum(weight, 1e-12), 0.0)
    # Target totals ∝ weight over everything spent so far plus the new budget; never take back.
    total = budget + int(have[free].sum())
    target = weight / weight.sum() * total
    extra = np.maximum(target - have, 0.0)
    extra = np.where(free, extra, 0.0)
    extra = np.maximum(extra, floor)
    if extra.sum() > budget:  # scale the part above the floors down to fit
        above = extra - floor
        room = budget - floor.sum()
        extra = floor + (above * room / above.sum() if above.sum() > 0 else 0.0)
    counts = np.floor(extra).astype(np.int64)
    left = min(budget - int(counts.sum()), int(free.sum()))
    if left > 0:  # largest remainders first
        order = np.argsort(-(extra - counts) + np.where(free, 0.0, np.inf), kind="stable")
        counts[order[:left]] += 1
    return np.asarray(counts, dtype=np.int64)


def coalition_moments(
    outcomes: Sequence[np.ndarray], known: Mapping[int, float] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, variance of the mean, and count of usable outcomes per coalition mask.

    The variance of a binary mean uses a shrunken proportion `(k + 1/2)/(n + 1)`: a coalition whose
    few rollouts all agreed is not taken as certain. Non-binary outcomes use the sample variance with
    the same floor. Known coalitions have variance 0.
    """
    size = len(outcomes)
    means = np.full(size, np.nan)
    var = np.full(size, np.inf)
    counts = np.zeros(size, dtype=np.int64)
    known = known or {}
    for mask in range(size):
        if mask in known:
            means[mask], var[mask], counts[mask] = known[mask], 0.0, 0
            continue
        x = np.asarray(outcomes[mask], dtype=float)
        x = x[~np.isnan(x)]
        m = len(x)
        counts[mask] = m
        if m == 0:
            continue
        mean = float(x.mean())
        shrunk = (mean * m + PSEUDO) / (m + 2 * PSEUDO)
        floor = shrunk * (1 - shrunk)
        binary = bool(np.all((x == 0) | (x == 1)))
        s2 = floor if binary else max(float(x.var(ddof=1)) if m > 1 else floor, floor / (m + 1))
        means[mask], var[mask] = mean, s2 / m
    return means, var, counts


def estimate_exact(
    means: np.ndarray,
    variances: np.ndarray,
    *,
    level: float = 0.95,
    units: int = 0,
    v_none_n: int = 0,
) -> ShapleyEstimate:
    """phi from one mean per coalition mask (length 2^n), with the exact linear variance."""
    means = np.asarray(means, dtype=float)
    variances = np.asarray(variances, dtype=float)
    size = len(means)
    n = size.bit_length() - 1
    if size != 1 << n:
        raise ValueError(f"expected 2^n coalition values, got {size}")
    _check_n(n)
    if np.isnan(means).any():
        missing = int(np.flatnonzero(np.isnan(means))[0])
        raise ValueError(f"coalition {missing:#b} has no usable outcome")
    plus, minus = _coefficients(n)
    sizes = popcounts(n)
    masks = np.arange(size, dtype=np.int64)
    p_s, m_s = plus[sizes], minus[sizes]
    phi = np.empty(n)
    var = np.empty(n)
    for i in range(n):
        inside = ((masks >> i) & 1).astype(bool)
        c = np.where(inside, p_s, -m_s)
        phi[i] = float(c @ means)
        var[i] = float((c * c) @ variances)
    se = np.sqrt(var)
    z = z_upper((1 - level) / 2)
    return ShapleyEstimate(
        phi,
        phi - z * se,
        phi + z * se,
        se,
        float(phi.sum()),
        float(means[-1]),
        float(means[0]),
        level,
        units,
        float(math.sqrt(variances[0])),
        int(v_none_n),
    )


def plan_walks(n: int, pairs: int, rng: np.random.Generator) -> np.ndarray:
    """`2 * pairs` orders of players 0..n-1: rows 2p and 2p+1 are an order and its reverse."""
    orders = np.empty((2 * pairs, n), dtype=np.int64)
    for p in range(pairs):
        order = rng.permutation(n)
        orders[2 * p] = order
        orders[2 * p + 1] = order[::-1]
    return orders


def walk_marginals(orders: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per-walk marginal vectors: `values[w, k]` is v of the first k players of `orders[w]`."""
    orders = np.asarray(orders)
    values = np.asarray(values, dtype=float)
    walks, n = orders.shape
    if values.shape != (walks, n + 1):
        raise ValueError(f"expected values of shape {(walks, n + 1)}, got {values.shape}")
    marg = np.empty((walks, n))
    rows = np.arange(walks)[:, None]
    marg[rows, orders] = np.diff(values, axis=1)
    return marg


def estimate_walks(
    orders: np.ndarray, values: np.ndarray, *, level: float = 0.95, floor: bool = True
) -> ShapleyEstimate:
    """phi from antithetic pairs of walks, Student-t across pairs, with a variance floor.

    Pairs with any NaN value are dropped. The floor is the variance one unseen pair would add if it
    sat a full scale away (`scale^2 / (P + 1)`, scale = the largest |pair mean| of any player): a
    player whose P marginals were all 0 gets a half-width of about `t * scale / P`, the order of the
    rule of three, instead of a zero-width interval.
    """
    orders = np.asarray(orders)
    values = np.asarray(values, dtype=float)
    if len(orders) % 2:
        raise ValueError("walks come in antithetic pairs: expected an even number of orders")
    marg = walk_marginals(orders, values)
    units = (marg[0::2] + marg[1::2]) / 2
    ok = ~np.isnan(units).any(axis=1)
    units = units[ok]
    pairs, _n = units.shape
    if pairs < 2:
        raise ValueError("the walk interval needs at least two complete pairs of walks")
    phi = units.mean(axis=0)
    s2 = units.var(axis=0, ddof=1)
    if floor:
        scale = float(np.abs(units).max())
        s2 = np.maximum(s2, scale * scale / (pairs + 1))
    se = np.sqrt(s2 / pairs)
    t = t_upper((1 - level) / 2, pairs - 1)
    ends = values[np.repeat(ok, 2)]
    none = ends[0::2, 0]
    return ShapleyEstimate(
        phi,
        phi - t * se,
        phi + t * se,
        se,
        float(phi.sum()),
        float(ends[:, -1].mean()),
        float(ends[:, 0].mean()),
        level,
        pairs,
        float(none.std(ddof=1) / math.sqrt(pairs)),
        pairs,
    )
