"""`blame`: the attribution entry point. Plan the rollouts, run them, estimate, report.

1. The factual arm (everything held) is the record copied: one scoring when the scorer is
   deterministic, otherwise `samples` replicates.
2. For each decision step k, `samples` replicates of "hold the decisions before k, resample from k
   on", replicate r of every arm sharing the noise of replicate r (common random numbers). They run as
   rows (`RowRunner`): on replicate r, a rollout that reproduced the record up to a later step's first
   change is that step's rollout too, draw for draw, and is not run again.
3. For each decision step, `match_samples` draws at the recorded context: the action-match rate.
4. `estimate_contrastive` turns the outcome matrix into rescue rates, effects, drops and a locus.
"""

from __future__ import annotations

import asyncio
import difflib
import inspect
import math
import os
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np

from car.arguments import JUDGE_SPEC, check_arguments, check_sampled_steps, parameters_of
from car.errors import InputError, SpecError, option_name, option_spec
from car.estimators.contrastive import (
    ContrastiveResult,
    Interval,
    estimate_contrastive,
    factual_interval,
)
from car.fallback import NEVER_RATE, NEVER_REPRODUCES, Method, precheck, shapley_into_report
from car.importers import load_any
from car.jsonfile import utf8_text
from car.protocols import Environment, Policy, Scorer
from car.replay import Replay, Reproductions, RowRunner, describe_error, gather_all
from car.report import (
    Budget,
    Estimate,
    Labelled,
    Report,
    Specs,
    StepReport,
    listed,
    many,
    percent,
    short,
)
from car.shapley import DEFAULT_BUDGET, Player, PlayersKind, ShapleyMethod
from car.specs import make_env, make_policy, make_scorer
from car.stats import mid_p
from car.trace import Trace, expected_of, no_decisions
from car.tracefiles import is_folder, is_pattern

if TYPE_CHECKING:
    from car.runner import Runner

__all__ = ["Progress", "blame", "blame_async", "nothing_to_attribute", "run_blocking"]

# (phase, done, total), counted within the phase: "match draws", "contrastive" (the arms' rollouts),
# "record" (in their place, the record re-scored by a noisy scorer when the match draws refused),
# "shapley" (total: its budget) or "adaptive" (total: its budget); each phase says (phase, 0, total)
# as it starts.
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class _Components:
    policy: Policy
    env: Environment
    scorer: Scorer


def _resolve(
    trace: Trace,
    policy: str | Policy | None,
    env: str | Environment | None,
    scorer: str | Scorer | None,
    origins: Mapping[str, str] | None = None,
) -> _Components:
    """`origins`: where a spec given by a configuration file or a `CAR_*` variable was set
    ("environment variable CAR_SCORER"), named in its error as an option's would be."""
    defaults = trace.replay
    pol = policy if policy is not None else (defaults.policy if defaults else None)
    if pol is None:
        raise InputError(f"trace {trace.id!r} names no policy: {policy_advice('it')}")
    en = env if env is not None else (defaults.env if defaults and defaults.env else "recorded")
    given = origins or {}
    with _named(given.get("policy") if policy is not None else None):
        built_policy = make_policy(pol, trace) if isinstance(pol, str) else pol
    with _named(given.get("env") if env is not None else None):
        built_env = make_env(en, trace) if isinstance(en, str) else en
    with _named(given.get("scorer") if scorer is not None else None):
        built_scorer = _resolve_scorer(trace, scorer)
    return _Components(built_policy, built_env, built_scorer)


def policy_advice(runs: str) -> str:
    """What to pass when no policy is named, for the model that recorded `runs` ("it", "them")."""
    model, other = option_spec("policy", "openai:MODEL"), option_spec("policy", "sim:NAME")
    return (
        f"pass the model that recorded {runs} ({model} or anthropic:MODEL, with "
        f"{option_name('base_url')} for a local server), or {other}, path/to/policy.py@name, or an "
        "installed plugin"
    )


@contextmanager
def _named(origin: str | None) -> Iterator[None]:
    """A spec error says where the spec was set, when that was not the command line or the trace."""
    try:
        yield
    except InputError as exc:  # a SpecError, or the component's own refusal (a regex that is not)
        if origin is None or exc.located:  # a setting beside the spec (`api_key_env`): named already
            raise
        kind = SpecError if isinstance(exc, SpecError) else InputError
        raise kind(f"{exc} (from {origin})") from exc


