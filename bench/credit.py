"""Shapley credit on planted models: the paper's permutation estimator and car's own, side by side.

A Shapley method is a function `(game, budget, rng) -> ShapleyEstimate`; `Game` runs rollouts of
"hold these players, resample the rest" through the real replay engine and counts them. car's
estimators run through `car.shapley.run_shapley` on the game's replay; another method joins the tables
with `register(name, method)`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from bench import run_sync
from bench.methods import replay_for
from bench.suite import Case, interval_coverage, model_truth
from car.estimators.paper import paper_shapley, paper_shapley_plan
from car.protocols import Mode
from car.replay import Plan, Rollout
from car.sim.planted import shapley_values

if TYPE_CHECKING:
    from car.shapley import ShapleyMethod

__all__ = [
    "IDEAL",
    "SHAPLEY",
    "Game",
    "ShapleyEstimate",
    "ideal_exact_cell",
    "register",
    "replicate_values",
    "shapley_cell",
]


@dataclass(frozen=True)
class ShapleyEstimate:
    values: np.ndarray
    low: np.ndarray
    high: np.ndarray
    rollouts: int


class Game:
    """v(S) by rollouts: players are groups of steps; a coalition holds its players' steps."""

    def __init__(self, case: Case, seed: int, players: Sequence[Sequence[int]] | None = None):
        self.trace = case.trace()
        self.replay = replay_for(self.trace, seed)
        n = len(self.trace.steps)
        self.players = [list(p) for p in players] if players else [[k] for k in range(n)]

    @property
    def n(self) -> int:
        return len(self.players)

    def runs(self, jobs: Sequence[tuple[frozenset[int], int]]) -> list[Rollout]:
        """Rollouts of (coalition of player indices, replicate) jobs, in order."""

        async def go() -> list[Rollout]:
            out = []
            for coalition, replicate in jobs:
                steps = [s for i in coalition for s in self.players[i]]
                out.append(await self.replay.run(Plan.hold(steps), replicate))
            return out

        return run_sync(go)

    def values(self, jobs: Sequence[tuple[frozenset[int], int]]) -> np.ndarray:
        """Outcomes of (coalition of player indices, replicate) jobs, in order (NaN if unscored)."""
        return np.array([r.outcome for r in self.runs(jobs)])

    @property
    def rollouts(self) -> int:
        return self.replay.counters.rollouts

    @property
    def policy_calls(self) -> int:
        return self.replay.counters.policy_calls


