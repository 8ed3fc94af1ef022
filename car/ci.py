"""What `car blame` does with its options: one trace or a batch, outputs, gates and the exit code.

Kept out of `car/cli.py` so the command's body stays a thin call and the logic is testable directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import IO, Any

from rich.console import Console

from car.arguments import check_arguments
from car.batch import (
    INTERRUPTED_WAITING,
    BatchOptions,
    TraceResult,
    _Planned,
    blame_many_async,
    check_caps,
    check_trace,
    expand_paths,
    plan_batch,
    total_estimate,
)
from car.errors import CarError, InputError
from car.formats import OutputFormat
from car.gates import EXIT_OK, EXIT_USAGE, final_exit_code, step_index
from car.jsonfile import os_reason, utf8_text
from car.outputs import counts_line, jsonl_line, render_output, write_step_summary
from car.render import error_line, literal
from car.report import Report, listed
from car.stdout import keep, refused
from car.store import BLAME_WAYS, RolloutStore, default_store_path, open_default_store
from car.trace import Trace
from car.tracefiles import is_folder, is_pattern, same_file

__all__ = [
    "USAGE_COUNTERS",
    "BlameRequest",
    "check_outputs",
    "open_store",
    "parse_prices",
    "parse_reports",
    "prepare_output",
    "print_table",
    "run_blame",
    "write_report",
]


def parse_reports(items: Sequence[str]) -> list[tuple[OutputFormat, Path]]:
    """`FORMAT=PATH` pairs (`--report junit=car.xml`)."""
    out = []
    valid = ", ".join(f.value for f in OutputFormat)
    for item in items:
        fmt, sep, path = item.partition("=")
        if not sep or not path:
            raise InputError(f"--report {item!r}: expected FORMAT=PATH, e.g. junit=car.xml ({valid})")
        try:
            chosen = OutputFormat(fmt.strip())
        except ValueError:
            raise InputError(f"--report {item!r}: unknown format {fmt!r}; formats: {valid}") from None
        if path == "-":  # not a file named "-"
            raise InputError(
                f"--report {item!r}: --report writes a file (for stdout: --format {chosen.value})"
            )
        if path.endswith(("/", os.sep)):  # a Path would drop it, and write a file of that name
            raise InputError(
                f"--report {item!r}: {path} names a directory (it ends in {path[-1]}); the report "
                f"is one file: name it ({chosen.value}={path}FILE)"
            )
        out.append((chosen, Path(path)))
    return out


# The token counters the built-in model backends, judge and simulated environment report (as named
# in car.backends.http; a test pins the two together, so `car blame` need not import httpx to check).
USAGE_COUNTERS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def parse_prices(items: Sequence[str]) -> dict[str, float]:
    """`COUNTER=USD` per million (`--price input_tokens=2.5 --price output_tokens=10`). A counter
    car's own backends do not report may be a plugin's (docs/ci.md), so it is kept: `run_blame`
    names it before any work, and again after the run if no component reported it."""
    prices = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            price = float(value)
        except ValueError:
            price = math.nan
        if not sep or not name.strip() or math.isnan(price):
            raise InputError(
                f"--price {item!r}: expected COUNTER=USD_PER_MILLION, e.g. input_tokens=2.5"
            )
        if price < 0 or math.isinf(price):
            raise InputError(f"--price {item!r}: a price is a finite amount of 0 or more")
        prices[name.strip()] = price
    return prices


def open_store(path: Path | None, no_store: bool, notice: Callable[[str], None]) -> RolloutStore | None:
    """The store asked for; the default one only if it can be made here (else a `notice` line)."""
    if no_store:
        return None
    return RolloutStore(path, ways=BLAME_WAYS) if path is not None else open_default_store(notice)


@dataclass
class BlameRequest:
    paths: list[str]
    options: BatchOptions
    fmt: OutputFormat = OutputFormat.table
    output: Path | None = None
    fmt_by_suffix: bool = False  # `fmt` is the one `output`'s suffix names (no --format given)
    reports: list[tuple[OutputFormat, Path]] = field(default_factory=list)
    store_path: Path | None = None
    no_store: bool = False
    concurrency: int = 8
    shard: tuple[int, int] | None = None
    fail_fast: bool = False
    max_rollouts: int | None = None
    max_policy_calls: int | None = None
    dry_run: bool = False
    exit_zero: bool = False
    progress: bool = True
    quiet: bool = False
    executor: str = "local"
    address: str | None = None


def _is_batch(paths: Sequence[str]) -> bool:
    if len(paths) != 1:
        return True
    return is_folder(paths[0]) or is_pattern(paths[0])


def prepare_output(path: Path) -> None:
    """Make the missing parent directories of an output file; a path that cannot be a file is an
    input error. Called before any work, so a mistyped `-o` costs no attribution."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{path}: cannot write the report ({os_reason(exc)})") from None
    if os.path.isdir(path):
        raise InputError(f"{path}: cannot write the report (it is a directory; name a file)")