def _resolve_scorer(trace: Trace, scorer: str | Scorer | None) -> Scorer:
    """The scorer to use: the one given, else the trace's; only the scorer is built."""
    defaults = trace.replay
    sc = scorer if scorer is not None else (defaults.scorer if defaults else None)
    if sc is None:
        raise InputError(f"trace {trace.id!r} names no scorer: {_scorer_advice(trace)}")
    return make_scorer(sc, trace) if isinstance(sc, str) else sc


def _scorer_advice(trace: Trace) -> str:
    """The scorers that fit this trace. A judge fits any run (its rubric defaults to the recorded
    outcome), so it is always named; `tool-called:` only when the run called tools, with their names,
    and first then, being exact and free: a group chat (Who&When) calls none, and there the advice
    to score a tool call was a dead end. A trace that holds the expected answer (a Who&When import's
    ground truth) is checked against it by the judge's extract mode, named first then."""
    tools = sorted({c.name for s in trace.steps for c in s.action.tool_calls})
    called = ", ".join(tools[:5]) + (", ..." if len(tools) > 5 else "")

    def scorer(spec: str, quoted: bool = False) -> str:
        return option_spec("scorer", spec, quoted=quoted)

    tool = f"{scorer('tool-called:NAME')} (it called {called}), " if tools else ""
    rest = (
        f"{scorer('regex:PATTERN', True)} (on the final answer), or {scorer('path/to/scorer.py@name')}"
    )
    if expected_of(trace) is not None:
        extract = (
            f"{scorer(JUDGE_SPEC + '?mode=extract', True)} (a model reads each run's final answer, "
            "compared with the expected one; see car plugins)"
        )
        return f"it holds the expected answer, so pass {extract}, {tool}{rest}"
    judge = f"{scorer(JUDGE_SPEC, True)} (a model judges each run; see car plugins)"
    if not tools:
        return f"its steps call no tools, so pass {judge}, {rest}"
    return f"pass one: {tool}{judge}, {rest}"


def require_decisions(trace: Trace, path: str | None) -> None:
    """Refuse a trace with nothing to attribute, before any component is built."""
    problem = no_decisions(trace, path)
    if problem is not None:
        raise InputError(problem)


def prepare(
    trace: Trace | str | Path,
    policy: str | Policy | None,
    env: str | Environment | None,
    scorer: str | Scorer | None,
    *,
    seed: int,
    runner: Runner | None = None,
) -> tuple[Trace, str | None, _Components, Replay]:
    """Load the trace (any format car imports), build its components and the replay engine.

    With a `runner`, every rollout goes through the resumable store and the run's global limit.
    """
    path = None
    if isinstance(trace, bytes | bytearray) or not isinstance(trace, Trace | str | os.PathLike):
        raise TypeError(  # as `blame_many` says of its paths
            "trace: expected a car.Trace or a path (str or os.PathLike), "
            f"got {type(trace).__name__} {trace!r:.80}"
        )
    if not isinstance(trace, Trace) and not os.fspath(trace):  # '' would be '.', a directory
        raise InputError("trace: an empty path (''); name a trace file")
    if not isinstance(trace, Trace):
        path = str(trace)
        # What `car blame` takes as a batch: the function that attributes it is named.
        if is_folder(path):
            raise InputError(
                f"{path}: a directory; car.blame attributes one trace file, "
                f"car.blame_many({path!r}) every trace in it"
            )
        if is_pattern(path):
            raise InputError(
                f"{path}: a pattern; car.blame attributes one trace file, "
                f"car.blame_many({path!r}) every trace it matches"
            )
        trace = load_any(trace)
    elif trace.source is not None:
        path = trace.source.path
    require_decisions(trace, path)
    comps = _resolve(trace, policy, env, scorer)
    replay = Replay(trace, comps.policy, comps.env, comps.scorer, seed=seed)
    if runner is not None:
        replay = runner.bind(replay)
    return trace, path, comps, replay


