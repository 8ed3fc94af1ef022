"""Message content of model-call spans, in every style emitters use.

OpenTelemetry GenAI: `gen_ai.input.messages` / `gen_ai.output.messages` / `gen_ai.system_instructions`
(the parts model, as JSON strings or structured values); the older per-message span events
(`gen_ai.user.message`, `gen_ai.choice`, ..., `gen_ai.content.prompt` / `gen_ai.content.completion`;
pydantic-ai's instrumentation version 1 writes them into one attribute, `events`, as JSON);
the flattened `gen_ai.prompt.N.*` / `gen_ai.completion.N.*` (OpenLLMetry; a content it wrote as
the JSON text of a list of parts, Anthropic blocks or Bedrock Converse blocks (which have no type:
`{"text"}`, `{"toolUse"}`, `{"toolResult"}`, `{"reasoningContent"}`, ...) is read as those parts, a
`tool_result` block as the tool message it is, as is a list of such blocks its event mode writes as
an event's `content`, and a streamed block it writes as a choice's `{type, content}`; the tools its
event mode writes as a user message are the call's tool definitions, no turn). OpenInference:
`llm.input_messages.N.message.*` and `llm.output_messages.N.message.tool_calls.M.tool_call.*`, and
content parts `message.contents.M.*` (a `tool_use` part is a tool call, once, though emitters repeat
it in `message.tool_calls`). A message's `reasoning` parts (an OpenInference `message.contents.M`
part of type `reasoning` too, as its flattened `message_content.*` fields, and an OpenAI-style
message's reasoning fields, `reasoning_content` and the like: `car.importers.thinking.chat_reasoning`)
are not text: they stay beside it, verbatim, with where they sit. A tool result given inside an
assistant message (a server or built-in tool the provider ran) follows that message. Parts car
cannot import (images, audio, types car does not know) are named in a warning (`Unimported`), never
dropped without a word, as is recorded content car cannot read (JSON cut off by an attribute length
limit, an object where a list of messages belongs, an entry that is not a message object); a tool
call without a name is refused (`make_call`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, TypeGuard

from car.importers.base import At, Builder, describe, parse_any_arguments, parse_float
from car.importers.openai_chat import TOOL_CALL, choices_skipped, custom_call
from car.importers.otlp import Span
from car.importers.thinking import chat_reasoning, chat_reasoning_sealed
from car.trace import Message, ToolCall

__all__ = [
    "Msg",
    "SpanContent",
    "Unimported",
    "as_text",
    "attr_id",
    "json_value",
    "make_call",
    "opt_id",
    "reasoning_sealed",
    "reasoning_text",
    "sampling_values",
    "span_messages",
    "system_instructions",
    "to_message",
    "tool_definitions",
]


@dataclass
class Msg:
    """One message of a model call's input or output, before it becomes a car `Message` (which
    cannot hold its reasoning parts: those are kept apart, each with where it sits)."""

    role: str
    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    call_id: str | None = None
    name: str | None = None
    reasoning: list[tuple[At, dict[str, Any]]] = field(default_factory=list)
    # A tool result given inside the assistant turn before it: the provider ran the tool (a server
    # or built-in tool), so the result is the observation of the call that produced the turn.
    in_turn: bool = False
    error: bool = False  # a tool result the tool reported as an error (Anthropic's is_error)
    at: At = field(kw_only=True)  # where it sits (a result that cannot be paired is named there)


class Unimported:
    """Message parts car cannot import, said once per trace: each kind with where it first sits
    (every input repeats earlier messages, so they are named, not counted)."""

    def __init__(self) -> None:
        self._first: dict[str, At] = {}  # what, in words -> where the first one sits
        self._compaction: At | None = None
        self._unreadable: dict[str, At] = {}  # the problem, in words -> where it first is

    def unreadable(self, problem: str, at: At) -> None:
        """Recorded content that cannot be read as messages (not a capture problem: it was
        recorded, so the capture hint would send the user after the wrong fix)."""
        self._unreadable.setdefault(problem, at)

    def part(self, kind: Any, at: At) -> None:
        what = f"{kind!r}" if isinstance(kind, str) else "parts without a type"
        self._first.setdefault(what, at)

    def not_an_object(self, at: At) -> None:
        self._first.setdefault("parts that are not objects", at)

    def compaction(self, at: At) -> None:
        if self._compaction is None:
            self._compaction = at

    def warn(self, b: Builder) -> None:
        if self._unreadable:
            named = "; ".join(f"{what} (first at {at.where()})" for what, at in self._unreadable.items())
            b.warn(
                "content-unparsed",
                f"recorded message content could not be read, so the calls it belongs to lack those "
                f"messages: {named}",
            )
        if self._compaction is not None:
            b.warn(
                "compaction",
                "the conversation was compacted: a compaction part stands for earlier turns (the "
                "provider's summary of them) and is not imported, since context messages hold text "
                "and tool calls only, so replayed inputs lack both the turns and the summary (first "
                f"at {self._compaction.where()})",
            )
        if self._first:
            named = ", ".join(f"{what} (first at {at.where()})" for what, at in self._first.items())
            b.warn("items-skipped", f"message parts car does not import were left out: {named}")


# The conventions' reasoning part is {"type": "reasoning", "content"}; pydantic-ai writes "thinking".
_REASONING = ("reasoning", "thinking")
# Images, audio and files: the conventions' blob / uri / file parts, pydantic-ai's media parts,
# OpenAI-style content parts, and OpenInference's image and audio contents.
_ATTACHMENTS = (
    "blob",
    "uri",
    "file",
    "image",
    "audio",
    "image-url",
    "audio-url",
    "video-url",
    "document-url",
    "binary",
    "image_url",
    "input_audio",
    "video",  # a Converse video block
)
# Where a tool_call_response part holds the result: the current conventions say `response`; the
# older ones and pydantic-ai say `result`.
_RESULT_KEYS = {
    "tool_call_response": ("response", "result"),
    "server_tool_call_response": ("server_tool_call_response",),
}


def _is_reasoning(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") in _REASONING


def json_value(value: Any) -> Any:
    """Attributes carry structure either as values or as JSON strings; accept both."""
    if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):
        try:
            return json.loads(value, parse_float=parse_float)
        except ValueError:
            return value
    return value


def as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def make_call(
    id_: str | None,
    name: Any,
    args: Any,
    at: At,
    fallback_id: str,
    *,
    name_at: At,
    what: str = "the tool name",
) -> ToolCall:
    """A tool call from its id (already text, see `opt_id`), name and arguments (at `at`). A call
    without a name cannot be replayed: as every importer does, it is refused naming `name_at`
    (`what` says what was expected there), never dropped."""
    if not isinstance(name, str):
        name_at.fail(what, name)
    if not name:
        name_at.fail(f"a non-empty {what.removeprefix('the ')}", name)
    arguments, raw = parse_any_arguments(args, at)
    return ToolCall(
        id=id_ if id_ is not None else fallback_id,
        name=name,
        arguments=arguments,
        raw_arguments=raw,
    )


def opt_id(value: Any, at: At, what: str = "a tool-call id") -> str | None:
    """A recorded call id as text, or None when none was recorded. The rule every importer shares
    (`At.call_id`): an integer (an `intValue`, or a number in JSON content) is its decimal string; a
    boolean (a `boolValue`) or a fraction is no id, refused naming `at`."""
    return None if value is None or value == "" else at.call_id(value, what)


def attr_id(span: Span, key: str, value: Any) -> str | None:
    """`opt_id` for the value of the span's attribute `key`, refused at that attribute."""
    return opt_id(value, span.place(key), f"the tool-call id in {key}")


