"""The `car` command line. stdout carries the report only; progress and errors go to stderr.

Exit codes: 0 done; 2 usage or input error; 3 backend failure (the report is still written).
"""

from __future__ import annotations

import io
import json
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from car.errors import CarError
from car.report import Report

# Typer may sit on click or on its own vendored copy; find the exception classes either way.
_UsageError: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
_ClickException: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"
)

app = typer.Typer(
    name="car",
    help="Find which step of a failed agent run caused the failure, by intervention.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


class Format(StrEnum):
    table = "table"
    json = "json"


class SchemaName(StrEnum):
    trace = "trace"
    report = "report"


_DEBUG = False


def _stderr() -> Console:
    return Console(stderr=True, no_color=bool(os.environ.get("NO_COLOR")) or None)


def _fail(exc: BaseException, code: int) -> NoReturn:
    if _DEBUG:
        raise exc
    message = " ".join(str(exc).split()) or type(exc).__name__
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


@app.command()
def blame(
    ctx: typer.Context,
    trace: Annotated[Path, typer.Argument(help="A car trace file (JSON).", show_default=False)],
    policy: Annotated[str | None, typer.Option(help="Policy spec (default: the trace's).")] = None,
    env: Annotated[
        str | None, typer.Option(help="Environment spec (default: trace's, else recorded).")
    ] = None,
    scorer: Annotated[str | None, typer.Option(help="Scorer spec (default: the trace's).")] = None,
    samples: Annotated[int, typer.Option(help="Rollouts per decision step.")] = 32,
    match_samples: Annotated[int, typer.Option(help="Draws per step for the action-match rate.")] = 8,
    seed: Annotated[int, typer.Option(help="Keys all randomness: same seed, same report.")] = 0,
    concurrency: Annotated[int, typer.Option(help="Rollouts in flight at once.")] = 8,
    level: Annotated[float, typer.Option(help="Two-sided interval level.")] = 0.95,
    min_effect: Annotated[float, typer.Option(help="Smallest rescue effect that counts.")] = 0.1,
    fmt: Annotated[Format, typer.Option("--format", help="Report format.")] = Format.table,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write the report here.")] = None,
    debug: Annotated[bool, typer.Option(help="Show tracebacks.")] = False,
    base_url: Annotated[
        str | None, typer.Option(help="Model server URL (default: OPENAI_BASE_URL / vendor URL).")
    ] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="Environment variable holding the API key.")
    ] = None,
    temperature: Annotated[
        float | None, typer.Option(help="Send this temperature (default: the recorded one).")
    ] = None,
    top_p: Annotated[float | None, typer.Option(help="Send this top_p (default: recorded).")] = None,
    max_tokens: Annotated[
        int | None, typer.Option(help="Send this max_tokens (default: recorded).")
    ] = None,
) -> None:
    """Rank the steps of a failed run by how much re-deciding them avoids the failure."""
    global _DEBUG
    _DEBUG = debug
    from car.backends.options import configure
    from car.config import BACKEND_KEYS, resolve

    given = {
        name
        for name in ctx.params
        if (src := ctx.get_parameter_source(name)) is not None and src.name != "DEFAULT"
    }
    o = resolve(ctx.params, given)
    policy, env, scorer = o["policy"], o["env"], o["scorer"]
    samples, match_samples, seed = o["samples"], o["match_samples"], o["seed"]
    concurrency, level, min_effect = o["concurrency"], o["level"], o["min_effect"]
    backend = {k: o.get(k) for k in BACKEND_KEYS}
    from car.blame import blame_async
    from car.render import render_json

    err = _stderr()
    bar = Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    task_id = bar.add_task("replaying", total=None)

    def progress(phase: str, done: int, total: int) -> None:
        bar.update(task_id, completed=done, total=total)

    import asyncio

    with bar, configure(**backend):
        report = asyncio.run(
            blame_async(
                trace,
                policy=policy,
                env=env,
                scorer=scorer,
                samples=samples,
                match_samples=match_samples,
                seed=seed,
                concurrency=concurrency,
                level=level,
                min_effect=min_effect,
                progress=progress,
            )
        )
    text = render_json(report) if fmt is Format.json else _table_text(report, to_file=output is not None)
    if output is not None:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            sys.stdout.write(text)
            raise CarError(
                f"{output}: cannot write the report ({exc.strerror}); printed it instead"
            ) from None
        err.print(f"report written to {output}", highlight=False)
    elif text:
        sys.stdout.write(text)
    if report.status == "backend-errors":
        print(
            f"car: error: too many rollouts errored ({report.budget.errored} of "
            f"{report.budget.rollouts}); first: {report.first_error}",
            file=sys.stderr,
        )
        raise SystemExit(3)


@app.command()
def plugins() -> None:
    """List the policies, environments and scorers available, and where each comes from."""
    from car.plugins import describe_plugins

    print(describe_plugins(), end="")


@app.command()
def validate(
    trace: Annotated[Path, typer.Argument(help="A car trace file (JSON).", show_default=False)],
) -> None:
    """Check a trace file; print a one-line summary."""
    from car.trace import load_trace

    t = load_trace(trace)
    actors = sorted({s.actor for s in t.steps})
    print(
        f"{trace}: ok: {t.version}, {len(t.steps)} steps, {len(t.decision_steps)} decision steps, "
        f"actors {', '.join(actors)}"
    )


@app.command()
def schema(
    name: Annotated[SchemaName, typer.Argument(help="Which schema.")] = SchemaName.trace,
) -> None:
    """Print the JSON Schema of the trace (or report) format."""
    from car.report import Report
    from car.trace import Trace

    model = Trace if name is SchemaName.trace else Report
    print(json.dumps(model.model_json_schema(), indent=2))


def _table_text(report: Report, *, to_file: bool) -> str:
    """Render the table; printed directly to a terminal, else returned as plain text."""
    from car.render import render_table

    stdout = Console()
    if stdout.is_terminal and not to_file:
        render_table(report, stdout)
        return ""
    # Not a terminal: a fixed, roomy width and no styling, so files and pipes read well.
    plain = Console(record=True, width=120, file=io.StringIO(), no_color=True)
    render_table(report, plain)
    return plain.export_text(styles=False)


def main(argv: list[str] | None = None) -> None:
    """Entry point: one-line errors with exit codes, tracebacks only with --debug."""
    global _DEBUG
    args = sys.argv[1:] if argv is None else argv
    _DEBUG = "--debug" in args
    try:
        app(args=args, prog_name="car", standalone_mode=False)
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except typer.Abort:
        print("car: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except _UsageError as exc:
        ctx = getattr(exc, "ctx", None)
        name = getattr(ctx, "info_name", None)
        hint = f" (see 'car {name} --help')" if name and name != "car" else " (see 'car --help')"
        _fail(CarError(f"{exc.format_message()}{hint}"), 2)  # type: ignore[attr-defined]
    except _ClickException as exc:
        _fail(CarError(exc.format_message()), 2)  # type: ignore[attr-defined]
    except CarError as exc:
        _fail(exc, exc.exit_code)
    except KeyboardInterrupt:
        print("car: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