async def blame_async(
    trace: Trace | str | Path,
    *,
    policy: str | Policy | None = None,
    env: str | Environment | None = None,
    scorer: str | Scorer | None = None,
    samples: int = 32,
    match_samples: int = 8,
    seed: int = 0,
    concurrency: int = 8,
    level: float = 0.95,
    min_effect: float = 0.1,
    max_error_rate: float = 0.5,
    progress: Progress | None = None,
    runner: Runner | None = None,
    method: Method = "auto",
    players: str = "steps",
    shapley_method: ShapleyMethod = "auto",
    budget: int | None = DEFAULT_BUDGET,
    budget_calls: int | None = None,
    target_width: float | None = None,
) -> Report:
    """Attribute the failure of `trace` to its steps. See `blame` for the arguments.

    `runner` (a `car.runner.Runner`) puts the resumable store and a global concurrency limit in
    front of every rollout; batch attribution (`car.batch`) passes one shared by all traces.
    """
    check_arguments(
        policy=policy,
        env=env,
        scorer=scorer,
        progress=progress,
        samples=samples,
        match_samples=match_samples,
        seed=seed,
        concurrency=concurrency,
        level=level,
        min_effect=min_effect,
        max_error_rate=max_error_rate,
        method=method,
        players=players,
        shapley_method=shapley_method,
        budget=budget,
        budget_calls=budget_calls,
        target_width=target_width,
    )
    # Options only Shapley uses: under --method auto a note names them if no rule fires.
    shapley_set = [
        option_name(name, str(value))
        for name, value, default in (
            ("players", players, "steps"),
            ("shapley_method", shapley_method, "auto"),
            ("budget", budget, DEFAULT_BUDGET),
            ("budget_calls", budget_calls, None),
            ("target_width", target_width, None),
        )
        if value is not None and value != default
    ]
    if method == "contrastive" and shapley_set:  # never ignored in silence, as on the command line
        raise InputError(
            f"{option_name('method', 'contrastive')} runs no Shapley, so {listed(shapley_set)} "
            f"would be ignored; drop {'it' if len(shapley_set) == 1 else 'them'}, or use "
            f"{option_name('method', 'auto')} or shapley"
        )
    budget = DEFAULT_BUDGET if budget is None else budget  # None: the default, as in BatchOptions
    trace, path, comps, replay = prepare(trace, policy, env, scorer, seed=seed, runner=runner)
    try:
        players_kind, shapley_players = check_contrastive(
            replay,
            method=method,
            players=players,
            shapley_method=shapley_method,
            budget=budget,
            budget_calls=budget_calls,
            samples=samples,
            match_samples=match_samples,
        )
        m = len(trace.decision_steps)
        exact = comps.scorer.deterministic
        # One row per replicate r < samples: every step's arm (and the factual arm unless the scorer
        # is deterministic) on replicate r. A rollout that reproduced the record up to a later step's
        # first change is that step's rollout too, draw for draw, so a row runs it once; the values
        # are those of running every arm alone. Rows keep values only: a rollout holds every turn of
        # its run, and keeping them all would cost memory in trace length times rollouts.
        rows = RowRunner(replay)
        row_arms = rows.arms()

        def phase(name: str, total: int) -> Callable[[], None]:
            """Say that phase `name` starts; the function that counts each of its rollouts or draws."""
            done = 0
            if progress is not None:
                progress(name, done, total)

            def tick() -> None:
                nonlocal done
                done += 1
                if progress is not None:
                    progress(name, done, total)

            return tick

        record = [await rows.record_value()] if exact else []
        observed: list[tuple[dict[int, float], int]] = []
        matches = None
        # The record scored costs no policy call: when the scorer says it did not fail (or cannot
        # score it) there is nothing to attribute, and no rollout or match draw is run to find that
        # out (nor a phase announced). A noisy scorer's factual arm runs in the rows, so it is known
        # only after them.
        unreproduced = False
        if not (exact and (math.isnan(record[0]) or record[0] == 0)):
            # The match draws first, at one policy call each: when they alone show that the policy
            # is not the recording agent, no step's rollouts are worth their calls (a noisy
            # scorer's factual arm still runs, calling no policy, to say whether the record failed).
            matches = await match_draws(
                replay, match_samples, concurrency, phase("match draws", m * match_samples)
            )
            unreproduced = never_reproduced(matches, level)
            arms_run = rows.arms(()) if unreproduced else row_arms
            if arms_run:
                tick = phase(
                    "record" if unreproduced else "contrastive", len(record) + samples * len(arms_run)
                )
                if exact:
                    tick()  # the record, scored
                rollouts = (rows.row(arms_run, r, tick) for r in range(samples))
                observed = await gather_all(rollouts, concurrency)
        arms, factual = rows.matrix([row for row, _ in observed], record)
        report = _report(
            trace,
            path,
            comps,
            replay,
            factual,
            arms,
            matches,
            samples=samples,
            match_samples=match_samples,
            seed=seed,
            level=level,
            min_effect=min_effect,
            max_error_rate=max_error_rate,
            seen=rows.seen,
            arms_skipped=unreproduced,
        )
        report = await shapley_into_report(
            report,
            replay,
            method=method,
            players_kind=players_kind,
            players=shapley_players,
            shapley_method=shapley_method,
            budget=budget,
            budget_calls=budget_calls,
            target_width=target_width,
            level=level,
            concurrency=concurrency,
            progress=progress,
            max_error_rate=max_error_rate,
            grant=runner.grant if runner is not None else None,
            options_set=shapley_set,
        )
    finally:
        # Backends report retries and capabilities, and hold connections: settle them whatever happened.
        component_notes = await _settle(comps)
    report.notes.extend(component_notes)
    return report


