"""Which files a directory holds as traces: one rule for `car blame DIR` and `car validate DIR`.

The rule (docs/batch.md): every regular file below the directory whose name ends in `.json`, `.jsonl`
or `.eval`, in any case (`B.JSON` too); names starting with `.` below the directory given (`.git`,
`.car`, `.ipynb_checkpoints`, `.hidden.json`) are skipped, files and directories alike; links are
followed, and a directory reached twice (through a link) is walked once. Entries come in natural
order, path part by part: `2.json` before `10.json`, `a.json` before `B.JSON`.

An entry that cannot be read or checked (a directory that cannot be listed, a broken link, a link
into a directory that cannot be entered) is never skipped in silence: it is an `Entry` with the
one-line error that names it, so the caller reports it beside the traces it could read.

A path named on the command line is walked when `is_folder` says it is a directory: where car may not
look (a path inside a folder it may not enter) the answer is no, and the path is then read or written
as a file, which names its own error in one line.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from car.jsonfile import os_reason

__all__ = [
    "TRACE_SUFFIXES",
    "Entry",
    "checked",
    "is_folder",
    "is_pattern",
    "is_trace_name",
    "natural_key",
    "same_file",
    "walk",
]

TRACE_SUFFIXES = (".json", ".jsonl", ".eval")


@dataclass(frozen=True)
class Entry:
    """A trace file found, or (with `error`) an entry that could not be read or checked."""

    path: str
    error: str | None = None


def is_trace_name(name: str) -> bool:
    return name.lower().endswith(TRACE_SUFFIXES)


def is_folder(path: str | os.PathLike[str]) -> bool:
    """Whether a path named directly is a directory to walk; False where it cannot be checked, as
    reading it then says why (pathlib's `is_dir` raises PermissionError there)."""
    return os.path.isdir(path)


def is_pattern(path: str | os.PathLike[str]) -> bool:
    """Whether a path named directly is a glob to match: it holds `*`, `?` or `[` and names no file
    (an existing file is that file, whatever its name holds). os.path, not Path: a path car may not
    look at is a file, whose error names it, not a crash."""
    text = os.fspath(path)
    return any(ch in text for ch in "*?[") and not os.path.exists(text)


def natural_key(path: str) -> tuple[object, ...]:
    """Sort key: part by part, digit runs as numbers and the rest without case (the exact text
    breaks ties, so the order never depends on the file system's)."""
    parts = tuple(
        tuple(int(c) if i % 2 else c.casefold() for i, c in enumerate(re.split(r"(\d+)", part)))
        for part in Path(path).parts
    )
    return parts, path


def checked(path: str) -> os.stat_result | Entry:
    """What `path` is, following links; or the error entry that names it."""
    try:
        return os.stat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR) and os.path.islink(path):
            try:
                target = f" (its target {os.readlink(path)} does not exist)"
            except OSError:
                target = ""
            return Entry(path, f"{path}: a broken link{target}")
        return Entry(path, f"{path}: cannot check it ({os_reason(exc)})")


def walk(root: str | Path) -> list[Entry]:
    """The trace files below the directory `root`, and the entries that could not be read or
    checked, in natural order (see the module docstring for the rule)."""
    top = str(Path(root))
    found: list[Entry] = []
    seen: set[tuple[int, int]] = set()
    todo: list[tuple[str, os.stat_result | Entry]] = [(top, checked(top))]
    while todo:
        folder, info = todo.pop()
        if isinstance(info, Entry):
            found.append(info)
            continue
        if (info.st_dev, info.st_ino) in seen:  # a link back to a directory already walked
            continue
        seen.add((info.st_dev, info.st_ino))
        try:
            with os.scandir(folder) as listing:
                names = [e.name for e in listing if not e.name.startswith(".")]
        except OSError as exc:
            found.append(Entry(folder, f"{folder}: cannot read this directory ({os_reason(exc)})"))
            continue
        for name in names:
            path = name if folder == "." else os.path.join(folder, name)  # as pathlib spells it
            what = checked(path)
            if isinstance(what, Entry):
                found.append(what)
            elif stat.S_ISDIR(what.st_mode):
                todo.append((path, what))
            elif stat.S_ISREG(what.st_mode) and is_trace_name(name):
                found.append(Entry(path))
    return sorted(found, key=lambda e: natural_key(e.path))


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one regular file (or one that does not exist yet): spelled differently,
    through a link, or a hard link. Devices, pipes and sockets are never one file: writing twice to
    /dev/null, or to /dev/stdout and /dev/stderr joined by `2>&1`, loses nothing."""
    if not (_regular_or_missing(a) and _regular_or_missing(b)):
        return False
    try:
        if a.resolve() == b.resolve():
            return True
        return a.samefile(b)
    except (OSError, RuntimeError):  # one does not exist yet (or a link loops): two files
        return False


def _regular_or_missing(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:  # not there yet (or a link loops): compared by name
        return True
