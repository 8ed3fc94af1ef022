"""Message content of model-call spans, in every style emitters use.

OpenTelemetry GenAI: `gen_ai.input.messages` / `gen_ai.output.messages` / `gen_ai.system_instructions`
(the parts model, as JSON strings or structured values); the older per-message span events
(`gen_ai.user.message`, `gen_ai.choice`, ..., `gen_ai.content.prompt` / `gen_ai.content.completion`);
the flattened `gen_ai.prompt.N.*` / `gen_ai.completion.N.*`. OpenInference:
`llm.input_messages.N.message.*` and `llm.output_messages.N.message.tool_calls.M.tool_call.*`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from car.importers.base import At, Builder, parse_arguments
from car.importers.otlp import Span
from car.trace import Message, ToolCall

__all__ = [
    "Msg",
    "as_text",
    "json_value",
    "make_call",
    "opt_id",
    "sampling_values",
    "span_messages",
    "system_instructions",
    "to_message",
    "tool_definitions",
]


@dataclass
class Msg:
    """One message of a model call's input or output, before it becomes a car `Message`."""

    role: str
    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    call_id: str | None = None
    name: str | None = None


def json_value(value: Any) -> Any:
    """Attributes carry structure either as values or as JSON strings; accept both."""
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def make_call(id_: Any, name: Any, args: Any, at: At, fallback_id: str) -> ToolCall | None:
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


def _messages(value: Any, at: At, b: Builder) -> list[Msg]:
    """Messages from a parts-model list, or from OpenAI-style {role, content, tool_calls} dicts."""
    value = json_value(value)
    if not isinstance(value, list):
        return []
    out: list[Msg] = []
    for i, m in enumerate(value):
        if not isinstance(m, dict):
            continue
        role = str(m.get("role") or "user")
        if isinstance(m.get("parts"), list):
            msg = Msg(role=role, name=m.get("name") if isinstance(m.get("name"), str) else None)
            texts: list[str] = []
            for j, p in enumerate(m["parts"]):
                if not isinstance(p, dict):
                    continue
                kind = p.get("type")
                if kind == "text":
                    texts.append(as_text(p.get("content")))
                elif kind == "tool_call":
                    c = make_call(
                        p.get("id"),
                        p.get("name"),
                        p.get("arguments"),
                        at / i / "parts" / j,
                        f"call_{i}_{j}",
                    )
                    if c is not None:
                        msg.calls.append(c)
                elif kind == "tool_call_response":
                    out.append(Msg("tool", as_text(p.get("response")), call_id=opt_id(p.get("id"))))
                elif kind in ("blob", "uri", "file", "image"):
                    b.warn("attachments-unresolved", "images or files in messages were not imported")
            msg.text = "\n".join(texts)
            if msg.text or msg.calls or role != "tool":
                out.append(msg)
        else:
            msg = Msg(role=role, text=_content(m.get("content")))
            for j, tc in enumerate((at / i / "tool_calls").arr(m.get("tool_calls") or [])):
                if isinstance(tc, dict):
                    fn_raw = tc.get("function")
                    fn: dict[str, Any] = fn_raw if isinstance(fn_raw, dict) else tc
                    c = make_call(
                        tc.get("id"),
                        fn.get("name"),
                        fn.get("arguments"),
                        at / i / "tool_calls" / j,
                        f"call_{i}_{j}",
                    )
                    if c is not None:
                        msg.calls.append(c)
            msg.call_id = opt_id(m.get("tool_call_id") or (m.get("id") if role == "tool" else None))
            out.append(msg)
    return out


def opt_id(value: Any) -> str | None:
    return None if value in (None, "") else str(value)