def check_outputs(req: BlameRequest) -> None:
    """Refuse, before any work, outputs that would overwrite each other, a trace being attributed or
    the rollout store (every report was written, and the last one silently won; a report over the
    store destroyed it, a JSONL one under the open database)."""
    named: list[tuple[str, Path]] = [(f"-o {req.output}", req.output)] if req.output else []
    named += [(f"--report {fmt.value}={path}", path) for fmt, path in req.reports]
    for i, (flag, path) in enumerate(named):
        for other, other_path in named[:i]:
            if same_file(path, other_path):
                raise InputError(
                    f"{other} and {flag} write the same file; give each report its own path"
                )
    kept = [
        (trace, f"the trace {trace} it attributes")
        for trace in (Path(p) for p in expand_paths(req.paths, own_outputs(req)))
        if os.path.isfile(trace)
    ]
    if not req.no_store:
        store = req.store_path if req.store_path is not None else default_store_path()
        kept.append((store, f"the rollout store {store}"))
    for flag, path in named:
        for target, what in kept:
            if same_file(path, target):
                raise InputError(f"{flag} would overwrite {what}; write the report elsewhere")


def own_outputs(req: BlameRequest) -> Callable[[Path], bool]:
    """Whether a file a directory or glob found is one of this run's outputs (`-o`, `--report`):
    its last run wrote it there, and running the same command again must resume, not read it as a
    trace. A file named directly is still a trace, and `check_outputs` refuses to overwrite it."""
    outputs = [p for p in (req.output, *(path for _, path in req.reports)) if p is not None]
    return lambda found: any(same_file(found, out) for out in outputs)


def check_rerender_output(source: Path, output: Path | None) -> None:
    """Refuse, before any work, a `car report -o` naming the store or file it re-renders."""
    if output is not None and same_file(output, source):
        raise InputError(
            f"-o {output} would overwrite {source}, the source it re-renders; write the report elsewhere"
        )


def suffix_note(path: Path, by_suffix: bool) -> str:
    """What the "report written" line adds when the format came from the file name."""
    return f" (the format its suffix {path.suffix} names; --format chooses another)" if by_suffix else ""


