"""Importers: open the traces users already have as car traces.

    from car.importers import load_any
    trace = load_any("run.otlp.json")            # sniffed: OTLP/JSON with GenAI attributes
    trace = load_any("log.json", fmt="who-and-when")

`load_any` is the one entry point the command line and `car.blame` use to open any file: native
`car.trace/v1` files go through `car.trace.load_trace`'s validation, foreign files through their
importer. Every imported trace carries `source` (format, path, locator, content hash) and `fidelity`
(class A, B or C, plus concrete warnings). Importers are plugins too: entry-point group
`car.importers`, objects with `name`, `description`, `sniff(data, path)` and `convert(document)`.

A file of several runs (an Inspect log, a tau-bench results file, an OTLP export) is converted run by
run (`Runs.each`): a run that cannot be imported (an errored sample that made no model call, an
empty trajectory) is skipped with a warning on the `car.importers` logger naming its place and why,
and the others import. `--item N` (`item=N`) counts runs as the file does, skipped ones included.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from car.errors import COMMAND_LINE, CarError, InputError, option_name
from car.importers.base import At, Builder, Document, Importer, read_document
from car.importers.registry import detect, get_importer, importers, known
from car.trace import Trace

__all__ = [
    "At",
    "Builder",
    "Document",
    "Importer",
    "Runs",
    "detect",
    "formats",
    "get_importer",
    "import_file",
    "importable_runs",
    "load_any",
    "read_document",
]


_log = logging.getLogger(__name__)
_Item = TypeVar("_Item")


class Runs(list[Trace]):
    """The runs of a file, in file order: as a list, those that could be imported; `entries` holds
    every run at its index in the file, one that could not be imported as the InputError saying why.

    A multi-run importer returns `Runs.each(items, convert)`, so that one bad run (a routine errored
    sample, an empty trajectory) does not cost the file its good ones. A plain list from `convert`
    means every run imported.
    """

    def __init__(self, entries: Iterable[Trace | InputError] = ()) -> None:
        self.entries: tuple[Trace | InputError, ...] = tuple(entries)
        super().__init__(e for e in self.entries if isinstance(e, Trace))

    @classmethod
    def each(cls, items: Iterable[_Item], convert: Callable[[_Item], Trace | None]) -> Runs:
        """Convert each item to a run; one that raises InputError stays, in its place, as that
        error. `convert` returns None for an item that is no run at all (it is not counted)."""
        entries: list[Trace | InputError] = []
        for item in items:
            try:
                trace = convert(item)
            except InputError as exc:
                entries.append(exc)
                continue
            if trace is not None:
                entries.append(trace)
        return cls(entries)

    @classmethod
    def listed(
        cls, records: list[object], at: At, stem: str, one: Callable[[object, At, str, str], Trace]
    ) -> Runs:
        """A file that is a list of runs: run i is `one(record, at[i], its locator, "STEM-i")`, and
        one that cannot be imported stays in its place as the error, as in `each`."""
        return cls.each(
            enumerate(records), lambda r: one(r[1], at / r[0], (at / r[0]).where(), f"{stem}-{r[0]}")
        )

    @property
    def skipped(self) -> list[tuple[int, InputError]]:
        """The runs that could not be imported, as (index in the file, why)."""
        return [(i, e) for i, e in enumerate(self.entries) if isinstance(e, InputError)]


def formats() -> list[tuple[str, str]]:
    """(name, description) of every format car can read, in sniffing order."""
    return [(i.name, i.description) for i in importers()]


def import_file(path: str | Path, fmt: str = "auto") -> Runs:
    """Every run in the file at `path` that can be imported, as traces; each run that cannot is
    skipped with a warning naming its place and why (`Runs.skipped`). `fmt` is a format name or
    "auto" (sniffed). A file none of whose runs can be imported is an InputError naming the first."""
    runs = importable_runs(path, fmt)
    for index, exc in runs.skipped:
        _skipped(path, index, exc)
    return runs


def importable_runs(path: str | Path, fmt: str = "auto") -> Runs:
    """Every run in the file, as `import_file` has them, without the warnings for the runs that
    cannot be imported (`car validate` reports those as errors); a file none of whose runs can be
    imported is an InputError naming the first."""
    runs = _runs(path, fmt)
    if not runs:  # every run failed (a file of none is refused by `_runs`)
        first = runs.skipped[0][1]
        if len(runs.entries) == 1:
            raise first
        raise InputError(f"{first}; none of the file's {len(runs.entries)} runs can be imported")
    return runs


def _skipped(path: str | Path, index: int, exc: InputError) -> None:
    """One warning line for a run left out: the file, the run's index, then its error's place and
    reason. The command line has no logging set up, so Python's last-resort handler prints it to
    stderr as it is: there it reads as car's own line, as `car: error:` does."""
    why = str(exc).removeprefix(f"{path}: ")
    line = f"{path}: run {index} skipped: {' '.join(why.split())}"
    if COMMAND_LINE.get():
        from car.render import visible  # a file's name is shown, its escape sequences not acted on

        line = "car: warning: " + visible(line)
    _log.warning("%s", line)


