"""OTLP/JSON decoding: `{resourceSpans: [...]}` exports (or JSON Lines of them) into `Span` values;
log records of GenAI events in `{resourceLogs: [...]}` lines become events of their span.

Ids may be hex or base64 (the protobuf JSON mapping); `intValue` may be a number or a decimal string;
`arrayValue` and `kvlistValue` become lists and dicts. Every bad value is reported at its JSON path;
each span remembers where its attributes sit (`Span.place`, and each event's attributes), so a value
found bad later is too, down to a member of a structured value (`Placed`).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from car.importers.base import At, Document

__all__ = ["Placed", "Span", "Unplaced", "read_spans"]

LLM_OPS = ("chat", "text_completion", "generate_content", "completion")
AGENT_OPS = ("invoke_agent", "create_agent")
# OpenLLMetry (Traceloop) marks a model call with llm.request.type (no gen_ai.operation.name), and
# its workflow spans with traceloop.span.kind (workflow, task, agent, tool).
TRACELOOP_LLM = ("chat", "completion")


@dataclass(frozen=True)
class Placed(At):
    """Where a decoded value sits whose members sit elsewhere in the JSON: a span event's attributes
    (members by key), a `kvlistValue` (by key), an `arrayValue` (by index). `/ member` is where that
    member's value is (`...kvlistValue.values[1].value.boolValue`), so a bad value found inside it is
    named at a real JSON place, not at a made-up `...kvlistValue.id`; a member it lacks is named at
    `holder`, the list that would hold it."""

    members: Mapping[str, At] | Sequence[At] = field(default_factory=dict, compare=False)
    holder: At | None = field(default=None, compare=False)

    def __truediv__(self, part: str | int) -> At:
        m = self.members
        if isinstance(m, Sequence):
            if isinstance(part, int) and 0 <= part < len(m):
                return m[part]
        elif isinstance(part, str) and part in m:
            return m[part]
        return self.holder if self.holder is not None else At(self.doc, (*self.loc, part))


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent: str
    name: str
    start: int
    order: int
    attrs: dict[str, Any]
    events: list[tuple[str, dict[str, Any], Placed]]  # name, attributes, where they sit
    error: bool
    at: At
    places: dict[str, At]  # attribute key -> where its value sits
    status_message: str = ""

    def place(self, key: str) -> At:
        """Where attribute `key` holds its value (`...attributes[3].value.intValue`)."""
        return self.places.get(key, self.at / "attributes")

    @property
    def op(self) -> str:
        v = self.attrs.get("gen_ai.operation.name")
        return v if isinstance(v, str) else ""

    @property
    def oi_kind(self) -> str:
        v = self.attrs.get("openinference.span.kind")
        return v.upper() if isinstance(v, str) else ""

    @property
    def traceloop_kind(self) -> str:
        v = self.attrs.get("traceloop.span.kind")
        return v.lower() if isinstance(v, str) else ""

    @property
    def is_llm(self) -> bool:
        request = self.attrs.get("llm.request.type")
        return self.op in LLM_OPS or self.oi_kind == "LLM" or request in TRACELOOP_LLM

    @property
    def is_tool(self) -> bool:
        # pydantic-ai's tool spans ("running tool", and "execute_tool NAME" in its early version 3)
        # carry no operation name: the tool's name and call id say what they are.
        untyped = (
            not self.op and "gen_ai.tool.name" in self.attrs and "gen_ai.tool.call.id" in self.attrs
        )
        return (
            self.op == "execute_tool"
            or self.oi_kind == "TOOL"
            or self.traceloop_kind == "tool"
            or (untyped and not self.is_llm)
        )

    @property
    def is_agent(self) -> bool:
        return self.op in AGENT_OPS or self.oi_kind == "AGENT" or self.traceloop_kind == "agent"


def _any_value(value: Any, at: At) -> tuple[Any, At]:
    """The value an OTLP AnyValue at `at` holds, and where it sits (a `Placed` for a list or a dict)."""
    v = at.obj(value, "an OTLP AnyValue {stringValue|intValue|doubleValue|boolValue|...}")
    if "stringValue" in v:
        return (at / "stringValue").string(v["stringValue"]), at / "stringValue"
    if "boolValue" in v:
        if not isinstance(v["boolValue"], bool):
            (at / "boolValue").fail("true or false", v["boolValue"])
        return v["boolValue"], at / "boolValue"
    if "intValue" in v:
        raw = v["intValue"]
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw, at / "intValue"
        if isinstance(raw, str) and re.fullmatch(r"-?\d+", raw.strip()):
            return int(raw), at / "intValue"
        (at / "intValue").fail("an integer (a number or a decimal string)", raw)
    if "doubleValue" in v:
        raw = v["doubleValue"]
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return float(raw), at / "doubleValue"
        if isinstance(raw, str):
            try:
                return float(raw), at / "doubleValue"
            except ValueError:
                pass
        (at / "doubleValue").fail("a number", raw)
    if "arrayValue" in v:
        here = at / "arrayValue"
        arr = here.obj(v["arrayValue"])
        vals = (here / "values").arr(arr.get("values", []))
        decoded = [_any_value(x, here / "values" / i) for i, x in enumerate(vals)]
        items = [item for item, _ in decoded]
        return items, Placed(at.doc, here.loc, [place for _, place in decoded], here / "values")
    if "kvlistValue" in v:
        here = at / "kvlistValue"
        kv = here.obj(v["kvlistValue"])
        places: dict[str, At] = {}
        out = _attributes(kv.get("values", []), here / "values", places)
        return out, Placed(at.doc, here.loc, places, here / "values")
    if "bytesValue" in v:
        return (at / "bytesValue").string(v["bytesValue"]), at / "bytesValue"
    return None, at  # an empty AnyValue is a valid "unset"


def _attributes(value: Any, at: At, places: dict[str, At] | None = None) -> dict[str, Any]:
    """Attributes `[{key, value}]` at `at` as a dict; `places` gets where each value sits."""
    out: dict[str, Any] = {}
    for i, kv in enumerate(at.arr(value or [], "a list of attributes [{key, value}]")):
        here = at / i
        item = here.obj(kv, "an attribute {key, value}")
        key = (here / "key").string(item.get("key"), "the attribute key")
        out[key], place = _any_value(item.get("value", {}), here / "value")
        if places is not None:
            places[key] = place
    return out


def _span_id(value: Any, at: At, nbytes: int) -> str:
    if value is None or value == "":
        return ""
    text = at.string(value, f"a {nbytes}-byte id (hex or base64)")
    if re.fullmatch(rf"[0-9a-fA-F]{{{2 * nbytes}}}", text):
        return text.lower()
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) == nbytes:
        return raw.hex()
    at.fail(f"a {nbytes}-byte id as {2 * nbytes} hex digits or base64", value)


def _nanos(value: Any, at: At) -> int:
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    at.fail("a time in nanoseconds (a number or a decimal string)", value)


class Unplaced(NamedTuple):
    """A GenAI log record whose span the file does not hold: its event belongs to no imported call."""

    trace_id: str
    name: str
    at: At  # the log record


def read_spans(doc: Document) -> tuple[list[Span], list[Unplaced]]:
    """The spans of every export in the file. Log records of GenAI events (`gen_ai.*`: the official
    instrumentations export message content as log events, not span events) from `resourceLogs`
    lines of the same file become events of the span they were emitted in, in time order; those
    whose span is not in the file are returned apart, in file order, to be named."""
    at = doc.at
    requests: list[tuple[Any, At]]
    if isinstance(doc.data, list):
        requests = [(r, at / i) for i, r in enumerate(doc.data)]
    else:
        requests = [(doc.data, at)]
    spans: list[Span] = []
    records: list[_LogEvent] = []
    for req, rat in requests:
        body = rat.obj(req, "an OTLP/JSON export {resourceSpans: [...]}")
        if body.get("resourceLogs") is not None and body.get("resourceSpans") is None:
            records += _log_events(body["resourceLogs"], rat / "resourceLogs")
            continue
        for i, rs in enumerate((rat / "resourceSpans").arr(body.get("resourceSpans"))):
            rsat = rat / "resourceSpans" / i
            rso = rsat.obj(rs, "a ResourceSpans object")
            key = "scopeSpans" if "scopeSpans" in rso else "instrumentationLibrarySpans"
            for j, ss in enumerate((rsat / key).arr(rso.get(key, []))):
                ssat = rsat / key / j
                sso = ssat.obj(ss, "a ScopeSpans object")
                for k, sp in enumerate((ssat / "spans").arr(sso.get("spans", []))):
                    spans.append(_span(sp, ssat / "spans" / k, len(spans)))
        if body.get("resourceLogs") is not None:
            records += _log_events(body["resourceLogs"], rat / "resourceLogs")
    by_id = {(s.trace_id, s.span_id): s for s in spans if s.span_id}
    for r in sorted(records, key=lambda r: (r.time, r.order)):
        span = by_id.get((r.trace_id, r.span_id))
        if span is not None:
            span.events.append((r.name, r.attrs, r.at))
    for s in spans:
        _operation_details(s)
    unplaced = [
        Unplaced(r.trace_id, r.name, r.record) for r in records if (r.trace_id, r.span_id) not in by_id
    ]
    return spans, unplaced


@dataclass
class _LogEvent:
    trace_id: str
    span_id: str
    time: int
    order: int
    name: str
    attrs: dict[str, Any]  # its attributes, and its body under "body"
    at: Placed
    record: At  # the log record itself


def _log_events(value: Any, at: At) -> list[_LogEvent]:
    """The GenAI events among the log records of `resourceLogs` at `at` (other logs are the
    application's own, not a model call's content)."""
    out: list[_LogEvent] = []
    for i, rl in enumerate(at.arr(value, "a list of ResourceLogs objects")):
        rlat = at / i
        rlo = rlat.obj(rl, "a ResourceLogs object")
        for j, sl in enumerate((rlat / "scopeLogs").arr(rlo.get("scopeLogs", []))):
            slat = rlat / "scopeLogs" / j
            slo = slat.obj(sl, "a ScopeLogs object")
            for k, lr in enumerate((slat / "logRecords").arr(slo.get("logRecords", []))):
                here = slat / "logRecords" / k
                rec = here.obj(lr, "a log record")
                places: dict[str, At] = {}
                attrs = _attributes(rec.get("attributes"), here / "attributes", places)
                # the event's name: a field of its own since OTLP 1.5, an attribute before
                name = rec.get("eventName") or attrs.get("event.name")
                if not isinstance(name, str) or not name.startswith("gen_ai."):
                    continue
                if "body" in rec:
                    attrs["body"], places["body"] = _any_value(rec["body"], here / "body")
                time = rec.get("timeUnixNano")
                if time in (None, "0", 0):
                    time = rec.get("observedTimeUnixNano")
                out.append(
                    _LogEvent(
                        trace_id=_span_id(rec.get("traceId"), here / "traceId", 16) or "unknown",
                        span_id=_span_id(rec.get("spanId"), here / "spanId", 8),
                        time=_nanos(time, here / "timeUnixNano"),
                        order=len(out),
                        name=name,
                        attrs=attrs,
                        at=Placed(at.doc, (here / "attributes").loc, places, here / "attributes"),
                        record=here,
                    )
                )
    return out


# The conventions' event that carries a call's content as attributes named as on the span.
_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_DETAILS = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
)


def _operation_details(span: Span) -> None:
    """Content the call's `gen_ai.client.inference.operation.details` event holds (a span event or
    a log record) is the span's, where the span does not hold it itself."""
    for name, attrs, at in span.events:
        if name == _DETAILS_EVENT:
            for key in _DETAILS:
                if key in attrs and key not in span.attrs:
                    span.attrs[key] = attrs[key]
                    span.places[key] = at / key


