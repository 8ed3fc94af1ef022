"""Contrastive methods, each run once per seeded replication through the real replay engine.

A method maps (trace, seed, budget) to a `Rep`: the locus it names, its per-step effect intervals and
what it spent. `budget` is total rollouts; fixed designs spend budget // m per decision step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from bench import run_sync
from car.adaptive import run_adaptive
from car.estimators.contrastive import PositionEstimate, estimate_contrastive
from car.estimators.paper import paper_contrastive
from car.replay import Plan, Replay, RowRunner
from car.sim import make
from car.trace import Trace

__all__ = ["CONTRASTIVE", "Rep", "fixed_replicates", "replay_for"]


@dataclass(frozen=True)
class Rep:
    locus: int | None
    effect: np.ndarray
    low: np.ndarray
    high: np.ndarray
    rollouts: int
    policy_calls: int
    certified: bool | None = None


def replay_for(trace: Trace, seed: int) -> Replay:
    name = str(trace.metadata["sim"]["scenario"])
    spec = f"sim:{name}"
    return Replay(
        trace,
        make("policy", name, trace, spec),
        make("env", name, trace, spec),
        make("scorer", name, trace, spec),
        seed=seed,
    )


def paper(trace: Trace, seed: int, budget: int, min_effect: float) -> Rep:
    """The paper's rule: K = budget // m fresh rollouts per step, bootstrap against the observed run."""
    replay = replay_for(trace, seed)
    decisions = trace.decision_steps
    m = len(decisions)
    k = max(budget // m, 1)

    async def go() -> np.ndarray:
        out = np.empty((m, k))
        for j, d in enumerate(decisions):
            plan = Plan.resample_from(trace, d)
            for i in range(k):  # independent rollouts: no replicate is shared between steps
                out[j, i] = (await replay.run(plan, j * k + i)).outcome
        return out

    arms = run_sync(go)
    res = paper_contrastive(arms, 1.0, np.random.default_rng([seed, 7]))
    c = replay.counters
    return Rep(res.locus, res.effect, res.low, res.high, c.rollouts, c.policy_calls)


def fixed_replicates(budget: int, m: int, exact: bool) -> int:
    """Replicates per step of the fixed design: the factual arm costs one rollout when it is exact."""
    return max((budget - (1 if exact else 0)) // (m + (0 if exact else 1)), 2)


def car_fixed(trace: Trace, seed: int, budget: int, min_effect: float) -> Rep:
    """`car blame`'s design: K = budget // m replicates, each a row of every step's arm (a rollout
    that reproduced the record up to a later arm's first change is that arm's too, so a row usually
    costs fewer than m rollouts; the values are those of every arm run alone)."""
    replay = replay_for(trace, seed)
    runner = RowRunner(replay)
    k = fixed_replicates(budget, runner.m, runner.exact)

    async def go() -> tuple[np.ndarray, np.ndarray]:
        record = [await runner.record_value()] if runner.exact else []
        rows = [(await runner.row(runner.arms(), r))[0] for r in range(k)]
        return runner.matrix(rows, record)

    arms, fact = run_sync(go)
    res = estimate_contrastive(arms, fact, factual_exact=runner.exact, min_effect=min_effect)
    return _rep(res.locus, res.positions, replay)


def _rep(
    locus: int | None,
    positions: Sequence[PositionEstimate],
    replay: Replay,
    certified: bool | None = None,
) -> Rep:
    """One replication's outcome: the locus, per-step effect intervals and what they cost."""
    return Rep(
        locus,
        np.array([p.effect.estimate for p in positions]),
        np.array([p.effect.low for p in positions]),
        np.array([p.effect.high for p in positions]),
        replay.counters.rollouts,
        replay.counters.policy_calls,
        certified,
    )


def car_rows(trace: Trace, seed: int, budget: int, min_effect: float) -> Rep:
    """The fixed estimator on rows with fork reuse: as many full rows as the budget pays for."""
    replay = replay_for(trace, seed)
    runner = RowRunner(replay)
    arms_all = runner.arms()

    async def go() -> tuple[np.ndarray, np.ndarray]:
        record = [await runner.record_value()] if runner.exact else []
        spent = len(record)
        rows: list[dict[int, float]] = []
        r = 1
        while budget - spent >= len(arms_all):
            out, cost = await runner.row(arms_all, r)
            rows.append(out)
            spent += cost
            r += 1
        return runner.matrix(rows, record)

    arms, fact = run_sync(go)
    res = estimate_contrastive(arms, fact, factual_exact=runner.exact, min_effect=min_effect)
    return _rep(res.locus, res.positions, replay)


def car_adaptive(trace: Trace, seed: int, budget: int, min_effect: float) -> Rep:
    """Adaptive rows with anytime-valid intervals, stopping when certified or at the budget."""
    replay = replay_for(trace, seed)
    run = run_sync(
        lambda: run_adaptive(replay, confidence=0.95, min_effect=min_effect, budget=budget, batch=8)
    )
    return _rep(run.state.locus, run.state.result.positions, replay, run.state.certified)


CONTRASTIVE: dict[str, Callable[[Trace, int, int, float], Rep]] = {
    "paper": paper,
    "car-fixed": car_fixed,
    "car-rows": car_rows,
    "car-adaptive": car_adaptive,
}