def check_contrastive(
    replay: Replay,
    *,
    method: Method,
    players: str,
    shapley_method: ShapleyMethod,
    budget: int | None = None,
    budget_calls: int | None = None,
    samples: int = 32,
    match_samples: int = 8,
    **_: Any,
) -> tuple[PlayersKind, list[Player]]:
    """What `blame_async` refuses once its components are built and before its first rollout:
    samples the trace's length makes too many to keep, the players, and a Shapley run the budget
    cannot pay (`precheck`). `car blame --dry-run` asks it too (other options are ignored: it takes
    a whole `BatchOptions.blame_kwargs()`)."""
    check_sampled_steps(len(replay.trace.decision_steps), samples=samples, match_samples=match_samples)
    return precheck(
        replay.trace,
        method=method,
        players=players,
        shapley_method=shapley_method,
        budget=DEFAULT_BUDGET if budget is None else budget,
        budget_calls=budget_calls,
        v_known=replay.scorer.deterministic,
        step_cap=replay.step_cap,
    )


def record_refusal(
    scorer: Scorer, values: Sequence[float], first_error: str | None = None
) -> str | None:
    """Why there is nothing to attribute when the scorer gave the recorded run `values` (none that
    is a number: it or its server failed on it, when the run's `first_error` is the scorer's, or it
    cannot score it; a mean of 0: it did not fail), or None: there is a failure."""
    scored = [v for v in values if not math.isnan(v)]
    if not scored and first_error is not None and first_error.startswith(("scorer ", "scoring: ")):
        return (
            f"the scorer failed on the recorded run ({first_error}), so there is no failure to "
            "compare against"
        )
    if not scored:
        return (
            f"the scorer {scorer.spec!r} cannot score the recorded run, so there is no "
            "failure to compare against"
        )
    if float(np.mean(scored)) == 0.0:
        return (
            f"the scorer {scorer.spec!r} says the recorded run did not fail (value 0): "
            "there is no failure to attribute; check the scorer"
        )
    return None


async def _settle(comps: _Components) -> list[str]:
    """Collect the components' own report lines (`notes()`) and close them (`aclose()`), if they
    have such methods: backends report retries, capabilities and judge noise, and hold connections."""
    notes: list[str] = []
    for comp in (comps.policy, comps.env, comps.scorer):
        get_notes = getattr(comp, "notes", None)
        if callable(get_notes):
            notes.extend(str(n) for n in get_notes())
        close = getattr(comp, "aclose", None)
        if callable(close):
            await close()
    return notes


def _never_upper(draws: int, level: float) -> float:
    """The upper end of the action-match rate's interval when none of `draws` took the record's."""
    return float(1 - ((1 - level) / 2) ** (1 / draws))


def never_reproduced(matches: np.ndarray | None, level: float) -> bool:
    """The match draws alone show that the policy is not the recording agent: none took its
    recorded action, and so many were drawn that its rate is below `NEVER_RATE`. Refusing on them
    before any rollout keeps the level of the rule that also counts the rollouts' draws: that rule
    refuses only where these draws took none as well."""
    if matches is None:
        return False
    drawn = int((~np.isnan(matches)).sum())
    return drawn > 0 and np.nansum(matches) == 0 and _never_upper(drawn, level) < NEVER_RATE


