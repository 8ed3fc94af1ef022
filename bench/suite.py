"""The suite: cases (model, parameters, min_effect), the metrics over seeded replications, the grid.

Every replication of every method on a case uses the same seeds (seed-matched comparisons in one run).
Exact answers come from `car.sim.planted.truth`; nothing is hard-coded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import xlogy

from bench.methods import CONTRASTIVE
from car.sim import record, scenario_for
from car.sim.mdp import Corridor
from car.sim.planted import BinaryModel, ExactModel, Truth, truth

__all__ = ["Case", "certify_cell", "contrastive_cell", "lower_bound", "model_truth"]


@dataclass(frozen=True)
class Case:
    model: str
    params: tuple[tuple[str, float], ...] = ()
    min_effect: float = 0.1
    label: str = ""

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


def contrastive_cell(case: Case, method: str, budget: int, reps: int, seed0: int = 0) -> Cell:
    """Run `method` on `case` at `budget` for seeds seed0.. seed0+reps-1 and score it."""
    _, tr = model_truth(case)
    trace = record(case.model, **dict(case.params))
    want = tr.locus(case.min_effect)
    eff = np.array(tr.effects)
    live = np.array([0 < p < 1 for p in tr.fail])
    run = CONTRASTIVE[method]
    correct, covered, counted, widths = 0, 0, 0, 0.0
    rollouts: list[int] = []
    calls: list[int] = []
    cert: list[bool] = []
    wrong_cert = 0
    cert_rollouts: list[int] = []
    for s in range(seed0, seed0 + reps):
        rep = run(trace, s, budget, case.min_effect)
        correct += rep.locus == want
        ok = live & ~np.isnan(rep.effect)
        covered += int(np.sum((rep.low[ok] <= eff[ok] + 1e-12) & (eff[ok] - 1e-12 <= rep.high[ok])))
        counted += int(ok.sum())
        widths += float(np.sum(rep.high[ok] - rep.low[ok]))
        rollouts.append(rep.rollouts)
        calls.append(rep.policy_calls)
        if rep.certified is not None:
            cert.append(rep.certified)
            if rep.certified:
                wrong_cert += rep.locus != want
                cert_rollouts.append(rep.rollouts)
    return Cell(
        case.name,
        method,
        budget,
        reps,
        correct / reps,
        covered / counted if counted else math.nan,
        widths / counted if counted else math.nan,
        float(np.mean(rollouts)),
        int(np.max(rollouts)),
        float(np.mean(calls)),
        correct,
        float(np.mean(cert)) if cert else None,
        wrong_cert / reps if cert else None,
        float(np.median(cert_rollouts)) if cert_rollouts else None,
    )


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
