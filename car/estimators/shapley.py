"""Shapley estimators over players 0..n-1: pure functions of coalition outcomes (plan, then estimate).

Coalitions are bitmasks: bit i set means player i is held. Two estimators, both averaging independent
units and giving a Student-t interval across them:

- **Exact, per replicate.** Each unit is one replicate on which every coalition S was played with
  shared noise, so `phi_i(r) = sum_S c_iS y_r(S)` with `c_iS = w(|S|-1)` when i is in S and `-w(|S|)`
  when it is not, `w(s) = s!(n-s-1)!/n!`. Each unit is the exact Shapley value of that replicate's
  game: no order is sampled, so the only noise left is the replicate's own, and efficiency
  (`sum phi = y(N) - y(empty)`) holds per unit. `c_iS` depends only on |S| and on membership, so the
  coefficient matrix is built size-grouped in O(n 2^n).
- **Permutation walks.** Orders come in antithetic pairs (an order and its reverse). A walk gives one
  marginal per player; the two walks of a pair are dependent, so the independent unit is the pair's
  mean marginal.

Both intervals carry a variance floor: with coupled rollouts many units are exactly 0, and a plain
interval would claim certainty the data do not carry; and they widen towards the tail of a skewed
unit distribution (Johnson's correction, only ever widening). Outcomes are in [0, 1]; NaN marks a
rollout that errored or could not be scored (its unit is dropped).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from car.estimators.contrastive import factual_interval
from car.stats import skew_shift, t_upper

__all__ = [
    "MAX_EXACT_PLAYERS",
    "ShapleyEstimate",
    "coefficient_matrix",
    "estimate_replicates",
    "estimate_walks",
    "plan_walks",
    "popcounts",
    "shapley_weights",
    "walk_marginals",
]

MAX_EXACT_PLAYERS = 16  # 2^16 coalitions per replicate: beyond this, walks


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
    units: int  # independent units: replicates (exact) or pairs of walks (permutation)
    v_none_se: float = math.nan
    v_none_n: int = 0
    # v(empty)'s interval at `level`, as the contrastive arms' rates are shown: mid-p where its
    # outcomes are binary, Student-t with guards where graded (never zero-width)
    v_none_low: float = 0.0
    v_none_high: float = 1.0

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


def coefficient_matrix(n: int) -> np.ndarray:
    """The (n, 2^n) matrix C with `phi = C @ v` for a table v of coalition values."""
    _check_n(n)
    plus, minus = _coefficients(n)
    sizes = popcounts(n)
    masks = np.arange(1 << n, dtype=np.int64)
    inside = ((masks[None, :] >> np.arange(n)[:, None]) & 1).astype(bool)
    return np.asarray(np.where(inside, plus[sizes][None, :], -minus[sizes][None, :]))


def estimate_replicates(values: np.ndarray, *, level: float = 0.95) -> ShapleyEstimate:
    """phi from R replicates of the whole game: `values[r, S]` is replicate r's outcome of coalition S.

    Replicates with any NaN are dropped; the interval is Student-t across the rest, with the floor.
    """
    values = np.asarray(values, dtype=float)
    size = values.shape[1]
    n = size.bit_length() - 1
    if size != 1 << n:
        raise ValueError(f"expected 2^n coalition values per replicate, got {size}")
    values = values[~np.isnan(values).any(axis=1)]
    units = values @ coefficient_matrix(n).T
    return _t_estimate(units, values[:, -1], values[:, 0], level)


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
    """phi from antithetic pairs of walks, Student-t across pairs, with the variance floor.

    Pairs with any NaN value are dropped.
    """
    orders = np.asarray(orders)
    values = np.asarray(values, dtype=float)
    if len(orders) % 2:
        raise ValueError("walks come in antithetic pairs: expected an even number of orders")
    marg = walk_marginals(orders, values)
    units = (marg[0::2] + marg[1::2]) / 2
    ok = ~np.isnan(units).any(axis=1)
    ends = values[np.repeat(ok, 2)]
    return _t_estimate(units[ok], ends[:, -1], ends[0::2, 0], level, floor)


_ROUNDING = 1e-12  # below this a unit (a marginal of outcomes in [0, 1]) is rounding, not a marginal


def _t_estimate(
    units: np.ndarray,
    v_all: np.ndarray,
    v_none: np.ndarray,
    level: float,
    floor: bool = True,
) -> ShapleyEstimate:
    """Mean of independent unit vectors with a Student-t interval and the variance floor.

    The floor is the variance one unseen unit would add if it sat a full scale away (`scale^2/(P+1)`,
    scale = the largest |unit| of any player, or 1 when every unit is 0): a player whose P units were
    all 0 gets a half-width of about `t * scale / P`, the order of the rule of three, instead of a
    zero-width interval. Where
    the units are skewed (a rare large marginal: a step whose re-decision seldom differs) the interval
    widens towards the tail by Johnson's correction (`car.stats.skew_shift`; `long`, 30 players, 36
    pairs covered 0.922 without it). A skewness estimated from few units can be large by chance (one
    rare marginal of a symmetric distribution), and shifting would then move the interval off the
    truth; so it only ever widens: the interval is the union of the t-interval and the shifted one.
    """
    count, _n = units.shape
    if count < 2:
        raise ValueError("the interval needs at least two complete independent units")
    # A unit made of equal values is 0 up to rounding (the exact design's coefficients leave
    # 1e-16 where every coalition failed alike): read as what it is, it would make the floor's scale
    # 1e-16 and the interval a point.
    units = np.where(np.abs(units) < _ROUNDING, 0.0, units)
    phi = units.mean(axis=0)
    s2 = units.var(axis=0, ddof=1)
    floored = np.zeros(s2.shape, dtype=bool)
    if floor:
        # No marginal seen anywhere (no rollout was ever rescued) says little: fall back to the
        # largest a marginal of outcomes in [0, 1] can be, as the contrastive floor does.
        scale = float(np.abs(units).max()) or 1.0
        floored = s2 < scale * scale / (count + 1)
        s2 = np.maximum(s2, scale * scale / (count + 1))
    se = np.sqrt(s2 / count)
    t = t_upper((1 - level) / 2, count - 1)
    widen = np.where(floored, 0.0, skew_shift(units, t)) * se
    none = factual_interval(v_none, level)
    return ShapleyEstimate(
        phi,
        phi - t * se + np.minimum(widen, 0.0),
        phi + t * se + np.maximum(widen, 0.0),
        se,
        float(phi.sum()),
        float(v_all.mean()),
        float(v_none.mean()),
        level,
        count,
        float(v_none.std(ddof=1) / math.sqrt(count)),
        count,
        none.low,
        none.high,
    )