def write_report(path: Path, text: str) -> None:
    """Write an output file, making missing parent directories; one-line InputError on failure.
    A file is replaced whole (written beside it, then renamed over it), so a write that fails half-way
    (a full disk, an interrupt) leaves the last good report in place, not part of a new one."""
    prepare_output(path)
    try:
        if path.exists() and not path.is_file():  # /dev/stdout, a pipe: written as they are
            path.write_text(text, encoding="utf-8")
            return
        target = Path(os.path.realpath(path))  # through a symlink, as writing in place does
        tmp = target.with_name(target.name + ".tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)  # never leave a partial file behind
            raise
    except OSError as exc:
        raise InputError(f"{path}: cannot write the report ({os_reason(exc)})") from None


def _kept_from_stdout(text: str, fmt: OutputFormat, reason: str) -> None:
    """Say that stdout refused the report, and where it was saved instead (the attribution already
    paid for is kept)."""
    suffix = {"table": "txt", "markdown": "md", "github": "md", "junit": "xml"}.get(fmt.value, fmt.value)
    print(f"car: error: {refused('the report', reason, text, f'.{suffix}')}", file=sys.stderr)


def _unreported_prices(prices: Mapping[str, float], results: Sequence[TraceResult]) -> str | None:
    """A priced counter that no component reported (a typo, or a policy that counts nothing)."""
    reported = sorted({name for r in results for name in r.usage or ()})
    missing = [name for name in prices if name not in reported]
    if not prices or not missing or not any(r.report for r in results):
        return None
    seen = f"reported: {', '.join(reported)}" if reported else "no component reported token usage"
    return f"--price {', '.join(missing)}: no such counter in this run ({seen}); its cost is 0"


def _unused_backend(req: BlameRequest, results: Sequence[TraceResult]) -> str | None:
    """The model-server options given on the command line (`--temperature 0.2`) when every report's
    components are local built-ins, which talk to no model server: the options changed nothing."""
    from car.config import BACKEND_KEYS
    from car.specs import runs_here

    given = req.options.given or {}
    shown = [given[key] for key in BACKEND_KEYS if key in given]
    reports = [r.report for r in results if r.report is not None]
    kinds = ("policy", "env", "scorer")
    if not shown or not reports:
        return None
    if not all(runs_here(kind, getattr(r.specs, kind)) for r in reports for kind in kinds):
        return None
    specs = list(dict.fromkeys(getattr(r.specs, kind) for r in reports for kind in kinds))
    more = f" and {len(specs) - 3} more" if len(specs) > 4 else ""
    return (
        f"{listed(shown)} {'was' if len(shown) == 1 else 'were'} not used: no component of this "
        f"run talks to a model server ({', '.join(specs[:3] if more else specs)}{more})"
    )


def _check_some_policy(policy: object, traces: Sequence[Trace]) -> None:
    """A batch whose traces all lack a policy, with none given, fails as a whole before its
    estimate, once: each trace would fail alike, after an estimate of work that never runs."""
    if policy is None and len(traces) > 1 and not any(t.replay and t.replay.policy for t in traces):
        from car.attribution import policy_advice

        raise InputError(f"none of the {len(traces)} traces names a policy: {policy_advice('them')}")


def _check_not_all_refused(req: BlameRequest, planned: Sequence[_Planned]) -> None:
    """A batch whose every trace would be refused before its first model call for one and the same
    reason (no API key, a plugin that fails to build) fails once, before its estimate: each trace
    would say it alike. The traces are checked in order (`check_trace`, as `--dry-run` does) only
    until one would start, the first in a run that works, or is refused for another reason."""
    if len(planned) < 2:
        return

    async def common() -> str | None:
        reason: str | None = None
        for item in planned:
            if item.trace is None:
                return None
            res = await check_trace(item.path, item.trace, req.options)
            if (
                res is None
                or res.status != "input-error"
                or res.error in (None, "")
                or (reason is not None and res.error != reason)
            ):
                return None
            reason = res.error
        return reason

    reason = asyncio.run(common())
    if reason is not None:
        raise InputError(f"every one of the {len(planned)} traces would be refused: {reason}")


def _check_blame_gate(names: Sequence[str], traces: Sequence[Trace]) -> None:
    """A --fail-on-blame actor that no trace of the run has is a typo that would never trip."""
    if not traces:
        return
    actors = {a.id for t in traces for a in t.actors}
    longest = max(len(t.steps) for t in traces)
    for who in names:
        if who == "any" or who in actors:
            continue
        step = step_index(who)
        if step is not None:
            if step < longest:
                continue
            raise InputError(
                f"--fail-on-blame {who}: no trace in this run has a step {step} "
                f"(the longest has {longest} steps, 0-{longest - 1})"
            )
        known = ", ".join(sorted(actors)[:10]) + (", ..." if len(actors) > 10 else "")
        raise InputError(
            f"--fail-on-blame {who!r}: no trace in this run has an actor of that id "
            f"(actors: {known}); give an actor id, a step index or 'any'"
        )


def _located(path: str | None, label: str, error: str) -> str:
    """An error line that names its trace once: `error` as is when it starts with `path`."""
    return error if path and error.startswith(path) else f"{label}: {error}"


def run_blame(req: BlameRequest, *, stdout: IO[str] | None = None) -> int:
    """Run `car blame` as the command line does; returns the exit code."""
    out = stdout or sys.stdout
    err = Console(stderr=True, no_color=bool(os.environ.get("NO_COLOR")) or None, highlight=False)

    def say(text: str) -> None:
        if not req.quiet:
            print(text, file=sys.stderr, flush=True)

    def written(fmt: OutputFormat, path: Path) -> None:
        # Only -o's format can come from its suffix: a --report names its own, which --format keeps.
        by_suffix = req.fmt_by_suffix and path == req.output
        say(f"{fmt.value} report written to {path}{suffix_note(path, by_suffix)}")

    if any(not p for p in req.paths):
        raise InputError(
            "TRACES: an empty path (''); name a trace file, a directory ('.' for this one) or a glob"
        )
    batch = _is_batch(req.paths)
    outputs = [(req.fmt, req.output), *req.reports]
    html = [path for fmt, path in req.reports if fmt is OutputFormat.html]
    if batch and (req.fmt is OutputFormat.html or html):
        if req.fmt is not OutputFormat.html:
            chosen = f"--report html={html[0]}: html"
        elif req.fmt_by_suffix:
            chosen = f"-o {req.output}: its suffix names html, and html"
        else:
            chosen = "--format html"
        raise InputError(  # before any work, not after the whole batch has run
            f"{chosen} renders one trace's report; for a batch use markdown, junit or github"
        )
    if req.options.gates.min_match_rate is not None and req.options.match_samples == 0:
        raise InputError("--min-match-rate needs match draws: set --match-samples above 0")
    if req.executor not in ("local", "ray"):
        raise InputError(f"--executor must be 'local' or 'ray', got {req.executor!r}")
    if req.address is not None and req.executor != "ray":
        raise InputError(  # a cluster named for nothing: the batch would run here without a word
            f"--address {req.address!r} names a Ray cluster, but the executor is local, so it "
            "would be ignored; add --executor ray, or drop --address"
        )
    check_caps(req.max_rollouts, req.max_policy_calls)
    check_outputs(req)
    for name in [n for n in req.options.prices if n not in USAGE_COUNTERS]:
        say(  # a typo would cost 0 for the whole run: said before any work
            f"car: note: --price {name}: car's backends report {', '.join(USAGE_COUNTERS)}; "
            f"{name} costs only if a plugin reports it"
        )

    check_arguments(  # what `blame_many_async` checks before any trace; before any estimate too
        concurrency=req.concurrency,
        shard=req.shard,
        max_rollouts=req.max_rollouts,
        max_policy_calls=req.max_policy_calls,
        **req.options.blame_kwargs(),
    )
    planned = plan_batch(req.paths, req.options, req.shard, own_outputs(req))
    traces = [p.trace for p in planned if p.trace]
    _check_blame_gate(req.options.gates.fail_on_blame, traces)
    _check_some_policy(req.options.policy, traces)
    if not req.dry_run and req.executor == "local":  # Ray's workers may hold keys the driver lacks
        _check_not_all_refused(req, planned)
    estimate = total_estimate(planned)
    if req.dry_run:
        if req.fmt in (OutputFormat.json, OutputFormat.jsonl):  # a script reads it: JSON, as asked
            indent = 2 if req.fmt is OutputFormat.json else None
            out.write(json.dumps(estimate.to_json(), indent=indent) + "\n")
        else:
            out.write(estimate.line() + "\n")
        # A pre-check that passes on input the run would refuse is no pre-check: name each one.
        refused = asyncio.run(_refusals(req, planned))
        for res in refused:
            print(
                f"car: error: {error_line(_located(res.path, res.label, res.error or ''))}",
                file=sys.stderr,
            )
        return final_exit_code([r.exit_code for r in refused], exit_zero=req.exit_zero)
    for _, path in outputs:
        if path is not None:
            prepare_output(path)
    if batch or req.max_rollouts is not None or req.max_policy_calls is not None:
        say(estimate.line())
    if not planned:
        say("no trace in this shard")
        # Every output asked for, empty: a CI step that reads `-o` or a `--report` file finds it.
        for fmt, path in outputs:
            text = render_output(fmt, [], batch=True)
            if path is None:
                out.write(text if fmt is not OutputFormat.table else "")
            else:
                write_report(path, text)
                written(fmt, path)
        return EXIT_USAGE if step_summary(outputs, [], batch=True) else EXIT_OK

    store = open_store(req.store_path, req.no_store, say)
    resume: str | None = None  # set when interrupted: whether and how a rerun resumes
    stream_stdout = req.fmt is OutputFormat.jsonl and req.output is None
    stream_files: dict[Path, IO[str]] = {}
    # A stream file that fails mid-run (a full disk) is dropped with its reason, cut back to its last
    # whole record; the batch goes on and the whole JSONL is saved elsewhere at the end, as for any
    # report that cannot be written.
    stream_failed: dict[Path, str] = {}
    streamed: dict[Path, int] = {}  # each stream file's size up to its last whole record
    stdout_failed: list[str] = []  # the same for stdout (a full disk, a closed pipe)

    def close_stream(path: Path) -> None:
        try:
            stream_files.pop(path).close()  # flushes: a full disk may say so only here
        except OSError as exc:
            stream_failed.setdefault(path, os_reason(exc))

    try:
        for fmt, path in outputs:
            if fmt is OutputFormat.jsonl and path is not None:
                try:
                    stream_files[path] = path.open("w", encoding="utf-8")
                except OSError as exc:
                    raise InputError(f"{path}: cannot write the report ({os_reason(exc)})") from None

        finished: list[TraceResult] = []
        cut: list[TraceResult] = []  # the traces an interrupt cancelled, with what each ran

        def on_result(result: TraceResult) -> None:
            finished.append(result)
            stream(result)

        def stream(result: TraceResult) -> None:
            line = jsonl_line(result)
            if stream_stdout and not stdout_failed:
                try:
                    out.write(line)
                    out.flush()
                except OSError as exc:
                    stdout_failed.append(os_reason(exc))
            for path, fh in list(stream_files.items()):
                try:
                    fh.write(line)
                    fh.flush()
                    streamed[path] = fh.tell()
                except OSError as exc:
                    stream_failed[path] = os_reason(exc)
                    close_stream(path)
                    with contextlib.suppress(OSError):  # a record cut in the middle is no record
                        os.truncate(path, streamed.get(path, 0))

        show = req.progress and not req.quiet
        display: Any = None
        # Records streamed to a terminal would land inside the live bars, which redraw over them:
        # plain lines then, which interleave whole.
        if show and err.is_terminal and not (stream_stdout and out.isatty()):
            from car.progress import RichBatchProgress

            display = RichBatchProgress(err, len(planned))
        elif show and batch:
            from car.progress import HeartbeatProgress

            display = HeartbeatProgress(sys.stderr, len(planned))
        elif show:  # one trace in a log: a line as each phase starts, and at each quarter of it
            from car.progress import PhaseProgress

            display = PhaseProgress(sys.stderr)
        kwargs: dict[str, Any] = {
            "options": req.options,
            "store": store,
            "concurrency": req.concurrency,
            "fail_fast": req.fail_fast,
            "max_rollouts": req.max_rollouts,
            "max_policy_calls": req.max_policy_calls,
            "on_result": on_result,
            "on_interrupted": cut.append,
            "progress": display,
            "planned": planned,
        }
        try:
            if display is not None:
                with display:
                    results = _execute(req, kwargs)
            else:
                results = _execute(req, kwargs)
        except KeyboardInterrupt:
            # Ctrl-C, or SIGTERM at a CI job's timeout: what finished still goes to every output,
            # in the shape of a whole run, each other trace marked as not attributed.
            results, unfinished = _so_far(planned, finished, cut)
            for res in unfinished:
                stream(res)  # a record for every trace, as a whole run streams
            resume = _resume(store, req.no_store)
    finally:
        for path in list(stream_files):
            close_stream(path)
        if store is not None:
            store.close()
            if store.unwritable is not None:  # said even when interrupted: the rerun will pay for it
                print(
                    f"car: error: {store.path}: {store.unwritable}; the rest of the run was not "
                    "stored, so a rerun computes it again (the reports are complete); "
                    f"{store.ways_out()}",
                    file=sys.stderr,
                )

    write_failed = store is not None and store.unwritable is not None
    kept_in: list[Path | None] = []  # where the outputs went (None: stdout), for an interrupted run
    unwritten: list[Path] = []  # the files an interrupted run of one trace had nothing for
    for fmt, path in outputs:
        if path is not None and path in stream_failed:
            text = render_output(fmt, results, batch=batch)
            reason = f"{path}: cannot write the report ({stream_failed[path]})"
            print(f"car: error: {reason}; {keep(text, path.suffix)}", file=sys.stderr)
            write_failed = True
            continue
        if path is None and stdout_failed and fmt is OutputFormat.jsonl:
            _kept_from_stdout(render_output(fmt, results, batch=batch), fmt, stdout_failed[0])
            write_failed = True
            continue
        if fmt is OutputFormat.jsonl and (path is not None or stream_stdout):
            kept_in.append(path)
            if path is not None and resume is None:  # streamed as each trace finished: now whole
                written(fmt, path)
            continue
        if (
            not batch
            and fmt in (OutputFormat.table, OutputFormat.json, OutputFormat.html)
            and (not results or results[0].report is None)
        ):
            if path is not None and resume is not None:
                unwritten.append(path)
            continue  # one trace and no report: the error line on stderr says it all
        if fmt is OutputFormat.table and path is None and print_table(results, out, batch=batch):
            continue
        text = render_output(fmt, results, batch=batch)
        if path is None:
            try:
                out.write(text)
                out.flush()
            except OSError as exc:
                _kept_from_stdout(text, fmt, os_reason(exc))
                write_failed = True
            else:
                kept_in.append(None)
            continue
        try:
            write_report(path, text)
        except InputError as exc:
            # Nothing computed is lost: the report goes to a file of its own, never to a terminal.
            print(f"car: error: {exc}; {keep(text, path.suffix)}", file=sys.stderr)
            write_failed = True
        else:
            kept_in.append(path)
            if resume is None:
                written(fmt, path)
    write_failed |= step_summary(outputs, results, batch=batch)
    if resume is not None:
        raise Interrupted(_interrupted_line(results, kept_in, resume, unwritten))
    if len(results) < len(planned):
        left = len(planned) - len(results)
        say(f"stopped early (--fail-fast): {left} trace{'s' if left != 1 else ''} not attributed")
    if batch and not req.quiet and (req.fmt is not OutputFormat.table or req.output is not None):
        # stdout holds a machine format (or nothing): the summary table goes to stderr for people
        from car.outputs import fitted_summary

        if err.is_terminal:
            err.print(fitted_summary(results, err))
        else:
            sys.stderr.write(render_output(OutputFormat.table, results, batch=True))
    if batch:
        say(counts_line(results))
    for note in (_unreported_prices(req.options.prices, results), _unused_backend(req, results)):
        if note:
            say(f"car: note: {note}")
    for res in results:
        if res.status in ("input-error", "backend-error") and (not batch or req.quiet):
            # An input error or a backend's failure names the trace it hit, as --dry-run's line
            # does (`_located`); -q hides the progress lines and the summary that name a batch's,
            # so its errors stay, named.
            print(
                f"car: error: {error_line(_located(res.path, res.label, res.error or res.status))}",
                file=sys.stderr,
            )
        elif res.status == "budget" and not batch:
            print(f"car: budget: {error_line(f'{res.path}: {res.error}')}", file=sys.stderr)
        elif res.status == "gate" and not batch:
            for g in res.gates:
                print(f"car: gate: {literal(g)}", file=sys.stderr)
    codes = [r.exit_code for r in results] + ([EXIT_USAGE] if write_failed else [])
    code = final_exit_code(codes, exit_zero=req.exit_zero)
    if batch and req.quiet and code != EXIT_OK and any(r.status in ("gate", "budget") for r in results):
        # -q hid the counts line, and a batch's tripped gates and budget skips have no error line
        # of their own: the exit code needs one line that says why (as `car report` prints it)
        print(f"car: {counts_line(results)}", file=sys.stderr)
    return code


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped `run_blame` once it had written what finished: `detail` says where
    that went and whether a rerun resumes, for the one line the command line prints."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _so_far(
    planned: Sequence[_Planned], finished: Sequence[TraceResult], cut: Sequence[TraceResult]
) -> tuple[list[TraceResult], list[TraceResult]]:
    """An interrupted run's results in input order, and those of the traces that did not finish:
    a file that could not be read is its input error (known before it ran); a trace the interrupt
    cancelled is its `cut` result, `interrupted` with what it ran (what its executor could tell);
    any other trace never started, `interrupted` having run nothing."""
    done = {r.path: r for r in finished}
    running = {r.path: r for r in cut}
    results: list[TraceResult] = []
    unfinished: list[TraceResult] = []
    for item in planned:
        path = utf8_text(item.path)
        res = done.get(path)
        if res is None:
            if item.trace is None:
                res = TraceResult(item.path, None, "input-error", error=item.error)
            else:
                res = running.get(path) or TraceResult(
                    item.path, item.trace.id, "interrupted", error=INTERRUPTED_WAITING
                )
            unfinished.append(res)
        results.append(res)
    return results, unfinished


