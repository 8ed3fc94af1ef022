"""car's messages and tool schemas to and from the two wire formats: OpenAI Chat and Anthropic Messages.

Tool schemas in traces come in several shapes; `tool_schema` reads them all into (name, description,
JSON-schema parameters):

    {"type": "function", "function": {"name", "description", "parameters"}}   OpenAI
    {"name", "description", "input_schema"}                                   Anthropic
    {"name", "description", "parameters": <JSON schema>}                      generic
    {"name", "parameters": {"order_id": "string"}}                            shorthand: field -> type

OpenAI's custom (free-form) tools take text, plain or matching a grammar, instead of JSON arguments:

    {"type": "custom", "custom": {"name", "description", "format"}}            Chat Completions
    {"type": "custom", "name", "description", "format"}                        Responses

`custom_tool` reads both; they go out to Chat Completions as custom tools. A trace's tool call does not
say which kind of tool it called (the importers keep a custom call's input as `raw_arguments`, like any
call's argument string), so a call is sent back as a custom call when the actor's tools define a custom
tool of its name (`custom_tool_names`).

Answers: `draw_from_openai` (one of `openai_choices`) and `draw_from_anthropic` read a response into a
`Draw`, the action and how it ended. A refusal is the action's text, as the importers read a recorded
one: it is what the agent would have received. An answer a content filter withheld (OpenAI
`finish_reason: "content_filter"` with no content, Anthropic `stop_reason: "refusal"` with none) hides
the model's decision: it is a `BackendError`, never an action. So is an answer of the wrong shape
(`tool_calls` that is not a list, a `function` that is not an object, ...), naming the backend (the
`source` given) and the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from car.errors import BackendError
from car.jsonfile import reject_constant
from car.trace import Action, Message, ToolCall

__all__ = [
    "Draw",
    "ToolSchema",
    "action_from_anthropic",
    "action_from_openai",
    "anthropic_messages",
    "anthropic_thinking",
    "anthropic_tools",
    "custom_tool",
    "custom_tool_names",
    "draw_from_anthropic",
    "draw_from_openai",
    "messages_from_anthropic",
    "messages_from_openai",
    "openai_choices",
    "openai_messages",
    "openai_tools",
    "tool_schema",
]


@dataclass(frozen=True)
class ToolSchema:
    name: str
    description: str
    parameters: dict[str, Any]


def custom_tool(tool: Mapping[str, Any]) -> dict[str, Any] | None:
    """A custom tool's properties `{name, description?, format?}` (as Chat Completions nests them
    under `custom`, with the format, a grammar say, kept as recorded), or None for any other tool."""
    if tool.get("type") != "custom":
        return None
    nested = tool.get("custom")
    if not isinstance(nested, dict) and ("input_schema" in tool or "parameters" in tool):
        return None  # Anthropic's client tools may say `type: "custom"` too, with a JSON schema
    props: Mapping[str, Any] = nested if isinstance(nested, dict) else tool
    return {k: props[k] for k in ("name", "description", "format") if props.get(k) is not None}


def custom_tool_names(tools: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    """The names of the custom tools among `tools`: the calls to send back as custom calls."""
    return frozenset(str(c.get("name", "")) for t in tools if (c := custom_tool(t)) is not None)


def tool_schema(tool: Mapping[str, Any]) -> ToolSchema:
    """A custom tool reads as a tool with no parameters: its input is text, not a JSON object."""
    fn = tool.get("function") if isinstance(tool.get("function"), dict) else custom_tool(tool) or tool
    assert isinstance(fn, Mapping)
    name = str(fn.get("name", ""))
    desc = str(fn.get("description") or "")
    params = fn.get("parameters", fn.get("input_schema"))
    if not isinstance(params, dict):
        params = {}
    if params.get("type") != "object" and "properties" not in params:
        # Shorthand {"field": "type"}: expand into an object schema.
        params = {
            "type": "object",
            "properties": {
                k: {"type": v if isinstance(v, str) else "string"} for k, v in params.items()
            },
        }
    return ToolSchema(name, desc, dict(params))


def openai_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for t in tools:
        custom = custom_tool(t)
        if custom is not None:
            out.append({"type": "custom", "custom": custom})
            continue
        s = tool_schema(t)
        fn: dict[str, Any] = {"name": s.name, "parameters": s.parameters}
        if s.description:
            fn["description"] = s.description
        out.append({"type": "function", "function": fn})
    return out


def anthropic_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for t in tools:
        s = tool_schema(t)
        entry: dict[str, Any] = {"name": s.name, "input_schema": s.parameters}
        if s.description:
            entry["description"] = s.description
        out.append(entry)
    return out


def _raw(call: ToolCall) -> str:
    return call.raw_arguments if call.raw_arguments is not None else json.dumps(call.arguments)


def _custom_input(call: ToolCall) -> str:
    """The free-form input of a custom call: the recorded text, else what the importers keep of it."""
    if call.raw_arguments is not None:
        return call.raw_arguments
    unparsed = call.arguments.get("_unparsed")
    if set(call.arguments) == {"_unparsed"} and isinstance(unparsed, str):
        return unparsed
    return json.dumps(call.arguments) if call.arguments else ""


def _openai_call(call: ToolCall, custom: frozenset[str]) -> dict[str, Any]:
    if call.name in custom:
        return {
            "id": call.id,
            "type": "custom",
            "custom": {"name": call.name, "input": _custom_input(call)},
        }
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": _raw(call)}}


def openai_messages(
    messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] = ()
) -> list[dict[str, Any]]:
    """Chat Completions messages; `tools` (the actor's definitions) say which calls are custom calls."""
    custom = custom_tool_names(tools)
    out: list[dict[str, Any]] = []
    for m in messages:
        msg: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.name and m.role == "user":
            msg["name"] = _safe_name(m.name)
        if m.role == "assistant" and m.tool_calls:
            msg["content"] = m.content or None
            msg["tool_calls"] = [_openai_call(c, custom) for c in m.tool_calls]
        if m.role == "tool":
            msg["tool_call_id"] = m.tool_call_id or ""
        out.append(msg)
    return out


def _safe_name(name: str) -> str:
    # OpenAI restricts `name` to [a-zA-Z0-9_-]{1,64}.
    cleaned = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in name)
    return cleaned[:64] or "user"