def _content(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(
            as_text(p.get("text", p.get("content"))) if isinstance(p, dict) else as_text(p)
            for p in value
        )
    return as_text(value)


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


def _openinference_messages(attrs: dict[str, Any], prefix: str, at: At) -> list[Msg]:
    out: list[Msg] = []
    for i, fields in _indexed(attrs, prefix).items():
        role = str(fields.get("message.role") or "user")
        text = fields.get("message.content")
        if text is None:
            parts = _indexed(fields, "message.contents")
            text = "\n".join(
                as_text(p.get("message_content.text"))
                for p in parts.values()
                if p.get("message_content.text") is not None
            )
        msg = Msg(role=role, text=as_text(text), call_id=opt_id(fields.get("message.tool_call_id")))
        name = fields.get("message.name")
        msg.name = name if isinstance(name, str) else None
        for j, tc in _indexed(fields, "message.tool_calls").items():
            c = make_call(
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


def _flat_genai(attrs: dict[str, Any], prefix: str, at: At) -> list[Msg]:
    out: list[Msg] = []
    for i, fields in _indexed(attrs, prefix).items():
        msg = Msg(role=str(fields.get("role") or "assistant"), text=as_text(fields.get("content")))
        msg.call_id = opt_id(fields.get("tool_call_id"))
        for j, tc in _indexed(fields, "tool_calls").items():
            c = make_call(tc.get("id"), tc.get("name"), tc.get("arguments"), at, f"call_{i}_{j}")
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


def _event_messages(span: Span, b: Builder) -> tuple[list[Msg], list[Msg]]:
    """The older event style: one span event per message (and `gen_ai.choice` for outputs)."""
    inputs: list[Msg] = []
    outputs: list[Msg] = []
    for i, (name, attrs) in enumerate(span.events):
        at = span.at / "events" / i / "attributes"
        if name == "gen_ai.content.prompt":
            inputs += _messages(attrs.get("gen_ai.prompt"), at, b)
        elif name == "gen_ai.content.completion":
            outputs += _messages(attrs.get("gen_ai.completion"), at, b)
        elif name in _EVENT_ROLES or name == "gen_ai.choice":
            body = json_value(attrs.get("gen_ai.event.content") or attrs.get("body"))
            if not isinstance(body, dict):
                body = {k: json_value(v) for k, v in attrs.items()}
            if name == "gen_ai.choice" and isinstance(body.get("message"), dict):
                body = {**body["message"]}
            role = _EVENT_ROLES.get(name, "assistant")
            m = {**body, "role": body.get("role") or role}
            if role == "tool" and "tool_call_id" not in m and "id" in m:
                m["tool_call_id"] = m["id"]
            msgs = _messages([m], at, b)
            (outputs if name == "gen_ai.choice" else inputs).extend(msgs)
    return inputs, outputs


def system_instructions(a: dict[str, Any]) -> str:
    v = json_value(a.get("gen_ai.system_instructions"))
    if isinstance(v, list):
        return "\n".join(as_text(p.get("content")) for p in v if isinstance(p, dict))
    return v if isinstance(v, str) else ""


_ROLE_MAP: dict[str, Literal["system", "user", "assistant", "tool"]] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "model": "assistant",
    "tool": "tool",
}


def to_message(m: Msg) -> Message:
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


def span_messages(s: Span, b: Builder) -> tuple[list[Msg], list[Msg]]:
    """Inputs and outputs of a model-call span, from the first style that has them."""
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


def tool_definitions(a: dict[str, Any]) -> list[dict[str, Any]]:
    defs = json_value(a.get("gen_ai.tool.definitions"))
    if isinstance(defs, list):
        return [d for d in defs if isinstance(d, dict)]
    out = []
    for _, fields in _indexed(a, "llm.tools").items():
        schema = json_value(fields.get("tool.json_schema"))
        if isinstance(schema, dict):
            fn = schema.get("function")
            out.append(fn if isinstance(fn, dict) else schema)
    return out


def sampling_values(a: dict[str, Any]) -> dict[str, Any]:
    params = json_value(a.get("llm.invocation_parameters"))
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