def _resume(store: RolloutStore | None, no_store: bool) -> str:
    """What a rerun of an interrupted run starts from."""
    if store is None:
        why = " (--no-store)" if no_store else ""
        return f"nothing was stored{why}: a rerun starts over"
    try:
        n = store.count()
    except CarError:  # a store damaged mid-run: its own error line says so
        return f"rerun the same command to resume from {store.path}"
    what = "rollout or draw" if n == 1 else "rollouts and draws"
    return f"rerun the same command to resume from {store.path} ({n:,} {what} stored)"


def _interrupted_line(
    results: Sequence[TraceResult],
    kept_in: Sequence[Path | None],
    resume: str,
    unwritten: Sequence[Path] = (),
) -> str:
    """After "car: interrupted; ": where the finished traces' reports went (or that the one trace's
    files got nothing), and `resume`."""
    if unwritten:
        nothing = f"nothing was written to {listed([str(p) for p in dict.fromkeys(unwritten)])}"
        resume = (
            f"{nothing}; {resume}" if kept_in else f"the trace did not finish, so {nothing}; {resume}"
        )
    if not kept_in:
        return resume
    files = [str(path) for path in dict.fromkeys(kept_in) if path is not None]
    where = f"in {listed(files)}" if files else ""
    if None in kept_in:
        where += ", and on stdout" if files else "on stdout"
    n = sum(r.status != "interrupted" for r in results)
    if n == 0:
        return f"no trace finished (the reports {where} list every trace as interrupted); {resume}"
    reports = "trace's report is" if n == 1 else "traces' reports are"
    return f"the {n} finished {reports} {where}; {resume}"


