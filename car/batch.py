"""Batch attribution: many traces, one global concurrency limit, one record per trace, nothing lost.

    >>> import car
    >>> results = car.blame_many(["traces/"], options=car.BatchOptions(samples=16))
    >>> [(r.label, r.status, r.report.locus if r.report else r.error) for r in results][:2]
    [('traces/and.json', 'ok', 1), ('traces/long-and.json', 'ok', 8)]

Each trace becomes a `TraceResult`: its report, or the one-line error that stopped it (a bad file is
an input error, a backend that is down a backend error), plus the gates it tripped and its exit code.
A failing trace never stops the batch unless `fail_fast` is set. Every rollout goes through one
`car.runner.Runner`, so the store makes an interrupted batch resumable and the concurrency limit is
shared by all traces.
"""

from __future__ import annotations

import asyncio
import glob
import hashlib
import json
import os
import stat
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, TypeVar

from pydantic import BaseModel

from car.arguments import check_arguments, parameters_of
from car.errors import CarError, InputError, flag_name, one_line, option_name
from car.gates import EXIT_BACKEND, EXIT_GATE, EXIT_OK, EXIT_USAGE, Gates
from car.jsonfile import utf8_text
from car.protocols import Environment, Policy, Scorer
from car.report import Report, listed, many
from car.runner import Grant, Runner, usage_of
from car.store import RolloutCache, RolloutStore
from car.trace import Trace
from car.tracefiles import (
    TRACE_SUFFIXES,
    Entry,
    checked,
    is_folder,
    is_pattern,
    natural_key,
    walk,
)

if TYPE_CHECKING:  # car.fallback and car.shapley load numpy: not at import
    from car.fallback import Method
    from car.shapley import ShapleyMethod

T = TypeVar("T")

__all__ = [
    "ESTIMATE_VERSION",
    "INTERRUPTED_RUNNING",
    "INTERRUPTED_WAITING",
    "RECORD_VERSION",
    "BatchOptions",
    "BatchProgress",
    "BudgetGuard",
    "TraceResult",
    "WorkEstimate",
    "as_paths",
    "backend_failure",
    "blame_many",
    "blame_many_async",
    "check_caps",
    "check_trace",
    "deliver",
    "distinct",
    "estimate_trace",
    "expand",
    "expand_paths",
    "in_shard",
    "load_any_trace",
    "parse_shard",
    "result_key",
]

RECORD_VERSION = "car.record/v1"
ESTIMATE_VERSION = "car.estimate/v1"
Status = Literal["ok", "gate", "input-error", "backend-error", "budget", "interrupted"]
_EXIT = {"ok": EXIT_OK, "gate": EXIT_GATE, "input-error": EXIT_USAGE, "backend-error": EXIT_BACKEND}
# Not attributed: skipped for the budget, or the run was stopped (Ctrl-C, SIGTERM) before it finished.
_EXIT["budget"] = _EXIT["interrupted"] = EXIT_GATE
# The error of an `interrupted` trace: one that was running, and one that never started.
INTERRUPTED_RUNNING = "not attributed: the run was interrupted before this trace finished"
INTERRUPTED_WAITING = "not attributed: the run was interrupted before this trace started"
# What `blame_many` takes: one path (a file, a directory or a glob), or several.
Paths = str | os.PathLike[str] | Iterable[str | os.PathLike[str]]


# -- inputs -------------------------------------------------------------------------------------
def as_paths(paths: Paths) -> list[str | os.PathLike[str]]:
    """`paths` as a list: one `str` or `os.PathLike` is one path (never its characters)."""
    if isinstance(paths, str | os.PathLike):
        return [paths]
    what = "paths: expected a path or a list of paths (str or os.PathLike)"
    # A trace in memory (its JSON, a `Trace`) iterates over its keys or fields, none of them a path.
    in_memory = "; blame_many reads trace files, and car.blame(trace) attributes a car.Trace"
    if isinstance(paths, bytes | bytearray | Mapping | BaseModel) or not isinstance(paths, Iterable):
        hint = in_memory if isinstance(paths, Mapping | BaseModel) else ""
        raise TypeError(f"{what}, got {type(paths).__name__} {paths!r:.80}{hint}")
    items = list(paths)
    for item in items:
        if not isinstance(item, str | os.PathLike):
            hint = in_memory if isinstance(item, Mapping | BaseModel) else ""
            raise TypeError(f"{what}, got a list holding {type(item).__name__} {item!r:.80}{hint}")
        if not os.fspath(item):  # '' would be '.', the working directory
            raise InputError(
                "an empty path (''); name a trace file, a directory ('.' for this one) or a glob"
            )
    return items


