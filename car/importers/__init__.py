"""Importers: open the traces users already have as car traces.

    from car.importers import load_any
    trace = load_any("run.otlp.json")            # sniffed: OTLP/JSON with GenAI attributes
    trace = load_any("log.json", fmt="who-and-when")

`load_any` is the one entry point the command line and `car.blame` use to open any file: native
`car.trace/v1` files go through `car.trace.load_trace`'s validation, foreign files through their
importer. Every imported trace carries `source` (format, path, locator, content hash) and `fidelity`
(class A, B or C, plus concrete warnings). Importers are plugins too: entry-point group
`car.importers`, objects with `name`, `description`, `sniff(data, path)` and `convert(document)`.
"""

from __future__ import annotations

from pathlib import Path

from car.errors import COMMAND_LINE, CarError, InputError, option_name
from car.importers.base import At, Builder, Document, Importer, read_document
from car.importers.registry import detect, get_importer, importers, known
from car.trace import Trace

__all__ = [
    "At",
    "Builder",
    "Document",
    "Importer",
    "detect",
    "formats",
    "get_importer",
    "import_file",
    "load_any",
    "read_document",
]


def formats() -> list[tuple[str, str]]:
    """(name, description) of every format car can read, in sniffing order."""
    return [(i.name, i.description) for i in importers()]


def import_file(path: str | Path, fmt: str = "auto") -> list[Trace]:
    """Every run in the file at `path`, as traces. `fmt` is a format name or "auto" (sniffed)."""
    doc = read_document(path)
    if fmt == "auto":
        name = detect(doc.data, doc.path)
        if name is None and isinstance(doc.data, dict) and _broken_native(doc.data):
            name = "car"  # a native trace with a broken header: let its validation say what is wrong
        if name is None and doc.problem:  # not JSON (nor an Inspect log): that is the whole story
            raise InputError(f"{doc.path}: {doc.problem}")
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
    if not traces:
        raise InputError(f"{doc.path}: $: expected at least one run ({imp.description}), found none")
    return traces


def _broken_native(data: dict[str, object]) -> bool:
    """A native trace whose header did not sniff (`"version": "v1"`, a number): it names a `version`
    beside car's `steps` or `actors`. A foreign format no importer claims that has `steps` of its
    own is no car trace: it gets "not recognised" and the list of formats, not the native format's
    "missing version" and its advice to use `car import`."""
    return "version" in data and ("steps" in data or "actors" in data)


def load_any(path: str | Path, fmt: str = "auto", item: int | None = None) -> Trace:
    """The one trace in the file at `path` (or run number `item` of a file holding several)."""
    traces = import_file(path, fmt)
    if item is not None:
        if not 0 <= item < len(traces):
            given = option_name("item", str(item))  # --item 5, or item=5 from Python
            raise InputError(
                f"{path}: {given} is out of range: the file holds {len(traces)} run"
                f"{'s' if len(traces) != 1 else ''} (0 to {len(traces) - 1})"
            )
        return traces[item]
    if len(traces) > 1:
        shown = ", ".join(
            f"{i}: {t.source.locator if t.source and t.source.locator else t.id}"
            for i, t in enumerate(traces[:5])
        )
        more = f", … ({len(traces)} in all)" if len(traces) > 5 else ""
        pick = "--item N" if COMMAND_LINE.get() else "car.importers.load_any(path, item=N)"
        raise InputError(
            f"{path}: holds {len(traces)} runs ({shown}{more}); pick one with {pick}, or split "
            "them with `car import FILE -o DIR`"
        )
    return traces[0]