def _span(value: Any, at: At, order: int) -> Span:
    sp = at.obj(value, "a span object")
    events = []
    for i, ev in enumerate((at / "events").arr(sp.get("events") or [])):
        eo = (at / "events" / i).obj(ev, "a span event {name, attributes}")
        name = (at / "events" / i / "name").string(eo.get("name", ""))
        where: dict[str, At] = {}
        attrs_at = at / "events" / i / "attributes"
        attrs = _attributes(eo.get("attributes"), attrs_at, where)
        events.append((name, attrs, Placed(at.doc, attrs_at.loc, where, attrs_at)))
    places: dict[str, At] = {}
    status = sp.get("status")
    code = status.get("code") if isinstance(status, dict) else None
    message = status.get("message") if isinstance(status, dict) else None
    return Span(
        trace_id=_span_id(sp.get("traceId"), at / "traceId", 16) or "unknown",
        span_id=_span_id(sp.get("spanId"), at / "spanId", 8),
        parent=_span_id(sp.get("parentSpanId"), at / "parentSpanId", 8),
        name=(at / "name").string(sp.get("name", ""), "the span name"),
        start=_nanos(sp.get("startTimeUnixNano"), at / "startTimeUnixNano"),
        order=order,
        attrs=_attributes(sp.get("attributes"), at / "attributes", places),
        events=events,
        error=code in (2, "STATUS_CODE_ERROR"),
        at=at,
        places=places,
        status_message=message if isinstance(message, str) else "",
    )