def expand(items: Paths, exclude: Callable[[Path], bool] | None = None) -> list[Entry]:
    """Files named directly, the trace files under each directory (`car.tracefiles`: the rule
    `car validate` follows too) and glob matches, in a stable order without duplicates.

    A directory or glob that matches nothing is an input error; a missing plain file is kept, so it
    becomes that trace's error record, and so is an entry of a directory that cannot be read or
    checked (an `Entry` with its error). `exclude` drops files a directory or glob found (a run's own
    outputs, written there by its last run); a file named directly is always kept.
    """

    def wanted(e: Entry) -> bool:
        return e.error is not None or exclude is None or not exclude(Path(e.path))

    out: list[Entry] = []
    for item in as_paths(items):
        text = os.fspath(item)
        if is_folder(text):
            found = [e for e in walk(text) if wanted(e)]
            if not found:
                raise InputError(
                    f"{text}: no trace files ({', '.join(TRACE_SUFFIXES)}) in this directory"
                )
        elif is_pattern(text):
            found = []
            # `**` follows links, round a loop too: an entry of a directory already matched through
            # another path is left out, as the walk of a folder walks a directory once (of the
            # paths to it, the one with the fewest parts is kept).
            places: set[tuple[int, int, str]] = set()
            matches = glob.glob(text, recursive=True)
            for match in sorted(matches, key=lambda m: (len(Path(m).parts), natural_key(m))):
                place = _place(match)
                if place is not None and place in places:
                    continue
                if place is not None:
                    places.add(place)
                what = checked(match)
                if isinstance(what, Entry):
                    found.append(what)
                elif stat.S_ISREG(what.st_mode) and wanted(Entry(match)):
                    found.append(Entry(match))
            found.sort(key=lambda e: natural_key(e.path))
            if not found:
                raise InputError(f"{text}: the pattern matches no file")
        else:
            found = [Entry(text)]
        out += found
    return distinct(out, lambda e: e.path)


def distinct(items: Iterable[T], path: Callable[[T], str]) -> list[T]:
    """`items` without those whose `path` names a file an earlier one named: `t/a.json` and
    `./t/a.json` are one trace, as are a file named directly and by a glob."""
    unique: dict[object, T] = {}
    for item in items:
        unique.setdefault(_place(path(item)) or path(item), item)
    return list(unique.values())


def _place(path: str) -> tuple[int, int, str] | None:
    """Which entry of which directory `path` names (None where its directory cannot be checked)."""
    try:
        info = os.stat(os.path.dirname(path) or ".")
    except OSError:
        return None
    return info.st_dev, info.st_ino, os.path.basename(path)


def expand_paths(items: Paths, exclude: Callable[[Path], bool] | None = None) -> list[str]:
    """The paths `expand` finds (`items`: one path, or a list of files, directories and globs)."""
    return [e.path for e in expand(items, exclude)]


def load_any_trace(path: str, fmt: str = "auto", item: int | None = None) -> Trace:
    """Load a trace in car's own format or any format car imports."""
    from car.importers import load_any

    return load_any(path, fmt, item)


def parse_shard(text: str) -> tuple[int, int]:
    """`K/N` with 1 <= K <= N (CI matrices number their jobs; pass 1-based K)."""
    try:
        k_text, n_text = text.split("/")
        k, n = int(k_text), int(n_text)
    except ValueError:
        raise InputError(f"--shard: expected K/N such as 1/4, got {text!r}") from None
    if not (n >= 1 and 1 <= k <= n):
        raise InputError(f"--shard {text}: K must be between 1 and N")
    return k, n


def in_shard(trace_id: str, shard: tuple[int, int]) -> bool:
    """Whether a trace belongs to shard K of N: a stable hash of its id (the same on every machine
    and Python version, unlike `hash`)."""
    k, n = shard
    digest = int.from_bytes(hashlib.sha256(trace_id.encode()).digest()[:8], "big")
    return digest % n == k - 1


