"""The `car` command line. stdout carries the report only; progress and errors go to stderr.

Exit codes: 0 done; 1 a gate the user asked for tripped; 2 usage or input error; 3 backend failure
(the report is still written). See `car.gates`.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import signal
import sys
import threading
from enum import StrEnum
from pathlib import Path
from types import FrameType
from typing import Annotated, Any, NoReturn, TextIO, cast

import typer
from rich.console import Console
from typer.core import TyperArgument, TyperCommand

from car.errors import COMMAND_LINE, CarError
from car.formats import OutputFormat, format_of
from car.stdout import Guard, Refused

# Typer may sit on click or on its own vendored copy; find the exception classes either way.
_UsageError: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
_ClickException: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"
)
# A group called without a command (`car`, `car cache`) raises this (click 8.2 and later) to show its
# help; an empty tuple catches nothing where it does not exist.
_NoArgsIsHelp: tuple[type[Exception], ...] = tuple(
    c for c in [getattr(sys.modules[_UsageError.__module__], "NoArgsIsHelpError", None)] if c
)


class _Command(TyperCommand):
    """Help as users read it: an argument shows as its metavar (`TRACE...`) in the usage line and in
    the Arguments section alike, never with typer's Python type (`TRACE <list[str]>`) or in braces;
    options show the metavars given with them."""

    # `ctx` and `formatter` are click's or typer's vendored copy of it, by typer version.
    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                name = _argument_name(param)
                pieces.append(name if param.required else f"[{name}]")
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        arguments: list[tuple[str, str]] = []
        options: list[tuple[str, str]] = []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if isinstance(param, TyperArgument):
                arguments.append((_argument_name(param), record[1]))
            else:
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def _argument_name(param: TyperArgument) -> str:
    name = param.metavar or (param.name or "").upper()
    return f"{name}..." if param.nargs != 1 else name


def _examples(*lines: str) -> str:
    """A command's epilog: its example command lines, shown as written (`\\b` stops rewrapping)."""
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)