async def _refusals(req: BlameRequest, planned: Sequence[_Planned]) -> list[TraceResult]:
    """What the run would refuse, in order, before any model call: the traces it cannot read, and
    those it would stop before their first rollout (`check_trace`: the same components built, and
    closed, with nothing sent)."""
    out: list[TraceResult] = []
    for item in planned:
        if item.trace is None:
            out.append(TraceResult(item.path, None, "input-error", error=item.error))
        elif (res := await check_trace(item.path, item.trace, req.options)) is not None:
            out.append(res)
    return out


def step_summary(
    outputs: Sequence[tuple[OutputFormat, Path | None]], results: Sequence[TraceResult], *, batch: bool
) -> bool:
    """The github format's job summary, once a run however many github outputs it renders;
    whether writing it failed (the error line is printed)."""
    if not any(fmt is OutputFormat.github for fmt, _ in outputs):
        return False
    problem = write_step_summary(results, batch=batch)
    if problem is not None:
        print(f"car: error: {problem}", file=sys.stderr)
    return problem is not None


def print_table(results: Sequence[TraceResult], out: IO[str], *, batch: bool) -> bool:
    """When `out` is a terminal, print the table there, styled and fitted to its width: one
    report's ranked table, or the summary of a batch (or of a trace without a report); whether
    it did. Files and pipes get `render_output`'s fixed width instead."""
    from car.outputs import fitted_summary
    from car.render import render_table

    console = Console(file=out, no_color=bool(os.environ.get("NO_COLOR")) or None)
    if not console.is_terminal or not results:
        return False
    report = results[0].report
    if batch or report is None:
        console.print(fitted_summary(results, console))
    else:
        render_table(report, console, stored=results[0].stored_rollouts)
    return True


