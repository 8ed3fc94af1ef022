"""Results that stdout refuses (a full disk, a closed pipe) are kept: saved to a file of their own,
named in one error line, and the command exits 2. `car blame`, `car validate` and `car import` share
this, so no work already done is lost to a traceback."""

from __future__ import annotations

import os
import sys
import tempfile

from car.jsonfile import os_reason

__all__ = ["StdoutWriter", "keep", "refused"]


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