def _runs(path: str | Path, fmt: str) -> Runs:
    """Every run in the file, imported or the error saying why not; no warnings."""
    doc = read_document(path)
    if fmt == "auto":
        name = detect(doc.data, doc.path)
        if name is None and isinstance(doc.data, dict) and _broken_native(doc.data):
            name = "car"  # a native trace with a broken header: let its validation say what is wrong
        if name is None and doc.problem:  # not JSON (nor an Inspect log): that is the whole story
            raise InputError(f"{doc.path}: {doc.problem}")
        # car's own results, named as a report is ("is this a report?")
        if name is None and (results := _car_results(doc.data)):
            raise InputError(f"{doc.path}: {results}, not a trace; `car report` reads it")
        if name is None:
            raise InputError(
                f"{doc.path}: not a trace format car recognises; car knows: {known()} "
                f"(name one with {option_name('fmt', 'NAME')})"
            )
        imp = get_importer(name)
    else:
        imp = get_importer(fmt)
        if doc.kind not in ("json", "jsonl") and imp.name != "inspect":
            raise InputError(f"{doc.path}: {doc.problem or 'not JSON text'}; expected {imp.description}")
    try:
        traces = imp.convert(doc)
    except CarError:
        raise
    except Exception as exc:
        # A bug in an importer must not become a traceback; --debug shows the chained one.
        raise InputError(
            f"{doc.path}: the {imp.name} importer failed: {type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:160]} (a bug in the importer; --debug shows where)"
        ) from exc
    runs = traces if isinstance(traces, Runs) else Runs(traces)
    if not runs.entries:
        raise InputError(f"{doc.path}: $: expected at least one run ({imp.description}), found none")
    return runs


# What car blame writes besides a report, which `car report` reads: named when given as a trace.
_RESULTS = {
    "car.batch/v1": "the results of a car blame batch",
    "car.record/v1": "car blame's records of its traces",
}


def _car_results(data: object) -> str | None:
    """The version and kind of car's own results in `data` (a JSON document, or JSON Lines' first
    line), or None."""
    first = data[0] if isinstance(data, list) and data else data
    version = first.get("version") if isinstance(first, dict) else None
    what = _RESULTS.get(version) if isinstance(version, str) else None
    return f"{version} ({what})" if what else None


def _broken_native(data: dict[str, object]) -> bool:
    """A native trace whose header did not sniff: it names a `version` (`"v1"`, a number) beside
    car's `steps` or `actors`, or has both of those and lost its `version` (hand-edited). A foreign
    format no importer claims that has `steps` of its own (ATIF's steps beside its `agent`) is no
    car trace: it gets "not recognised" and the list of formats, not the native format's "missing
    version" and its advice to use `car import`."""
    native_parts = ("steps" in data) + ("actors" in data)
    return native_parts == 2 or ("version" in data and native_parts > 0)


def load_any(path: str | Path, fmt: str = "auto", item: int | None = None) -> Trace:
    """The one trace in the file at `path` (or run number `item` of a file holding several, counted
    as the file holds them: a run that cannot be imported is an error only when it is the one asked
    for). Without `item`, runs that cannot be imported are skipped with a warning, as in
    `import_file`, and the file must hold one run that can."""
    if item is not None:
        runs = _runs(path, fmt)
        n = len(runs.entries)
        given = option_name("item", str(item))  # --item 5, or item=5 from Python
        if not 0 <= item < n:
            raise InputError(
                f"{path}: {given} is out of range: the file holds {n} run{'s' if n != 1 else ''} "
                f"(0 to {n - 1})"
            )
        picked = runs.entries[item]
        if isinstance(picked, InputError):
            raise InputError(f"{picked}; {given} picks this run, which cannot be imported")
        return picked
    traces = import_file(path, fmt)
    if len(traces) > 1:
        shown = ", ".join(
            f"{i}: {t.source.locator if t.source and t.source.locator else t.id}"
            if isinstance(t, Trace)
            else f"{i}: cannot be imported"
            for i, t in enumerate(traces.entries[:5])
        )
        n = len(traces.entries)
        more = f", … ({n} in all)" if n > 5 else ""
        pick = "--item N" if COMMAND_LINE.get() else "car.importers.load_any(path, item=N)"
        raise InputError(
            f"{path}: holds {n} runs ({shown}{more}); pick one with {pick}, or split "
            "them with `car import FILE -o DIR`"
        )
    return traces[0]