def _messages(
    value: Any, at: At, what: str, b: Builder, unimported: Unimported, ids: str
) -> list[Msg] | None:
    """Messages from a parts-model list, or from OpenAI-style {role, content, name, tool_calls or
    function_call} dicts, or None when `what` was not recorded; `at` is where the list (or the JSON
    string holding it) sits, `ids` what names its calls recorded without an id (`{ids}{i}_{j}`, see
    `span_messages`). Recorded content that is no such list (JSON cut off by an attribute length
    limit, an object) and entries that are not objects are named (`Unimported.unreadable`), never
    dropped silently."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value, parse_float=parse_float)
        except (ValueError, RecursionError):
            cut = value.lstrip()[:1] in ("[", "{")
            problem = "is not valid JSON (possibly cut off by an attribute length limit)"
            unimported.unreadable(f"{what} {problem if cut else 'is not JSON'}", at)
            return []
    if not isinstance(value, list):
        unimported.unreadable(f"{what} is {describe(value)}, not a list of messages", at)
        return []
    out: list[Msg] = []
    for i, m in enumerate(value):
        if isinstance(m, dict):
            out += _message(m, at / i, b, f"{ids}{i}", unimported)
        else:
            unimported.unreadable(f"entries of {what} that are not message objects", at / i)
    return out


def _message(
    m: dict[str, Any],
    at: At,
    b: Builder,
    ids: str,
    unimported: Unimported,
    beside: tuple[dict[str, Any], At] | None = None,
) -> list[Msg]:
    """One message at `at`, whose calls recorded without an id are `{ids}_{j}`. A parts-model
    message's tool_call_response parts become tool messages of their own: before it (they answer
    earlier calls), or, in an assistant message, after it (a server or built-in tool's result, given
    inside the turn). `beside` is the object holding the message (and its place) when that lists
    calls of the message beside it, as OpenLLMetry's `gen_ai.choice` event body does."""
    before: list[Msg] = []
    after: list[Msg] = []
    role = str(m.get("role") or "user")
    if isinstance(m.get("parts"), list):
        in_turn = role in ("assistant", "model")
        msg = Msg(role=role, name=m.get("name") if isinstance(m.get("name"), str) else None, at=at)
        texts: list[str] = []
        for j, p in enumerate(m["parts"]):
            here = at / "parts" / j
            if not isinstance(p, dict):
                unimported.not_an_object(here)
                continue
            kind = p.get("type")
            if kind == "text":
                texts.append(as_text(p.get("content")))
            elif kind in ("tool_call", "server_tool_call"):
                # A server tool's call holds its details in `server_tool_call` ({type, ...}).
                args = p.get("arguments" if kind == "tool_call" else "server_tool_call")
                call_id = opt_id(p.get("id"), here / "id")
                c = make_call(call_id, p.get("name"), args, here, f"{ids}_{j}", name_at=here / "name")
                msg.calls.append(c)
            elif kind in _RESULT_KEYS:
                answers = opt_id(p.get("id"), here / "id", "the id of the tool call this part answers")
                result = _result(p, kind, here, b)
                answer = Msg("tool", result, call_id=answers, in_turn=in_turn, at=here)
                (after if in_turn else before).append(answer)
            elif kind in _REASONING:
                msg.reasoning.append((here, p))
            elif kind in _ATTACHMENTS:
                b.attachments("images or files in messages", here)
            elif kind == "compaction":
                unimported.compaction(here)
            else:
                unimported.part(kind, here)
        msg.text = "\n".join(texts)
        msg.calls += _calls_beside(beside, msg.calls, len(m["parts"]), b, ids)
        keep = [msg] if msg.text or msg.calls or role != "tool" else []
        return [*before, *keep, *after]
    content = m.get("content")
    msg = Msg(role=role, name=m.get("name") if isinstance(m.get("name"), str) else None, at=at)
    msg.reasoning += chat_reasoning(m, at)  # DeepSeek, vLLM, OpenRouter, LiteLLM
    msg.calls = [c for _, c in _listed_calls(m, at, b, ids)]
    own = len(m.get("tool_calls") or ()) or int(m.get("function_call") is not None)
    msg.calls += _calls_beside(beside, msg.calls, own, b, ids)
    results: list[Msg] = []
    if isinstance(content, dict) and isinstance(content.get("type"), str):
        content = _streamed_block(content, at / "content", msg, unimported)
    if _converse(content) or (_typed(content) and {p["type"] for p in content} & _ANTHROPIC_BLOCKS):
        # Anthropic or Converse blocks, as OpenLLMetry's event mode writes a message's content: read
        # as the flattened style reads them, a tool_use block a call, a tool_result block a result
        results = _flat_parts(content, at / "content", msg, ids, b, unimported)
        content = msg.text  # the text blocks' text
    elif isinstance(content, list):
        for j, p in enumerate(content):
            if _is_reasoning(p):
                msg.reasoning.append((at / "content" / j, p))
            elif isinstance(p, dict) and "text" not in p and "content" not in p:
                if p.get("type") == "refusal":
                    continue  # an OpenAI refusal part: its text, read below
                if p.get("type") in _ATTACHMENTS:
                    b.attachments("images or files in messages", at / "content" / j)
                else:
                    unimported.part(p.get("type"), at / "content" / j)
        content = [p for p in content if not _is_reasoning(p)]
    msg.text = _with_refusal(_content(content), m.get("refusal"))
    # A tool message names the call it answers in tool_call_id, or (event style) in id.
    key = "tool_call_id" if m.get("tool_call_id") not in (None, "") else "id"
    if key == "tool_call_id" or role == "tool":
        msg.call_id = opt_id(m.get(key), at / key, "the id of the tool call this message answers")
    # A user turn that only carries tool results (Anthropic's shape) is those results alone.
    said = msg.text or msg.calls or msg.reasoning or not results
    return [*results, *([msg] if said else [])]


