"""Benchmark: rollouts each Shapley estimator needs to reach CAR's precision, side by side.

    python bench/shapley.py --car-runs 40 --runs 200 --calibrate 20   # bench/RESULTS-shapley.md
    python bench/shapley.py --quick                                    # a smoke run (few seeds)

For each planted model (AND, pivot: step players; research-team: agent players) it runs, through the
real replay engine and the simulated scenarios:

  (i)   CAR's configuration re-implemented from its description: antithetic pairs of orders (80
        orders and their reverses on AND), every coalition on every walk re-estimated with 12 fresh
        rollouts, v(empty) and v(N) included; a normal interval across walks.
  (ii)  exact: every coalition on each replicate (`car.shapley`, method "exact").
  (iii) fork-walks, every fork continued on a fresh replicate (no shared seeds).
  (iv)  fork-walks with shared seeds (common random numbers along a walk; car's default).

Precision is the 95% half-width averaged over the players whose exact value is not 0. CAR's
configuration is run first; each other method is then calibrated on a few seeds and re-run at the
budget predicted to match CAR's measured half-width (half-widths scale as 1/sqrt(rollouts)), and its
achieved half-width and coverage of the exact values are measured over many seeds.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

# tests/ is on the path from the line above, not to the type checker.
from shapley_truth import (  # type: ignore[import-not-found]
    and_game,
    brute_shapley,
    pivot_game,
    research_team_game,
)

from bench import run_sync
from car.replay import Plan, Replay
from car.shapley import parse_players, run_shapley
from car.sim import record
from car.specs import make_env, make_policy, make_scorer
from car.trace import Trace

CAR_PAIRS = 80
CAR_PER_COALITION = 12
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Model:
    name: str
    scenario: str
    players: str
    truth: tuple[float, ...]


MODELS = (
    Model("AND (q=0.3)", "and", "steps", tuple(brute_shapley(3, and_game()))),
    Model("pivot (p=0.3)", "pivot", "steps", tuple(brute_shapley(3, pivot_game()))),
    Model(
        "research-team (agents)",
        "research-team",
        "agents",
        tuple(brute_shapley(4, research_team_game(agents=True))),
    ),
)


@functools.cache
def _trace(scenario: str) -> Trace:
    return record(scenario)


def _replay(model: Model, seed: int) -> Replay:
    trace = _trace(model.scenario)
    spec = f"sim:{model.scenario}"
    return Replay(
        trace, make_policy(spec, trace), make_env(spec, trace), make_scorer(spec, trace), seed=seed
    )


async def _car(model: Model, seed: int, pairs: int) -> tuple[np.ndarray, np.ndarray, int]:
    """CAR's estimator: fresh rollouts for every coalition on every walk; CLT across walks."""
    replay = _replay(model, seed)
    _, players = parse_players(replay.trace, model.players)
    n = len(players)
    rng = np.random.default_rng([seed, 7])
    counter = iter(range(1 << 40))
    sem = asyncio.Semaphore(64)

    async def value(order: np.ndarray, k: int) -> float:
        held = frozenset(s for i in order[:k] for s in players[int(i)].steps)

        async def one() -> float:
            async with sem:
                r = await replay.run(Plan.hold(held), (3 << 60) + next(counter))
            return r.outcome

        vals = await asyncio.gather(*(one() for _ in range(CAR_PER_COALITION)))
        return float(np.nanmean(vals))

    async def walk(order: np.ndarray) -> np.ndarray:
        vals = await asyncio.gather(*(value(order, k) for k in range(n + 1)))
        marg = np.empty(n)
        marg[order] = np.diff(vals)
        return marg

    orders = []
    for _ in range(pairs):
        o = rng.permutation(n)
        orders += [o, o[::-1]]
    marg = np.array(await asyncio.gather(*(walk(o) for o in orders)))
    phi = marg.mean(axis=0)
    half = Z95 * marg.std(axis=0, ddof=1) / math.sqrt(len(marg))
    return phi, half, replay.counters.rollouts