def rerender(
    source: str | Path, fmt: str, *, trace: Path | None = None, pick: str | None = None
) -> tuple[str, list[TraceResult]]:
    """Render saved results (a store, a report or batch JSON, batch JSONL) in any output format;
    returns the text and the results it shows, failed traces included (`car report` exits with
    their worst code, as `car blame` did).

    A trace analysed several ways (other samples, seed, method, budget, ...) is listed once per
    analysis, labelled with its report id and what sets it apart; `pick` keeps the reports of one
    trace (its path or id) or one report id (a prefix of at least 4 digits will do).
    """
    from car.outputs import read_results

    p = Path(source)
    saved = read_results(p)  # a store without reports is an error there; a batch of none is not
    found = _analyses(saved)
    if pick is not None:
        found = _pick(found, pick, source)
    if OutputFormat(fmt) is OutputFormat.html:
        from car.html import html_page

        found = [a for a in found if a.report is not None]  # a trace that failed has no page
        if len(found) != 1:
            what = f"--pick {pick} matches" if pick is not None else "holds"
            raise InputError(
                f"{source}: {what} {len(found)} reports; --format html renders one"
                + (f": choose it with --pick {_choices(found, source)}" if found else "")
            )
        assert found[0].report is not None
        page = html_page(
            found[0].report, near=p.parent, given=trace, stored=found[0].result.stored_rollouts
        )
        return page, [found[0].result]
    results = [
        # differs is "" when only a setting the label leaves out differs: the id still tells
        replace(a.result, analysis=a.id + (f": {a.differs}" if a.differs else ""))
        if a.differs is not None
        else a.result
        for a in found
    ]
    # A batch of none (an empty shard's JSON) renders as `car blame` wrote it: an empty batch.
    return render_output(OutputFormat(fmt), results, batch=len(results) != 1), results