def _streamed_block(block: dict[str, Any], at: At, msg: Msg, unimported: Unimported) -> str:
    """The text of a content block (at `at`) that OpenLLMetry's Anthropic instrumentation writes as
    a streamed response's choice content, `{type, content}`: a text block's text; a thinking block
    is the reasoning of `msg` (as a thinking block of a later input is read); a block of any other
    type (its older versions wrote a tool_use block so, without the call) is named, not text."""
    kind = block["type"]
    if kind in _PART_TEXT:
        return as_text(block.get("content"))
    if kind == "thinking":
        msg.reasoning.append((at, {"type": "reasoning", "content": as_text(block.get("content"))}))
    else:
        unimported.part(kind, at)
    return ""


def _listed_calls(
    m: dict[str, Any], at: At, b: Builder, ids: str, first: int = 0
) -> list[tuple[bool, ToolCall]]:
    """The calls an OpenAI-style message `m` at `at` lists in `tool_calls`, or its legacy
    `function_call`, each with whether it was recorded with an id (the j-th without one is
    `{ids}_{first + j}`)."""
    listed = (at / "tool_calls").arr(m.get("tool_calls") or [])
    # an entry that is not an object is refused, as openai-chat refuses it, not skipped
    calls = [
        (at / "tool_calls" / j, (at / "tool_calls" / j).obj(tc, TOOL_CALL))
        for j, tc in enumerate(listed)
    ]
    if not calls and m.get("function_call") is not None:
        # OpenAI's legacy function calling: one call {name, arguments}, without an id, answered by
        # the function message after it (`results-paired-by-order`)
        here = at / "function_call"
        calls = [(here, here.obj(m["function_call"], "a function call {name, arguments}"))]
    out: list[tuple[bool, ToolCall]] = []
    for j, (here, tc) in enumerate(calls, first):
        fn_raw = tc.get("function")
        if fn_raw is None and (tc.get("type") == "custom" or "custom" in tc):
            name_at, _, name, args = custom_call(tc, here, b)  # free-form input, as openai-chat
        else:
            # `{function: {name, arguments}}`, or the flat `{name, arguments}` form, as openai-chat
            inner = fn_raw is not None
            fn = (here / "function").obj(fn_raw, "{name, arguments}") if inner else tc
            name_at = (here / "function" if inner else here) / "name"
            name, args = fn.get("name"), fn.get("arguments")
        call_id = opt_id(tc.get("id"), here / "id")
        c = make_call(call_id, name, args, here, f"{ids}_{j}", name_at=name_at)
        out.append((call_id is not None, c))
    return out


