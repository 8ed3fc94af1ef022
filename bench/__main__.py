"""`python -m bench [--quick]`: run the suite, print (or write) RESULTS.md, exit 1 if a target fails."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from bench.credit import IDEAL, SHAPLEY, ShapleyCell, ideal_exact_cell, shapley_cell
from bench.suite import Case, Cell, certify_cell, contrastive_cell
from bench.targets import (
    PIVOT,
    Target,
    check,
    rollouts_to,
    shapley_coverage,
    shapley_ratio_target,
)
from car.shapley import exact_cost

PIVOT_CASE = Case("planted-pivot", (("p", 0.9),), 0.0, PIVOT)
SHAPLEY_BUDGET = 320  # rollouts per Shapley cell
HEADLINE_BUDGET = 7680  # the paper's headline run: 80 pairs of walks x 4 coalitions x 12 rollouts
IDEAL_MAX_PLAYERS = 6  # the ideal exact design plays every coalition: 64 rollouts per replicate
IDEAL_REPLICATES = 1000  # per case: its variance to about 5% (2,000 took the suite past 10 min)
QUICK_SHAPLEY_FACTOR = 2.0  # the quick mode's guard: car's default vs paper-12 on planted-and

SEEDS = 200  # seeded replications per cell (the pivot target: 40)
# (case, decision steps): the contrastive grid of the full suite.
FULL_CASES: list[tuple[Case, int]] = [
    (Case("planted-pivot", (("p", 0.5),)), 3),
    (Case("planted-and"), 3),
    (Case("planted-or"), 3),
    (Case("chain"), 3),
    (Case("mediated"), 3),
    (Case("graded"), 4),
    (Case("cascade"), 6),
    (Case("noisy-judge"), 3),
    (Case("team"), 4),
    (Case("corridor"), 6),
    (Case("long", (("n", 30),)), 30),
]
STEPS = {case.model: m for case, m in FULL_CASES}
QUICK_CASES: list[tuple[Case, int]] = [
    (Case("planted-and"), 3),
    (Case("noisy-judge"), 3),
]
CERTIFY_FULL = [c for c, _ in FULL_CASES if c.model != "graded"]
CERTIFY_QUICK = [Case("planted-and"), Case("planted-pivot", (("p", 0.5),))]


def _jobs(quick: bool) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    grid: list[tuple[Any, ...]] = [
        (PIVOT_CASE, "paper", 48, 40),
        (PIVOT_CASE, "paper", 96, 40),
        (PIVOT_CASE, "car-fixed", 96, 40),
        (PIVOT_CASE, "car-rows", 96, 40),
        (PIVOT_CASE, "car-rows", 48, 40),
        (PIVOT_CASE, "car-adaptive", 96, 40),
    ]
    for case, m in QUICK_CASES if quick else FULL_CASES:
        high = max(96 * m, 200) if m < 10 else 32 * m
        budgets = [high] if quick or m >= 10 else [32 * m, high]
        for b in budgets:
            grid += [(case, "paper", b, SEEDS), (case, "car-fixed", b, SEEDS)]
        grid.append((case, "car-rows", high, SEEDS))
    certify = [
        (case, 5000, 100 if quick else SEEDS) for case in (CERTIFY_QUICK if quick else CERTIFY_FULL)
    ]
    shapley: list[tuple[Any, ...]] = []
    if quick:
        shapley = [
            (Case("planted-and"), m, 480, 50)
            for m in ("paper-1", "paper-12", "paper-1-shared", "car", "car-shared")
        ]
    else:
        # Every case of the suite (agent-level players on the team), every registered method.
        for case, m in FULL_CASES:
            agents = case.model == "team"
            if agents:
                case = Case(case.model, case.params, case.min_effect, "team (agents)")
            for method in SHAPLEY:
                if method.startswith("car-exact") and exact_cost(m, True) > SHAPLEY_BUDGET:
                    continue  # 2^m coalitions on each replicate: more than the cell's budget
                shapley.append((case, method, SHAPLEY_BUDGET, SEEDS, 0, agents))
            if m <= IDEAL_MAX_PLAYERS:  # it plays all 2^m coalitions of every replicate
                shapley.append((case, IDEAL, IDEAL_REPLICATES, agents))
        shapley.append((Case("planted-and"), "paper-12", HEADLINE_BUDGET, SEEDS))
    return grid, certify, shapley


def _work(args: tuple[Any, ...]) -> float:
    """A cell's rough cost, for scheduling: rollouts x seeds x decision steps."""
    case = args[0]
    if args[1] == IDEAL:  # (case, IDEAL, replicates, agents): every coalition of each
        return float(args[2] * 2 ** STEPS.get(case.model, 3))
    if isinstance(args[1], str):  # (case, method, budget, seeds, ...)
        budget, seeds = args[2], args[3]
    else:  # certification (case, cap, seeds): it stops at about a tenth of its cap
        budget, seeds = args[1] / 10, args[2]
    return float(budget * seeds * STEPS.get(case.model, 3))


