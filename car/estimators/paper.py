"""The CAR paper's own estimators, re-implemented from its description, as baselines.

They are here so that every claim car makes about doing better is measured against them side by side
(`python -m bench`), not so that anyone uses them for attribution. Both are pure functions of outcome
arrays, with the paper's choices kept on purpose, weaknesses included:

- `paper_contrastive`: K rollouts per step with the prefix held; each step's effect is the observed
  run's value (a sample of one, treated as certain) minus the step's mean outcome, with a percentile
  bootstrap interval; the locus is the latest step whose interval excludes 0. No multiplicity control.
- `paper_shapley_plan` / `paper_shapley`: permutation sampling with every walk paired with its
  reverse; every coalition on every walk (the empty set and N included) is valued by its own fresh
  rollouts (one or twelve per coalition); normal-approximation intervals over walks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from car.estimators.shapley import plan_walks, walk_marginals
from car.stats import z_upper

__all__ = [
    "PaperContrastive",
    "PaperShapley",
    "paper_contrastive",
    "paper_shapley",
    "paper_shapley_plan",
]


@dataclass(frozen=True)
class PaperContrastive:
    effect: np.ndarray  # observed - mean(arm k)
    low: np.ndarray
    high: np.ndarray
    locus: int | None
    level: float
    resamples: int


def paper_contrastive(
    arms: np.ndarray,
    observed: float,
    rng: np.random.Generator,
    *,
    resamples: int = 2000,
    level: float = 0.95,
) -> PaperContrastive:
    """Effects and the latest-significant locus from `arms[k, i]` (K outcomes per step)."""
    arms = np.asarray(arms, dtype=float)
    m, k = arms.shape
    effect = observed - arms.mean(axis=1)
    low = np.empty(m)
    high = np.empty(m)
    tail = (1 - level) / 2 * 100
    for j in range(m):
        idx = rng.integers(0, k, size=(resamples, k))
        boot = observed - arms[j][idx].mean(axis=1)
        low[j], high[j] = np.percentile(boot, [tail, 100 - tail])
    excludes = (low > 0) | (high < 0)
    hits = np.flatnonzero(excludes)
    locus = int(hits.max()) if len(hits) else None
    return PaperContrastive(effect, low, high, locus, level, resamples)


def paper_shapley_plan(n: int, walks: int, rng: np.random.Generator) -> np.ndarray:
    """`walks` player orders (rounded up to even): random permutations, each followed by its reverse."""
    return plan_walks(n, (walks + 1) // 2, rng)


@dataclass(frozen=True)
class PaperShapley:
    values: np.ndarray
    low: np.ndarray
    high: np.ndarray
    walks: int
    level: float


def paper_shapley(orders: np.ndarray, values: np.ndarray, *, level: float = 0.95) -> PaperShapley:
    """Shapley estimates from walks.

    `orders[w]` is walk w's player order; `values[w, j]` the estimated v of its first j players
    (j = 0..n, so `values[w, 0]` is v(empty) and `values[w, n]` is v(N)), each from fresh rollouts.
    """
    orders = np.asarray(orders)
    values = np.asarray(values, dtype=float)
    w, n = orders.shape
    marginals = walk_marginals(orders, values)
    phi = marginals.mean(axis=0)
    se = marginals.std(axis=0, ddof=1) / np.sqrt(w) if w > 1 else np.full(n, np.inf)
    z = z_upper((1 - level) / 2)
    return PaperShapley(phi, phi - z * se, phi + z * se, w, level)