async def match_draws(
    replay: Replay, match_samples: int, concurrency: int, tick: Callable[[], None]
) -> np.ndarray | None:
    """Draw `match_samples` actions at each decision's recorded context: 1.0 where the draw's
    signature equals the recorded action's, 0.0 where not, NaN where the draw failed (it is left
    out, counted in `match_errors`, and the first failure is kept as `first_match_error`: the
    report's first error where no rollout erred). None when not measured (no draws, or every draw
    failed)."""
    trace = replay.trace
    decisions = trace.decision_steps
    if match_samples == 0:
        return None
    recorded = [trace.steps[d].action.signature() for d in decisions]

    async def draw(k: int, j: int) -> float:
        try:
            action = await replay.sample_recorded(decisions[k], j)
            hit = float(action.signature() == recorded[k])
        except Exception as exc:  # one failed draw costs that draw only
            replay.counters.match_errors += 1
            if replay.counters.first_match_error is None:
                replay.counters.first_match_error = (
                    f"match draw at step {decisions[k]}: {describe_error(exc)}"
                )
            hit = math.nan
        tick()  # not when cancelled: a draw stopped by an interrupt is not done
        return hit

    draws = (draw(k, j) for k in range(len(decisions)) for j in range(match_samples))
    matches = np.array(await gather_all(draws, concurrency)).reshape(len(decisions), match_samples)
    return None if np.isnan(matches).all() else matches


def _labelled(trace: Trace) -> Labelled | None:
    """The dataset's label of the decisive mistake, when an importer kept one (Who&When)."""
    label = trace.metadata.get("who_and_when")
    if not isinstance(label, dict):
        return None
    step, agent = label.get("mistake_step"), label.get("mistake_agent")
    if not isinstance(step, int) and not isinstance(agent, str):
        return None
    return Labelled(
        source="who-and-when",
        step=step if isinstance(step, int) and not isinstance(step, bool) else None,
        agent=agent if isinstance(agent, str) else None,
    )


@parameters_of(blame_async)
def blame(trace: Trace | str | Path, **options: Any) -> Report:
    """Attribute the failure of a recorded run to its steps, by intervention.

    `trace` is a `Trace` or a path to a trace file. `policy`, `env` and `scorer` are spec strings
    (`sim:support-refund`, `file.py@name`, ...) or objects implementing the protocols; they default to
    the trace's own built-in specs (and the `recorded` environment). `samples` rollouts per decision
    step, `match_samples` draws per step for the action-match rate, `seed` keys all randomness,
    `level` is the two-sided interval level, `min_effect` the smallest rescue effect that counts.

    Shapley credit (see docs/shapley.md): `method` is "auto" (Shapley when the contrastive estimator
    abstains or finds shared credit), "shapley" (always) or "contrastive" (never); `players` is
    "steps", "agents" or groups like "0,1;2,3"; `shapley_method` "auto", "exact" or "permutation";
    `budget` caps Shapley's rollouts, `budget_calls` its policy calls; `target_width` stops early
    once every interval half-width is at most that. With `method="contrastive"` these are an
    `InputError` when not at their defaults: nothing would use them.

    A `trace` that is neither a `car.Trace` nor a path is a `TypeError`; any other argument of the
    wrong type or out of range is an `InputError` naming it (`samples= must be at least 1, got 0`),
    before any work.

    When the scorer says the recorded run did not fail (or cannot score it) there is nothing to
    attribute: the report names no step and says why (`abstained_reason`, `factual`), and with a
    deterministic scorer that is found before any policy call. `car blame` and `blame_many` make
    such a trace an input error (`nothing_to_attribute`).

    From a running event loop (a Jupyter notebook, an async function) use
    `await car.blame_async(...)`: this function then raises RuntimeError saying so.

    >>> import car
    >>> report = car.blame("traces/support-refund.json", seed=1)
    >>> report.locus
    1
    """

    def advice(key: str) -> str | None:
        if key == "store":  # the closest keyword is `scorer`, which is no help
            return "; a store is car.blame_many()'s: car.blame_many(trace, store=...) resumes a trace"
        return None

    return run_blocking("blame", blame_async, trace, advice=advice, **options)


T = TypeVar("T")


