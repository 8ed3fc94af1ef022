"""The importers car knows: built-ins plus plugins (entry-point group `car.importers`), and sniffing.

Sniffing goes from the most specific shape to the most generic (a native trace, then benchmark logs,
then telemetry, then bare chat transcripts), plugins first so a plugin can claim a shape a built-in
would also accept. A sniffer that raises is treated as "not mine": detection never fails on a plugin.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from car.errors import InputError, SpecError
from car.importers.base import Document, Importer
from car.jsonfile import finite_float, loads
from car.trace import TRACE_VERSION, Trace, parse_trace

__all__ = ["NativeTrace", "detect", "get_importer", "importers"]

GROUP = "car.importers"


class NativeTrace:
    name = "car"
    description = f"car's own trace format ({TRACE_VERSION})"

    def sniff(self, data: Any, path: str) -> bool:
        return (
            isinstance(data, dict)
            and isinstance(data.get("version"), str)
            and (data["version"].startswith("car.trace/"))
        )

    def convert(self, doc: Document) -> list[Trace]:
        if doc.kind != "json":
            raise InputError(f"{doc.path}: {doc.problem or 'not a JSON document'}")
        if isinstance(doc.data, dict) and "version" not in doc.data:
            # Only `--from car` brings such a file here: parse_trace's hint (`car import`) would
            # send the user to a command that refuses it alike.
            raise InputError(
                f"{doc.path}: $.version: missing; expected {TRACE_VERSION!r} (--from car reads "
                "car's own traces; without --from, car sniffs which format this is)"
            )
        if doc.may_hold_huge_numbers:
            _refuse_huge_numbers(doc)
        return [parse_trace(doc.data, source=doc.path)]


def _refuse_huge_numbers(doc: Document) -> None:
    """A number beyond a double's range (`1e400`) in a native trace is refused at its place, as
    `load_trace` refuses it: car would write it as null (JSON has no infinity). A foreign log keeps
    it as text, with a warning; a trace of car's own has no warnings to say so in."""
    try:
        loads(doc.raw.decode("utf-8-sig"), parse_float=finite_float)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{doc.path}: line {exc.lineno} column {exc.colno}: invalid JSON: {exc.msg}"
        ) from None


def _builtins() -> list[Importer]:
    from car.importers.anthropic import AnthropicMessages
    from car.importers.atif import Atif
    from car.importers.inspect_log import InspectLog
    from car.importers.mini_swe_agent import MiniSweAgent
    from car.importers.openai_chat import OpenAIChat
    from car.importers.otel import OtlpJson
    from car.importers.responses import OpenAIResponses
    from car.importers.tau_bench import TauBench
    from car.importers.who_and_when import WhoAndWhen

    return [
        NativeTrace(),
        WhoAndWhen(),
        TauBench(),
        MiniSweAgent(),  # before openai-chat: its messages are a chat list too
        Atif(),
        InspectLog(),
        OtlpJson(),
        OpenAIResponses(),
        AnthropicMessages(),
        OpenAIChat(),
    ]


# The importer plugins' entry points, by the lookup that found them: a lookup reads every installed
# distribution's metadata (tens of milliseconds), which once per file was most of the time a folder
# of a thousand traces took to load. Keyed by the lookup, so one substituted for it is asked afresh.
_FOUND: dict[Callable[..., Any], tuple[Any, ...]] = {}


def _entry_points() -> tuple[Any, ...]:
    found = _FOUND.get(entry_points)
    if found is None:
        found = _FOUND[entry_points] = tuple(entry_points(group=GROUP))
    return found


def _plugins() -> list[Importer]:
    found: list[Importer] = []
    for ep in _entry_points():
        try:
            obj = ep.load()
            imp = obj() if isinstance(obj, type) else obj
        except Exception as exc:
            raise SpecError(f"importer plugin {ep.name!r} ({ep.value}) failed to load: {exc}") from exc
        if not isinstance(imp, Importer):
            raise SpecError(
                f"importer plugin {ep.name!r} ({ep.value}) has no name, description, sniff() and "
                "convert()"
            )
        imp.name = getattr(imp, "name", None) or ep.name
        found.append(imp)
    return found


def importers() -> list[Importer]:
    """Every importer in sniffing order: plugins first, then the built-ins."""
    return [*_plugins(), *_builtins()]


def known() -> str:
    return ", ".join(i.name for i in importers())


def get_importer(name: str) -> Importer:
    """The importer called `name`; an unknown name lists the known ones."""
    all_ = importers()
    for imp in all_:
        if imp.name == name:
            return imp
    names = [i.name for i in all_]
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise SpecError(f"unknown format {name!r}; {hint}car knows: auto, {', '.join(names)}")


def detect(data: Any, path: str = "") -> str | None:
    """The name of the first importer whose sniffer accepts the parsed `data`, or None."""
    for imp in importers():
        try:
            if imp.sniff(data, path):
                return imp.name
        except Exception:
            continue
    return None
