"""Results that stdout refuses (a full disk, a closed pipe) are kept: saved to a file of their own,
named in one error line, and the command exits 2. `car blame`, `car validate` and `car import` share
this, so no work already done is lost to a traceback. `Guard` is sys.stdout while `car.cli.main`
runs: every command's writes go through it, so a refusal is seen in one place and said in one line,
and nothing is left for Python to complain about at exit."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import tempfile
from typing import Any, TextIO

from car.jsonfile import os_reason

__all__ = ["Guard", "Refused", "StdoutWriter", "keep", "refused"]


class Refused(OSError):
    """stdout refused a write; `str()` is the reason ("No space left on device"). It carries no
    errno: click takes an EPIPE for its own and exits 1 without a word."""


class Guard:
    """sys.stdout while `car.cli.main` runs. A write or flush that stdout refuses raises `Refused`,
    and so does every later write, untried (one probe that swallows the first, as click's does,
    cannot hide it); a later flush has nothing left to say. On the first refusal stdout's descriptor
    is pointed at /dev/null, so what Python still buffers does not fail again when it flushes at
    exit ("Exception ignored ... BrokenPipeError"). Everything else is the wrapped stream's."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream  # None when descriptor 1 was closed (`car schema >&-`)
        self.refused: str | None = None

    def write(self, text: str) -> int:
        if self.refused is None:
            try:
                if self._stream is None:
                    raise OSError(errno.EBADF, os.strerror(errno.EBADF))
                return self._stream.write(text)
            except OSError as exc:
                raise self._refuse(exc) from exc
        raise Refused(self.refused)

    def flush(self) -> None:
        if self.refused is None and self._stream is not None:
            try:
                self._stream.flush()
            except OSError as exc:
                raise self._refuse(exc) from exc

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()

    def _refuse(self, exc: OSError) -> Refused:
        self.refused = os_reason(exc)
        if self._stream is not None:
            with contextlib.suppress(OSError, ValueError):  # a stream without a descriptor (a test's)
                fd = self._stream.fileno()
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, fd)
                os.close(null)
        return Refused(self.refused)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def keep(text: str, suffix: str, prefix: str = "car-report-") -> str:
    """Save `text` that could not go where asked; say where (or why it could not be saved)."""
    try:
        fd, name = tempfile.mkstemp(prefix=prefix, suffix=suffix)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        return f"could not save it elsewhere either ({os_reason(exc)})"
    return f"saved it to {name} instead"


def refused(what: str, reason: str, text: str, suffix: str, prefix: str = "car-report-") -> str:
    """The error for `text` (`what`: "the report") that stdout refused for `reason`: it is saved to a
    file of its own (`keep`), and the message says where."""
    return f"stdout: cannot write {what} ({reason}); {keep(text, suffix, prefix)}"


class StdoutWriter:
    """Writes to stdout as it goes and remembers everything; once stdout refuses a write, the rest
    is only remembered. `close` flushes (a full disk may say so only there) and, when stdout failed,
    saves the whole text and prints one error line."""

    def __init__(self, what: str, suffix: str, prefix: str = "car-report-") -> None:
        self.what, self.suffix, self.prefix = what, suffix, prefix
        self._parts: list[str] = []
        self.failed: str | None = None

    def write(self, text: str) -> None:
        self._parts.append(text)
        if self.failed is None:
            try:
                sys.stdout.write(text)
            except OSError as exc:
                self.failed = os_reason(exc)

    def close(self) -> bool:
        """Whether stdout refused the text (then it was saved elsewhere and the error line said
        where)."""
        if self.failed is None:
            try:
                sys.stdout.flush()
            except OSError as exc:
                self.failed = os_reason(exc)
        if self.failed is None:
            return False
        text = "".join(self._parts)
        print(
            f"car: error: {refused(self.what, self.failed, text, self.suffix, self.prefix)}",
            file=sys.stderr,
        )
        return True