def parse_arguments(raw: str) -> dict[str, Any]:
    """Tool-call arguments as a dict, by the importers' rule (`car.importers.base.parse_arguments`),
    so a sampled call compares with a recorded one: text that is not a JSON object (a custom tool's
    input, a malformed argument string) is kept verbatim under `_unparsed`."""
    try:
        value = json.loads(raw, parse_constant=reject_constant) if raw.strip() else {}
    except (ValueError, RecursionError):
        return {"_unparsed": raw}
    return value if isinstance(value, dict) else {"_unparsed": raw}


@dataclass(frozen=True)
class Draw:
    """One sampled answer: its action, and how the model ended it."""

    action: Action
    refused: bool = False  # the model declined (OpenAI `refusal`, Anthropic stop_reason "refusal")
    cut: bool = False  # stopped at max tokens (finish_reason "length", stop_reason "max_tokens")


def _shape(value: object) -> str:
    """What a JSON value is, for an error message ("a string", "an object", ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    names = {str: "a string", dict: "an object", list: "a list", int: "a number", float: "a number"}
    return names.get(type(value), f"a {type(value).__name__}")


def _wrong(source: str, where: str, value: object, expected: str) -> BackendError:
    return BackendError(
        f"{source}: the server answered with {where} {_shape(value)}, expected {expected}"
    )


def _openai_text(content: object, *, source: str, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _wrong(source, where, content, "text, a list of parts or null")
    out = []
    for part in content:  # some servers send content parts
        if isinstance(part, dict):
            value = part.get("text") if part.get("type") != "refusal" else part.get("refusal")
            out.append(value if isinstance(value, str) else "")
    return "".join(out)


def action_from_openai(
    message: Mapping[str, Any], *, fallback_id: str, source: str = "openai", where: str = "message"
) -> Action:
    """An `Action` from a Chat Completions `choices[i].message`. Its `refusal` is its text (added to
    any content it does not repeat), as the openai-chat importer reads a recorded one. A message of
    the wrong shape is a `BackendError` naming `source` and the field (`where` is its path)."""
    text = _openai_text(message.get("content"), source=source, where=f"{where}.content")
    refusal = message.get("refusal")
    if refusal is not None and not isinstance(refusal, str):
        raise _wrong(source, f"{where}.refusal", refusal, "text or null")
    if refusal and refusal not in text:
        text = f"{text}\n{refusal}" if text else refusal
    tool_calls = message.get("tool_calls")
    if tool_calls is not None and not isinstance(tool_calls, list):
        raise _wrong(source, f"{where}.tool_calls", tool_calls, "a list of calls")
    calls = []
    for i, tc in enumerate(tool_calls or ()):
        at = f"{where}.tool_calls[{i}]"
        if not isinstance(tc, dict):
            raise _wrong(source, at, tc, "an object")
        fn, field, arg = tc.get("function"), "function", "arguments"
        if not fn and (tc.get("type") == "custom" or "custom" in tc):
            # A custom tool's call: free-form `input`, no `arguments`.
            fn, field, arg = tc.get("custom"), "custom", "input"
        if not isinstance(fn, dict):
            raise _wrong(source, f"{at}.{field}", fn, "an object with the tool's name")
        name = fn.get("name")
        if name is not None and not isinstance(name, str):
            raise _wrong(source, f"{at}.{field}.name", name, "a string")
        raw = fn.get(arg)
        raw_text = raw if isinstance(raw, str) else json.dumps(raw if raw is not None else {})
        calls.append(
            ToolCall(
                id=str(tc.get("id") or f"{fallback_id}_{i}"),
                name=name or "?",
                arguments=parse_arguments(raw_text),
                raw_arguments=raw_text,
            )
        )
    return Action(text=text, tool_calls=tuple(calls))


def openai_choices(data: Mapping[str, Any], *, source: str) -> list[Any]:
    """A Chat Completions response's `choices`: a list of at least one, else a `BackendError`."""
    choices = data.get("choices")
    if choices is not None and not isinstance(choices, list):
        raise _wrong(source, "choices", choices, "a list")
    if not choices:
        raise BackendError(f"{source}: the server answered without choices")
    return choices