def _run_grid(args: tuple[Any, ...]) -> Cell:
    return contrastive_cell(*args)


def _run_certify(args: tuple[Any, ...]) -> Cell:
    return certify_cell(*args)


def _run_shapley(args: tuple[Any, ...]) -> ShapleyCell:
    if args[1] == IDEAL:
        case, _, replicates, agents = args
        return ideal_exact_cell(case, replicates, agents, SHAPLEY_BUDGET)
    return shapley_cell(*args)


def _headline(shapley: list[ShapleyCell]) -> ShapleyCell | None:
    """The paper's headline run (paper-12 on planted-and at 7,680 rollouts): its RMSE is the target."""
    return next((x for x in shapley if x.budget == HEADLINE_BUDGET), None)


def _f(x: float | None, spec: str = ".3f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def render(
    command: str,
    grid: list[Cell],
    certify: list[Cell],
    shapley: list[ShapleyCell],
    targets: list[Target],
) -> str:
    out = [
        "# car validation and benchmark results",
        "",
        f"Regenerate with `{command}` (seeded: the same command gives the same numbers).",
        "Every method on a case runs on the same seeds; budgets and costs are rollouts, not times.",
        "",
        "## Targets",
        "",
        "| target | measured | wanted | status |",
        "|---|---|---|---|",
    ]
    for t in targets:
        status = "pass" if t.passed else ("FAIL" if t.gating else "miss (tracked)")
        out.append(f"| {t.name} | {t.measured} | {t.wanted} | {status} |")
    out += [
        "",
        "## Contrastive locus, per case, method and budget",
        "",
        "accuracy: share of seeds naming the exact locus (latest step whose effect exceeds the case's "
        "min_effect); coverage and width: nominal 95% per-step effect intervals, over steps whose "
        "failure rate is strictly between 0 and 1 and whose estimate is not exact on every seed; "
        "exact: car-fixed's coverage by summing over the binomial counts where the outcome is "
        "deterministic given the actions (no seed noise); rollouts: mean (max); calls: mean policy "
        "calls.",
        "",
        "| case | method | budget | seeds | accuracy | coverage | exact | width | rollouts (max) "
        "| calls |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in grid:
        out.append(
            f"| {c.case} | {c.method} | {c.budget} | {c.reps} | {c.correct}/{c.reps} | "
            f"{_f(c.coverage)} | {_f(c.exact_coverage)} | {_f(c.width)} | "
            f"{c.rollouts:.0f} ({c.rollouts_max}) | "
            f"{c.policy_calls:.0f} |"
        )
    out += [
        "",
        "## Certified locus (adaptive, delta = 0.05, min_effect 0.1, budget cap 5000)",
        "",
        "wrong: share of seeds certified with a wrong locus (must be <= delta); lower bound: samples a "
        "delta-correct test needs on the hardest deciding step, kl(delta, 1-delta) / KL(p_k, boundary) "
        "(one row samples every arm, so no method can use fewer rollouts in expectation).",
        "",
        "| case | seeds | certified | wrong | median rollouts | lower bound | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in certify:
        lb = c.extra.get("lower_bound", math.nan)
        ratio = (c.rollouts_certified or math.nan) / lb if lb else math.nan
        out.append(
            f"| {c.case} | {c.reps} | {_f(c.certified, '.0%')} | {_f(c.wrong_certified)} | "
            f"{_f(c.rollouts_certified, '.0f')} | {lb:.0f} | {_f(ratio, '.1f')} |"
        )
    out += [
        "",
        "## Shapley credit (the paper's estimators and car's, seed-matched)",
        "",
        "rmse of phi; share error: mean |phi_i / sum phi - true share|; coverage and width of the "
        "nominal 95% intervals, over players whose estimate is not exact on every seed; rollouts and "
        "calls: mean rollouts and policy calls spent; `car`: car's default (`auto`: fork-walks); "
        "`car-exact`: every coalition on each replicate (not run where 8 replicates of the 2^n "
        f"coalitions cost more than the cell's {SHAPLEY_BUDGET} rollouts); "
        "`-shared`: with shared seeds (the paper's: one replicate per walk shared by its "
        "coalitions; car's: forks continue on their replicate's noise).",
        "",
        "| case | method | budget | seeds | rmse | share error | coverage | width | rollouts | calls |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in shapley:
        if s.method == IDEAL:
            continue  # a cost model, not a method: in the table below
        out.append(
            f"| {s.case} | {s.method} | {s.budget} | {s.reps} | {s.rmse:.4f} | {s.share_error:.4f} "
            f"| {_f(s.coverage)} | {_f(s.width)} | {s.rollouts:.0f} | {_f(s.calls, '.0f')} |"
        )
    headline = _headline(shapley)
    if headline is not None:
        eps = headline.rmse
        out += [
            "",
            f"Rollouts to the paper's headline precision (RMSE {eps:.4f}: paper-12 on planted-and at "
            "its 7,680 rollouts), from each cell by the 1/budget variance law of independent walks, "
            "budget x (rmse / target)^2; ratios against paper-12 on the same case. "
            f"`{IDEAL}` is the exact design at its ideal cost, not a method car runs: each "
            "replicate's exact Shapley value (every coalition on its shared noise), charged only "
            "for its distinct runs (the record free where the scorer is deterministic); no exact "
            "design costs less "
            f"(cases of up to {IDEAL_MAX_PLAYERS} players; per-replicate variance x charge from "
            f"{IDEAL_REPLICATES:,} replicates, at {SHAPLEY_BUDGET} rollouts):",
            "",
            "| case | method | rollouts to target | paper-12 / method |",
            "|---|---|---|---|",
        ]
        for x in shapley:
            if x.budget == HEADLINE_BUDGET:
                continue
            need = rollouts_to(x, eps)
            base = next(
                (
                    y
                    for y in shapley
                    if y.case == x.case and y.method == "paper-12" and y.budget == x.budget
                ),
                None,
            )
            ratio = rollouts_to(base, eps) / need if base is not None else math.nan
            out.append(f"| {x.case} | {x.method} | {need:.0f} | {_f(ratio, '.1f')} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="the CI subset (10-20 s on 2 cores)")
    parser.add_argument("--out", help="write RESULTS markdown here (default: stdout)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    args = parser.parse_args(argv)
    command = "python -m bench" + (" --quick" if args.quick else "")
    grid_jobs, cert_jobs, shap_jobs = _jobs(args.quick)
    work: list[tuple[Callable[[tuple[Any, ...]], Any], tuple[Any, ...]]] = [
        *((_run_shapley, j) for j in shap_jobs),
        *((_run_certify, j) for j in cert_jobs),
        *((_run_grid, j) for j in grid_jobs),
    ]
    print(f"bench: {len(work)} cells on {args.jobs} worker(s)", file=sys.stderr)
    if args.jobs > 1:
        # Every cell at once, the most work first, so that no big cell starts last.
        with ProcessPoolExecutor(args.jobs) as pool:
            order = sorted(range(len(work)), key=lambda i: -_work(work[i][1]))
            futures = {i: pool.submit(work[i][0], work[i][1]) for i in order}
            done = [futures[i].result() for i in range(len(work))]
    else:
        done = [run(job) for run, job in work]
    shapley: list[ShapleyCell] = done[: len(shap_jobs)]
    certify: list[Cell] = done[len(shap_jobs) : len(shap_jobs) + len(cert_jobs)]
    grid: list[Cell] = done[len(shap_jobs) + len(cert_jobs) :]
    targets = check(grid, certify)
    head = _headline(shapley)
    for name in SHAPLEY:
        if name.startswith("paper") or head is None:
            continue
        # The issue's bar: 4x fewer rollouts than the paper's estimator, 8x with seed sharing. It
        # gates car as users get it (`auto`); exact enumeration is tracked.
        factor = 8 if name.endswith("shared") else 4
        gating = name in ("car", "car-shared")
        t = shapley_ratio_target(shapley, name, "paper-12", factor, head.rmse, gating)
        if t is not None:
            targets.append(t)
    if head is not None:
        # What the 8x bar asks of seed sharing, against the best an exact design could do on these
        # models: tracked, it measures the bar, not car.
        bound = shapley_ratio_target(
            shapley,
            IDEAL,
            "paper-12",
            8,
            head.rmse,
            gating=False,
            name=f"Shapley rollouts to the headline precision, exact design at its ideal cost "
            f"({IDEAL} vs paper-12)",
        )
        if bound is not None:
            targets.append(bound)
    targets += shapley_coverage(shapley)
    if args.quick:
        # A regression guard on one case at one budget (the issue's targets need the full suite):
        # car's default on planted-and measured 3.0x (2.6x with shared seeds) in the full run.
        for name in ("car", "car-shared"):
            guard = f"quick guard: Shapley rollouts for equal error, planted-and ({name} vs paper-12)"
            t = shapley_ratio_target(shapley, name, "paper-12", QUICK_SHAPLEY_FACTOR, 1.0, name=guard)
            if t is not None:
                targets.append(t)
    text = render(command, grid, certify, shapley, targets)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"bench: wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    failed = [t for t in targets if t.gating and not t.passed]
    for t in failed:
        print(f"bench: target failed: {t.name}: {t.measured} (wanted {t.wanted})", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