def run_blocking(
    name: str,
    function: Callable[..., Coroutine[Any, Any, T]],
    *args: Any,
    advice: Callable[[str], str | None] | None = None,
    **kwargs: Any,
) -> T:
    """Run `car.<name>_async` (`function`) to completion for a caller without an event loop.

    A keyword it does not take is a TypeError naming `car.<name>()`, with `advice(keyword)` or the
    nearest keyword it does take. Inside a running loop the coroutine is never made (it would be
    left never awaited): the error says what to await."""
    taken = [p.name for p in inspect.signature(function).parameters.values() if p.kind is p.KEYWORD_ONLY]
    for key in kwargs:
        if key not in taken:
            close = difflib.get_close_matches(key, taken, n=1)
            hint = (advice(key) if advice else None) or (
                f"; did you mean {close[0]!r}?" if close else ""
            )
            raise TypeError(f"car.{name}() got an unexpected keyword argument {key!r}{hint}")
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass  # no loop running: the usual case
    else:
        raise RuntimeError(
            f"car.{name}() cannot run inside a running event loop (a Jupyter notebook, an async "
            f"function): use `await car.{name}_async(...)` there, with the same arguments"
        )
    # Out of the `except` above, so nothing the run raises reads as raised while handling it.
    return asyncio.run(function(*args, **kwargs))


def scorer_failed(first_error: str | None) -> bool:
    """Whether a run's first error is its scorer's (it raised, or answered what is no score): the
    scorer, user code or a built-in given the wrong options, is what to fix, not the backend. (A
    scorer's server that failed, a judge's, is a backend failure: its error starts "scoring: ".)"""
    return first_error is not None and first_error.startswith("scorer ")


def nothing_to_attribute(report: Report) -> str | None:
    """Why the scorer leaves nothing to attribute (it says the recorded run did not fail, or cannot
    score it), in the report's words; None otherwise. The batch makes such a trace an input error:
    the scorer, not the run, is what to check."""
    fact = report.factual.estimate
    return report.abstained_reason if fact is None or fact == 0 else None


def _est(iv: Interval) -> Estimate:
    return Estimate.of(iv.estimate, iv.low, iv.high, iv.n)


