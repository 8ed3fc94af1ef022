"""The output formats of `car blame` and `car report`, apart from their renderers, so the command line
can name them without importing the attribution machinery (start-up of `car --help` stays short)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

__all__ = ["OutputFormat", "format_of"]


class OutputFormat(StrEnum):
    table = "table"
    json = "json"
    jsonl = "jsonl"
    markdown = "markdown"
    github = "github"
    junit = "junit"
    html = "html"


# The suffixes that name one format; `.md` is markdown (github's job summary is markdown too, but
# it is chosen by name), `.txt` names none.
_SUFFIXES = {
    ".html": OutputFormat.html,
    ".htm": OutputFormat.html,
    ".json": OutputFormat.json,
    ".jsonl": OutputFormat.jsonl,
    ".md": OutputFormat.markdown,
    ".xml": OutputFormat.junit,
}


def format_of(path: Path) -> OutputFormat | None:
    """The format a file name's suffix names (`page.html`: html, in any case), else None."""
    return _SUFFIXES.get(path.suffix.lower())