def draw_from_openai(choice: object, *, source: str, fallback_id: str, index: int = 0) -> Draw:
    """The `Draw` of one Chat Completions choice (see the module docstring)."""
    where = f"choices[{index}]"
    if not isinstance(choice, dict):
        raise _wrong(source, where, choice, "an object")
    message, finish = choice.get("message"), choice.get("finish_reason")
    filtered = BackendError(
        f"{source}: the server's content filter withheld the answer (finish_reason "
        "content_filter, no content): the model's decision is unknown, so it is not a draw"
    )
    if message is None and finish == "content_filter":
        raise filtered
    if not isinstance(message, dict):
        raise _wrong(source, f"{where}.message", message, "an object")
    action = action_from_openai(
        message, fallback_id=fallback_id, source=source, where=f"{where}.message"
    )
    if finish == "content_filter" and not action.text.strip() and not action.tool_calls:
        raise filtered
    return Draw(action, refused=bool(message.get("refusal")), cut=finish == "length")


def messages_from_openai(messages: Sequence[Mapping[str, Any]]) -> list[Message]:
    """car messages from a Chat Completions `messages` list (the loopback server reads requests so)."""
    out = []
    for m in messages:
        role = m.get("role", "user")
        if role == "developer":
            role = "system"
        content = m.get("content") or ""
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        calls = action_from_openai(m, fallback_id="call").tool_calls if role == "assistant" else ()
        out.append(
            Message(
                role=role,
                content=str(content),
                name=m.get("name"),
                tool_calls=calls,
                tool_call_id=m.get("tool_call_id"),
            )
        )
    return out


def anthropic_messages(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """(system, messages) for the Messages API: system goes top-level, tool results become
    `tool_result` blocks in user turns, and consecutive turns of one role are merged.

    A call's `input` is its parsed `arguments`, since the API takes only an object. A call whose
    arguments were not one (a malformed argument string, a custom tool's free-form text) goes back
    as the object car keeps of it, `{"_unparsed": <text>}`: the model sees the text it wrote, as
    `openai:` sends the recorded string, and the block reads back to the same arguments. Sending
    `{}` instead would show a different call."""
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for m in messages:
        if m.role == "system":
            continue
        if m.role == "user":
            text = f"[{m.name}] {m.content}" if m.name else m.content
            add("user", [{"type": "text", "text": text or "(empty)"}])
        elif m.role == "tool":
            add(
                "user",
                [{"type": "tool_result", "tool_use_id": m.tool_call_id or "", "content": m.content}],
            )
        else:
            blocks: list[dict[str, Any]] = anthropic_thinking(m.reasoning)
            if m.content:
                blocks.append({"type": "text", "text": m.content})
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                for c in m.tool_calls
            ]
            add("assistant", blocks or [{"type": "text", "text": "(empty)"}])
    if not out or out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": [{"type": "text", "text": "(start)"}]})
    return system, out


