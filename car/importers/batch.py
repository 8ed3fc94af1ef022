"""Batch checks: `car validate DIR` imports every file and prints one row per run.

A file that fails gets one row with its one-line error, and so does an entry of the directory that
cannot be read or checked; the others are still checked. The files are those `car blame DIR` takes
(`car.tracefiles`). Nothing here stops at the first bad file: the exit code (2 if any failed) is the
caller's.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from car.errors import CarError
from car.render import error_line, literal
from car.trace import Trace, no_decisions
from car.tracefiles import Entry, is_folder, walk

__all__ = ["Row", "check_path", "render_rows", "trace_files"]


@dataclass(frozen=True)
class Row:
    file: str
    format: str | None = None
    fidelity: str | None = None
    steps: int | None = None
    actors: int | None = None
    warnings: tuple[str, ...] = ()
    error: str | None = None
    item: int | None = None


def trace_files(root: Path) -> list[Path]:
    """Files under `root` that may hold traces, by the rule `car blame DIR` follows too
    (`car.tracefiles`), in natural order; entries that cannot be read are left out."""
    return [Path(e.path) for e in walk(root) if e.error is None]


def _rows_for(trace: Trace, file: str, item: int | None) -> Row:
    fid = trace.fidelity
    return Row(
        file=file,
        format=trace.source.format if trace.source else "car",
        fidelity=fid.class_ if fid else None,
        steps=len(trace.steps),
        actors=len(trace.actors),
        warnings=tuple(w.code for w in fid.warnings) if fid else (),
        item=item,
    )


def check_path(path: Path, fmt: str = "auto") -> list[Row]:
    """One row per run in `path` (a file, or every trace file under a directory); an entry of the
    directory that cannot be read or checked is a failed row of its own, and so is a run that
    cannot be imported, under its index in the file (`car import` skips it with a warning)."""
    from car.importers import _runs

    entries = walk(path) if is_folder(path) else [Entry(str(path))]
    rows: list[Row] = []
    for entry in entries:
        if entry.error is not None:
            rows.append(Row(file=entry.path, error=entry.error))
            continue
        try:
            runs = _runs(Path(entry.path), fmt).entries
        except CarError as exc:
            rows.append(Row(file=entry.path, error=" ".join(str(exc).split())))
            continue
        for i, run in enumerate(runs):
            item = i if len(runs) > 1 else None
            problem = no_decisions(run, entry.path) if isinstance(run, Trace) else None
            if problem is not None:  # `car blame` refuses it: a failed row, in its words
                rows.append(Row(file=entry.path, error=problem, item=item))
            elif isinstance(run, Trace):
                rows.append(_rows_for(run, entry.path, item))
            else:
                rows.append(Row(file=entry.path, error=" ".join(str(run).split()), item=item))
    return rows


def render_rows(rows: list[Row], root: Path | None = None) -> str:
    """The summary table as plain text (stable in files, pipes and CI logs)."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name, justify in (
        ("file", "left"),
        ("format", "left"),
        ("class", "center"),
        ("steps", "right"),
        ("actors", "right"),
        ("warnings", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    # File names and error text are the user's, never rich markup: `run[bold].json` stays as is.
    for r in rows:
        name = r.file
        if root is not None:
            with contextlib.suppress(ValueError):  # a file outside root keeps its full path
                name = str(Path(r.file).relative_to(root))
        if r.item is not None:
            name += f" #{r.item}"
        if r.error is not None:
            table.add_row(literal(name), "FAILED", "", "", "", Text(error_line(r.error, 500)))
        else:
            table.add_row(
                literal(name),
                literal(r.format or ""),
                r.fidelity or "-",
                str(r.steps),
                str(r.actors),
                literal(", ".join(r.warnings) or "-"),
            )
    failed = sum(1 for r in rows if r.error is not None)
    files = len({r.file for r in rows})
    console = Console(record=True, width=160, file=io.StringIO(), no_color=True)
    console.print(table)
    console.print(
        f"{files} file{'s' if files != 1 else ''}, {len(rows) - failed} run"
        f"{'s' if len(rows) - failed != 1 else ''} ok, {failed} failed"
    )
    return "".join(line.rstrip() + "\n" for line in console.export_text(styles=False).splitlines())