# -- options and results ------------------------------------------------------------------------
@dataclass(frozen=True)
class BatchOptions:
    """What `blame` needs for every trace of a batch (picklable: the Ray executor ships it)."""

    policy: str | Policy | None = None  # None: the trace's own (see `car.blame`)
    env: str | Environment | None = None
    scorer: str | Scorer | None = None
    samples: int = 32
    match_samples: int = 8
    seed: int = 0
    level: float = 0.95
    min_effect: float = 0.1
    max_error_rate: float = 0.5
    gates: Gates = field(default_factory=Gates)
    prices: Mapping[str, float] = field(default_factory=dict)  # USD per million of each usage counter
    debug: bool = False
    source_format: str = "auto"  # --from: the importer to use (auto-detected by default)
    item: int | None = None  # --item: which run of a file that holds several
    adaptive: bool = False  # --adaptive: anytime-valid sampling until the locus is certified
    confidence: float = 0.95
    budget: int | None = None  # rollouts per trace for Shapley or the adaptive run (None: default)
    target_width: float | None = None  # stop once open intervals have at most this half-width
    method: Method = "auto"  # contrastive, shapley, or auto (Shapley when credit is shared)
    players: str = "steps"
    shapley_method: ShapleyMethod = "auto"
    budget_calls: int | None = None
    # The options the user set, each as they set it ('--samples 64', 'CAR_LEVEL=0.9'); None: every
    # option not at its default, shown as its keyword ('samples=64': a Python caller). See
    # `__post_init__`.
    given: Mapping[str, str] | None = None
    # Where each component spec not given on the command line was set ("environment variable
    # CAR_SCORER", "car.toml, key scorer"), keyed 'policy', 'env', 'scorer': a spec error names it.
    origins: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        """An option the user set that this run would not use is an error, never ignored in silence:
        --samples and --level with --adaptive, --confidence without it, the Shapley options where no
        Shapley runs (--budget and --target-width serve both --adaptive and Shapley)."""
        shapley = ["players", "shapley_method", "budget_calls"]
        adaptive = flag_name("adaptive")
        # (what ignores them, why, the options, the other way out)
        rules: list[tuple[str, str, list[str], str]]
        if self.adaptive:
            method = [] if self.method == "contrastive" else ["method"]  # contrastive is what it does
            out = f"drop {adaptive}"
            rules = [
                (
                    adaptive,
                    f"samples until certified (within {option_name('budget')})",
                    ["samples"],
                    out,
                ),
                (adaptive, f"reports its intervals at {option_name('confidence')}", ["level"], out),
                (adaptive, "runs no Shapley", method + shapley, out),
            ]
        else:
            rules = [
                (
                    f"without {adaptive}",
                    f"the intervals are at {option_name('level')}",
                    ["confidence"],
                    f"add {adaptive}",
                )
            ]
            if self.method == "contrastive":
                rules.append(
                    (
                        option_name("method", "contrastive"),
                        "runs no Shapley",
                        [*shapley, "budget", "target_width"],
                        f"use {option_name('method', 'auto')} or shapley",
                    )
                )
        fired = [
            (who, why, shown, fix)
            for who, why, names, fix in rules
            if (shown := [s for s in map(self._set_as, names) if s is not None])
        ]
        if not fired:
            return
        clauses = [  # one subject, its reasons: "--adaptive samples ... and runs no Shapley"
            f"{who} {listed([why for w, why, _, _ in fired if w == who])}"
            for who in dict.fromkeys(who for who, _, _, _ in fired)
        ]
        unused = [s for _, _, shown, _ in fired for s in shown]
        fixes = {fix for _, _, _, fix in fired}
        raise InputError(
            f"{listed(clauses)}, so {listed(unused)} would be ignored; drop "
            f"{'it' if len(unused) == 1 else 'them'}{f', or {fixes.pop()}' if len(fixes) == 1 else ''}"
        )

    def _set_as(self, name: str) -> str | None:
        """How the user set option `name` (None: they did not)."""
        if self.given is not None:
            return self.given.get(name)
        value = getattr(self, name)
        if value == _DEFAULTS[name]:
            return None
        return option_name(name, str(value))

    def blame_kwargs(self) -> dict[str, Any]:
        common = {
            "policy": self.policy,
            "env": self.env,
            "scorer": self.scorer,
            "match_samples": self.match_samples,
            "seed": self.seed,
            "min_effect": self.min_effect,
            "max_error_rate": self.max_error_rate,
        }
        if self.adaptive:
            return {
                **common,
                "confidence": self.confidence,
                "budget": self.budget,
                "target_width": self.target_width,
            }
        shapley: dict[str, Any] = {
            "method": self.method,
            "players": self.players,
            "shapley_method": self.shapley_method,
            "budget_calls": self.budget_calls,
            "target_width": self.target_width,
        }
        if self.budget is not None:
            shapley["budget"] = self.budget
        return {**common, **shapley, "samples": self.samples, "level": self.level}


_DEFAULTS = {f.name: f.default for f in fields(BatchOptions)}  # what a Python caller did not set


@dataclass
class TraceResult:
    """The outcome of one trace of a batch: a report, or the error that stopped it."""

    path: str
    trace_id: str | None
    status: Status
    report: Report | None = None
    error: str | None = None
    gates: list[str] = field(default_factory=list)
    # Rollouts this run computed, and those the store served (for an `interrupted` trace, until it
    # was stopped). None for a report read back on its own (`car report` of a store or of one
    # report's JSON), which does not say, and for a trace interrupted under Ray, whose worker never
    # said: not 0, which would read as a run that cost nothing (a report's `budget.rollouts` is the
    # run's total either way).
    fresh_rollouts: int | None = 0
    stored_rollouts: int | None = 0
    fresh_policy_calls: int = 0  # what the budget guard charges when there is no report
    # Tokens the components reported; None for a report read back on its own, which does not keep
    # them, and for a trace interrupted under Ray: not {}, which would read as a run that used none
    # (its cost is None then too).
    usage: dict[str, int] | None = field(default_factory=dict)
    cost: float | None = None
    # Re-rendered results only (`car report`): what sets this analysis apart from the others of its
    # trace, with its report id (`1a2b3c4d: samples 8`); None when the trace was analysed once.
    analysis: str | None = None

    @property
    def exit_code(self) -> int:
        return _EXIT[self.status]

    @property
    def label(self) -> str:
        name = self.path or self.trace_id or "?"
        return f"{name} [{self.analysis}]" if self.analysis else name

    def __post_init__(self) -> None:
        # A file name that is not UTF-8 could not be written to a report, a record or the store.
        self.path = utf8_text(self.path)
        if self.error is not None:
            self.error = utf8_text(self.error)

    def to_record(self) -> dict[str, Any]:
        """The JSONL record (`car.record/v1`)."""
        return {
            "version": RECORD_VERSION,
            "trace": self.path,
            "trace_id": self.trace_id,
            "status": self.status,
            "exit_code": self.exit_code,
            "error": self.error,
            "gates": self.gates,
            "rollouts": {"fresh": self.fresh_rollouts, "stored": self.stored_rollouts},
            "usage": self.usage,
            "cost_usd": self.cost,
            "report": self.report.model_dump(mode="json") if self.report is not None else None,
        }