def _calls_beside(
    beside: tuple[dict[str, Any], At] | None, listed: list[ToolCall], first: int, b: Builder, ids: str
) -> list[ToolCall]:
    """The calls the object holding a message lists beside it (`beside`: the object and its
    place), one recorded without an id numbered from `first`, after every entry of the message
    that may hold one of its own calls (`listed`). A call listed in both places is one call, taken
    once (`_not_listed`): a model turn's calls are one list, whichever place an emitter wrote them
    in, and taking either place alone would drop the other's calls without a word."""
    if beside is None:
        return []
    return _not_listed(_listed_calls(*beside, b, ids, first), listed)


def _result(part: dict[str, Any], kind: str, at: At, b: Builder) -> str:
    """The result a tool_call_response (or server_tool_call_response) part at `at` holds, as text.
    A part with none is imported as an empty result, and a warning names it: no empty text passes
    for what the tool returned."""
    keys = _RESULT_KEYS[kind]
    value = next((part[k] for k in keys if part.get(k) is not None), None)
    if value is None and not any(k in part for k in keys):
        b.warn(
            "tool-result-missing",
            f"a {kind} part holds no result (no {' or '.join(repr(k) for k in keys)}); it is "
            f"imported as an empty result (first at {at.where()})",
        )
    return as_text(value)


