"""OTLP/JSON decoding: `{resourceSpans: [...]}` exports (or JSON Lines of them) into `Span` values.

Ids may be hex or base64 (the protobuf JSON mapping); `intValue` may be a number or a decimal string;
`arrayValue` and `kvlistValue` become lists and dicts. Every bad value is reported at its JSON path;
each span remembers where its attributes sit (`Span.place`), so a value found bad later is too.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any

from car.importers.base import At, Document

__all__ = ["Span", "read_spans"]

LLM_OPS = ("chat", "text_completion", "generate_content", "completion")
AGENT_OPS = ("invoke_agent", "create_agent")


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent: str
    name: str
    start: int
    order: int
    attrs: dict[str, Any]
    events: list[tuple[str, dict[str, Any], dict[str, At]]]  # name, attributes, their places
    error: bool
    at: At
    places: dict[str, At]  # attribute key -> where its value sits

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
    def is_llm(self) -> bool:
        return self.op in LLM_OPS or self.oi_kind == "LLM"

    @property
    def is_tool(self) -> bool:
        return self.op == "execute_tool" or self.oi_kind == "TOOL"

    @property
    def is_agent(self) -> bool:
        return self.op in AGENT_OPS or self.oi_kind == "AGENT"


def _any_value(value: Any, at: At) -> Any:
    v = at.obj(value, "an OTLP AnyValue {stringValue|intValue|doubleValue|boolValue|...}")
    if "stringValue" in v:
        return (at / "stringValue").string(v["stringValue"])
    if "boolValue" in v:
        if not isinstance(v["boolValue"], bool):
            (at / "boolValue").fail("true or false", v["boolValue"])
        return v["boolValue"]
    if "intValue" in v:
        raw = v["intValue"]
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and re.fullmatch(r"-?\d+", raw.strip()):
            return int(raw)
        (at / "intValue").fail("an integer (a number or a decimal string)", raw)
    if "doubleValue" in v:
        raw = v["doubleValue"]
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return float(raw)
        if isinstance(raw, str):
            try:
                return float(raw)
            except ValueError:
                pass
        (at / "doubleValue").fail("a number", raw)
    if "arrayValue" in v:
        arr = (at / "arrayValue").obj(v["arrayValue"])
        vals = (at / "arrayValue" / "values").arr(arr.get("values", []))
        return [_any_value(x, at / "arrayValue" / "values" / i) for i, x in enumerate(vals)]
    if "kvlistValue" in v:
        kv = (at / "kvlistValue").obj(v["kvlistValue"])
        return _attributes(kv.get("values", []), at / "kvlistValue" / "values")
    if "bytesValue" in v:
        return (at / "bytesValue").string(v["bytesValue"])
    return None  # an empty AnyValue is a valid "unset"


_MEMBERS = (
    "stringValue",
    "boolValue",
    "intValue",
    "doubleValue",
    "arrayValue",
    "kvlistValue",
    "bytesValue",
)  # in the order _any_value reads them


def _attributes(value: Any, at: At, places: dict[str, At] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, kv in enumerate(at.arr(value or [], "a list of attributes [{key, value}]")):
        here = at / i
        item = here.obj(kv, "an attribute {key, value}")
        key = (here / "key").string(item.get("key"), "the attribute key")
        raw = item.get("value", {})
        out[key] = _any_value(raw, here / "value")
        if places is not None:
            member = next((m for m in _MEMBERS if m in raw), None)
            places[key] = here / "value" / member if member else here / "value"
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


def read_spans(doc: Document) -> list[Span]:
    at = doc.at
    requests: list[tuple[Any, At]]
    if isinstance(doc.data, list):
        requests = [(r, at / i) for i, r in enumerate(doc.data)]
    else:
        requests = [(doc.data, at)]
    spans: list[Span] = []
    for req, rat in requests:
        body = rat.obj(req, "an OTLP/JSON export {resourceSpans: [...]}")
        for i, rs in enumerate((rat / "resourceSpans").arr(body.get("resourceSpans"))):
            rsat = rat / "resourceSpans" / i
            rso = rsat.obj(rs, "a ResourceSpans object")
            key = "scopeSpans" if "scopeSpans" in rso else "instrumentationLibrarySpans"
            for j, ss in enumerate((rsat / key).arr(rso.get(key, []))):
                ssat = rsat / key / j
                sso = ssat.obj(ss, "a ScopeSpans object")
                for k, sp in enumerate((ssat / "spans").arr(sso.get("spans", []))):
                    spans.append(_span(sp, ssat / "spans" / k, len(spans)))
    return spans


def _span(value: Any, at: At, order: int) -> Span:
    sp = at.obj(value, "a span object")
    events = []
    for i, ev in enumerate((at / "events").arr(sp.get("events") or [])):
        eo = (at / "events" / i).obj(ev, "a span event {name, attributes}")
        name = (at / "events" / i / "name").string(eo.get("name", ""))
        where: dict[str, At] = {}
        attrs = _attributes(eo.get("attributes"), at / "events" / i / "attributes", where)
        events.append((name, attrs, where))
    places: dict[str, At] = {}
    status = sp.get("status")
    code = status.get("code") if isinstance(status, dict) else None
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
    )
