"""`car import`: write the runs of a foreign file as `car.trace/v1` files.

One run goes to `-o FILE` (or stdout: no `-o`, or `-o -`); several go to `-o DIR`, one file per run,
named after the trace id (an `-o` that is a file, ends in `.json`, or is `-`, is refused for several
runs: one JSON document per trace is what car reads back). An `-o` ending in `/` is a directory
even for one run. Missing parent directories are made. An existing file is never half-written: each
trace is written to a temporary name and renamed. An `-o` that would overwrite the file being
imported is refused before anything is written.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from pathlib import Path

from car.errors import InputError
from car.importers.base import MAX_NESTING, nested_too_deep
from car.jsonfile import os_reason
from car.report import short
from car.stdout import refused
from car.trace import Trace
from car.tracefiles import is_folder, same_file

__all__ = ["write_imported"]


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "trace"


def _encoded(trace: Trace, dest: object, file: Path | None = None) -> bytes:
    """The trace as UTF-8, before anything is written: text UTF-8 cannot encode, or a value nested
    too deep to write (in a `car.trace/v1` file: importers refuse both), is an InputError."""
    try:
        text = trace.to_json()
    except ValueError:
        deep = nested_too_deep(trace)
        if deep is None:
            raise
        raise InputError(
            f"{file or dest}: cannot write trace {trace.id!r} to {dest}: the value at {deep[0]} is "
            f"nested {deep[1]} levels deep, and car writes at most {MAX_NESTING}; flatten it in the "
            "input"
        ) from None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        near = text[max(exc.start - 30, 0) : exc.start].rsplit("\n", 1)[-1].strip()
        raise InputError(
            f"{dest}: cannot write trace {trace.id!r}: it holds a lone UTF-16 surrogate "
            f"({text[exc.start]!r}, after {near!r}), which UTF-8 cannot encode; replace it in the "
            "input (importers replace it with U+FFFD)"
        ) from None


def _write(path: Path, trace: Trace, file: Path | None = None) -> None:
    data = _encoded(trace, path, file)
    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # as `car blame -o` does
        try:
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)  # never leave a partial file behind
            raise
    except OSError as exc:
        raise InputError(f"{path}: cannot write the trace ({os_reason(exc)})") from None


def _to_stdout(text: str) -> None:
    """Write the trace to stdout; one that stdout refuses (a full disk) is saved to a file of its
    own, and the one error line says where."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        message = refused("the trace", os_reason(exc), text, ".json", prefix="car-trace-")
        raise InputError(message) from None


def _summary(trace: Trace) -> str:
    fid = trace.fidelity
    cls = f"class {fid.class_}" if fid else "native"
    warn = f"; warnings: {', '.join(w.code for w in fid.warnings)}" if fid and fid.warnings else ""
    fmt = trace.source.format if trace.source else "car"
    steps, actors = len(trace.steps), len(trace.actors)
    counts = f"{steps} step{'s' if steps != 1 else ''}, {actors} actor{'s' if actors != 1 else ''}"
    return f"{short(trace.id)}: {fmt}, {cls}, {counts}{warn}"


def write_imported(
    file: Path,
    fmt: str = "auto",
    output: str | os.PathLike[str] | None = None,
    item: int | None = None,
) -> list[str]:
    """Import `file` and write the result; returns the progress lines for stderr."""
    from car.importers import import_file, load_any

    runs = None if item is not None else import_file(file, fmt)
    traces = list(runs) if runs is not None else [load_any(file, fmt, item)]
    lines = [f"imported {_summary(t)}" for t in traces]
    raw = None if output is None else os.fspath(output)
    dest = None if raw is None or raw == "-" else Path(raw)  # `-o -` is stdout
    # `-o DIR/` names a directory, made if missing, even for one run (Path drops the slash)
    as_dir = raw is not None and raw.endswith(tuple(s for s in (os.sep, os.altsep) if s))
    if len(traces) == 1 and (dest is None or not (as_dir or is_folder(dest))):
        if dest is None:
            _to_stdout(_encoded(traces[0], "stdout", file).decode("utf-8"))
        else:
            _refuse_overwriting(file, output, dest, [dest])
            _write(dest, traces[0], file)
            lines.append(f"wrote {dest}")
        return lines
    n = len(traces)
    # where car may not look, `dest` is taken as no directory: writing it names the error
    if dest is None or (
        not as_dir and not is_folder(dest) and (os.path.exists(dest) or dest.suffix.lower() == ".json")
    ):
        if output is None:
            named = ""
        elif dest is None:
            named = "-o - writes one trace to stdout; "
        else:
            named = f"-o {output} names a file; "
        held = len(runs.entries) if runs is not None else n  # --item counts skipped runs too
        raise InputError(
            f"{file}: holds {held} runs; {named}write them to a directory with -o DIR, or pick one "
            f"with --item N (0 to {held - 1})"
        )
    used: set[str] = set()
    targets: list[Path] = []
    for t in traces:
        name = _safe(t.id)
        while name in used:
            name += "_"
        used.add(name)
        targets.append(dest / f"{name}.json")
    _refuse_overwriting(file, output, dest, targets)
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{dest}: cannot create the directory ({os_reason(exc)})") from None
    for t, target in zip(traces, targets, strict=True):
        _write(target, t, file)
    lines.append(f"wrote {n} trace{'s' if n != 1 else ''} to {dest}")
    return lines


def _refuse_overwriting(file: Path, output: object, dest: Path, targets: list[Path]) -> None:
    """Refuse, before anything is written, an `-o` that would replace the file being imported (as
    `car blame -o` refuses to overwrite the trace it attributes): the input was lost, exit 0."""
    for target in targets:
        if same_file(target, file):
            into = "" if target in (dest, file) else f" (as {target})"
            raise InputError(
                f"-o {output} would overwrite {file}, the file it imports{into}; write the trace "
                "elsewhere"
            )