@dataclass(frozen=True)
class _Analysis:
    result: TraceResult
    id: str  # the first digits of its store key (`result_key`): one per analysis ("" if it failed)
    differs: str | None  # what sets it apart from the other analyses of its trace (None: the only one)

    @property
    def report(self) -> Report | None:
        return self.result.report


_ID_DIGITS = 8
_MIN_PICK_DIGITS = 4


def _settings(report: Report) -> dict[str, str]:
    """What an analysis was asked to do, by name: the settings `result_key` tells apart."""
    out: dict[str, str] = {}
    if report.adaptive is not None:
        ad = report.adaptive
        out |= {"method": "adaptive", "confidence": f"{ad.confidence:g}", "budget": str(ad.budget)}
        if ad.target_width is not None:
            out["target width"] = f"{ad.target_width:g}"
    elif report.shapley is not None:
        sh = report.shapley
        out["method"] = f"shapley {sh.method}"
        out["players"] = sh.players_kind
        if sh.players_kind == "groups":
            out["players"] += " " + ";".join(",".join(map(str, p.steps)) for p in sh.players)
        for name, limit in (("budget", sh.budget_limit), ("budget calls", sh.budget_calls_limit)):
            if limit is not None:
                out[name] = str(limit)  # counts, never 1.23457e+06
        if sh.target_width is not None:
            out["target width"] = f"{sh.target_width:g}"
    else:
        out["method"] = report.method
    if report.adaptive is None:  # an adaptive run takes neither: its confidence says it
        out |= {"samples": str(report.samples), "level": f"{report.level:g}"}
    out |= {
        "match samples": str(report.match_samples),
        "seed": str(report.seed),
        "min effect": f"{report.min_effect:g}",
        "policy": report.specs.policy,
        "env": report.specs.env,
        "scorer": report.specs.scorer,
        "trace content": report.trace_hash[:_ID_DIGITS],  # the file changed between two analyses
    }
    return out