def _paper(
    per_coalition: int, shared: bool
) -> Callable[[Game, int, np.random.Generator], ShapleyEstimate]:
    def method(game: Game, budget: int, rng: np.random.Generator) -> ShapleyEstimate:
        n = game.n
        walks = max(2, budget // ((n + 1) * per_coalition))
        orders = paper_shapley_plan(n, walks, rng)
        jobs: list[tuple[frozenset[int], int]] = []
        fresh = 0
        for w, order in enumerate(orders):
            for j in range(n + 1):
                coalition = frozenset(int(x) for x in order[:j])
                for c in range(per_coalition):
                    # Without sharing every rollout gets its own replicate; with it, a walk's
                    # coalitions share the replicates of that walk.
                    rep = w * per_coalition + c if shared else fresh
                    fresh += 1
                    jobs.append((coalition, rep))
        out = game.values(jobs).reshape(len(orders), n + 1, per_coalition)
        est = paper_shapley(orders, np.nanmean(out, axis=2))
        return ShapleyEstimate(est.values, est.low, est.high, game.rollouts)

    return method


def _car(
    method: ShapleyMethod, shared: bool
) -> Callable[[Game, int, np.random.Generator], ShapleyEstimate]:
    """car's own Shapley estimators (`car.shapley.run_shapley`) on the suite's game."""

    def run(game: Game, budget: int, rng: np.random.Generator) -> ShapleyEstimate:
        from car.shapley import Player, run_shapley

        players = [Player(str(i), tuple(p)) for i, p in enumerate(game.players)]
        result = run_sync(
            lambda: run_shapley(game.replay, players, method=method, budget=budget, shared_seeds=shared)
        )
        est = result.estimate
        return ShapleyEstimate(est.values, est.low, est.high, game.rollouts)

    return run


IDEAL = "exact-ideal"  # the name of `ideal_exact_cell`'s rows: a cost model, not a method car runs

SHAPLEY: dict[str, Callable[[Game, int, np.random.Generator], ShapleyEstimate]] = {
    "paper-1": _paper(1, shared=False),
    "paper-12": _paper(12, shared=False),
    "paper-1-shared": _paper(1, shared=True),
    # car as a user gets it (`auto`: the fork-walks), and its exact enumeration for comparison.
    "car": _car("auto", shared=False),
    "car-shared": _car("auto", shared=True),
    "car-exact": _car("exact", shared=False),
    "car-exact-shared": _car("exact", shared=True),
}


def register(name: str, method: Callable[[Game, int, np.random.Generator], ShapleyEstimate]) -> None:
    """Add a Shapley method to every Shapley table of the suite."""
    SHAPLEY[name] = method


@dataclass
class ShapleyCell:
    case: str
    method: str
    budget: int
    reps: int
    rmse: float
    share_error: float
    coverage: float
    width: float
    rollouts: float
    calls: float


def _players(model: Any, agents: bool) -> list[list[int]]:
    """The game's players: the model's agents' steps if asked (and it has agents), else each step."""
    players = model.agents() if agents and hasattr(model, "agents") else None
    return [list(p) for p in players] if players else [[k] for k in range(model.size())]


def shapley_cell(
    case: Case, method: str, budget: int, reps: int, seed0: int = 0, agents: bool = False
) -> ShapleyCell:
    model, _ = model_truth(case)
    groups = _players(model, agents)
    phi = np.array(shapley_values(model, groups))
    share = phi / phi.sum()
    sq, err, spent, calls = 0.0, 0.0, [], []
    values, lows, highs = [], [], []
    for s in range(seed0, seed0 + reps):
        game = Game(case, s, groups)
        est = SHAPLEY[method](game, budget, np.random.default_rng([s, 11]))
        sq += float(np.mean((est.values - phi) ** 2))
        total = est.values.sum()
        err += float(np.mean(np.abs(est.values / total - share))) if total != 0 else 1.0
        values.append(est.values)
        lows.append(est.low)
        highs.append(est.high)
        spent.append(est.rollouts)
        calls.append(game.policy_calls)
    everyone = np.ones(len(phi), dtype=bool)
    coverage, width = interval_coverage(np.array(values), np.array(lows), np.array(highs), phi, everyone)
    return ShapleyCell(
        case.name,
        method,
        budget,
        reps,
        math.sqrt(sq / reps),
        err / reps,
        coverage,
        width,
        float(np.mean(spent)),
        float(np.mean(calls)),
    )


def _shapley_weights(n: int) -> np.ndarray:
    """`W[mask, i]`: phi_i = sum over masks of W[mask, i] v(mask), players i in bit i of mask."""
    w = np.zeros((2**n, n))
    for mask in range(2**n):
        k = mask.bit_count()
        for i in range(n):
            if mask >> i & 1:
                w[mask, i] = math.factorial(k - 1) * math.factorial(n - k) / math.factorial(n)
            else:
                w[mask, i] = -math.factorial(k) * math.factorial(n - k - 1) / math.factorial(n)
    return w


def replicate_values(case: Case, replicates: int, agents: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Each replicate's exact Shapley values (every coalition played on the replicate's shared noise;
    their mean is phi) and its charge: the distinct runs among them, the least any method must see to
    learn those values. The record (every player held) is free only when the scorer is
    deterministic; a noisy judge's score of it is a draw of the replicate like any other run's."""
    model, _ = model_truth(case)
    game = Game(case, 0, _players(model, agents))
    n = game.n
    weights = _shapley_weights(n)
    coalitions = [frozenset(j for j in range(n) if mask >> j & 1) for mask in range(2**n)]
    phis, charges = [], []
    for r in range(replicates):
        runs = game.runs([(c, r) for c in coalitions])
        if any(t.mode != Mode.COPIED for t in runs[-1].turns):
            raise ValueError(f"{case.name}: the players leave a decision step out of the game")
        distinct = {tuple(t.identity() for t in run.turns) for run in runs}
        if game.replay.scorer.deterministic:
            distinct.discard(tuple(t.identity() for t in runs[-1].turns))  # the record
        charges.append(len(distinct))
        phis.append(np.array([run.outcome for run in runs]) @ weights)
    return np.array(phis), np.array(charges, dtype=float)


def ideal_exact_cell(
    case: Case, replicates: int, agents: bool = False, budget: int = 320
) -> ShapleyCell:
    """The exact design at its ideal cost, not a method car runs: each replicate's exact Shapley value,
    charged only for its distinct runs (`replicate_values`), at `budget` charged rollouts: RMSE =
    sqrt(mean variance x mean charge / budget), from `replicates` replicates (their variance, not a
    squared error per seed, so a few thousand pin it down). No exact design can cost less; designs
    that play fewer coalitions per replicate (walks) can, at more variance each."""
    phis, charges = replicate_values(case, replicates, agents)
    variance = float(phis.var(axis=0, ddof=1).mean())
    rmse = math.sqrt(variance * float(charges.mean()) / budget)
    nan = math.nan
    return ShapleyCell(case.name, IDEAL, budget, replicates, rmse, nan, nan, nan, budget, nan)