def _report(
    trace: Trace,
    path: str | None,
    comps: _Components,
    replay: Replay,
    factual: np.ndarray,
    arms: np.ndarray,
    matches: np.ndarray | None,
    *,
    samples: int,
    match_samples: int,
    seed: int,
    level: float,
    min_effect: float,
    max_error_rate: float,
    precomputed: ContrastiveResult | None = None,
    seen: Reproductions | None = None,
    arms_skipped: bool = False,
) -> Report:
    """The report of one contrastive analysis. `seen` counts the rollouts' own draws at recorded
    contexts: with the match draws, they decide whether a step was never reproduced.
    `arms_skipped`: no step's rollouts ran, because the match draws alone refused the policy."""
    from car import __version__

    decisions = trace.decision_steps
    notes: list[str] = []
    c = replay.counters
    fact_ok = factual[~np.isnan(factual)]
    result: ContrastiveResult | None = None
    abstain = record_refusal(comps.scorer, [float(v) for v in factual], c.first_error)

    match_by_pos: list[Estimate | None] = [None] * len(decisions)
    never: list[int] = []
    overall = Estimate(estimate=None, low=None, high=None, n=0)
    if matches is not None:
        draws = 0  # at recorded contexts: the match draws and the rollouts' own
        tried = 0  # steps with at least one such draw
        drawn = ~np.isnan(matches)  # a failed draw is left out
        for k in range(len(decisions)):
            hits, n = int(np.nansum(matches[k])), int(drawn[k].sum())
            if n:
                lo, hi = mid_p(hits, n, level)
                match_by_pos[k] = Estimate(estimate=hits / n, low=lo, high=hi, n=n)
            step_draws = n + (seen.draws[k] if seen is not None else 0)
            draws += step_draws
            tried += step_draws > 0
            # A step whose every draw failed was not seen at all: it did not fail to reproduce.
            if step_draws and hits == 0 and (seen is None or seen.hits[k] == 0):
                never.append(decisions[k])
        total_hits, total = int(np.nansum(matches)), int(drawn.sum())
        lo, hi = mid_p(total_hits, total, level)
        overall = Estimate(estimate=total_hits / total, low=lo, high=hi, n=total)
        if replay.counters.match_errors:
            failed = replay.counters.match_errors
            were = "was" if failed == 1 else "were"
            # With no errored rollout (whose note names the run's first error) the first error is
            # a match draw's, and this note is the only place the table and markdown can show it.
            first = (
                f"first: {c.first_match_error}" if not c.errors else "the first error is in the report"
            )
            notes.append(
                f"{failed} of {many(matches.size, 'match draw')} failed and {were} left out of the "
                f"action-match rate ({first})"
            )
        if never and len(never) == tried:
            # No draw took any recorded action. A wrong policy does that, but so does the recording
            # agent when its recorded actions were rare (a one-step trace of a 10% slip, 40 draws:
            # 1.5% of the time): refuse only when the draws show its rate is below NEVER_RATE.
            upper = _never_upper(draws, level)
            if upper < NEVER_RATE:
                notes.append(
                    f"the policy never reproduced any recorded action in {draws} draws at the "
                    f"recorded contexts (its rate is below {upper:.1%}): it is probably not the "
                    "agent that recorded this trace (another model or prompt)"
                )
                if arms_skipped and abstain is None:  # the refusal is the verdict
                    notes.append("no step's rollouts were run: the match draws alone decided that")
                abstain = abstain or NEVER_REPRODUCES
            else:
                notes.append(
                    f"the policy reproduced no recorded action in {draws} draws at the recorded "
                    f"contexts, too few to tell a rare action (a rate up to {upper:.0%} fits) from "
                    "another agent (another model or prompt): check the policy"
                )
        elif never:
            notes.append(
                f"step{'s' if len(never) > 1 else ''} {_join(never)} never reproduced the "
                "recorded action"
            )

    if abstain is None and precomputed is not None:  # e.g. adaptive sampling's anytime-valid result
        result = precomputed
    elif abstain is None:
        result = estimate_contrastive(
            arms,
            factual,
            factual_exact=comps.scorer.deterministic,
            level=level,
            min_effect=min_effect,
        )

    steps: list[StepReport] = []
    pos_of = {d: k for k, d in enumerate(decisions)}
    for s in trace.steps:
        pos = pos_of.get(s.index)
        sr = StepReport(
            index=s.index, actor=s.actor, decision=pos is not None, action=s.action.summary()
        )
        if pos is not None:
            sr.match_rate = match_by_pos[pos]
            sr.never_reproduced = s.index in never
            if result is not None:
                p = result.positions[pos]
                sr.rescue, sr.effect, sr.drop = _est(p.rescue), _est(p.effect), _est(p.drop)
                sr.verdict = p.verdict  # type: ignore[assignment]
        steps.append(sr)

    locus = largest = needed = None
    shared: list[int] = []
    if result is not None:
        locus = decisions[result.locus] if result.locus is not None else None
        largest = decisions[result.largest_drop] if result.largest_drop is not None else None
        shared = [decisions[k] for k in result.shared]
        abstain = result.abstained_reason
        needed = result.needed_per_step
        if locus is not None and largest is not None and largest != locus:
            notes.append(
                f"the largest single drop is at step {largest}, not at the locus (step {locus})"
            )
        if len(shared) >= 2:
            notes.append(f"credit looks shared: steps {_join(shared)} each carry a significant drop")
        # The rule names the latest step shown to matter: a later step with no scored rollout was
        # not looked at, so it could be the point of commitment.
        unseen = [
            decisions[p.position]
            for p in result.positions
            if p.effect.n == 0 and (result.locus is None or p.position > result.locus)
        ]
        if locus is not None and unseen:
            one = len(unseen) == 1
            notes.append(
                f"step{'' if one else 's'} {_join(unseen)} after the locus had no scored rollout "
                f"(every one errored or was unscorable): the locus holds only if "
                f"{'it is' if one else 'they are'} not where the run was decided"
            )

    if trace.fidelity is not None:
        # A policy that sends the record's reasoning back (anthropic: with Anthropic's own blocks)
        # answers the import's warning that replays leave it out.
        sent = getattr(comps.policy, "sends_reasoning", None)
        answered = {"thinking-not-replayed"} if sent is not None and sent(trace) else set()
        notes += [f"import: {w.message}" for w in trace.fidelity.warnings if w.code not in answered]

    errored = c.errors
    status: Literal["ok", "backend-errors"] = "ok"
    if c.erred_beyond(max_error_rate):
        status = "backend-errors"
    if errored:
        notes.append(_errored_note(errored, c.rollouts, c.first_error, locus is not None))
    if c.unscorable:
        notes.append(f"{many(c.unscorable, 'rollout')} could not be scored (excluded)")

    # The record's own value, whether or not there was anything to attribute.
    fact_exact = result.factual_exact if result is not None else comps.scorer.deterministic
    if len(fact_ok) == 0:
        fact_est = Estimate(estimate=None, low=None, high=None, n=0)
    elif fact_exact:
        v = float(fact_ok[0])
        fact_est = Estimate(estimate=v, low=v, high=v, n=1)
    else:
        fact_est = _est(result.factual if result is not None else factual_interval(factual, level))
    report = Report(
        car_version=__version__,
        trace_id=trace.id,
        trace_path=utf8_text(path) if path else path,
        trace_hash=trace.content_hash(),
        fidelity=trace.fidelity.class_ if trace.fidelity is not None else None,
        labelled=_labelled(trace),
        status=status,
        headline="",
        locus=locus,
        locus_actor=trace.steps[locus].actor if locus is not None else None,
        abstained_reason=abstain,
        rollouts_needed_per_step=needed,
        largest_drop=largest,
        shared=shared,
        factual=fact_est,
        factual_exact=bool(fact_exact and len(fact_ok) > 0),
        steps=steps,
        match_rate=overall,
        never_reproduced=never,
        divergence_rate=c.divergence_rate,
        first_error=c.first_error or c.first_match_error,
        notes=notes,
        budget=Budget(
            rollouts=c.rollouts,
            policy_calls=c.policy_calls,
            env_calls=c.env_calls,
            reused=c.reused,
            errored=errored,
            unscorable=c.unscorable,
            match_errors=c.match_errors,
        ),
        seed=seed,
        level=level,
        min_effect=min_effect,
        samples=samples,
        match_samples=match_samples,
        specs=Specs(policy=comps.policy.spec, env=comps.env.spec, scorer=comps.scorer.spec),
    )
    report.headline = headline(report)
    return report