def _analyses(saved: Sequence[TraceResult]) -> list[_Analysis]:
    """One entry per analysis (a source that holds one twice keeps the last, as the store does) or
    failed trace without a report, in the source's order; the analyses of a trace analysed several
    ways say what differs."""
    from car.batch import result_key

    by_key = {(result_key(s.report) if s.report else f"failed: {s.path}"): s for s in saved}
    groups: dict[str, list[Report]] = {}
    for s in by_key.values():
        if s.report is not None:
            groups.setdefault(s.path, []).append(s.report)
    out = []
    for key, s in by_key.items():
        r = s.report
        if r is None:
            out.append(_Analysis(s, "", None))
            continue
        group = groups[s.path]
        differs = None
        if len(group) > 1:
            mine = _settings(r)
            others = [_settings(o) for o in group]
            differs = ", ".join(
                value if name == "method" else f"{name} {value}"  # "shapley exact" says enough
                for name, value in mine.items()
                if any(o.get(name) != value for o in others)
            )
        out.append(_Analysis(s, key[:_ID_DIGITS], differs))
    return out


def _pick(found: Sequence[_Analysis], pick: str, source: str | Path) -> list[_Analysis]:
    """The reports of a trace (its path as recorded or as a file, or its id), else of a report id."""

    def same_trace(r: TraceResult) -> bool:
        if pick in (r.trace_id, r.path):
            return True
        return bool(r.path) and same_file(Path(pick), Path(r.path))

    chosen = [a for a in found if same_trace(a.result)]
    if chosen:
        return chosen
    digits = pick.lower()
    if len(digits) < _MIN_PICK_DIGITS or any(c not in "0123456789abcdef" for c in digits):
        hint = " (a report id has at least 4 of its digits)" if len(digits) < _MIN_PICK_DIGITS else ""
        raise InputError(
            f"{source}: --pick {pick!r}: no report of that trace path or id{hint}; "
            f"`car report {source}` lists them"
        )
    chosen = [a for a in found if a.id and a.id.startswith(digits)]
    if not chosen:
        raise InputError(
            f"{source}: --pick {pick!r}: no report of that trace path or id, nor report id; "
            f"`car report {source}` lists them"
        )
    return chosen


def _choices(found: Sequence[_Analysis], source: str | Path, most: int = 4) -> str:
    """How to --pick each of these, for an error line: a report id, and what it is."""
    one_trace = len({a.result.path for a in found}) == 1
    shown = []
    for a in found[:most]:
        name = a.result.path
        what = (a.differs or name) if one_trace else (f"{name}: {a.differs}" if a.differs else name)
        shown.append(f"{a.id} ({what})")
    more = f", or one of {len(found) - most} more (`car report {source}` lists them)"
    return ", ".join(shown) + (more if len(found) > most else "")


def _execute(req: BlameRequest, kwargs: dict[str, Any]) -> list[TraceResult]:
    if req.executor == "ray":
        from car.executors.ray import run_ray

        return run_ray(address=req.address, **kwargs)
    stopping = False

    async def run() -> list[TraceResult]:
        # The first Ctrl-C (or SIGTERM, which `car.cli` hands to Ctrl-C's handler) cancels the run;
        # one that comes again while the cancelled traces wind down is ignored. asyncio's own
        # handler raises it wherever the loop stands: tasks cut off half-way were reported on
        # stderr, and one whose wake-up it lost left the run waiting forever as it shut down.
        main = asyncio.current_task()
        loop = asyncio.get_running_loop()

        def interrupt(signum: int, frame: FrameType | None) -> None:
            nonlocal stopping
            if main is not None and not stopping:
                stopping = True
                loop.call_soon_threadsafe(main.cancel)

        previous = signal.signal(signal.SIGINT, interrupt)
        try:
            return await blame_many_async([], **kwargs)
        finally:
            signal.signal(signal.SIGINT, previous)

    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):  # no Ctrl-C reaches it: another thread, or a background job that ignores it
        return asyncio.run(blame_many_async([], **kwargs))
    try:
        return asyncio.run(run())
    except asyncio.CancelledError:
        if stopping:
            raise KeyboardInterrupt from None
        raise