app = typer.Typer(
    name="car",
    help="Find which step of a failed agent run caused the failure, by intervention.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


Format = OutputFormat  # table, json, jsonl, markdown, github, junit, html


class MethodName(StrEnum):
    contrastive = "contrastive"
    shapley = "shapley"
    auto = "auto"


class ShapleyName(StrEnum):
    exact = "exact"
    permutation = "permutation"
    auto = "auto"


class SchemaName(StrEnum):
    trace = "trace"
    report = "report"


_DEBUG = False
# Every command takes --debug (main() reads it from the arguments before parsing).
_DEBUG_OPTION = typer.Option("--debug", help="Show tracebacks.")


def _choices(names: type[StrEnum]) -> str:
    return "|".join(names)


_FORMAT_OPTION = typer.Option(
    "--format",
    help="Report format. Default: the one -o FILE's suffix names (.html/.htm html, .json json, "
    ".jsonl jsonl, .md markdown, .xml junit), else table.",
    metavar=_choices(Format),
    show_default=False,
)


def _output_file(text: str) -> Path:
    """`-o FILE`: a path that ends in a separator names a directory, which a report cannot be
    written as (a `Path` drops the separator, so `-o out/` wrote a file named `out`)."""
    if text.endswith(("/", os.sep)):
        raise ValueError(
            f"{text} names a directory (it ends in {text[-1]}); the report is one file: name it "
            f"(-o {text}FILE)"
        )
    return Path(text)


_OUTPUT_OPTION = typer.Option(
    "-o",
    "--output",
    help="Write the report here (- or none: stdout).",
    metavar="FILE",
    parser=_output_file,
)
_STORE_OPTION = typer.Option(
    "--store", help="Rollout store file (default .car/store.sqlite).", metavar="FILE"
)


def _stderr() -> Console:
    return Console(stderr=True, no_color=bool(os.environ.get("NO_COLOR")) or None)


def _fail(exc: BaseException, code: int) -> NoReturn:
    if _DEBUG:  # the traceback, and still the exit code CI reads (a usage error is 2, not 1)
        import traceback

        traceback.print_exception(exc)
        raise SystemExit(code)
    from car.render import error_line  # an error may quote trace text or a file's name

    message = error_line(str(exc)) or type(exc).__name__
    print(f"car: error: {message}", file=sys.stderr)
    raise SystemExit(code)


def _version(value: bool) -> None:
    if value:
        from car import __version__

        print(f"car {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """car: causal agent replay."""


@app.command(
    cls=_Command,
    epilog=_examples(
        "car blame traces/support-refund.json",
        "car blame traces/ --format markdown -o summary.md",
    ),
)
def blame(
    ctx: typer.Context,
    traces: Annotated[
        list[str],
        typer.Argument(
            help="Trace files, directories of traces, or globs.", show_default=False, metavar="TRACE"
        ),
    ],
    source_format: Annotated[
        str,
        typer.Option(
            "--from", help="Format of the trace files (see `car import --help`).", metavar="FORMAT"
        ),
    ] = "auto",
    item: Annotated[
        int | None,
        typer.Option(help="Which run of a file that holds several (0-based).", metavar="N"),
    ] = None,
    policy: Annotated[
        str | None, typer.Option(help="Policy spec (default: the trace's).", metavar="SPEC")
    ] = None,
    env: Annotated[
        str | None,
        typer.Option(help="Environment spec (default: trace's, else recorded).", metavar="SPEC"),
    ] = None,
    scorer: Annotated[
        str | None, typer.Option(help="Scorer spec (default: the trace's).", metavar="SPEC")
    ] = None,
    samples: Annotated[
        int,
        typer.Option(
            help="Samples per decision step (a rollout may serve several steps). Not with --adaptive.",
            metavar="N",
        ),
    ] = 32,
    match_samples: Annotated[
        int, typer.Option(help="Draws per step for the action-match rate.", metavar="N")
    ] = 8,
    seed: Annotated[
        int, typer.Option(help="Keys all randomness: same seed, same report.", metavar="N")
    ] = 0,
    concurrency: Annotated[
        int, typer.Option(help="Rollouts in flight at once, across all traces.", metavar="N")
    ] = 8,
    level: Annotated[
        float,
        typer.Option(help="Two-sided interval level (with --adaptive: --confidence).", metavar="P"),
    ] = 0.95,
    min_effect: Annotated[
        float, typer.Option(help="Smallest rescue effect that counts.", metavar="P")
    ] = 0.1,
    method: Annotated[
        MethodName,
        typer.Option(
            help="contrastive, shapley, or auto (Shapley when credit is shared).",
            metavar=_choices(MethodName),
        ),
    ] = MethodName.auto,
    players: Annotated[
        str,
        typer.Option(
            help="Shapley players: steps, agents, or step groups like '0,1;2,3'.",
            metavar="steps|agents|GROUPS",
        ),
    ] = "steps",
    shapley: Annotated[
        ShapleyName,
        typer.Option(
            help="Shapley estimator: permutation (fork-walks), exact, or auto (the walks).",
            metavar=_choices(ShapleyName),
        ),
    ] = ShapleyName.auto,
    budget: Annotated[
        int | None,
        typer.Option(
            help="Most rollouts per trace for Shapley (default 1000) or, with --adaptive, for the "
            "adaptive contrastive run (default 32 per decision step; refused below about 8 per "
            "step). Not with --method contrastive.",
            metavar="N",
        ),
    ] = None,
    budget_calls: Annotated[
        int | None,
        typer.Option(help="Most policy calls Shapley may make (default: no cap).", metavar="N"),
    ] = None,
    target_width: Annotated[
        float | None,
        typer.Option(
            help="Stop early once every interval that is still open has at most this half-width "
            "(Shapley values; with --adaptive, the undecided steps' effects). Not with --method "
            "contrastive.",
            metavar="W",
        ),
    ] = None,
    fmt: Annotated[Format, _FORMAT_OPTION] = Format.table,
    output: Annotated[Path | None, _OUTPUT_OPTION] = None,
    report: Annotated[
        list[str] | None,
        typer.Option(
            "--report",
            help="Also write FORMAT=PATH (repeatable).",
            show_default=False,
            metavar="FORMAT=PATH",
        ),
    ] = None,
    store: Annotated[Path | None, _STORE_OPTION] = None,
    no_store: Annotated[
        bool, typer.Option("--no-store", help="Neither read nor write a store.")
    ] = False,
    min_match_rate: Annotated[
        float | None,
        typer.Option(help="Gate: exit 1 if the action-match rate is below this.", metavar="P"),
    ] = None,
    fail_on_abstain: Annotated[
        bool, typer.Option("--fail-on-abstain", help="Gate: exit 1 if no step can be named.")
    ] = False,
    fail_on_blame: Annotated[
        list[str] | None,
        typer.Option(
            help="Gate: exit 1 if this actor, step index or 'any' is blamed (repeatable).",
            show_default=False,
            metavar="WHO",
        ),
    ] = None,
    exit_zero: Annotated[
        bool, typer.Option("--exit-zero", help="Exit 0 on gates (1) and backend failures (3).")
    ] = False,
    fail_fast: Annotated[
        bool, typer.Option("--fail-fast", help="Stop at the first failing trace.")
    ] = False,
    max_rollouts: Annotated[
        int | None,
        typer.Option(help="Rollouts allowed for the whole run (stored ones count).", metavar="N"),
    ] = None,
    max_policy_calls: Annotated[
        int | None,
        typer.Option(help="Policy calls allowed for the whole run (estimated per trace).", metavar="N"),
    ] = None,
    price: Annotated[
        list[str] | None,
        typer.Option(
            help="COUNTER=USD per million tokens, for a cost figure (repeatable).",
            show_default=False,
            metavar="COUNTER=USD",
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Print the estimate only (JSON with --format json or jsonl)."),
    ] = False,
    shard: Annotated[
        str | None, typer.Option(help="Attribute only shard K/N of the traces.", metavar="K/N")
    ] = None,
    executor: Annotated[
        str,
        typer.Option(help="local, or ray (pip install 'car-blame[ray]').", metavar="local|ray"),
    ] = "local",
    address: Annotated[
        str | None, typer.Option(help="Ray cluster address (default: local).", metavar="URL")
    ] = None,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress display.")] = False,
    quiet: Annotated[bool, typer.Option("-q", "--quiet", help="Only errors on stderr.")] = False,
    debug: Annotated[bool, _DEBUG_OPTION] = False,
    adaptive: Annotated[
        bool,
        typer.Option(
            "--adaptive",
            help="Sample adaptively until the locus is certified (anytime-valid intervals); "
            "--samples, --level and the Shapley options are then refused.",
        ),
    ] = False,
    confidence: Annotated[
        float,
        typer.Option(
            help="Only with --adaptive: interval level and certification level (1 - delta).",
            metavar="P",
        ),
    ] = 0.95,
    base_url: Annotated[
        str | None,
        typer.Option(help="Model server URL (default: OPENAI_BASE_URL / vendor URL).", metavar="URL"),
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(help="Environment variable holding the API key.", metavar="NAME"),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds to wait for a model server's answer to one request (default 120).",
            metavar="SECONDS",
        ),
    ] = None,
    max_attempts: Annotated[
        int | None,
        typer.Option(
            help="Tries per model request, the first included, before it errs (default 6).",
            metavar="N",
        ),
    ] = None,
    temperature: Annotated[
        float | None,
        typer.Option(help="Send this temperature (default: the recorded one).", metavar="T"),
    ] = None,
    top_p: Annotated[
        float | None, typer.Option(help="Send this top_p (default: recorded).", metavar="P")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option(help="Send this max_tokens (default: recorded).", metavar="N")
    ] = None,
    thinking: Annotated[
        str | None,
        typer.Option(
            help="Extended thinking of anthropic:MODEL policies: off, adaptive, or a budget of N "
            "tokens (1024 or more). Default: as recorded (a budget of 4096 for a trace that shows "
            "thinking but not its settings).",
            show_default=False,
            metavar="off|adaptive|N",
        ),
    ] = None,
) -> None:
    """Find which step of each failed run caused its failure.

    Ranks the steps by how much re-deciding them avoids the failure.

    Exit codes: 0 done; 1 a gate tripped; 2 usage or input error; 3 backend failure.
    """
    global _DEBUG
    _DEBUG = debug
    from car.backends.options import configure
    from car.config import BACKEND_KEYS, resolve_sourced, unknown_variables

    if not quiet:
        for line in unknown_variables():
            print(f"car: note: {line}", file=sys.stderr)
    given = {
        name
        for name in ctx.params
        if (src := ctx.get_parameter_source(name)) is not None and src.name != "DEFAULT"
    }
    o, origins = resolve_sourced(ctx.params, given)
    _check_ranges(o, confidence)
    policy, env, scorer = o["policy"], o["env"], o["scorer"]
    samples, match_samples, seed = o["samples"], o["match_samples"], o["seed"]
    concurrency, level, min_effect = o["concurrency"], o["level"], o["min_effect"]
    backend = {k: o.get(k) for k in BACKEND_KEYS}
    from car.batch import BatchOptions, parse_shard
    from car.ci import BlameRequest, Interrupted, parse_prices, parse_reports, run_blame
    from car.gates import Gates

    output = _dash_is_stdout(output)
    fmt, by_suffix = _chosen_format(ctx, fmt, output)
    _check_html_destination(fmt, output)
    request = BlameRequest(
        paths=list(traces),
        options=BatchOptions(
            policy=policy,
            env=env,
            scorer=scorer,
            samples=samples,
            match_samples=match_samples,
            seed=seed,
            level=level,
            min_effect=min_effect,
            gates=Gates(min_match_rate, fail_on_abstain, tuple(fail_on_blame or ())),
            prices=parse_prices(price or []),
            debug=debug,
            source_format=source_format,
            item=item,
            adaptive=adaptive,
            confidence=confidence,
            budget=budget,
            target_width=target_width,
            method=method.value,
            players=players,
            shapley_method=shapley.value,
            budget_calls=budget_calls,
            given=_set_by_user(ctx, given),
            origins={k: v for k, v in origins.items() if k in ("policy", "env", "scorer")},
        ),
        fmt=fmt,
        output=output,
        fmt_by_suffix=by_suffix,
        reports=parse_reports(report or []),
        store_path=store,
        no_store=no_store,
        concurrency=concurrency,
        shard=parse_shard(shard) if shard else None,
        fail_fast=fail_fast,
        max_rollouts=max_rollouts,
        max_policy_calls=max_policy_calls,
        dry_run=dry_run,
        exit_zero=exit_zero,
        progress=not no_progress,
        quiet=quiet,
        executor=executor,
        address=address,
    )
    with configure(**backend):
        try:
            code = run_blame(request)
        except Interrupted as stop:
            _interrupted(stop.detail)
    if code:
        raise SystemExit(code)


@app.command(cls=_Command)
def plugins(debug: Annotated[bool, _DEBUG_OPTION] = False) -> None:
    """List the policies, environments and scorers car can use.

    Each line says where it comes from.
    """
    from car.plugins import describe_plugins

    print(describe_plugins(), end="")


@app.command(
    cls=_Command,
    epilog=_examples(
        "car validate traces/support-refund.json",
        "car validate traces/",
        "car validate traces/pivot.json traces/or.json   # several: one table",
    ),
)
def validate(
    traces: Annotated[
        list[Path],
        typer.Argument(
            help="Trace files (any format car imports), directories of them, or glob patterns.",
            show_default=False,
            metavar="TRACE",
        ),
    ],
    source_format: Annotated[
        str,
        typer.Option(
            "--from", help="Format of the file(s); default: sniffed per file.", metavar="FORMAT"
        ),
    ] = "auto",
    debug: Annotated[bool, _DEBUG_OPTION] = False,
) -> None:
    """Check trace files, or every trace file under a directory.

    One file gets a one-line summary; a directory, or several paths, a table.
    """
    from car.batch import distinct
    from car.render import error_line, literal
    from car.report import short
    from car.stdout import StdoutWriter
    from car.tracefiles import is_folder

    # A pattern the shell left alone (quoted, or on Windows) is matched here, as `car blame` does.
    # A file named twice (`t.json ./t.json`) is checked once, as `car blame` attributes it once.
    traces = distinct([Path(p) for item in traces for p in _matched(item)], str)
    # stdout may refuse the results (a full disk): they are saved to a file, named in one line
    out = StdoutWriter("the results", ".txt", prefix="car-validate-")
    trace = traces[0]
    if len(traces) > 1 or is_folder(trace):
        from car.importers.batch import check_path, render_rows

        rows = [row for path in traces for row in check_path(path, source_format)]
        if not rows:
            raise CarError(f"{trace}: no trace files (*.json, *.jsonl, *.eval) under this directory")
        out.write(render_rows(rows, trace if len(traces) == 1 else None))
        if out.close() or any(r.error is not None for r in rows):
            raise SystemExit(2)
        return
    from car.importers import importable_runs
    from car.trace import no_decisions

    runs = importable_runs(trace, source_format)
    refused = False
    for t in runs:
        problem = no_decisions(t, str(trace))
        if problem is not None:  # `car blame` refuses it: not ok
            print(f"car: error: {error_line(problem)}", file=sys.stderr)
            refused = True
            continue
        # trace text: its escape sequences and line breaks are shown, not acted on
        actors = sorted(str(literal(short(a))) for a in {s.actor for s in t.steps})
        name = str(literal(str(trace)))
        where = (
            name
            if t.source is None or t.source.locator in (None, "$")
            else f"{name} ({literal(t.source.locator)})"
        )
        origin = ""
        if t.source is not None and t.fidelity is not None:
            n = len(t.fidelity.warnings)
            origin = (
                f" from {t.source.format}, fidelity class {t.fidelity.class_}"
                f"{f', {n} warning' + ('s' if n != 1 else '') if n else ''}"
            )
        steps, decisions = len(t.steps), len(t.decision_steps)
        out.write(
            f"{where}: ok: {t.version}{origin}, {steps} step{'s' if steps != 1 else ''}, {decisions} "
            f"decision step{'s' if decisions != 1 else ''}, actors {', '.join(actors)}\n"
        )
        for w in t.fidelity.warnings if t.fidelity is not None else ():
            # what is missing, and the fix where there is one
            out.write(f"  warning {literal(w.code)}: {literal(w.message)}\n")
    for index, exc in runs.skipped:
        # `car import` skips such a run with a warning; a file that holds one is not valid, as the
        # row of `car validate DIR` says
        why = str(exc).removeprefix(f"{trace}: ")  # `error_line` makes it one line
        print(
            f"car: error: {error_line(f'{trace}: run {index} cannot be imported: {why}')}",
            file=sys.stderr,
        )
        refused = True
    if out.close() or refused:
        raise SystemExit(2)


def _matched(item: Path) -> list[str]:
    """The files a glob that names no file matches (`car blame`'s rule); any other path as it is."""
    from car.batch import expand_paths
    from car.tracefiles import is_pattern

    return expand_paths([item]) if is_pattern(item) else [str(item)]


@app.command(
    "import",
    cls=_Command,
    epilog=_examples(
        "car import chat.json -o trace.json      # the format is sniffed; --from names it",
        "car import tau-bench.json -o runs/      # a file of several runs: one trace each",
    ),
)
def import_(
    file: Annotated[
        Path,
        typer.Argument(help="A trace in a foreign format.", show_default=False, metavar="FILE"),
    ],
    source_format: Annotated[
        str,
        typer.Option(
            "--from",
            help="auto (sniff), car, who-and-when, tau-bench, mini-swe-agent, atif, inspect, otel, "
            "openai-responses, anthropic, openai-chat, or an installed importer plugin.",
            metavar="FORMAT",
        ),
    ] = "auto",
    output: Annotated[
        str | None,  # not Path, which drops the trailing slash of `-o DIR/`
        typer.Option(
            "-o",
            "--output",
            help="Write the trace here (a directory for several runs, or ending in /; - or none: "
            "stdout).",
            metavar="PATH",
        ),
    ] = None,
    item: Annotated[
        int | None, typer.Option(help="Import only this run (0-based).", metavar="N")
    ] = None,
    debug: Annotated[bool, _DEBUG_OPTION] = False,
) -> None:
    """Convert a run log in another format into a car trace.

    Chat logs, OTLP spans, Inspect logs and more: see --from.
    """
    from car.importers.convert import write_imported
    from car.render import literal

    for line in write_imported(file, source_format, output, item):
        print(literal(line), file=sys.stderr)  # names the trace by its id: trace text


@app.command(cls=_Command)
def schema(
    name: Annotated[
        SchemaName, typer.Argument(help="Which schema.", metavar=_choices(SchemaName))
    ] = SchemaName.trace,
    debug: Annotated[bool, _DEBUG_OPTION] = False,
) -> None:
    """Print the JSON Schema of the trace (or report) format."""
    from car.report import Report
    from car.trace import Trace

    model = Trace if name is SchemaName.trace else Report
    print(json.dumps(model.model_json_schema(), indent=2))


cache_app = typer.Typer(help="Inspect or clear the rollout store.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")


@cache_app.command("info", cls=_Command)
def cache_info(
    store: Annotated[Path | None, _STORE_OPTION] = None,
    debug: Annotated[bool, _DEBUG_OPTION] = False,
) -> None:
    """Show what the store holds."""
    from car.store import CACHE_WAYS, RolloutStore, default_store_path

    path = store or default_store_path()
    with RolloutStore(path, create=False, ways=CACHE_WAYS) as st:
        info = st.info()
    kinds = ", ".join(f"{n:,} {k}" for k, n in sorted(info.by_kind.items())) or "none"
    size = f"{info.bytes / 1e6:.1f} MB"
    print(f"{info.path}: {_rows(info.rollouts)} stored ({kinds}) over {info.holds()}; {size}")


def _rows(n: int) -> str:
    """A count of a store's rows: every rollout and match draw is one."""
    return f"{n:,} {'rollout or draw' if n == 1 else 'rollouts and draws'}"


@cache_app.command("clear", cls=_Command)
def cache_clear(
    store: Annotated[Path | None, _STORE_OPTION] = None,
    force: Annotated[bool, typer.Option("--force", help="Delete even a file car did not make.")] = False,
    debug: Annotated[bool, _DEBUG_OPTION] = False,
) -> None:
    """Delete the store (every stored rollout and report)."""
    from car.store import clear_store, default_store_path

    path = store or default_store_path()
    removed = clear_store(path, force=force)
    print(f"{path}: removed" if removed else f"{path}: nothing to remove")


@app.command(cls=_Command)
def merge(
    into: Annotated[
        Path, typer.Argument(help="The store to merge into (created if missing).", metavar="INTO")
    ],
    sources: Annotated[list[Path], typer.Argument(help="Shard stores to merge in.", metavar="SHARD")],
    debug: Annotated[bool, _DEBUG_OPTION] = False,
) -> None:
    """Combine shard stores (from `car blame --shard K/N`) into one."""
    from car.store import MERGE_WAYS, RolloutStore, merge_source

    shards = [merge_source(src, into) for src in sources]  # all checked before `into` is made
    try:
        with RolloutStore(into, ways=MERGE_WAYS) as target:
            for shard in shards:
                added, present = target.merge_from(shard)
                print(
                    f"{shard.path}: {_rows(added)} added, {present:,} already present", file=sys.stderr
                )
            info = target.info()
    finally:
        for shard in shards:
            shard.close()
    print(f"{into}: {_rows(info.rollouts)} stored over {info.holds()}")


@app.command(
    "report",
    cls=_Command,
    epilog=_examples(
        "car blame traces/support-refund.json --format json -o report.json",
        "car report report.json --format html -o report.html",
        "car report .car/store.sqlite --format markdown   # every stored report",
    ),
)
def report_cmd(
    ctx: typer.Context,
    source: Annotated[
        Path,
        typer.Argument(
            help="A store file, or what car blame --format json or jsonl wrote (a report or a batch).",
            show_default=False,
            metavar="SOURCE",
        ),
    ],
    fmt: Annotated[Format, _FORMAT_OPTION] = Format.table,
    output: Annotated[Path | None, _OUTPUT_OPTION] = None,
    trace: Annotated[
        Path | None,
        typer.Option(
            help="The trace, for the HTML timeline (default: the report's trace_path).",
            metavar="FILE",
        ),
    ] = None,
    pick: Annotated[
        str | None,
        typer.Option(
            help="Only the reports of this trace (its path or id), or this report: a trace analysed "
            "several ways is listed once per analysis as 'PATH [ID: what differs]'; give the ID "
            "(or its first 4+ digits). --format html needs it when SOURCE holds several reports.",
            metavar="WHICH",
        ),
    ] = None,
    exit_zero: Annotated[
        bool,
        typer.Option("--exit-zero", help="Exit 0 on gates (1) and backend failures (3)."),
    ] = False,
    debug: Annotated[bool, _DEBUG_OPTION] = False,
) -> None:
    """Re-render saved results in any format, without new model calls.

    Exits as car blame did for the traces it shows (1 a gate tripped, 2 an input error, 3 a backend
    failure), unless --exit-zero.
    """
    global _DEBUG
    _DEBUG = debug
    from car.ci import (
        check_rerender_output,
        print_table,
        rerender,
        step_summary,
        suffix_note,
        write_report,
    )
    from car.gates import final_exit_code
    from car.outputs import counts_line

    output = _dash_is_stdout(output)
    fmt, by_suffix = _chosen_format(ctx, fmt, output)
    _check_html_destination(fmt, output)
    if trace is not None and fmt is not Format.html:  # named, so never ignored in silence
        from car.errors import InputError

        raise InputError(
            f"--trace {trace}: only --format html shows the trace (its timeline), and this report "
            f"is {fmt.value}; drop --trace, or use --format html"
        )
    check_rerender_output(source, output)
    text, results = rerender(source, fmt, trace=trace, pick=pick)
    if output is None:
        # A terminal gets the table fitted to it, as `car blame` prints it there.
        if fmt is not Format.table or not print_table(results, sys.stdout, batch=len(results) != 1):
            sys.stdout.write(text)
    else:
        write_report(output, text)  # re-rendering costs nothing: a failed write is just an error
        print(f"{fmt.value} report written to {output}{suffix_note(output, by_suffix)}", file=sys.stderr)
    if step_summary([(fmt, output)], results, batch=len(results) != 1):
        raise typer.Exit(2)
    # As car blame exited for these traces.
    code = final_exit_code((r.exit_code for r in results), exit_zero=exit_zero)
    if code or len(results) > 1:  # a batch ends with its counts (and the labels' tally), as blame's
        print(f"car: {counts_line(results)}", file=sys.stderr)
    if code:
        raise typer.Exit(code)


def _check_ranges(values: dict[str, object], confidence: float) -> None:
    """Option values out of range are usage errors before any work, whether or not this run uses
    them (a typo in a CI command line should not pass silently)."""
    from pydantic import ValidationError

    from car.config import BACKEND_KEYS, Settings
    from car.errors import InputError
    from car.jsonfile import describe_error, expected_value

    if not 0.5 <= confidence < 1:
        raise InputError(f"--confidence must be in [0.5, 1), got {confidence}")
    # The attribution options have their own checks (and messages); these are the backends'.
    given = {k: v for k, v in values.items() if k in BACKEND_KEYS and v is not None}
    try:
        Settings.model_validate(given)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        name = "--" + str(err["loc"][0]).replace("_", "-")
        value = expected_value(err)
        msg = f"must be {value}" if value is not None else describe_error(err)
        raise InputError(f"{name} {msg}, got {err.get('input')!r}") from None


def _set_by_user(ctx: typer.Context, given: set[str]) -> dict[str, str]:
    """Each option given on the command line, as given (`--samples 64`), keyed by its `BatchOptions`
    name, which refuses the ones the run would not use. A `CAR_*` variable or the configuration
    file sets a project's defaults for every mode: an adaptive run leaves `samples = 64` unused
    without a word, as a contrastive run leaves `confidence`."""
    out: dict[str, str] = {}
    for param in ctx.command.params:
        if param.name in given and not isinstance(param, TyperArgument):
            name = "shapley_method" if param.name == "shapley" else param.name
            out[name] = f"{max(param.opts, key=len)} {ctx.params[param.name]}"
    return out


def _dash_is_stdout(output: Path | None) -> Path | None:
    # As in `car import -o -`: a file named "-" is never what was meant.
    return None if output == Path("-") else output


def _chosen_format(ctx: typer.Context, fmt: Format, output: Path | None) -> tuple[Format, bool]:
    """The format to write, and whether it came from -o FILE's suffix: --format when given (the
    user's choice, whatever the suffix; the "report written" line names the format), else the
    format the suffix names (`-o page.html`), else table. `format` is no configuration key, so only
    the command line can give it."""
    source = ctx.get_parameter_source("fmt")
    named = format_of(output) if output is not None else None
    if named is None or (source is not None and source.name != "DEFAULT"):
        return fmt, False
    return named, True


def _check_html_destination(fmt: Format, output: Path | None) -> None:
    # Checked before any work: an HTML page dumped on a terminal helps nobody.
    if fmt is Format.html and output is None and sys.stdout.isatty():
        raise CarError("--format html needs -o FILE (or redirect stdout to a file)")


def _empty_value(args: list[str], i: int) -> str:
    """Why `args[i]`, an empty string, is refused, and what its option takes instead, from the
    option's metavar: "--players: an empty value (''); give steps, agents or GROUPS"."""
    command: Any = typer.main.get_command(app)
    for word in args[:i]:  # the (sub)command named: `blame`, `cache clear`
        sub = getattr(command, "commands", {}).get(word)
        if sub is None:
            break
        command = sub
    option = args[i - 1] if i > 0 and args[i - 1].startswith("-") else None
    metavar = next((p.metavar for p in command.params if option in p.opts), None)
    if option is None or metavar is None:  # after a flag, '' is an argument
        return "an empty argument (''); give a path or a value"
    if "PATH" in metavar or metavar == "FILE":
        takes = "a path"
    else:  # a choice ("table|json|...") or a placeholder ("N")
        *ways, last = metavar.split("|")
        takes = f"{', '.join(ways)} or {last}" if ways else last
    return f"{option}: an empty value (''); give {takes}"


_TERMINATED = False  # SIGTERM, not Ctrl-C, stopped the command


def _terminate(signum: int, frame: FrameType | None) -> None:
    """SIGTERM (a CI runner's timeout, `kill`) stops a command as Ctrl-C does, rather than killing
    it where it stands: the runs it cancels close the store and the reports they stream, and one
    line says so (exit 143, as a shell reports a process that SIGTERM ended). Ctrl-C's own handler
    does it: inside `asyncio.run` that one cancels the run at its next await, so no coroutine is
    cut off half-way."""
    global _TERMINATED
    _TERMINATED = True
    on_interrupt = signal.getsignal(signal.SIGINT)
    if not callable(on_interrupt):  # Ctrl-C ignored (a job started in the background)
        raise KeyboardInterrupt
    on_interrupt(signal.SIGINT, frame)


def _interrupted(detail: str | None = None) -> NoReturn:
    """The one line of a command stopped by Ctrl-C or SIGTERM; `detail`, after it, says what was
    kept and whether a rerun resumes."""
    said = "; " + detail if detail else ""
    if _TERMINATED:
        print(f"car: terminated{said}", file=sys.stderr)
        raise SystemExit(128 + signal.SIGTERM)
    print(f"car: interrupted{said}", file=sys.stderr)
    raise SystemExit(130)


def main(argv: list[str] | None = None) -> None:
    """Entry point: one-line errors with exit codes, tracebacks only with --debug."""
    global _DEBUG, _TERMINATED
    args = sys.argv[1:] if argv is None else argv
    _DEBUG = "--debug" in args
    if "" in args:  # a path option would read '' as '.', the current directory
        _fail(CarError(_empty_value(args, args.index(""))), 2)
    token = COMMAND_LINE.set(True)  # messages name options (`--item N`), not Python arguments
    stdout = sys.stdout
    guard = Guard(stdout)
    sys.stdout = cast(TextIO, guard)  # every command's output, help and --version included
    _TERMINATED = False
    main_thread = threading.current_thread() is threading.main_thread()  # only there can it be set
    term = signal.signal(signal.SIGTERM, _terminate) if main_thread else None
    try:
        try:
            _run(args)
        finally:
            guard.flush()  # a full disk may say so only here
    except Refused as exc:
        # What a command saves when stdout refuses it (a report, a trace) it has said already; the
        # rest (a schema, a listing, a re-rendered report) costs nothing to make again.
        error = CarError(
            f"stdout: cannot write the output ({exc}); it is quick to make again, so it was not saved"
        )
        error.__cause__ = exc  # --debug shows where
        _fail(error, 2)
    finally:
        if term is not None:
            signal.signal(signal.SIGTERM, term)
        sys.stdout = stdout
        COMMAND_LINE.reset(token)  # in-process callers (tests) go on in Python


def _choice_hint(message: str) -> str:
    """The hint after a value that is not one of its option's choices but close to one (`--method
    shapely`: " Did you mean 'shapley'?"), read from the parser's own words; else nothing."""
    said = re.search(r"'([^']*)' is not one of ((?:'[^']*'(?:, )?)+)", message)
    if said is None:
        return ""
    close = difflib.get_close_matches(said[1], re.findall(r"'([^']*)'", said[2]), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def _format_flag(message: str, ctx: Any) -> str:
    """`--html` (or `--json`, ...) where the command has `--format`: click's near spellings
    (`--help, --item`) in place of the option meant; say that one instead."""
    said = re.match(r"No such option: --([a-z]+)", message)
    params = ctx.command.params if ctx is not None else []
    if said is None or said[1] not in set(OutputFormat):
        return message
    if not any("--format" in p.opts for p in params):
        return message
    return f"No such option: --{said[1]}. Did you mean '--format {said[1]}'?"


def _merge_output(message: str, ctx: Any) -> str:
    """`car merge -o OUT A B`: the store merged into is the first argument, not an option."""
    said = re.match(r"No such option: (-o|--output)\b", message)
    if said is None or ctx is None or ctx.command.name != "merge":
        return message
    return f"No such option: {said[1]}. The store to merge into comes first: car merge INTO SHARD..."


def _command_path(args: list[str]) -> str:
    """`car blame`, `car cache info`: the command the arguments name, for an error click raised
    without its context (an option's missing value)."""
    command: Any = typer.main.get_command(app)
    path = ["car"]
    for arg in args:
        command = getattr(command, "commands", {}).get(arg)  # a group's subcommands
        if command is None:
            break
        path.append(arg)
    return " ".join(path)


def _run(args: list[str]) -> None:
    """Run the command; every outcome but success becomes SystemExit with car's exit code."""
    try:
        rv = app(args=args, prog_name="car", standalone_mode=False)
        # Typer turns Ctrl-C into an exit code it returns rather than raises (standalone off).
        if isinstance(rv, int) and not isinstance(rv, bool) and rv != 0:
            if rv == 130:
                _interrupted()
            raise SystemExit(rv)
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except typer.Abort:
        _interrupted()
    except _NoArgsIsHelp as exc:
        exc.show()  # type: ignore[attr-defined]  # the help on stderr, exit 2, as click does
        raise SystemExit(2) from None
    except _UsageError as exc:
        ctx = getattr(exc, "ctx", None)
        hint = f" (see '{ctx.command_path if ctx is not None else _command_path(args)} --help')"
        message = exc.format_message().replace("Value error, ", "")  # type: ignore[attr-defined]
        message = _merge_output(_format_flag(message, ctx), ctx)
        _fail(CarError(f"{message}{_choice_hint(message)}{hint}"), 2)
    except _ClickException as exc:
        _fail(CarError(exc.format_message()), 2)  # type: ignore[attr-defined]
    except CarError as exc:
        _fail(exc, exc.exit_code)
    except KeyboardInterrupt:
        _interrupted()