def action_from_anthropic(content: Sequence[Any], *, source: str = "anthropic") -> Action:
    """An `Action` from a Messages API response's `content` blocks. A block of the wrong shape is a
    `BackendError` naming `source` and the block."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for i, b in enumerate(content):
        if not isinstance(b, dict):
            raise _wrong(source, f"content[{i}]", b, "a content block (an object)")
        kind = b.get("type")
        if kind == "text":
            text = b.get("text", "")
            if not isinstance(text, str):
                raise _wrong(source, f"content[{i}].text", text, "a string")
            texts.append(text)
        elif kind == "tool_use":
            name = b.get("name")
            if name is not None and not isinstance(name, str):
                raise _wrong(source, f"content[{i}].name", name, "a string")
            args, raw = _anthropic_input(b.get("input"))
            calls.append(
                ToolCall(
                    id=str(b.get("id") or f"toolu_{len(calls)}"),
                    name=name or "?",
                    arguments=args,
                    raw_arguments=raw,
                )
            )
    thinking = anthropic_thinking([dict(b) for b in content])
    return Action(text="".join(texts), tool_calls=tuple(calls), reasoning=tuple(thinking))


def draw_from_anthropic(data: Mapping[str, Any], *, source: str) -> Draw:
    """The `Draw` of a Messages API response (see the module docstring)."""
    content, stop = data.get("content"), data.get("stop_reason")
    if content is None and stop == "refusal":
        content = []
    if content is None:
        raise BackendError(f"{source}: the server answered without content blocks")
    if not isinstance(content, list):
        raise _wrong(source, "content", content, "a list of content blocks")
    action = action_from_anthropic(content, source=source)
    if stop == "refusal" and not action.text.strip() and not action.tool_calls:
        raise BackendError(
            f"{source}: the model refused without an answer (stop_reason refusal, no content): "
            "its decision is unknown, so it is not a draw"
        )
    return Draw(action, refused=stop == "refusal", cut=stop == "max_tokens")


def anthropic_thinking(reasoning: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The Messages API thinking blocks among an action's reasoning, in order, as the API sent them:
    `thinking` blocks with their `signature`, `redacted_thinking` blocks with their `data`, also
    inside LiteLLM's `{"thinking_blocks": [...]}`, and Inspect's `reasoning` parts of them (the
    thinking text and its `signature`, or the redacted `data` in `reasoning` beside
    `redacted: true`), turned back into the blocks they were made from, as Inspect does when it
    sends them. The API checks signatures and refuses a changed or unsigned block, so anything else
    (another vendor's reasoning, reasoning text without a signature) is left out: a replay cannot
    send it back."""
    sealed = {"thinking": "signature", "redacted_thinking": "data"}  # what each kind must carry
    out: list[dict[str, Any]] = []
    for block in reasoning:
        kind = block.get("type")
        text = block.get("reasoning")
        if kind in sealed and isinstance(block.get(sealed[kind]), str):
            out.append(dict(block))
        elif kind == "reasoning" and isinstance(text, str):  # Inspect's ContentReasoning
            signature = block.get("signature")
            if block.get("redacted") is True:
                out.append({"type": "redacted_thinking", "data": text})
            elif isinstance(signature, str) and signature:
                out.append({"type": "thinking", "thinking": text, "signature": signature})
        elif kind is None and isinstance(block.get("thinking_blocks"), list):
            out += anthropic_thinking([b for b in block["thinking_blocks"] if isinstance(b, dict)])
    return out


def _anthropic_input(value: Any) -> tuple[dict[str, Any], str | None]:
    """A `tool_use` block's `input` as (arguments, raw text). An object is the arguments (its JSON
    the text). Anything else, which the API never sends but a compatible server or proxy may, is
    read as the anthropic importer reads it in a record (`car.importers.base.parse_any_arguments`),
    so the call can match its recorded twin: its text, the string itself or else its JSON, goes
    through `parse_arguments` (kept under `_unparsed` unless it is a JSON object); none is {}."""
    if isinstance(value, dict):
        return value, json.dumps(value)
    if value is None:
        return {}, None
    raw = value if isinstance(value, str) else json.dumps(value)
    return parse_arguments(raw), raw


def messages_from_anthropic(
    system: str | Sequence[Mapping[str, Any]] | None, messages: Sequence[Mapping[str, Any]]
) -> list[Message]:
    """car messages from a Messages API request (the loopback server reads requests so)."""
    out: list[Message] = []
    if isinstance(system, str) and system:
        out.append(Message(role="system", content=system))
    elif isinstance(system, list):
        text = "".join(str(b.get("text", "")) for b in system)
        if text:
            out.append(Message(role="system", content=text))
    for m in messages:
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        if m.get("role") == "assistant":
            action = action_from_anthropic(blocks)
            out.append(
                Message(
                    role="assistant",
                    content=action.text,
                    tool_calls=action.tool_calls,
                    reasoning=action.reasoning,
                )
            )
            continue
        for b in blocks:
            if b.get("type") == "tool_result":
                c = b.get("content", "")
                if isinstance(c, list):
                    c = "".join(str(x.get("text", "")) for x in c if isinstance(x, dict))
                out.append(Message(role="tool", content=str(c), tool_call_id=b.get("tool_use_id")))
            elif b.get("type") == "text":
                text = str(b.get("text", ""))
                name = None
                if text.startswith("[") and "] " in text:
                    name, text = text[1:].split("] ", 1)
                out.append(Message(role="user", content=text, name=name))
    return out