@dataclass(frozen=True)
class WorkEstimate:
    """What a batch will cost before it runs (upper bounds where rollouts may run long)."""

    traces: int
    rollouts: int
    match_draws: int
    policy_calls: int  # if rollouts follow the recorded length
    unreadable: int = 0
    shapley_rollouts: int = 0  # at most this many more if Shapley runs (shared credit, abstention)

    def to_json(self) -> dict[str, Any]:
        """The estimate as `car.estimate/v1` (`car blame --dry-run --format json`)."""
        return {
            "version": ESTIMATE_VERSION,
            "traces": self.traces,
            "unreadable": self.unreadable,
            "rollouts": self.rollouts,
            "shapley_rollouts": self.shapley_rollouts,
            "match_draws": self.match_draws,
            "policy_calls": self.policy_calls,
        }

    def line(self) -> str:
        bad = f" ({self.unreadable} unreadable)" if self.unreadable else ""
        more = (
            f" (+ up to {self.shapley_rollouts} if Shapley runs: shared credit or an abstention)"
            if self.shapley_rollouts
            else ""
        )
        return (
            f"estimate: {many(self.traces, 'trace')}{bad}, "
            f"up to {many(self.rollouts, 'rollout')}{more}, {many(self.match_draws, 'match draw')}, "
            f"~{many(self.policy_calls, 'policy call')} "
            "(at the recorded lengths; stored rollouts are free)"
        )


@dataclass
class BudgetGuard:
    """The run-wide budget: a trace starts only if its estimate fits in what is left.

    Estimates are reserved when a trace starts and settled at what it used (its report's budget, or
    the rollouts and policy calls it ran before failing), so traces running at the same time cannot
    together overshoot by more than the estimates' error. A trace whose estimate does not fit waits
    while others hold reservations (they usually use less than their estimate, and a failed trace
    returns what it did not use) and is skipped only when nothing running could free room. Work an
    estimate leaves out (an automatic Shapley run) is granted while the trace runs, as much of it as
    the caps leave once the trace's reservation is settled at what it has spent so far. Reservations
    are keyed by the trace's place in the batch. `admit` decides whether a trace starts, waits or is
    skipped; `acquire` waits on it in this process, the Ray executor's driver asks it again (in the
    guard's actor) each time a trace settles.
    """

    WAIT: ClassVar[str] = "wait"  # what `admit` says of a trace that does not fit yet

    max_rollouts: int | None = None
    max_policy_calls: int | None = None
    rollouts: int = 0
    policy_calls: int = 0
    held: dict[int, tuple[int, int]] = field(default_factory=dict)
    _settled: asyncio.Event = field(default_factory=asyncio.Event)

    async def acquire(self, key: int, est: WorkEstimate | None) -> str | None:
        """Reserve the trace's estimate once it fits; or the reason it cannot (nothing reserved)."""
        while (verdict := self.admit(key, est)) == self.WAIT:
            await self._settled.wait()
        return verdict

    def admit(self, key: int, est: WorkEstimate | None) -> str | None:
        """Reserve the trace's estimate if it fits (None). If it does not, nothing is reserved:
        `WAIT` while other traces hold reservations (settling them may free room), else the reason to
        skip it."""
        reason = self.reserve(key, est)
        return self.WAIT if reason is not None and self.held else reason

    def admit_each(self, waiting: Sequence[tuple[int, WorkEstimate | None]]) -> list[str | None]:
        """`admit` for each waiting trace, in order: one call to the Ray executor's guard actor."""
        return [self.admit(key, est) for key, est in waiting]

    def reserve(self, key: int, est: WorkEstimate | None) -> str | None:
        """Reserve the trace's estimate now; or the reason it does not fit (nothing reserved)."""
        need_r = est.rollouts if est is not None else 0
        need_c = est.policy_calls if est is not None else 0
        if self.max_rollouts is not None and self.rollouts + need_r > self.max_rollouts:
            left = max(0, self.max_rollouts - self.rollouts)
            return (
                f"skipped: needs {many(need_r, 'rollout')}, {left} left of "
                f"--max-rollouts {self.max_rollouts}"
            )
        if self.max_policy_calls is not None and self.policy_calls + need_c > self.max_policy_calls:
            left = max(0, self.max_policy_calls - self.policy_calls)
            return (
                f"skipped: needs about {many(need_c, 'policy call')}, {left} left of "
                f"--max-policy-calls {self.max_policy_calls}"
            )
        self._hold(key, need_r, need_c)
        return None

    def grant(
        self, key: int, rollouts: int, policy_calls: int, *, spent_rollouts: int, spent_calls: int
    ) -> tuple[int, int]:
        """Rollouts and policy calls for a running trace's unplanned work: as much as the caps leave
        once the trace's reservation is settled at what it has spent so far (its estimate is an upper
        bound: holding it would cut the grant by rollouts that never ran)."""
        r, c = self.held.get(key, (0, 0))
        self.held[key] = (spent_rollouts, spent_calls)
        self.rollouts += spent_rollouts - r
        self.policy_calls += spent_calls - c
        self._wake()  # a trace waiting for room may fit now
        if self.max_rollouts is not None:
            rollouts = min(rollouts, max(0, self.max_rollouts - self.rollouts))
        if self.max_policy_calls is not None:
            policy_calls = min(policy_calls, max(0, self.max_policy_calls - self.policy_calls))
        self._hold(key, rollouts, policy_calls)
        return rollouts, policy_calls

    def settle(self, key: int, result: TraceResult) -> None:
        """Replace the trace's reservation by what it used, and wake the traces waiting for room."""
        report = result.report
        used_r = (
            report.budget.rollouts
            if report
            else (result.fresh_rollouts or 0) + (result.stored_rollouts or 0)
        )
        used_c = report.budget.policy_calls if report else result.fresh_policy_calls
        self.release(key, used_r, used_c)

    def release(self, key: int, rollouts: int, policy_calls: int) -> None:
        """Replace the trace's reservation by the rollouts and policy calls it used, and wake the
        traces waiting for room."""
        if key in self.held:
            r, c = self.held.pop(key)
            self.rollouts += rollouts - r
            self.policy_calls += policy_calls - c
        self._wake()

    def _wake(self) -> None:
        self._settled.set()
        self._settled = asyncio.Event()

    def _hold(self, key: int, rollouts: int, policy_calls: int) -> None:
        r, c = self.held.get(key, (0, 0))
        self.held[key] = (r + rollouts, c + policy_calls)
        self.rollouts += rollouts
        self.policy_calls += policy_calls