def _content(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(_part_text(p) for p in value)
    return as_text(value)


def _part_text(part: Any) -> str:
    if not isinstance(part, dict):
        return as_text(part)
    if part.get("type") == "refusal" and "text" not in part:
        return as_text(part.get("refusal"))  # an OpenAI refusal part: what the model said
    return as_text(part.get("text", part.get("content")))


def _with_refusal(text: str, refusal: Any) -> str:
    """A message's text with its OpenAI `refusal` field: the model declined, and the refusal is what
    it said (the content is null then, or holds the same text as a refusal part)."""
    if not isinstance(refusal, str) or not refusal or refusal in text:
        return text
    return f"{text}\n{refusal}" if text else refusal


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


def _openinference_messages(
    span: Span, prefix: str, b: Builder, unimported: Unimported, ids: str
) -> list[Msg]:
    """Messages flattened as `{prefix}.N.message.*`. Of a message's content parts
    (`message.contents.M.*`), text is its text (unless `message.content` gives it whole), reasoning
    stays beside it, a tool_use part (its call under `tool_call.*`) is a tool call, and images,
    audio and parts of types car does not know are said in a warning, never dropped silently."""
    out: list[Msg] = []
    for i, fields in _indexed(span.attrs, prefix).items():
        key = f"{prefix}.{i}"
        role = str(fields.get("message.role") or "user")
        answers = attr_id(span, f"{key}.message.tool_call_id", fields.get("message.tool_call_id"))
        msg = Msg(role=role, call_id=answers, at=span.place(f"{key}.message.role"))
        texts: list[str] = []
        part_calls: list[tuple[bool, ToolCall]] = []  # the tool_use parts': was an id recorded
        for j, part in _indexed(fields, "message.contents").items():
            at = f"{key}.message.contents.{j}"
            kind = part.get("message_content.type")
            if kind == "reasoning":
                # kept as recorded (its flattened message_content.* fields), named where its type is
                msg.reasoning.append((span.place(f"{at}.message_content.type"), part))
            elif kind == "tool_use":
                call = _flat_call(span, part, at, _OI_CALL, f"{ids}{i}_contents_{j}")
                part_calls.append((part.get(_OI_CALL[0]) not in (None, ""), call))
            elif part.get(_OI_TEXT) is not None:
                texts.append(as_text(part[_OI_TEXT]))
            elif kind in _ATTACHMENTS or any(k.startswith(_OI_MEDIA) for k in part):
                named = "message_content.type" if "message_content.type" in part else next(iter(part))
                b.attachments("images or files in messages", span.place(f"{at}.{named}"))
            elif kind != "text":
                named = "message_content.type" if "message_content.type" in part else next(iter(part))
                unimported.part(kind, span.place(f"{at}.{named}"))
        # a message may give its text whole, beside contents that hold its reasoning
        text = fields.get("message.content")
        msg.text = as_text(text) if text is not None else "\n".join(texts)
        name = fields.get("message.name")
        msg.name = name if isinstance(name, str) else None
        msg.calls = _flat_calls(span, fields, key, "message.tool_calls", _OI_CALL, f"{ids}{i}")
        msg.calls += _not_listed(part_calls, msg.calls)
        out.append(msg)
    return out


def _not_listed(part_calls: list[tuple[bool, ToolCall]], listed: list[ToolCall]) -> list[ToolCall]:
    """The calls of a message's tool_use parts that its `message.tool_calls` lack. Emitters write
    a call in both (the part keeps its place among the contents): a part's call is the listed call
    of the same name and arguments (and id, when the part records one), each listed call matched
    once; the rest are calls of their own."""
    left = list(listed)
    out: list[ToolCall] = []
    for has_id, call in part_calls:
        twin = next(
            (
                c
                for c in left
                if (c.name, c.arguments) == (call.name, call.arguments)
                and (not has_id or c.id == call.id)
            ),
            None,
        )
        if twin is None:
            out.append(call)
        else:
            left.remove(twin)
    return out


# OpenInference flattens a content part's fields under message_content: a reasoning part (Anthropic
# thinking and redacted_thinking, OpenAI reasoning items) has its readable text in
# message_content.text, and what must go back unchanged in signature, data (redacted_thinking) or
# encrypted_content (OpenAI's).
_OI_TEXT = "message_content.text"
# An image or audio part's own fields (message_content.image.image.url, ...), with or without a type
_OI_MEDIA = ("message_content.image", "message_content.audio")
_OI_SEALED = ("message_content.data", "message_content.encrypted_content")


def reasoning_text(part: dict[str, Any]) -> str:
    """The readable text of a reasoning part: the conventions' (and pydantic-ai's) `content`, or an
    OpenInference part's message_content.text; none is empty."""
    text = part.get("content", part.get(_OI_TEXT))
    return text if isinstance(text, str) else ""


def reasoning_sealed(part: dict[str, Any]) -> bool:
    """Whether a reasoning piece of span content is encrypted: an OpenInference part holding
    redacted data or encrypted_content, or an OpenAI-style message's reasoning field holding an
    encrypted entry (`chat_reasoning_sealed`). The GenAI conventions have no encrypted form."""
    return any(part.get(k) for k in _OI_SEALED) or chat_reasoning_sealed(part)


def _flat_genai(span: Span, prefix: str, b: Builder, unimported: Unimported, ids: str) -> list[Msg]:
    """Messages flattened as `{prefix}.N.role|content|name|tool_call_id|tool_calls.M.*` (OpenLLMetry;
    its older versions wrote a legacy function call as `{prefix}.N.function_call.name|arguments`).

    OpenLLMetry writes a content that is a list of parts (OpenAI) or blocks (Anthropic) as its JSON
    text: it is read as those parts (`_flat_parts`), not kept as JSON. A refusal, which it writes
    in `{prefix}.N.refusal` instead of the content, is the message's text. Its Anthropic
    instrumentation writes a thinking block as a message of its own, of role `thinking`: that is the
    reasoning of the message after it (of the one before it when none follows)."""
    out: list[Msg] = []
    thinking: list[tuple[At, dict[str, Any]]] = []
    for i, fields in _indexed(span.attrs, prefix).items():
        key = f"{prefix}.{i}"
        role = str(fields.get("role") or "assistant")
        content = fields.get("content")
        if role == "thinking":
            part = {"type": "reasoning", "content": as_text(content)}
            thinking.append((span.place(f"{key}.content"), part))
            continue
        name = fields["name"] if isinstance(fields.get("name"), str) else None
        msg = Msg(role=role, name=name, at=span.place(f"{key}.role"))
        msg.call_id = attr_id(span, f"{key}.tool_call_id", fields.get("tool_call_id"))
        msg.calls = _flat_calls(span, fields, key, "tool_calls", _FLAT_CALL, f"{ids}{i}")
        legacy = {
            k.removeprefix("function_call."): v
            for k, v in fields.items()
            if k.startswith("function_call.")
        }
        if legacy and not msg.calls:  # older OpenLLMetry: a legacy function call, no id
            msg.calls = [_flat_call(span, legacy, f"{key}.function_call", _FLAT_CALL, f"{ids}{i}_0")]
        parts = _json_parts(content, role)
        results: list[Msg] = []
        if parts is None:
            msg.text = as_text(content)
        else:
            results = _flat_parts(parts, span.place(f"{key}.content"), msg, f"{ids}{i}", b, unimported)
        msg.text = _with_refusal(msg.text, fields.get("refusal"))
        msg.reasoning[:0], thinking = thinking, []
        # A user turn that only carries tool results (Anthropic's shape) is those results alone.
        keep = msg.text or msg.calls or msg.reasoning or not results
        out += [*results, *([msg] if keep else [])]
    if thinking:
        if out:
            out[-1].reasoning += thinking
        else:
            out.append(Msg("assistant", reasoning=thinking, at=thinking[0][0]))
    return out


def _json_parts(value: Any, role: str) -> list[dict[str, Any]] | None:
    """A content written as the JSON text of a list of content parts, as that list; None for any
    other value (text that is not such JSON stays text). A tool's output may itself be JSON of
    typed objects: a tool message's content is read as parts only when they are all text parts, any
    other message's when one of them is a part of a type car knows."""
    if not isinstance(value, str) or not value.lstrip().startswith("["):
        return None
    try:
        parts = json.loads(value, parse_float=parse_float)
    except (ValueError, RecursionError):
        return None
    if _typed(parts):
        types = {p["type"] for p in parts}
    elif _converse(parts):
        types = {_CONVERSE.get(k, k) for p in parts for k in p}
    else:
        return None
    if role == "tool":
        return parts if types <= set(_PART_TEXT) else None
    return parts if types & _KNOWN_PARTS else None


def _typed(value: Any) -> TypeGuard[list[dict[str, Any]]]:
    """Whether `value` is a list of content parts: objects, each with a type."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(p, dict) and isinstance(p.get("type"), str) for p in value)
    )


def _converse(value: Any) -> TypeGuard[list[dict[str, Any]]]:
    """Whether `value` is a list of Bedrock Converse content blocks: objects without a type, each
    named by its one key, one of them a block car reads (`_CONVERSE`)."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(p, dict) and len(p) == 1 and "type" not in p for p in value)
        and any(k in _CONVERSE for p in value for k in p)
    )


# Bedrock's Converse API names a content block by its one key, and the Anthropic block each one
# matches: they are read as those blocks (`_as_anthropic`). `json` is a toolResult's content.
_CONVERSE = {
    "text": "text",
    "json": "text",
    "toolUse": "tool_use",
    "toolResult": "tool_result",
    "reasoningContent": "thinking",
    "image": "image",
    "document": "document",
    "video": "video",
}


