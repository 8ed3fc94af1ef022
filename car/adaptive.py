"""Adaptive, anytime-valid contrastive attribution: rollouts go where the locus is still undecided.

The loop works in *rows*. A row is one fresh replicate r on which every arm still in play is observed:
"resample from decision k" for the open positions k, plus the factual arm when the scorer is not
deterministic. Arms on the same replicate share every draw (event-keyed randomness), so when the
rollout of arm k reproduces the recorded turns up to decision j it *is* the rollout of arm j on that
replicate, draw for draw (the fork-reuse invariant): arm j is observed for free. A row therefore
costs one rollout per point where the replay leaves the record, not one per arm, and every cell of a
row is observed, so paired differences between arms stay unbiased.

After each batch of rows (`LOOK_ROWS` rows, or an eighth of the rows so far once that is more; never
the concurrency, so the report is the same at any `--concurrency`) `locus_state` re-decides each
position with
anytime-valid confidence sequences. Positions before the latest certainly-significant one cannot
change the answer and get no more rollouts; the loop stops when the locus is certified at the
requested confidence, when every open position's interval half-width is at most `target_width`, or when
the rollout budget is spent. Rows are only started when the budget can pay for all their arms, so the
budget is never exceeded and no row is cut short (a cut row would bias the estimate). A budget that
cannot pay for every step's first batch (`minimum_budget`) is refused before any rollout.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from car.arguments import check_arguments, check_sampled_steps
from car.errors import BudgetError, InputError, flag_name, option_name
from car.estimators.sequential import LocusState, locus_state
from car.protocols import Environment, Policy, Scorer
from car.replay import Replay, Reproductions, RowRunner, gather_all
from car.report import Adaptive, Report, many, percent
from car.trace import Trace

if TYPE_CHECKING:
    from car.runner import Runner

__all__ = [
    "LOOK_ROWS",
    "ROLLOUTS_PER_STEP",
    "AdaptiveRun",
    "blame_adaptive_async",
    "check_adaptive",
    "minimum_budget",
    "run_adaptive",
]

ROLLOUTS_PER_STEP = 32  # the default budget: this many rollouts per decision step
LOOK_ROWS = 8  # rows between the first looks (then an eighth of the rows so far)

Stop = Literal["certified", "target-width", "budget", "nothing-to-attribute"]


@dataclass
class AdaptiveRun:
    """What the loop gathered and decided."""

    arms: np.ndarray  # (m, rows), NaN = not observed in that row
    factual: np.ndarray  # (rows,) or (1,) when exact
    state: LocusState
    stopped: Stop
    rollouts: int
    rows: int
    history: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)  # (rollouts, open)
    seen: Reproductions | None = None  # the rows' draws at recorded contexts


def unsampled(
    m: int, factual: np.ndarray, spent: int, *, confidence: float, min_effect: float, rows: int = 0
) -> AdaptiveRun:
    """A run that sampled no step's arm (nothing to attribute, or a refusal): the caller's report
    says why."""
    empty = np.full((m, 0), math.nan)
    state = locus_state(
        empty, np.array([1.0]), factual_exact=True, confidence=confidence, min_effect=min_effect
    )
    return AdaptiveRun(empty, factual, state, "nothing-to-attribute", spent, rows)


async def run_adaptive(
    replay: Replay,
    *,
    record: float | None = None,
    confidence: float = 0.95,
    min_effect: float = 0.1,
    budget: int = 1000,
    target_width: float | None = None,
    batch: int = 8,
    concurrency: int = 8,
    progress: Callable[[str, int, int], None] | None = None,
) -> AdaptiveRun:
    """The allocation loop (see the module docstring). `budget` counts rollouts, the factual included;
    `record` is the record's value when the caller has scored it already (a deterministic scorer)."""
    runner = RowRunner(replay)
    m = runner.m
    exact = runner.exact
    spent = 0
    factual_cells: list[float] = []
    if exact:
        factual_cells.append(await runner.record_value() if record is None else record)
        spent += 1
    cells: list[dict[int, float]] = []
    state: LocusState | None = None
    history: list[tuple[int, tuple[int, ...]]] = []
    open_arms: tuple[int, ...] = tuple(range(m))
    stopped: Stop = "budget"
    replicate = 1 if exact else 0
    fact = np.array(factual_cells)
    if exact and (len(fact) == 0 or np.isnan(fact[0]) or fact[0] == 0):
        # Nothing to attribute (or nothing scorable): the caller's report explains it.
        return unsampled(m, fact, spent, confidence=confidence, min_effect=min_effect)

    def decide(previous: LocusState | None, drops: bool) -> tuple[np.ndarray, np.ndarray, LocusState]:
        """The outcome matrices so far and the locus decided on them (drops: the final report's)."""
        arms, factual = runner.matrix(cells, factual_cells)
        return (
            arms,
            factual,
            locus_state(
                arms,
                factual,
                factual_exact=exact,
                confidence=confidence,
                min_effect=min_effect,
                previous=previous,
                drops=drops,
                steps=runner.decisions,
            ),
        )

    if progress is not None:
        progress("adaptive", spent, budget)
    while True:
        row_arms = runner.arms(open_arms)
        # Looks thin out geometrically (any look schedule is valid for a CS; fewer looks cost less).
        rows = min(max(batch, len(cells) // 8), (budget - spent) // max(len(row_arms), 1))
        if rows <= 0:
            stopped = "budget"
            break
        # Made as workers free up (gather_all); the range is fixed here, before `replicate` moves on.
        jobs = (runner.row(row_arms, r) for r in range(replicate, replicate + rows))
        replicate += rows
        for out, cost in await gather_all(jobs, limit=concurrency):
            spent += cost
            cells.append(out)
        arms, factual, state = decide(state, drops=False)
        open_arms = state.open
        history.append((spent, open_arms))
        if progress is not None:
            progress("adaptive", spent, budget)
        if state.certified:
            stopped = "certified"
            break
        if target_width is not None and all(
            (state.result.positions[k].effect.high - state.result.positions[k].effect.low) / 2
            <= target_width
            for k in open_arms
        ):
            stopped = "target-width"
            break
    arms, factual, state = decide(state, drops=True)
    return AdaptiveRun(arms, factual, state, stopped, spent, len(cells), history, runner.seen)


def minimum_budget(runner: RowRunner, batch: int = LOOK_ROWS) -> int:
    """The fewest rollouts with which `run_adaptive` gives every step its first batch: the record's
    scoring when the scorer is deterministic, then `batch` rows, each paid for at its worst (one
    rollout per arm). Less, and the first look comes with fewer rows, or none at all."""
    return int(runner.exact) + batch * len(runner.arms())


def _check_budget(runner: RowRunner, budget: int) -> None:
    need = minimum_budget(runner)
    if budget < need:
        record = "the record's scoring and " if runner.exact else ""
        raise BudgetError(
            f"adaptive sampling over {many(runner.m, 'decision step')} needs at least {need} "
            f"rollouts ({record}a first batch of {LOOK_ROWS} rows of up to "
            f"{many(len(runner.arms()), 'rollout')} each); {option_name('budget', str(budget))} is "
            "too small"
        )


def check_adaptive(
    replay: Replay,
    *,
    confidence: float,
    budget: int | None,
    target_width: float | None,
    min_effect: float,
    concurrency: int = 1,
    match_samples: int = 8,
    **_: object,
) -> int:
    """What `blame_adaptive_async` refuses once its components are built and before its first
    rollout; returns the budget (None: `ROLLOUTS_PER_STEP` per decision step). `car blame
    --dry-run` asks it too (other options are ignored: it takes `BatchOptions.blame_kwargs()`)."""
    check_sampled_steps(len(replay.trace.decision_steps), match_samples=match_samples)
    budget = ROLLOUTS_PER_STEP * len(replay.trace.decision_steps) if budget is None else budget
    check_arguments(confidence=confidence, target_width=target_width, concurrency=concurrency)
    if min_effect <= 0 and target_width is None:
        # A committed later step has effect exactly 0: certifying it "at most 0" needs a bound
        # of exactly 1 on its failure rate, which no finite sample gives.
        raise InputError(
            f"{flag_name('adaptive')} with {option_name('min_effect', '0')} can never certify (a "
            "step with no effect is never certified at or below 0) and would spend its whole "
            f"budget: give {option_name('min_effect')} above 0, or {option_name('target_width')} "
            "to stop on precision"
        )
    _check_budget(RowRunner(replay), budget)
    return budget


async def blame_adaptive_async(
    trace: Trace | str | Path,
    *,
    policy: str | Policy | None = None,
    env: str | Environment | None = None,
    scorer: str | Scorer | None = None,
    confidence: float = 0.95,
    budget: int | None = None,
    target_width: float | None = None,
    match_samples: int = 8,
    seed: int = 0,
    concurrency: int = 8,
    min_effect: float = 0.1,
    max_error_rate: float = 0.5,
    progress: Callable[[str, int, int], None] | None = None,
    runner: Runner | None = None,
) -> Report:
    """`blame` with adaptive, anytime-valid sampling; see `car.attribution.blame` for the shared options.

    `confidence` is both the level of every reported interval (confidence sequences, valid however
    the sampling stopped) and the certification level (delta = 1 - confidence). `budget` caps the
    rollouts (default: 32 per decision step; less than `minimum_budget` is a `BudgetError`);
    `target_width` stops once every still-open step's effect interval has at most this half-width.
    """
    from car.attribution import _report, _settle, headline, match_draws, never_reproduced, prepare
    from car.report import NEVER_REPRODUCES

    check_arguments(policy=policy, env=env, scorer=scorer, progress=progress)
    trace, path, comps, replay = prepare(trace, policy, env, scorer, seed=seed, runner=runner)
    try:
        decisions = trace.decision_steps
        budget = check_adaptive(
            replay,
            match_samples=match_samples,
            confidence=confidence,
            budget=budget,
            target_width=target_width,
            concurrency=concurrency,
            min_effect=min_effect,
        )
        # As `blame` does: the record scored (no policy call), then the match draws, and when they
        # alone show that the policy is not the recording agent, no step's arm is sampled (a noisy
        # scorer re-scores the record, calling no policy, to say whether it failed).
        rows = RowRunner(replay)
        record = await rows.record_value() if rows.exact else None
        nothing = record is not None and (math.isnan(record) or record == 0)
        matches = (
            None if nothing else await match_draws(replay, match_samples, concurrency, lambda: None)
        )
        refused = never_reproduced(matches, confidence)
        if refused:
            factual = np.array([record])
            if record is None:
                observed = await gather_all(
                    (rows.row(rows.arms(()), r) for r in range(LOOK_ROWS)), concurrency
                )
                factual = rows.matrix([row for row, _ in observed])[1]
            spent, n_rows = (1, 0) if record is not None else (LOOK_ROWS, LOOK_ROWS)
            run = unsampled(
                len(decisions), factual, spent, confidence=confidence, min_effect=min_effect, rows=n_rows
            )
        else:
            run = await run_adaptive(
                replay,
                record=record,
                confidence=confidence,
                min_effect=min_effect,
                budget=budget,
                target_width=target_width,
                batch=LOOK_ROWS,
                concurrency=concurrency,
                progress=progress,
            )
        report = _report(
            trace,
            path,
            comps,
            replay,
            run.factual,
            run.arms,
            matches,
            samples=int((~np.isnan(run.arms)).sum(axis=1).min()) if run.arms.size else 0,
            match_samples=match_samples,
            seed=seed,
            level=confidence,
            min_effect=min_effect,
            max_error_rate=max_error_rate,
            precomputed=run.state.result,
            seen=run.seen,
        )
        open_steps = [decisions[k] for k in run.state.open]
        # The report refused on what the rows showed (a noisy scorer's record that never failed, a
        # policy that is not the recording agent): the loop's state is not its answer.
        refusal = report.abstained_reason not in (None, run.state.result.abstained_reason)
        certified = (
            not refusal
            and run.state.certified
            and report.locus == (decisions[run.state.locus] if run.state.locus is not None else None)
        )
        level, least = percent(confidence), percent(min_effect)  # 99.9%, not "100%"
        if certified and report.locus is not None:
            statement = (
                f"certified at {level}: step {report.locus} is the latest step whose effect "
                f"exceeds {least}, and every later step's effect is at most {least}"
            )
        elif certified:
            statement = f"certified at {level}: no step's effect exceeds {least}"
        elif refused and report.abstained_reason == NEVER_REPRODUCES:
            statement = "not sampled: the match draws alone show the policy is not the recording agent"
        elif report.abstained_reason == NEVER_REPRODUCES:  # decided once the rows' draws counted too
            statement = (
                "not attributed: the match draws and the rollouts show the policy is not the "
                "recording agent"
            )
        elif run.stopped == "nothing-to-attribute" or refusal:
            statement = f"nothing to attribute: {report.abstained_reason}"
        else:
            why = {
                "budget": "the budget ran out",
                "target-width": f"every open step's interval half-width is at most {target_width}",
            }.get(run.stopped, "")
            which = ", ".join(map(str, open_steps))
            plural = "steps" if len(open_steps) > 1 else "step"
            statement = f"best guess, not certified at {level}: {why}; {plural} {which} still undecided"
        if run.stopped != "nothing-to-attribute":  # what it used of the budget it was given
            statement += f"; {run.rollouts:,} of {budget:,} rollouts used"
        report.adaptive = Adaptive(
            certified=certified,
            confidence=confidence,
            target_width=target_width,
            budget=budget,
            rollouts=run.rollouts,
            rows=run.rows,
            stopped=run.stopped,
            open_steps=open_steps,
            open_upper=max((run.state.decision_highs[k] for k in run.state.open), default=None),
            statement=statement,
        )
        report.notes.append(statement)  # rendered with the other notes: no renderer change needed
        prefix = "Certified" if certified else "Best guess"
        report.headline = headline(report)  # knows the open steps
        if not refusal:  # a refusal guesses nothing
            report.headline = f"{prefix} ({level}): {report.headline}"
    finally:
        notes = await _settle(comps)  # backends' own lines; close their connections
    report.notes.extend(notes)
    return report