def check_caps(max_rollouts: int | None, max_policy_calls: int | None) -> None:
    """The run-wide caps must be counts (0 allows nothing)."""
    check_arguments(max_rollouts=max_rollouts, max_policy_calls=max_policy_calls)


def estimate_trace(trace: Trace, options: BatchOptions, deterministic_scorer: bool) -> WorkEstimate:
    """Rollouts, match draws and policy calls (at the recorded lengths) for one trace.

    The contrastive rollouts are an upper bound: a row runs once a rollout that serves several steps.

    `--method shapley` adds its budget; under `auto` a Shapley run happens only when credit turns out
    shared, so its budget is an upper bound (`shapley_rollouts`), shown but not reserved: the run is
    granted what the caps leave when it starts (`BudgetGuard.grant`).
    """
    from car.adaptive import ROLLOUTS_PER_STEP
    from car.shapley import DEFAULT_BUDGET, calls_estimate

    decisions = trace.decision_steps
    m = len(decisions)
    draws = m * options.match_samples
    if options.adaptive:
        rollouts = options.budget if options.budget is not None else ROLLOUTS_PER_STEP * m
        # A rollout resampled from decision k re-decides k and every later one: (m + 1) / 2 on average.
        return WorkEstimate(1, rollouts, draws, rollouts * (m + 1) // 2 + draws)
    factual = 1 if deterministic_scorer else options.samples
    rollouts = factual + m * options.samples
    calls = sum(options.samples * (m - i) for i in range(m))
    shapley = 0 if options.method == "contrastive" else (options.budget or DEFAULT_BUDGET)
    if options.method == "shapley":
        shapley_calls = calls_estimate(shapley, m)
        if options.budget_calls is not None:  # the run never exceeds it
            shapley_calls = min(shapley_calls, options.budget_calls)
        return WorkEstimate(1, rollouts + shapley, draws, calls + shapley_calls + draws)
    return WorkEstimate(1, rollouts, draws, calls + draws, shapley_rollouts=shapley)


def result_key(report: Report) -> str:
    """Identifies a stored report: same trace (and path), components and options, same key.

    A Shapley run's players and budget and an adaptive run's settings are part of the analysis, so
    two analyses of one trace that differ in them are stored side by side, not over each other.
    """
    body: list[Any] = [
        report.trace_hash,
        report.trace_path,  # one file copied to two places: two results
        report.specs.model_dump(),
        report.seed,
        report.samples,
        report.match_samples,
        report.level,
        report.min_effect,
        report.method,
    ]
    if report.shapley is not None:
        sh = report.shapley
        players = sorted(p.steps for p in sh.players)
        limits = [sh.budget_limit, sh.budget_calls_limit, sh.target_width, sh.level]
        body.append(["shapley", sh.method, sh.players_kind, players, limits])
    if report.adaptive is not None:
        ad = report.adaptive
        body.append(["adaptive", ad.confidence, ad.target_width, ad.budget])
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


class BatchProgress(Protocol):
    """What a batch tells its progress display (all calls on the event loop's thread)."""

    def trace_started(self, label: str, total: int) -> None: ...

    def trace_advanced(self, label: str, phase: str, done: int, total: int) -> None:
        """`done` of the `total` rollouts or draws of `phase` (`car.attribution.Progress`)."""

    def trace_finished(self, result: TraceResult) -> None: ...


# -- one trace ------------------------------------------------------------------------------------
async def attribute_one(
    path: str,
    trace: Trace,
    options: BatchOptions,
    runner: Runner,
    progress: BatchProgress | None = None,
    grant: Grant | None = None,
    interrupted: Callable[[TraceResult], None] | None = None,
) -> TraceResult:
    """Attribute one loaded trace; every failure becomes the result's status, never an exception.

    `grant` asks the run-wide budget for an automatic Shapley run's rollouts and policy calls.
    Cancelled (Ctrl-C, SIGTERM), the trace is handed to `interrupted` before the cancellation goes
    on: an `interrupted` result with what it ran until then.
    """
    from car.attribution import _resolve, blame_async, require_decisions

    label = path or trace.id
    runner = runner.child(grant)
    components: tuple[object, ...] = ()
    try:
        require_decisions(trace, path or None)
        comps = _resolve(trace, options.policy, options.env, options.scorer, options.origins)
        components = (comps.policy, comps.env, comps.scorer)
        if progress is not None:
            progress.trace_started(
                label, estimate_trace(trace, options, comps.scorer.deterministic).rollouts
            )

        def tick(phase: str, done: int, total: int) -> None:
            if progress is not None:
                progress.trace_advanced(label, phase, done, total)

        kwargs = options.blame_kwargs()
        kwargs.update(policy=comps.policy, env=comps.env, scorer=comps.scorer)
        from car.adaptive import blame_adaptive_async

        attribute: Callable[..., Awaitable[Report]] = (
            blame_adaptive_async if options.adaptive else blame_async
        )
        report = await attribute(
            trace, **kwargs, concurrency=max(1, runner.concurrency), progress=tick, runner=runner
        )
        report.trace_path = utf8_text(path) if path else None
        judged, error = report_status(report, label)
        result = TraceResult(path, trace.id, judged, report, error=error)
        result.gates = options.gates.check(report)
        if result.gates and result.status == "ok":
            result.status = "gate"
    except Exception as exc:  # an unexpected failure ends this trace, never the batch
        if options.debug:
            raise
        result = _failed(path, trace, exc)
    except (asyncio.CancelledError, KeyboardInterrupt):
        # An interrupted run's record of this trace says how much it ran: its fresh rollouts are in
        # the store (a rerun resumes from them), and its tokens were paid for.
        if interrupted is not None:
            cut = TraceResult(path, trace.id, "interrupted", error=INTERRUPTED_RUNNING)
            interrupted(_counted(cut, runner, components, options))
        raise
    return _counted(result, runner, components, options)


def _counted(
    result: TraceResult, runner: Runner, components: tuple[object, ...], options: BatchOptions
) -> TraceResult:
    """`result` with what its trace ran: `runner`'s rollouts and policy calls, the tokens the
    `components` reported, and what they cost at `options.prices`."""
    result.fresh_rollouts = runner.stats.fresh
    result.stored_rollouts = runner.stats.stored
    result.fresh_policy_calls = runner.stats.fresh_policy_calls
    result.usage = usage_of(*components)
    if options.prices and result.usage:
        result.cost = sum(
            result.usage.get(name, 0) * price / 1e6 for name, price in options.prices.items()
        )
    return result


def _failed(path: str, trace: Trace, exc: Exception) -> TraceResult:
    """The result of a trace stopped by `exc`: its status says whose it is to fix."""
    if isinstance(exc, InputError):
        return TraceResult(path, trace.id, "input-error", error=_one_line(exc))
    if isinstance(exc, CarError):
        # A CarError that is the user's to fix (a budget that cannot pay for the method) is input.
        status: Status = "input-error" if exc.exit_code == 2 else "backend-error"
        return TraceResult(path, trace.id, status, error=_one_line(exc))
    return TraceResult(path, trace.id, "backend-error", error=f"{type(exc).__name__}: {_one_line(exc)}")


async def check_trace(path: str, trace: Trace, options: BatchOptions) -> TraceResult | None:
    """What the run would stop this trace with before its first model call, as its result (None:
    it would start). `car blame --dry-run` asks it of every trace: the steps of `attribute_one`
    and `blame_async` (or `blame_adaptive_async`) up to their first rollout, the same components
    built (specs resolved, plugin files named on the command line loaded, API keys looked up) and
    closed again. No request is sent and no rollout runs; the record is scored only by a built-in
    scorer that runs here (not a judge, not a plugin), as the run scores it first."""
    from car.adaptive import check_adaptive
    from car.attribution import (
        _resolve,
        _settle,
        check_contrastive,
        record_refusal,
        require_decisions,
    )
    from car.replay import Replay, RowRunner
    from car.specs import runs_here

    comps = None
    try:
        require_decisions(trace, path or None)
        comps = _resolve(trace, options.policy, options.env, options.scorer, options.origins)
        replay = Replay(trace, comps.policy, comps.env, comps.scorer, seed=options.seed)
        kwargs = options.blame_kwargs()
        if options.adaptive:
            check_adaptive(replay, **kwargs)
        else:
            check_contrastive(replay, **kwargs)
        scorer = comps.scorer
        if scorer.deterministic and runs_here("scorer", scorer.spec):
            reason = record_refusal(scorer, [await RowRunner(replay).record_value()])
            if reason is not None:
                return TraceResult(path, trace.id, "input-error", error=f"{path or trace.id}: {reason}")
    except Exception as exc:
        if options.debug:
            raise
        return _failed(path, trace, exc)
    finally:
        if comps is not None:
            await _settle(comps)
    return None


def report_status(report: Report, label: str) -> tuple[Status, str | None]:
    """A finished report's status and error before gates, by one rule for `car blame` and for
    `car report` re-reading it: a backend error when its rollouts errored too often (an input error
    naming `label` when the first error is its scorer's), or when its scorer's server (a judge's)
    failed on the recorded run; an input error when its scorer leaves nothing to attribute
    (`nothing_to_attribute`: the scorer, not the run, is what to fix; the report that says so is
    kept); else ok."""
    from car.attribution import nothing_to_attribute, scorer_failed

    if report.status == "backend-errors" and scorer_failed(report.first_error):
        return "input-error", f"{label}: {backend_failure(report)}"
    if report.status == "backend-errors":
        return "backend-error", backend_failure(report)
    if (reason := nothing_to_attribute(report)) is not None:
        if report.factual.estimate is None and (report.first_error or "").startswith("scoring: "):
            return "backend-error", reason  # the judge's server failed on the record: not the scorer
        return "input-error", f"{label}: {reason}"
    return "ok", None


def backend_failure(report: Report) -> str:
    """Why a report whose rollouts errored too often is a backend error: its line in the summary."""
    b = report.budget
    return f"too many rollouts errored ({b.errored} of {b.rollouts}); first: {report.first_error}"


def _one_line(exc: BaseException) -> str:
    return one_line(str(exc)) or type(exc).__name__


# -- the batch ------------------------------------------------------------------------------------
@dataclass
class _Planned:
    path: str
    trace: Trace | None
    error: str | None
    estimate: WorkEstimate | None


def plan_batch(
    paths: Paths,
    options: BatchOptions,
    shard: tuple[int, int] | None = None,
    exclude: Callable[[Path], bool] | None = None,
) -> list[_Planned]:
    """Load every trace (unreadable ones, and entries of a directory that cannot be read, become
    error entries), keep this shard's, estimate each. `exclude`: see `expand`."""
    from car.attribution import _resolve_scorer

    planned: list[_Planned] = []
    for entry in expand(paths, exclude):
        path = entry.path
        try:
            if entry.error is not None:
                raise InputError(entry.error)
            trace = load_any_trace(path, options.source_format, options.item)
        except CarError as exc:
            if options.debug:
                raise
            if shard is None or in_shard(path, shard):
                planned.append(_Planned(path, None, _one_line(exc), None))
            continue
        if shard is not None and not in_shard(trace.id, shard):
            continue
        est: WorkEstimate | None = None
        try:
            # Only the scorer's determinism matters here; the rest is built when the trace runs.
            scorer = _resolve_scorer(trace, options.scorer)
            est = estimate_trace(trace, options, scorer.deterministic)
        except CarError:
            est = estimate_trace(trace, options, True)  # the error surfaces when it runs
        planned.append(_Planned(path, trace, None, est))
    return planned


def total_estimate(planned: Sequence[_Planned]) -> WorkEstimate:
    ests = [p.estimate for p in planned if p.estimate is not None]
    return WorkEstimate(
        len(planned),
        sum(e.rollouts for e in ests),
        sum(e.match_draws for e in ests),
        sum(e.policy_calls for e in ests),
        sum(1 for p in planned if p.trace is None),
        sum(e.shapley_rollouts for e in ests),
    )


def deliver(
    result: TraceResult,
    store: RolloutCache | None,
    progress: BatchProgress | None,
    on_result: Callable[[TraceResult], None] | None,
) -> None:
    """What happens to every finished trace, whatever executor ran it: its report is stored (so
    `car report` can re-render it), the caller's callback runs, then the progress display hears of
    it: a trace shown finished has been handed over, so an interrupt that follows the line (a CI
    job's timeout, sent when it appears) finds it among the finished ones."""
    if isinstance(store, RolloutStore) and result.report is not None:
        rep = result.report
        store.put_result(
            result_key(rep), rep.trace_id, rep.trace_path, rep.trace_hash, rep.model_dump_json()
        )
    if on_result is not None:
        on_result(result)
    if progress is not None:
        progress.trace_finished(result)


async def blame_many_async(
    paths: Paths,
    *,
    options: BatchOptions | None = None,
    store: RolloutCache | None = None,
    concurrency: int = 8,
    traces_at_once: int = 4,
    shard: tuple[int, int] | None = None,
    fail_fast: bool = False,
    max_rollouts: int | None = None,
    max_policy_calls: int | None = None,
    on_result: Callable[[TraceResult], None] | None = None,
    on_interrupted: Callable[[TraceResult], None] | None = None,
    progress: BatchProgress | None = None,
    planned: Sequence[_Planned] | None = None,
) -> list[TraceResult]:
    """Attribute many traces; results in input order. See `blame_many`."""
    check_arguments(options=options)
    opts = options or BatchOptions()
    check_arguments(  # before any trace is read: types and ranges, named as the caller gave them
        store=store,
        on_result=on_result,
        on_interrupted=on_interrupted,
        batch_progress=progress,
        concurrency=concurrency,
        traces_at_once=traces_at_once,
        shard=shard,
        max_rollouts=max_rollouts,
        max_policy_calls=max_policy_calls,
        item=opts.item,
        adaptive=opts.adaptive,
        gates=opts.gates,
        prices=dict(opts.prices) if isinstance(opts.prices, Mapping) else opts.prices,
        **opts.blame_kwargs(),
    )
    work = list(planned) if planned is not None else plan_batch(paths, opts, shard)
    runner = Runner(store, concurrency)
    results: list[TraceResult | None] = [None] * len(work)
    gate = asyncio.Semaphore(max(1, traces_at_once))
    budget = BudgetGuard(max_rollouts, max_policy_calls)
    stop = asyncio.Event()
    failures: list[Exception] = []  # to raise once every task has ended, the first first
    stopping = False  # a finished trace could not be delivered (its on_result raised)
    cut: dict[int, TraceResult] = {}  # the traces cancelled while they ran, with what each ran

    def finish(i: int, result: TraceResult) -> None:
        nonlocal stopping
        results[i] = result
        try:
            # Once the batch is stopping, a trace that still finishes is stored, not handed on.
            deliver(result, store, progress, None if stopping else on_result)
        except Exception as exc:  # the caller's callback raised: the batch stops, then it is raised
            stopping = True
            failures.append(exc)
            stop.set()
            return
        if fail_fast and result.status != "ok":
            stop.set()

    async def one(i: int, item: _Planned) -> None:
        try:
            await attribute_next(i, item)
        except Exception as exc:  # --debug re-raises a trace's failure: raised once the rest end
            failures.append(exc)

    async def attribute_next(i: int, item: _Planned) -> None:
        async with gate:
            if stop.is_set():
                return
            if item.trace is None:
                finish(i, TraceResult(item.path, None, "input-error", error=item.error))
                return
            skip = await budget.acquire(i, item.estimate)
            if skip is not None:
                finish(i, TraceResult(item.path, item.trace.id, "budget", error=skip))
                return

            async def grant(
                rollouts: int, policy_calls: int, *, spent_rollouts: int, spent_calls: int
            ) -> tuple[int, int]:
                return budget.grant(
                    i, rollouts, policy_calls, spent_rollouts=spent_rollouts, spent_calls=spent_calls
                )

            def cancelled(result: TraceResult) -> None:
                cut[i] = result

            counted = runner.child()  # this trace's counts, still there if attribute_one raises
            try:
                result = await attribute_one(
                    item.path, item.trace, opts, counted, progress, grant, cancelled
                )
            except BaseException:
                # --debug re-raises (and fail-fast cancels): the reservation is still returned, or a
                # trace waiting for room would wait for it forever.
                stats = counted.stats
                budget.release(i, stats.fresh + stats.stored, stats.fresh_policy_calls)
                raise
            budget.settle(i, result)
            finish(i, result)

    tasks = [asyncio.ensure_future(one(i, item)) for i, item in enumerate(work)]
    stopper = asyncio.ensure_future(stop.wait())
    interrupted = False
    try:
        pending: set[asyncio.Future[Any]] = set(tasks)
        while pending and not stop.is_set():
            _, pending = await asyncio.wait(pending | {stopper}, return_when=asyncio.FIRST_COMPLETED)
            pending.discard(stopper)
    except (asyncio.CancelledError, KeyboardInterrupt):
        interrupted = True
        raise
    finally:
        # Stopped (fail-fast, a failure) or cancelled from outside: nothing outlives the batch.
        for t in (*tasks, stopper):
            t.cancel()
        await asyncio.gather(*tasks, stopper, return_exceptions=True)
        # Only a batch cancelled from outside hands them on: one that stopped itself (fail-fast, a
        # callback that raised) said why, and its cancelled traces are simply not attributed.
        if interrupted and on_interrupted is not None:
            for i in sorted(cut):
                on_interrupted(cut[i])
    if failures:
        raise failures[0]
    return [r for r in results if r is not None]


@parameters_of(blame_many_async)
def blame_many(paths: Paths, **kwargs: Any) -> list[TraceResult]:
    """Attribute every trace in `paths` with one global concurrency limit; results in input order.

    `paths` is one path (a `str` or `os.PathLike`: a file, a directory or a glob) or a list of them.
    A directory gives every trace file below it, by the rule `car validate` follows too
    (`car.tracefiles`: `.json`, `.jsonl` and `.eval` in any case, hidden names skipped, natural
    order). Anything else is a TypeError.

    Keyword arguments: `options` (`BatchOptions`: policy, env, scorer, samples, gates, ...), `store`
    (a `car.store.RolloutStore` makes the batch resumable), `concurrency` (rollouts in flight across
    all traces), `traces_at_once`, `shard` ((K, N)), `fail_fast`, `max_rollouts`,
    `max_policy_calls`, `on_result` (called with each `TraceResult` as it finishes),
    `on_interrupted` and `progress`.

    Cancelled (Ctrl-C, SIGTERM), the batch cancels its traces and awaits them, then calls
    `on_interrupted` with each trace that was running, in input order, before the cancellation
    propagates: a result of status `interrupted` (no report) with the rollouts, fresh and stored, the
    policy calls and the tokens the trace had used. Its fresh rollouts are in `store`, so a rerun
    resumes from them.

    A trace that fails becomes an error result and the batch goes on: a bad file or an entry of a
    directory that cannot be read is an `input-error`, and so is a trace whose scorer says the
    recorded run did not fail (its report, which says so, is kept). An exception raised by
    `on_result` stops the batch: the traces still running are cancelled and awaited, then it
    propagates (the reports finished so far are in `store`, if one was given); catch it inside the
    callback to go on instead. With `fail_fast`, the first trace that is not `ok` stops the batch the
    same way, and the list holds only the traces that finished (in input order; each result's `path`
    says which), not one per trace. A store that stops taking writes mid-run (a full disk) stores nothing
    more and the batch goes on; `store.unwritable` then says why. A store found damaged, by a read or
    a write, before the run or during it, is given up the same way and read no more: every trace
    goes on without it (`store.damaged`).

    From a running event loop (a Jupyter notebook, an async function) use
    `await car.blame_many_async(...)`: this function then raises RuntimeError saying so.

    >>> import car
    >>> results = car.blame_many("traces/pivot.json", options=car.BatchOptions(samples=8))
    >>> results[0].status
    'ok'
    """
    from car.attribution import run_blocking

    def advice(key: str) -> str | None:
        if key in {f.name for f in fields(BatchOptions)}:
            return f"; options for every trace go in options=car.BatchOptions({key}=...)"
        return None

    return run_blocking("blame_many", blame_many_async, paths, advice=advice, **kwargs)