def _as_anthropic(block: dict[str, Any], at: At) -> tuple[dict[str, Any], At]:
    """A content block at `at` as an Anthropic block (or an OpenAI-style part), and where its fields
    sit. A block with a type is itself; a Converse block is the Anthropic block it matches, its ids
    read where they sit (`opt_id`); a Converse block car does not read is named by its key."""
    if "type" in block or len(block) != 1:
        return block, at
    ((key, value),) = block.items()
    inner = value if isinstance(value, dict) else {}
    here = at / key
    if key in ("text", "json"):
        return {"type": "text", "text": as_text(value)}, at
    if key == "toolUse":
        call_id = opt_id(inner.get("toolUseId"), here / "toolUseId")
        return {"type": "tool_use", "id": call_id, **_only(inner, "name", "input")}, here
    if key == "toolResult":
        what = "the id of the tool call this block answers"
        answers = opt_id(inner.get("toolUseId"), here / "toolUseId", what)
        error = inner.get("status") == "error"
        result = {"type": "tool_result", "tool_use_id": answers, "is_error": error}
        return result | _only(inner, "content"), here
    if key == "reasoningContent":
        said = inner.get("reasoningText")
        if isinstance(said, dict):
            return {"type": "thinking", "thinking": said.get("text")}, here
        return {"type": "redacted_thinking", **inner}, here  # its redactedContent, kept as is
    return {"type": _CONVERSE.get(key, key)}, at


def _only(fields: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: fields[k] for k in keys if k in fields}


_PART_TEXT = ("text", "input_text", "output_text")
# Blocks only Anthropic's content lists hold: a list with one is read as Anthropic blocks
# (`_flat_parts`), not as OpenAI-style parts, whose `reasoning` parts stay reasoning.
_ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "redacted_thinking", "document"}
_KNOWN_PARTS = {
    *_PART_TEXT,
    *("refusal", "tool_use", "tool_result", "thinking", "redacted_thinking", "document"),
    *_ATTACHMENTS,
}


def _flat_parts(
    parts: list[dict[str, Any]], at: At, msg: Msg, ids: str, b: Builder, unimported: Unimported
) -> list[Msg]:
    """Read the content parts of a message (the JSON text at `at`) into `msg`: text parts are its
    text, tool_use blocks its calls (once: OpenLLMetry lists them in `tool_calls` too; one without
    an id is `{ids}_{j}`), thinking blocks its reasoning; images and documents are warned about,
    other parts named. A Bedrock Converse block (no type, named by its one key) is read as the
    Anthropic block it matches (`_as_anthropic`). Returns the tool_result blocks as tool messages
    (they answer earlier calls)."""
    texts: list[str] = []
    results: list[Msg] = []
    part_calls: list[tuple[bool, ToolCall]] = []
    for j, block in enumerate(parts):
        p, here = _as_anthropic(block, at / j)
        kind = p["type"]
        if kind in _PART_TEXT:
            texts.append(as_text(p.get("text")))
        elif kind == "refusal":  # an OpenAI refusal part: what the model said
            texts.append(as_text(p.get("refusal")))
        elif kind == "tool_use":
            call_id = opt_id(p.get("id"), here / "id")
            call = make_call(
                call_id,
                p.get("name"),
                p.get("input"),
                here / "input",
                f"{ids}_{j}",
                name_at=here / "name",
            )
            part_calls.append((call_id is not None, call))
        elif kind == "tool_result":
            answers = opt_id(
                p.get("tool_use_id"), here / "tool_use_id", "the id of the tool call this block answers"
            )
            text = _block_text(p.get("content"), here / "content", b, unimported)
            error = p.get("is_error") is True
            results.append(Msg("tool", text, call_id=answers, error=error, at=here))
        elif kind == "thinking":
            # as the `thinking` message of a completion is read, so the two are one piece
            msg.reasoning.append((here, {"type": "reasoning", "content": as_text(p.get("thinking"))}))
        elif kind == "redacted_thinking":
            msg.reasoning.append((here, p))
        elif kind in _ATTACHMENTS or kind == "document":
            b.attachments("images or files in messages", here)
        else:
            unimported.part(kind, here)
    msg.text = "\n".join(texts)
    msg.calls += _not_listed(part_calls, msg.calls)
    return results


def _block_text(content: Any, at: At, b: Builder, unimported: Unimported) -> str:
    """A tool_result block's content as text: a string, or its text blocks joined (a Converse
    toolResult's json block is its JSON text)."""
    if not isinstance(content, list):
        return as_text(content)
    texts: list[str] = []
    for j, block in enumerate(content):
        if not isinstance(block, dict):
            unimported.not_an_object(at / j)
            continue
        p, here = _as_anthropic(block, at / j)
        kind = p.get("type")
        if kind == "text":
            texts.append(as_text(p.get("text")))
        elif kind in _ATTACHMENTS or kind == "document":
            b.attachments("images or files in messages", here)
        else:
            unimported.part(kind, here)
    return "\n".join(texts)


# OpenLLMetry's and OpenInference's names for a flattened call's id, name and arguments
_FLAT_CALL = ("id", "name", "arguments")
_OI_CALL = ("tool_call.id", "tool_call.function.name", "tool_call.function.arguments")