async def _ours(
    model: Model, seed: int, method: str, budget: int, shared: bool
) -> tuple[np.ndarray, np.ndarray, int]:
    replay = _replay(model, seed)
    kind, players = parse_players(replay.trace, model.players)
    res = await run_shapley(
        replay,
        players,
        players_kind=kind,
        method=method,  # type: ignore[arg-type]
        budget=budget,
        shared_seeds=shared,
        concurrency=64,
    )
    return res.estimate.values, res.estimate.half_width, res.rollouts


def _one(args: tuple[Model, int, str, int]) -> tuple[np.ndarray, np.ndarray, int]:
    model, seed, method, budget = args
    _trace(model.scenario)  # recorded outside the event loop
    if method == "car":
        return run_sync(lambda: _car(model, seed, budget))
    if method == "exact":
        return run_sync(lambda: _ours(model, seed, "exact", budget, True))
    return run_sync(lambda: _ours(model, seed, "permutation", budget, method == "walks-shared"))


@dataclass
class Measured:
    rollouts: float
    half: float
    coverage: float
    runs: int


def measure(pool: ProcessPoolExecutor, model: Model, method: str, budget: int, runs: int) -> Measured:
    truth = np.array(model.truth)
    credited = np.abs(truth) > 1e-12
    out = list(pool.map(_one, [(model, seed, method, budget) for seed in range(runs)]))
    phi = np.array([o[0] for o in out])
    half = np.array([o[1] for o in out])
    used = np.array([o[2] for o in out])
    cover = (np.abs(phi - truth) <= half + 1e-12)[:, credited]
    return Measured(float(used.mean()), float(half[:, credited].mean()), float(cover.mean()), runs)


LABELS = {
    "car": "(i) CAR configuration",
    "exact": "(ii) exact per replicate",
    "walks-fresh": "(iii) fork-walks, fresh seeds",
    "walks-shared": "(iv) fork-walks, shared seeds",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--car-runs", type=int, default=60, help="seeded runs of CAR's configuration")
    ap.add_argument("--runs", type=int, default=200, help="seeded runs of each other method")
    ap.add_argument("--calibrate", type=int, default=30, help="runs to calibrate each budget")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="a smoke run: few seeds")
    args = ap.parse_args()
    if args.quick:
        args.car_runs, args.runs, args.calibrate = 6, 20, 6
    started = time.perf_counter()
    rows: list[str] = []
    with ProcessPoolExecutor(args.workers) as pool:
        for model in MODELS:
            car = measure(pool, model, "car", CAR_PAIRS, args.car_runs)
            print(f"{model.name}: CAR {car}", file=sys.stderr)
            rows.append(_row(model, "car", car, car))
            for method in ("exact", "walks-fresh", "walks-shared"):
                pilot_budget = 1000
                pilot = measure(pool, model, method, pilot_budget, args.calibrate)
                budget = max(60, round(pilot.rollouts * (pilot.half / car.half) ** 2))
                final = measure(pool, model, method, budget, args.runs)
                print(f"{model.name}: {method} budget {budget} {final}", file=sys.stderr)
                rows.append(_row(model, method, final, car))
    print(
        "| model | method | rollouts per run | 95% half-width | coverage | runs "
        "| rollouts at (i)'s half-width | fewer than (i) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(r)
    print(f"\n{time.perf_counter() - started:.0f} s", file=sys.stderr)


def _row(model: Model, method: str, m: Measured, car: Measured) -> str:
    # The calibrated budget lands near, not on, CAR's half-width: rescale by (half / CAR's)^2.
    equal = m.rollouts * (m.half / car.half) ** 2
    return (
        f"| {model.name} | {LABELS[method]} | {m.rollouts:,.0f} | {m.half:.4f} | "
        f"{m.coverage:.3f} | {m.runs} | {equal:,.0f} | {car.rollouts / equal:.1f}x |"
    )


if __name__ == "__main__":
    main()