# From this share of errored rollouts on, the note says the result rests on the rest alone.
MANY_ERRORS = 1 / 3


def _errored_note(errored: int, rollouts: int, first_error: str | None, has_locus: bool) -> str:
    """Why rollouts were left out, whatever their number: the count and the first error (it was in
    the JSON's `first_error` alone); when they are many, what the result rests on."""
    why = f" (first error: {first_error})" if first_error else ""
    head = (
        f"{errored} of {many(rollouts, 'rollout')} errored and {'is' if errored == 1 else 'are'} "
        f"excluded{why}"
    )
    rest = rollouts - errored
    if rest == 0:
        return f"{head}; none is left to estimate from"
    if errored >= MANY_ERRORS * rollouts:
        what = "the locus rests" if has_locus else "the result rests"
        return f"{head}; {what} on the other {rest} alone, biased if errors depend on what the agent did"
    return f"{head}; when errors depend on what the agent did, the remaining estimates are biased"


def _join(items: Sequence[int]) -> str:
    words = [str(i) for i in items]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def headline(report: Report) -> str:
    """One plain sentence saying where the run was decided (or why car cannot say)."""
    if report.locus is None:
        return f"car cannot name a decisive step: {report.abstained_reason}."
    s = report.steps[report.locus]
    assert s.effect is not None and s.effect.estimate is not None
    pct = f"{s.effect.estimate:.0%} [{s.effect.low:.0%}, {s.effect.high:.0%}]"
    later = [x.index for x in report.steps if x.decision and x.index > report.locus]
    # What the rule shows: no later step's effect is significantly above --min-effect (with few
    # samples a later step may still matter; it is not shown to). An adaptive run that stopped with
    # later steps undecided says so, and how much their intervals leave possible.
    # The bound quoted is the one that decides (over all steps), not the displayed per-step one: a
    # displayed upper end below --min-effect read as "decided" while the step was still open.
    undecided = [i for i in report.adaptive.open_steps if i > s.index] if report.adaptive else []
    upper = report.adaptive.open_upper if report.adaptive else None
    if undecided and upper is not None:
        one = len(undecided) == 1
        tail = (
            f"; step{'' if one else 's'} {_join(undecided)} {'is' if one else 'are'} still undecided "
            f"(re-deciding from {'it' if one else 'one of them'} may remove up to {upper:.0%} at "
            f"the level that decides, over all {sum(x.decision for x in report.steps)} steps)"
        )
    elif later:
        least = percent(report.min_effect)
        tail = f"; from step {later[0]} on, no step is shown to remove more than {least}"
    else:
        tail = ""
    return (
        f"Step {s.index} ({short(s.actor)}: {s.action}) is where the run was decided: re-deciding from "
        f"there removes {pct} of the failure{tail}."
    )