def _flat_calls(
    span: Span, fields: dict[str, Any], key: str, group: str, names: tuple[str, str, str], ids: str
) -> list[ToolCall]:
    """The tool calls of a message, flattened as `{key}.{group}.J.<id|name|arguments>` attributes
    (`names` spell those three; one recorded without an id is `{ids}_{J}`); an id or a name is
    refused at its own attribute, a missing name at the span's attributes."""
    return [
        _flat_call(span, tc, f"{key}.{group}.{j}", names, f"{ids}_{j}")
        for j, tc in _indexed(fields, group).items()
    ]


def _flat_call(
    span: Span, tc: dict[str, Any], call: str, names: tuple[str, str, str], fallback_id: str
) -> ToolCall:
    """The call whose `names` (id, name, arguments) are attributes `{call}.<name>`, given in `tc`."""
    id_name, fn_name, args_name = names
    name_key = f"{call}.{fn_name}"
    if fn_name not in tc:
        span.place(name_key).fail(
            f"the tool name in {name_key}", detail="the call has no such attribute"
        )
    return make_call(
        attr_id(span, f"{call}.{id_name}", tc.get(id_name)),
        tc[fn_name],
        tc.get(args_name),
        span.place(f"{call}.{args_name}"),
        fallback_id,
        name_at=span.place(name_key),
        what=f"the tool name in {name_key}",
    )


_EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def _event_messages(span: Span, b: Builder, unimported: Unimported, ids: Ids) -> SpanContent:
    """The older event style: one span event per message (and `gen_ai.choice` for outputs)."""
    inputs: list[Msg] = []
    outputs: list[Msg] = []
    recorded_inputs = recorded_outputs = False
    events: list[tuple[str, dict[str, Any], At]] = [*span.events, *_attribute_events(span)]
    alternatives = _other_choices(span, events, b)
    for k, (name, attrs, at) in enumerate(events):
        # `at / key` is where the attribute `key` holds its value (`attributes[1].value.boolValue`)
        if _event_tools(name, attrs, at) is not None:
            continue  # the request's tool definitions (`tool_definitions`), no turn
        if name == "gen_ai.content.prompt":
            key = "gen_ai.prompt"
            got = _messages(attrs.get(key), at / key, key, b, unimported, ids.inputs)
            recorded_inputs |= got is not None
            inputs += got or []
        elif name == "gen_ai.content.completion":
            key = "gen_ai.completion"
            got = _messages(attrs.get(key), at / key, key, b, unimported, ids.outputs)
            recorded_outputs |= got is not None
            outputs += got or []
        elif (name in _EVENT_ROLES or name == "gen_ai.choice") and k not in alternatives:
            body, body_at = _event_body(attrs, at)
            beside = None
            if name == "gen_ai.choice" and isinstance(body.get("message"), dict):
                # OpenLLMetry lists a choice's calls beside its message: {index, message,
                # finish_reason, tool_calls}; the conventions list them in the message
                beside = (body, body_at)
                body, body_at = {**body["message"]}, body_at / "message"
            role = _EVENT_ROLES.get(name, "assistant")
            side, prefix = (outputs, ids.outputs) if name == "gen_ai.choice" else (inputs, ids.inputs)
            body = {**body, "role": body.get("role") or role}
            side += _message(body, body_at, b, f"{prefix}{len(side)}", unimported, beside)
            recorded_outputs |= name == "gen_ai.choice"
            recorded_inputs |= name != "gen_ai.choice"
    return SpanContent(inputs, outputs, recorded_inputs, recorded_outputs)


def _event_body(attrs: dict[str, Any], at: At) -> tuple[dict[str, Any], At]:
    """The body of the event whose attributes are `attrs` (at `at`), and where it sits."""
    key = "gen_ai.event.content" if attrs.get("gen_ai.event.content") else "body"
    body = json_value(attrs.get(key))
    if isinstance(body, dict):
        return body, at / key
    # The event's fields are its attributes, each named where it sits
    return {k: json_value(v) for k, v in attrs.items()}, at


def _event_tools(name: str, attrs: dict[str, Any], at: At) -> list[dict[str, Any]] | None:
    """The tool definitions an event holds, or None when it holds none. OpenLLMetry's Anthropic
    instrumentation writes a request's tools in its event mode as one more user message, after the
    conversation, whose content is `{"tools": [...]}`: that is no turn of the conversation (a
    message's content is text or a list of parts, never such an object)."""
    if name != "gen_ai.user.message":
        return None
    content = json_value(_event_body(attrs, at)[0].get("content"))
    if not isinstance(content, dict) or set(content) != {"tools"}:
        return None
    tools = json_value(content["tools"])
    return [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else None


def _other_choices(span: Span, events: list[tuple[str, dict[str, Any], At]], b: Builder) -> set[int]:
    """The positions in `events` of the gen_ai.choice events that are alternatives to the first,
    said in a warning. A response sampled with n > 1 is written a choice per alternative, each a
    whole message with its own `index`, and the run went on with the first; choices sharing an
    index are parts of one (Koog writes each call as a choice of index 0). OpenLLMetry's Anthropic
    instrumentation gives each content block a choice of its own index, but Anthropic's API
    returns one message: those are one turn, told apart by the provider the span or its events
    name."""
    indexes: dict[int, str] = {}
    for k, (name, attrs, at) in enumerate(events):
        index = _event_body(attrs, at)[0].get("index") if name == "gen_ai.choice" else None
        if index is not None and index != "":
            indexes[k] = str(index)
    first = next(iter(indexes.values()), None)
    others = {k for k, index in indexes.items() if index != first}
    said = [span.attrs, *(events[k][1] for k in indexes)]
    if not others or any(_provider(attrs) == "anthropic" for attrs in said):
        return set()
    _, attrs, at = events[min(others)]
    where = f"the first skipped at {_event_body(attrs, at)[1].where()}"
    n = len(set(indexes.values()))
    choices_skipped(b, "a model call's output (gen_ai.choice events of distinct index)", n, where)
    return others


def _provider(attrs: dict[str, Any]) -> str:
    """The provider a span or event names (the current conventions' attribute, or the older one)."""
    return str(attrs.get("gen_ai.provider.name") or attrs.get("gen_ai.system") or "").lower()


def _attribute_events(span: Span) -> list[tuple[str, dict[str, Any], At]]:
    """The events pydantic-ai's instrumentation (version 1, event_mode "attributes", as Logfire
    records it) writes into one span attribute, `events`: a JSON list of `{event.name, ...}`
    objects whose other fields are the event's body."""
    value = json_value(span.attrs.get("events"))
    if not isinstance(value, list):
        return []
    at = span.place("events")
    return [
        (e["event.name"], e, at / k)
        for k, e in enumerate(value)
        if isinstance(e, dict) and isinstance(e.get("event.name"), str)
    ]


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
    "function": "tool",  # a result of OpenAI's legacy function calling
}


