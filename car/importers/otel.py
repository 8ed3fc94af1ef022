"""OTLP/JSON traces with OpenTelemetry GenAI or OpenInference attributes (fidelity class A when the
message content was captured).

`{resourceSpans: [{resource, scopeSpans: [{spans: [...]}]}]}` (or JSON Lines of such requests, as the
collector's file exporter writes them). One car trace per trace id. Each model-call span
(`gen_ai.operation.name` chat / text_completion / generate_content, or `openinference.span.kind` LLM)
is a decision step whose context is the exact input of that call; when model spans nest (a framework
span around the client span) the innermost is the call. Tool spans (`execute_tool`, TOOL) are
observations of the step that made the call, matched by call id, else by tool name. The actor is
`gen_ai.agent.name` on the span or its nearest agent ancestor (`invoke_agent`, AGENT spans).

Content is read from, in order: `gen_ai.input.messages` / `gen_ai.output.messages` (parts model, JSON
string or structured), the older per-message span events (`gen_ai.user.message`, `gen_ai.choice`, ...,
and `gen_ai.content.prompt` / `gen_ai.content.completion`), the flattened `gen_ai.prompt.N.*` /
`gen_ai.completion.N.*` style, and OpenInference `llm.input_messages.N.message.*`. Ids may be hex or
base64; `intValue` may be a string.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from car.importers.base import At, Builder, Document, parse_arguments, sampling_from
from car.trace import Message, ToolCall, Trace

__all__ = ["OtlpJson"]

CAPTURE_HINT = (
    "message content was not captured: set OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true "
    "(OpenInference: unset OPENINFERENCE_HIDE_INPUTS / OPENINFERENCE_HIDE_OUTPUTS) and record again"
)
_LLM_OPS = (
    "chat",
    "text_completion",
    "generate_content",
    "completion",
)
_AGENT_OPS = (
    "invoke_agent",
    "create_agent",
)


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent: str
    name: str
    start: int
    order: int
    attrs: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    error: bool
    at: At

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
        return self.op in _LLM_OPS or self.oi_kind == "LLM"

    @property
    def is_tool(self) -> bool:
        return self.op == "execute_tool" or self.oi_kind == "TOOL"

    @property
    def is_agent(self) -> bool:
        return self.op in _AGENT_OPS or self.oi_kind == "AGENT"


@dataclass
class _Msg:
    role: str
    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    call_id: str | None = None
    name: str | None = None


# -- OTLP decoding ---------------------------------------------------------------------------------
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


def _attributes(value: Any, at: At) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, kv in enumerate(at.arr(value or [], "a list of attributes [{key, value}]")):
        here = at / i
        item = here.obj(kv, "an attribute {key, value}")
        key = (here / "key").string(item.get("key"), "the attribute key")
        out[key] = _any_value(item.get("value", {}), here / "value")
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


def _spans(doc: Document) -> list[Span]:
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
        events.append((name, _attributes(eo.get("attributes"), at / "events" / i / "attributes")))
    status = sp.get("status")
    code = status.get("code") if isinstance(status, dict) else None
    return Span(
        trace_id=_span_id(sp.get("traceId"), at / "traceId", 16) or "unknown",
        span_id=_span_id(sp.get("spanId"), at / "spanId", 8),
        parent=_span_id(sp.get("parentSpanId"), at / "parentSpanId", 8),
        name=(at / "name").string(sp.get("name", ""), "the span name"),
        start=_nanos(sp.get("startTimeUnixNano"), at / "startTimeUnixNano"),
        order=order,
        attrs=_attributes(sp.get("attributes"), at / "attributes"),
        events=events,
        error=code in (2, "STATUS_CODE_ERROR"),
        at=at,
    )


# -- message content ---------------------------------------------------------------------------------
def _json_value(value: Any) -> Any:
    """Attributes carry structure either as values or as JSON strings; accept both."""
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _call(id_: Any, name: Any, args: Any, at: At, fallback_id: str) -> ToolCall | None:
    if not isinstance(name, str) or not name:
        return None
    arguments, raw = parse_arguments(_keep_string(args), at)
    return ToolCall(
        id=str(id_) if id_ not in (None, "") else fallback_id,
        name=name,
        arguments=arguments,
        raw_arguments=raw,
    )


def _keep_string(args: Any) -> Any:
    return args if isinstance(args, dict | str) or args is None else json.dumps(args)


def _messages(value: Any, at: At, b: Builder) -> list[_Msg]:
    """Messages from a parts-model list, or from OpenAI-style {role, content, tool_calls} dicts."""
    value = _json_value(value)
    if not isinstance(value, list):
        return []
    out: list[_Msg] = []
    for i, m in enumerate(value):
        if not isinstance(m, dict):
            continue
        role = str(m.get("role") or "user")
        if isinstance(m.get("parts"), list):
            msg = _Msg(role=role, name=m.get("name") if isinstance(m.get("name"), str) else None)
            texts: list[str] = []
            for j, p in enumerate(m["parts"]):
                if not isinstance(p, dict):
                    continue
                kind = p.get("type")
                if kind == "text":
                    texts.append(_as_text(p.get("content")))
                elif kind == "tool_call":
                    c = _call(
                        p.get("id"),
                        p.get("name"),
                        p.get("arguments"),
                        at / i / "parts" / j,
                        f"call_{i}_{j}",
                    )
                    if c is not None:
                        msg.calls.append(c)
                elif kind == "tool_call_response":
                    out.append(_Msg("tool", _as_text(p.get("response")), call_id=_opt_id(p.get("id"))))
                elif kind in ("blob", "uri", "file", "image"):
                    b.warn("attachments-unresolved", "images or files in messages were not imported")
            msg.text = "\n".join(texts)
            if msg.text or msg.calls or role != "tool":
                out.append(msg)
        else:
            msg = _Msg(role=role, text=_content(m.get("content")))
            for j, tc in enumerate(m.get("tool_calls") or []):
                if isinstance(tc, dict):
                    fn_raw = tc.get("function")
                    fn: dict[str, Any] = fn_raw if isinstance(fn_raw, dict) else tc
                    c = _call(
                        tc.get("id"),
                        fn.get("name"),
                        fn.get("arguments"),
                        at / i / "tool_calls" / j,
                        f"call_{i}_{j}",
                    )
                    if c is not None:
                        msg.calls.append(c)
            msg.call_id = _opt_id(m.get("tool_call_id") or (m.get("id") if role == "tool" else None))
            out.append(msg)
    return out


def _opt_id(value: Any) -> str | None:
    return None if value in (None, "") else str(value)


def _content(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(
            _as_text(p.get("text", p.get("content"))) if isinstance(p, dict) else _as_text(p)
            for p in value
        )
    return _as_text(value)


_FLAT = re.compile(r"^(?P<prefix>.+?)\.(?P<i>\d+)\.(?P<rest>.+)$")


def _indexed(attrs: dict[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    """`prefix.N.rest = v` attributes grouped as {N: {rest: v}}."""
    out: dict[int, dict[str, Any]] = {}
    plen = len(prefix) + 1
    for key, v in attrs.items():
        if key.startswith(prefix + "."):
            head, _, rest = key[plen:].partition(".")
            if head.isdigit() and rest:
                out.setdefault(int(head), {})[rest] = v
    return dict(sorted(out.items()))


def _openinference_messages(attrs: dict[str, Any], prefix: str, at: At) -> list[_Msg]:
    out: list[_Msg] = []
    for i, fields in _indexed(attrs, prefix).items():
        role = str(fields.get("message.role") or "user")
        text = fields.get("message.content")
        if text is None:
            parts = _indexed(fields, "message.contents")
            text = "\n".join(
                _as_text(p.get("message_content.text"))
                for p in parts.values()
                if p.get("message_content.text") is not None
            )
        msg = _Msg(role=role, text=_as_text(text), call_id=_opt_id(fields.get("message.tool_call_id")))
        name = fields.get("message.name")
        msg.name = name if isinstance(name, str) else None
        for j, tc in _indexed(fields, "message.tool_calls").items():
            c = _call(
                tc.get("tool_call.id"),
                tc.get("tool_call.function.name"),
                tc.get("tool_call.function.arguments"),
                at,
                f"call_{i}_{j}",
            )
            if c is not None:
                msg.calls.append(c)
        out.append(msg)
    return out


def _flat_genai(attrs: dict[str, Any], prefix: str, at: At) -> list[_Msg]:
    out: list[_Msg] = []
    for i, fields in _indexed(attrs, prefix).items():
        msg = _Msg(role=str(fields.get("role") or "assistant"), text=_as_text(fields.get("content")))
        msg.call_id = _opt_id(fields.get("tool_call_id"))
        for j, tc in _indexed(fields, "tool_calls").items():
            c = _call(tc.get("id"), tc.get("name"), tc.get("arguments"), at, f"call_{i}_{j}")
            if c is not None:
                msg.calls.append(c)
        out.append(msg)
    return out


_EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def _event_messages(span: Span, b: Builder) -> tuple[list[_Msg], list[_Msg]]:
    """The older event style: one span event per message (and `gen_ai.choice` for outputs)."""
    inputs: list[_Msg] = []
    outputs: list[_Msg] = []
    for i, (name, attrs) in enumerate(span.events):
        at = span.at / "events" / i / "attributes"
        if name == "gen_ai.content.prompt":
            inputs += _messages(attrs.get("gen_ai.prompt"), at, b)
        elif name == "gen_ai.content.completion":
            outputs += _messages(attrs.get("gen_ai.completion"), at, b)
        elif name in _EVENT_ROLES or name == "gen_ai.choice":
            body = _json_value(attrs.get("gen_ai.event.content") or attrs.get("body"))
            if not isinstance(body, dict):
                body = {k: _json_value(v) for k, v in attrs.items()}
            if name == "gen_ai.choice" and isinstance(body.get("message"), dict):
                body = {**body["message"]}
            role = _EVENT_ROLES.get(name, "assistant")
            m = {**body, "role": body.get("role") or role}
            if role == "tool" and "tool_call_id" not in m and "id" in m:
                m["tool_call_id"] = m["id"]
            msgs = _messages([m], at, b)
            (outputs if name == "gen_ai.choice" else inputs).extend(msgs)
    return inputs, outputs


# -- the importer ------------------------------------------------------------------------------------
class OtlpJson:
    name = "otel"
    description = "OTLP/JSON traces with OpenTelemetry GenAI (gen_ai.*) or OpenInference (llm.*) spans"

    def sniff(self, data: Any, path: str) -> bool:
        if isinstance(data, dict):
            return isinstance(data.get("resourceSpans"), list)
        return (
            isinstance(data, list)
            and bool(data)
            and all(isinstance(r, dict) and isinstance(r.get("resourceSpans"), list) for r in data[:20])
        )

    def convert(self, doc: Document) -> list[Trace]:
        spans = _spans(doc)
        by_trace: dict[str, list[Span]] = {}
        for s in spans:
            by_trace.setdefault(s.trace_id, []).append(s)
        traces = [
            t for tid, group in by_trace.items() if (t := self._trace(doc, tid, group)) is not None
        ]
        if not traces:
            doc.at.fail(
                "model-call spans (gen_ai.operation.name = chat, or openinference.span.kind = LLM)",
                detail=f"found {len(spans)} span{'s' if len(spans) != 1 else ''} and no model call",
            )
        return traces

    def _trace(self, doc: Document, trace_id: str, spans: list[Span]) -> Trace | None:
        spans.sort(key=lambda s: (s.start, s.order))
        by_id = {s.span_id: s for s in spans if s.span_id}

        def ancestors(s: Span) -> Iterable[Span]:
            seen: set[str] = set()
            p = s.parent
            while p and p in by_id and p not in seen:
                seen.add(p)
                yield by_id[p]
                p = by_id[p].parent

        llm = [s for s in spans if s.is_llm]
        if not llm:
            return None
        wrappers = {a.span_id for s in llm for a in ancestors(s) if a.is_llm}
        calls = [s for s in llm if s.span_id not in wrappers]
        b = Builder(doc, self.name)
        steps: list[dict[str, Any]] = []
        missing_input = missing_output = 0
        for s in calls:
            actor = self._agent(s, ancestors(s))
            inputs, outputs = self._content(s, b)
            system = _system(s.attrs)
            if system:
                inputs = [_Msg("system", system), *[m for m in inputs if m.role != "system"]]
            tools = self._tools(s.attrs)
            b.actor(
                actor,
                "agent",
                system_prompt=next((m.text for m in inputs if m.role == "system"), None),
                tools=tools,
            )
            if not inputs:
                missing_input += 1
            if not outputs:
                missing_output += 1
            text = "\n".join(m.text for m in outputs if m.text)
            out_calls = [c for m in outputs for c in m.calls]
            sampling, dropped = sampling_from(self._sampling(s.attrs))
            if dropped:
                b.warn("sampling-invalid", f"ignored unusable sampling values: {', '.join(dropped)}")
            steps.append(
                {
                    "span": s,
                    "actor": actor,
                    "inputs": inputs,
                    "text": text,
                    "calls": out_calls,
                    "captured": bool(outputs),
                    "sampling": sampling,
                    "obs": [],
                }
            )
        self._attach_tools(b, spans, steps)
        for st in steps:
            context = [_to_message(m) for m in st["inputs"]] if st["inputs"] else None
            idx = b.step(
                st["actor"],
                st["text"],
                st["calls"],
                context=context,
                sampling=st["sampling"],
                metadata={"span_id": st["span"].span_id, "span_name": st["span"].name},
            )
            del idx
            for call_id, content, error in st["obs"]:
                if not b.observe(call_id, content, is_error=error):
                    b.observe_orphan(call_id or "?", content, is_error=error)
        self._observations_from_inputs(b, steps)
        if missing_input or missing_output:
            b.warn("content-not-captured", CAPTURE_HINT)
        fidelity: Literal["A", "B", "C"] = (
            "A" if not missing_input else ("B" if missing_output < len(steps) else "C")
        )
        task = next((m.text for st in steps for m in st["inputs"] if m.role == "user" and m.text), "")
        return b.build(
            trace_id=trace_id,
            fidelity=fidelity,
            locator=f"traceId {trace_id}",
            at=doc.at,
            task=task,
        )

    @staticmethod
    def _agent(span: Span, ancestors: Iterable[Span]) -> str:
        for s in (span, *ancestors):
            name = s.attrs.get("gen_ai.agent.name") or s.attrs.get("agent.name")
            if isinstance(name, str) and name:
                return name
            if s.is_agent and s is not span and s.name:
                return s.name
        return "assistant"

    def _content(self, s: Span, b: Builder) -> tuple[list[_Msg], list[_Msg]]:
        a = s.attrs
        at = s.at / "attributes"
        inputs = _messages(a.get("gen_ai.input.messages"), at, b)
        outputs = _messages(a.get("gen_ai.output.messages"), at, b)
        if not inputs and not outputs:
            inputs, outputs = _event_messages(s, b)
        if not inputs:
            inputs = _flat_genai(a, "gen_ai.prompt", at)
        if not outputs:
            outputs = _flat_genai(a, "gen_ai.completion", at)
        if not inputs:
            inputs = _openinference_messages(a, "llm.input_messages", at)
        if not outputs:
            outputs = _openinference_messages(a, "llm.output_messages", at)
        return inputs, [m for m in outputs if m.role in ("assistant", "model", "")] or outputs

    @staticmethod
    def _tools(a: dict[str, Any]) -> list[dict[str, Any]]:
        defs = _json_value(a.get("gen_ai.tool.definitions"))
        if isinstance(defs, list):
            return [d for d in defs if isinstance(d, dict)]
        out = []
        for _, fields in _indexed(a, "llm.tools").items():
            schema = _json_value(fields.get("tool.json_schema"))
            if isinstance(schema, dict):
                fn = schema.get("function")
                out.append(fn if isinstance(fn, dict) else schema)
        return out

    @staticmethod
    def _sampling(a: dict[str, Any]) -> dict[str, Any]:
        params = _json_value(a.get("llm.invocation_parameters"))
        values: dict[str, Any] = dict(params) if isinstance(params, dict) else {}
        if "max_tokens" not in values and "max_completion_tokens" in values:
            values["max_tokens"] = values["max_completion_tokens"]
        model = a.get("gen_ai.request.model") or a.get("llm.model_name") or values.get("model")
        values = {k: values.get(k) for k in ("temperature", "top_p", "seed", "max_tokens")}
        values["model"] = model
        for key in ("temperature", "top_p", "seed", "max_tokens"):
            v = a.get(f"gen_ai.request.{key}")
            if v is not None:
                values[key] = v
        return values

    @staticmethod
    def _attach_tools(b: Builder, spans: list[Span], steps: list[dict[str, Any]]) -> None:
        for t in (s for s in spans if s.is_tool):
            a = t.attrs
            name = a.get("gen_ai.tool.name") or a.get("tool.name") or t.name
            call_id = _opt_id(a.get("gen_ai.tool.call.id") or a.get("tool_call.id") or a.get("tool.id"))
            result = a.get("gen_ai.tool.call.result", a.get("output.value"))
            args = a.get("gen_ai.tool.call.arguments", a.get("tool.parameters", a.get("input.value")))
            before = [st for st in steps if (st["span"].start, st["span"].order) <= (t.start, t.order)]
            target = None
            if call_id is not None:
                target = next(
                    (
                        st
                        for st in [*reversed(before), *steps]
                        if any(c.id == call_id for c in st["calls"])
                    ),
                    None,
                )
            if target is None:
                for st in reversed(before):
                    answered = {o[0] for o in st["obs"]}
                    match = next(
                        (c for c in st["calls"] if c.name == name and c.id not in answered), None
                    )
                    if match is not None:
                        target, call_id = st, match.id
                        break
            if target is None and before and not before[-1]["captured"]:
                # The model's output was not captured: the tool span is the only record of the call.
                target = before[-1]
                cid = call_id or f"span_{t.span_id}"
                c = _call(cid, name, _json_value(args) if isinstance(args, str) else args, t.at, cid)
                if c is not None:
                    target["calls"].append(c)
                    call_id = c.id
                    b.warn("calls-from-tool-spans", "tool calls were rebuilt from tool spans")
            if target is None:
                if before:
                    before[-1]["obs"].append((None, _as_text(result), t.error))
                    b.warn(
                        "orphan-tool-span",
                        "some tool spans match no recorded call; kept as plain observations",
                    )
                continue
            target["obs"].append((call_id, _as_text(result), t.error))

    @staticmethod
    def _observations_from_inputs(b: Builder, steps: list[dict[str, Any]]) -> None:
        """Tool results that only appear in a later call's input become observations too."""
        answered = {o[0] for st in steps for o in st["obs"]}
        for st in steps:
            for m in st["inputs"]:
                if (
                    m.role == "tool"
                    and m.call_id
                    and m.call_id not in answered
                    and b.has_call(m.call_id)
                ):
                    b.observe(m.call_id, m.text)
                    answered.add(m.call_id)


def _system(a: dict[str, Any]) -> str:
    v = _json_value(a.get("gen_ai.system_instructions"))
    if isinstance(v, list):
        return "\n".join(_as_text(p.get("content")) for p in v if isinstance(p, dict))
    return v if isinstance(v, str) else ""


_ROLE_MAP: dict[str, Literal["system", "user", "assistant", "tool"]] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "model": "assistant",
    "tool": "tool",
}


def _to_message(m: _Msg) -> Message:
    role = (
        m.role
        if m.role in ("system", "user", "assistant", "tool")
        else ("system" if m.role == "developer" else "assistant" if m.role == "model" else "user")
    )
    return Message(
        role=role,
        content=m.text,
        name=m.name,
        tool_calls=tuple(m.calls),
        tool_call_id=m.call_id if role == "tool" else None,
    )
