"""The suite: cases (model, parameters, min_effect), the metrics over seeded replications, the grid.

Every replication of every method on a case uses the same seeds (seed-matched comparisons in one run).
Exact answers come from `car.sim.planted.truth`; nothing is hard-coded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.special import xlogy
from scipy.stats import binom

from bench.methods import CONTRASTIVE, fixed_replicates
from car.estimators.contrastive import estimate_contrastive
from car.sim import record, scenario_for
from car.sim.mdp import Corridor
from car.sim.planted import BinaryModel, ExactModel, Truth, truth

if TYPE_CHECKING:
    from car.trace import Trace

__all__ = [
    "Case",
    "certify_cell",
    "contrastive_cell",
    "fixed_exact_coverage",
    "interval_coverage",
    "lower_bound",
    "model_truth",
]


@dataclass(frozen=True)
class Case:
    model: str
    params: tuple[tuple[str, float], ...] = ()
    min_effect: float = 0.1
    label: str = ""

    def trace(self) -> Trace:
        """The case's recorded failing run."""
        # `params` name the model's parameters, never `seed` (the recording's seed stays 0).
        return record(self.model, **dict(self.params))  # type: ignore[arg-type]

    @property
    def name(self) -> str:
        if self.label:
            return self.label
        ps = ",".join(f"{k}={v:g}" for k, v in self.params)
        return f"{self.model}({ps})" if ps else self.model


def model_truth(case: Case) -> tuple[ExactModel, Truth]:
    model = scenario_for(case.model, None, **dict(case.params))
    assert isinstance(model, BinaryModel | Corridor)
    return model, truth(model)


@dataclass
class Cell:
    case: str
    method: str
    budget: int
    reps: int
    accuracy: float
    coverage: float  # per-step effect intervals, steps with 0 < p_k < 1
    width: float
    rollouts: float
    rollouts_max: int
    policy_calls: float
    correct: int
    certified: float | None = None
    wrong_certified: float | None = None
    rollouts_certified: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    exact_coverage: float | None = None  # car-fixed with a deterministic binary outcome: no seeds


def contrastive_cell(case: Case, method: str, budget: int, reps: int, seed0: int = 0) -> Cell:
    """Run `method` on `case` at `budget` for seeds seed0.. seed0+reps-1 and score it."""
    model, tr = model_truth(case)
    trace = case.trace()
    want = tr.locus(case.min_effect)
    eff = np.array(tr.effects)
    live = np.array([0 < p < 1 for p in tr.fail])
    run = CONTRASTIVE[method]
    correct = 0
    est: list[np.ndarray] = []
    lows: list[np.ndarray] = []
    highs: list[np.ndarray] = []
    rollouts: list[int] = []
    calls: list[int] = []
    cert: list[bool] = []
    wrong_cert = 0
    cert_rollouts: list[int] = []
    for s in range(seed0, seed0 + reps):
        rep = run(trace, s, budget, case.min_effect)
        correct += rep.locus == want
        est.append(rep.effect)
        lows.append(rep.low)
        highs.append(rep.high)
        rollouts.append(rep.rollouts)
        calls.append(rep.policy_calls)
        if rep.certified is not None:
            cert.append(rep.certified)
            if rep.certified:
                wrong_cert += rep.locus != want
                cert_rollouts.append(rep.rollouts)
    coverage, width = interval_coverage(np.array(est), np.array(lows), np.array(highs), eff, live)
    exact_cov = None
    if method == "car-fixed" and model.deterministic_outcome():
        n = fixed_replicates(budget, len(tr.fail), exact=True)
        exact_cov = fixed_exact_coverage(tr.fail, n, case.min_effect)
    return Cell(
        case.name,
        method,
        budget,
        reps,
        correct / reps,
        coverage,
        width,
        float(np.mean(rollouts)),
        int(np.max(rollouts)),
        float(np.mean(calls)),
        correct,
        float(np.mean(cert)) if cert else None,
        wrong_cert / reps if cert else None,
        float(np.median(cert_rollouts)) if cert_rollouts else None,
        exact_coverage=exact_cov,
    )


def interval_coverage(
    est: np.ndarray, low: np.ndarray, high: np.ndarray, truth: np.ndarray, live: np.ndarray
) -> tuple[float, float]:
    """Coverage and mean width of intervals (seeds x quantities) over the informative quantities.

    A quantity counts when `live` says so (a step's failure rate strictly between 0 and 1) and its
    estimate is not the truth on every seed: an estimate that cannot vary (a step or player that never
    changes anything, with shared noise) covers whatever its interval, which says nothing about it.
    """
    exact = np.all(np.abs(est - truth) < 1e-12, axis=0)
    ok = (live & ~exact)[None, :] & ~np.isnan(est)
    if not ok.any():
        return math.nan, math.nan
    hit = (low <= truth + 1e-12) & (truth - 1e-12 <= high)
    return float(hit[ok].mean()), float((high - low)[ok].mean())


def fixed_exact_coverage(fail: tuple[float, ...], n: int, min_effect: float) -> float:
    """Exact coverage of the fixed design's effect intervals when the outcome is deterministic given
    the actions (the factual arm is known: 1) and every arm holds n independent binary outcomes.

    Arm k's failure count is Binomial(n, p_k) and its interval depends on that count alone, so the
    coverage is a sum over counts, taken through `estimate_contrastive` itself; averaged over the steps
    with 0 < p_k < 1 like the measured column, without its seed-to-seed noise.
    """
    live = [k for k, p in enumerate(fail) if 0 < p < 1]
    if not live:
        return math.nan
    covered = np.zeros(len(fail))
    for j in range(n + 1):
        arms = np.zeros((len(fail), n))
        arms[:, :j] = 1.0
        res = estimate_contrastive(arms, np.ones(1), factual_exact=True, min_effect=min_effect)
        for k in live:
            e, iv = 1 - fail[k], res.positions[k].effect
            if iv.low <= e + 1e-12 and e - 1e-12 <= iv.high:
                covered[k] += binom.pmf(j, n, fail[k])
    return float(np.mean(covered[live]))


def _kl(p: float, q: float) -> float:
    return float(xlogy(p, p / q) + xlogy(1 - p, (1 - p) / (1 - q)))


def lower_bound(case: Case, delta: float) -> float:
    """Samples any delta-correct test needs on the hardest step that decides the locus.

    Each step from the locus on must be told apart from the boundary effect `min_effect`; for a
    Bernoulli arm with failure rate p_k against the boundary v - min_effect, a delta-correct sequential
    test needs at least kl(delta, 1 - delta) / KL(p_k, boundary) samples in expectation (Kaufmann,
    Cappe and Garivier 2016). A row observes every arm at once, so the largest of these bounds the
    rollouts of any method from below. Deterministic-scorer models only (v exact).
    """
    _, tr = model_truth(case)
    locus = tr.locus(case.min_effect)
    start = 0 if locus is None else locus
    need = _kl(delta, 1 - delta)
    bounds = []
    for k in range(start, len(tr.fail)):
        boundary = tr.v_all - case.min_effect
        bounds.append(need / max(_kl(tr.fail[k], boundary), 1e-12))
    return max(bounds) if bounds else 0.0


def certify_cell(case: Case, budget: int, reps: int, seed0: int = 0) -> Cell:
    cell = contrastive_cell(case, "car-adaptive", budget, reps, seed0)
    cell.extra["lower_bound"] = lower_bound(case, 0.05)
    return cell