def to_message(m: Msg) -> Message:
    role = _ROLE_MAP.get(m.role, "user")
    return Message(
        role=role,
        content=m.text,
        name=m.name,
        tool_calls=tuple(m.calls),
        tool_call_id=m.call_id if role == "tool" else None,
    )


class SpanContent(NamedTuple):
    """A model call's input and output messages, and whether each was recorded at all (recorded
    content may still give no message: an empty list, or content car could not read)."""

    inputs: list[Msg]
    outputs: list[Msg]
    recorded_inputs: bool
    recorded_outputs: bool


class Ids(NamedTuple):
    """How a model call's messages name their calls recorded without an id: `{inputs}{i}_{j}` is
    the j-th call of input message i, `{outputs}{i}_{j}` of output message i."""

    inputs: str
    outputs: str


def span_messages(s: Span, b: Builder, unimported: Unimported, step: int) -> SpanContent:
    """Inputs and outputs of a model-call span, from the first style that has them. The outputs are
    the model's messages and the results given inside them (`Msg.in_turn`). A call recorded without
    an id is named by the step's place among the trace's model calls (`step`) and its own place:
    `call_{step}_{i}_{j}` is the j-th call of output message i (`call_{step}_in_{i}_{j}` of input
    message i), so no two calls of a trace share a made-up id, nor do results paired with them."""
    a = s.attrs
    ids = Ids(f"call_{step}_in_", f"call_{step}_")
    keys = ("gen_ai.input.messages", "gen_ai.output.messages")
    got_in, got_out = (
        _messages(a.get(k), s.place(k), k, b, unimported, side)
        for k, side in zip(keys, ids, strict=True)
    )
    recorded_in, recorded_out = got_in is not None, got_out is not None
    inputs, outputs = got_in or [], got_out or []
    if not inputs and not outputs:
        inputs, outputs, events_in, events_out = _event_messages(s, b, unimported, ids)
        recorded_in, recorded_out = recorded_in or events_in, recorded_out or events_out
    if not inputs:
        inputs = _flat_genai(s, "gen_ai.prompt", b, unimported, ids.inputs)
    if not outputs:
        outputs = _flat_genai(s, "gen_ai.completion", b, unimported, ids.outputs)
    if not inputs:
        inputs = _openinference_messages(s, "llm.input_messages", b, unimported, ids.inputs)
    if not outputs:
        outputs = _openinference_messages(s, "llm.output_messages", b, unimported, ids.outputs)
    said = [m for m in outputs if m.role in ("assistant", "model", "") or m.in_turn] or outputs
    return SpanContent(inputs, said, recorded_in or bool(inputs), recorded_out or bool(outputs))


def tool_definitions(span: Span) -> list[dict[str, Any]]:
    """The tool definitions of a model call: `gen_ai.tool.definitions`, OpenInference's
    `llm.tools.N.tool.json_schema`, OpenLLMetry's `llm.request.functions.N.*`, or the tools
    OpenLLMetry's Anthropic instrumentation writes as an event (`_event_tools`)."""
    a = span.attrs
    defs = json_value(a.get("gen_ai.tool.definitions"))
    if isinstance(defs, list):
        return [d for d in defs if isinstance(d, dict)]
    out = []
    for _, fields in _indexed(a, "llm.tools").items():
        schema = json_value(fields.get("tool.json_schema"))
        if isinstance(schema, dict):
            fn = schema.get("function")
            out.append(fn if isinstance(fn, dict) else schema)
    if out:
        return out
    # OpenLLMetry flattens each function: llm.request.functions.N.name|description|parameters, its
    # Anthropic instrumentation the schema as input_schema (kept as named: backends read either)
    for _, fields in _indexed(a, "llm.request.functions").items():
        fn = {k: json_value(fields[k]) for k in _FUNCTION_KEYS if k in fields}
        if fn:
            out.append(fn)
    if out:
        return out
    events = [*span.events, *_attribute_events(span)]
    return next((t for e in events if (t := _event_tools(*e)) is not None), [])


_FUNCTION_KEYS = ("name", "description", "parameters", "input_schema")


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
