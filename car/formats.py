"""The output formats of `car blame` and `car report`, apart from their renderers, so the command line
can name them without importing the attribution machinery (start-up of `car --help` stays short)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["OutputFormat"]


class OutputFormat(StrEnum):
    table = "table"
    json = "json"
    jsonl = "jsonl"
    markdown = "markdown"
    github = "github"
    junit = "junit"
    html = "html"
