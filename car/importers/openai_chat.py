"""OpenAI Chat Completions message lists (fidelity class B: the conversation only).

Accepted: a request-like object `{messages, tools?, model?, temperature?, ...}` (also a fine-tuning
JSONL line, or a request with its `response`/`choices` appended), a bare message list, or a JSON array /
JSON Lines file of such objects (one run each). `assistant.tool_calls[] = {id, type: "function",
function: {name, arguments: <JSON string>}}` become tool calls (the exact argument string is kept);
OpenAI's custom (free-form) tool calls, `{id, type: "custom", custom: {name, input: <text>}}`, keep
the input text exactly as `raw_arguments` (the parsed `arguments` follow the shared rule: a JSON
object, else `{"_unparsed": <text>}`); a custom call without input is read as empty input, with a
warning (`tool-input-missing`).
`{role: "tool", tool_call_id, content}` messages become observations of the step that made the call.
A call recorded without an id gets one (`call_<j>`); a result without an id (Ollama's history, which
names the tool as `tool_name`) answers the latest such calls in order, the first of them with its name
when it names one, and a warning (`results-paired-by-order`) says so.
The request's `tools` (and the legacy API's `functions`) are the assistant's tools.
Leading system (and developer) messages become the assistant's system prompt, joined by a blank line;
user messages are steps of the actor "user". Content parts with no text that are no attachment are
left out, named by a warning (`items-skipped`). An assistant's `refusal` is its text. The output-token
limit may be `max_tokens` or `max_completion_tokens`. The reasoning OpenAI-compatible servers add to a
message (`reasoning_content`, `reasoning`, `reasoning_details`, LiteLLM's `thinking_blocks`, Ollama's
`thinking`) is kept verbatim in its step's metadata (`car.importers.thinking`); a replay cannot send
it back, and a warning says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from car.importers import Runs
from car.importers.base import At, Builder, Document, parse_arguments, sampling_from, text_of
from car.importers.thinking import (
    chat_reasoning,
    chat_reasoning_sealed,
    chat_reasoning_texts,
    not_replayed,
    thinking_metadata,
)
from car.trace import Sampling, ToolCall, Trace

__all__ = [
    "TOOL_CALL",
    "OpenAIChat",
    "add_chat_messages",
    "chat_attachments",
    "chat_tool_call",
    "choices_skipped",
    "custom_call",
    "custom_input",
]

_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
# What a `tool_calls[]` entry must be (an error names the entry that is not)
TOOL_CALL = "a tool call {id, type, function: {name, arguments}}"


def _looks_like_messages(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) > 0
        and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in value[:50])
        and not any("type" in m and m.get("type") != "message" for m in value[:50])
    )


def chat_tool_call(value: Any, at: At, b: Builder) -> ToolCall:
    """One `tool_calls[]` entry; also accepts the flat `{id, name, arguments}` form (tau2) and a
    custom tool's call `{id, type: "custom", custom: {name, input}}` (`custom_call`)."""
    call = at.obj(value, TOOL_CALL)
    fn = call.get("function")
    if fn is None and (call.get("type") == "custom" or "custom" in call):
        name_at, args_at, name, args = custom_call(call, at, b)
    elif fn is not None:
        fn = (at / "function").obj(fn, "{name, arguments}")
        name_at, args_at, name, args = (
            at / "function" / "name",
            at / "function" / "arguments",
            (fn.get("name")),
            fn.get("arguments"),
        )
    else:
        name_at, args_at, name, args = (
            at / "name",
            at / "arguments",
            call.get("name"),
            call.get("arguments"),
        )
    name = name_at.string(name, "the tool name")
    if not name:
        name_at.fail("a non-empty tool name", name)
    arguments, raw = parse_arguments(args, args_at)
    call_id = call.get("id")
    if call_id is None:
        call_id = f"call_{at.loc[-1]}" if at.loc else "call"
    call_id = (at / "id").call_id(call_id)
    return ToolCall(id=call_id, name=name, arguments=arguments, raw_arguments=raw)


def custom_call(call: dict[str, Any], at: At, b: Builder) -> tuple[At, At, Any, str | None]:
    """Where a custom tool's call at `at` names its tool and holds its input, then the name and the
    input. OpenAI's custom tools take free-form text (`custom.input`, plain or matching a grammar),
    not JSON arguments: the text is kept exactly as the call's `raw_arguments` and read as
    openai-responses reads a `custom_tool_call` (`parse_arguments`; no input: `custom_input`)."""
    custom = (at / "custom").obj(call.get("custom"), "a custom tool call {name, input}")
    input_at = at / "custom" / "input"
    text = custom_input(custom, at / "custom", b)
    if text is not None:
        text = input_at.string(text, "the custom tool's free-form input (a string)")
    return at / "custom" / "name", input_at, custom.get("name"), text


def custom_input(call: dict[str, Any], at: At, b: Builder) -> Any:
    """The `input` of the custom tool call `call` (at `at`). A call that records none is read as
    empty input, as a function call without `arguments` is read as no arguments; but the API always
    sends a custom call's input (empty text is text), so a warning names the first such call."""
    value = call.get("input")
    if value is None:
        b.warn(
            "tool-input-missing",
            "a custom tool call records no input ('input' is missing or null); it is imported as "
            f"empty input, as a function call without arguments is (first at {at.where()})",
        )
    return value


def chat_attachments(b: Builder, parts: list[Any], at: At) -> list[int]:
    """The indexes of the images, audio and files among the OpenAI-style content `parts` at `at`;
    the trace keeps text only, so a warning names where the first one sits."""
    media = [
        j
        for j, p in enumerate(parts)
        if isinstance(p, dict) and p.get("type") in ("image_url", "input_audio", "file", "image")
    ]
    if media:
        b.attachments("images or files in messages", at / media[0])
    return media


def add_chat_messages(
    b: Builder,
    messages: list[Any],
    at: At,
    *,
    assistant: str = "assistant",
    user: str = "user",
    user_stochastic: bool | None = None,
    tools: list[dict[str, Any]] | None = None,
    sampling: Sampling | None = None,
    places: Sequence[At] | None = None,
) -> None:
    """Add an OpenAI-style message list to `b`: one step per user/assistant message. Message i sits
    at `at / i`, or at `places[i]` when given (an appended response's message is no list item)."""
    b.actor(assistant, "agent", tools=tools or ())
    last_legacy: str | None = None
    seen: list[tuple[At, bool]] = []  # where each reasoning field sits; does it hold encrypted entries
    unkeyed: list[ToolCall] = []  # the latest calls recorded without an id that no result answered
    skipped: dict[str, At] = {}  # content parts car does not import, by kind: where the first sits
    for i, raw in enumerate(messages):
        here = places[i] if places is not None else at / i
        msg = here.obj(raw, "a chat message {role, content}")
        role = (here / "role").string(msg.get("role"), f"a role ({', '.join(_ROLES)})")
        content = text_of(msg.get("content"), here / "content")
        images = msg.get("images")
        if isinstance(images, list) and images:  # Ollama's native messages: base64 images
            b.attachments("images or files in messages", here / "images" / 0)
        if isinstance(msg.get("content"), list):
            media = chat_attachments(b, msg["content"], here / "content")
            for j, p in enumerate(msg["content"]):
                # A part with no text that is no attachment (a video, another API's block) is left
                # out of the text: say so, naming each kind where it first sits.
                if isinstance(p, dict) and j not in media and not _has_text(p):
                    kind = p.get("type")
                    kind = repr(kind) if isinstance(kind, str) else "without a type"
                    skipped.setdefault(kind, here / "content" / j)
        if role in ("system", "developer"):
            if b.n_steps == 0:
                b.add_system_prompt(assistant, content)
            else:  # an instruction injected mid-run is an input, like a user turn
                b.actor(user, "user", stochastic=user_stochastic)
                b.step(user, content, metadata={"role": role})
            continue
        calls_raw = msg.get("tool_calls")
        calls: list[ToolCall] = []
        if calls_raw is not None and role in ("user", "assistant"):
            calls = [
                chat_tool_call(c, here / "tool_calls" / j, b)
                for j, c in enumerate((here / "tool_calls").arr(calls_raw))
            ]
            if calls:  # results without an id answer these, not older calls
                unkeyed = [c for c, r in zip(calls, calls_raw, strict=True) if r.get("id") is None]
        if role == "user":
            # A simulated user may call tools of its own (tau2's dual-control domains).
            b.actor(user, "user", stochastic=user_stochastic)
            reasoning, meta = _thinking(msg, here, seen)  # a simulated user may reason too
            name = msg.get("name")
            if isinstance(name, str):
                meta = {"name": name, **meta}
            b.step(user, content, calls, metadata=meta, reasoning=reasoning)
            continue
        if role == "assistant":
            name = msg.get("name")
            who = name if isinstance(name, str) and name else assistant
            if who != assistant:
                b.actor(who, "agent", tools=tools or ())
            legacy = msg.get("function_call")
            if legacy is not None:
                # The legacy API has no call ids: the next "function" message answers this call.
                last_legacy = f"fc_{i}"
                calls.append(
                    chat_tool_call({"id": last_legacy, "function": legacy}, here / "function_call", b)
                )
            (reasoning, meta), refusal = _thinking(msg, here, seen), msg.get("refusal")
            if isinstance(refusal, str) and refusal:
                # The model declined: its refusal is what it said (content is null then, or holds
                # the same text as a refusal part).
                if refusal not in content:
                    content = f"{content}\n{refusal}" if content else refusal
                meta = {"refusal": True, **meta}
            b.step(who, content, calls, sampling=sampling, metadata=meta, reasoning=reasoning)
            continue
        if role in ("tool", "function"):
            key = "tool_call_id"
            call_id = msg.get(key)
            if call_id is None and role == "tool" and msg.get("id") is not None:
                key, call_id = "id", msg["id"]  # tau2 keys a tool message by the call's id
            if role == "function" and call_id is None:
                call_id = last_legacy
            answers = "the id of the tool call this message answers"
            if call_id is None and role == "tool":
                call_id = _pair_by_order(b, msg, here, unkeyed)
            if call_id is None:
                (here / key).fail(answers, None)
            call_id = (here / key).call_id(call_id, answers)
            error = bool(msg.get("error")) or msg.get("is_error") is True
            if not b.observe(call_id, content, is_error=error):
                b.observe_orphan(call_id, content, is_error=error)
            continue
        (here / "role").fail(f"a role ({', '.join(_ROLES)})", role)
    if skipped:
        named = ", ".join(f"{kind} (first at {place.where()})" for kind, place in skipped.items())
        b.warn("items-skipped", f"content parts car does not import were left out: {named}")
    if seen:
        b.warn(
            "thinking-not-replayed",
            not_replayed(seen, "reasoning field", "with encrypted or redacted entries"),
        )


def _has_text(part: dict[str, Any]) -> bool:
    """Whether `text_of` reads text from the content part `part`."""
    return any(isinstance(part.get(key), str) for key in ("text", "content", "refusal"))


def _pair_by_order(b: Builder, msg: dict[str, Any], at: At, unkeyed: list[ToolCall]) -> str:
    """The id of the call the tool result without an id at `at` answers: the first of the latest
    calls recorded without an id that no result answered yet, the first with the tool's name when the
    result names one (Ollama's `tool_name`, or `name`). It is taken from `unkeyed`; when none is
    left, the result cannot be paired and its place is named."""
    name = msg.get("tool_name", msg.get("name"))
    name = name if isinstance(name, str) and name else None
    k = next((k for k, c in enumerate(unkeyed) if name is None or c.name == name), None)
    if k is None:
        left = f"no call of {name!r} without an id" if name else "no call without an id"
        (at / "tool_call_id").fail(
            "the id of the tool call this message answers",
            None,
            detail=f"{left} is left for it to answer; add the call's id as tool_call_id",
        )
    call = unkeyed.pop(k)
    b.warn(
        "results-paired-by-order",
        "tool results without a tool_call_id were paired with the calls recorded without an id, in "
        f"order (by tool name where the result names one); first at {at.where()}",
    )
    return call.id


def _thinking(
    msg: dict[str, Any], at: At, seen: list[tuple[At, bool]]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The reasoning fields of the message at `at` (the action's reasoning, each `{field: value}`)
    and the step metadata for their text; each field is added to `seen`."""
    fields = chat_reasoning(msg, at)
    seen += [(place, chat_reasoning_sealed(block)) for place, block in fields]
    blocks = [block for _, block in fields]
    return blocks, thinking_metadata(chat_reasoning_texts(blocks))


def _tools(value: Any, at: At) -> list[dict[str, Any]]:
    if value is None:
        return []
    out: list[dict[str, Any]] = []
    for i, t in enumerate(at.arr(value, "a list of tool definitions")):
        tool = (at / i).obj(t, "a tool definition")
        fn = tool.get("function")
        out.append(fn if isinstance(fn, dict) else tool)
    return out


class OpenAIChat:
    name = "openai-chat"
    description = "OpenAI Chat Completions messages ({messages, tools?} or a message list; JSON/JSONL)"

    def sniff(self, data: Any, path: str) -> bool:
        if _looks_like_messages(data):
            return True
        if isinstance(data, dict):
            # A request whose first message is a chat message is one, though a later message is
            # broken (no role): converting it names that place, where "not a format car
            # recognises" would not. No format sniffed after this one is left to claim it.
            messages = data.get("messages")
            return _looks_like_messages(messages) or (
                isinstance(messages, list)
                and _looks_like_messages(messages[:1])
                and messages[0].get("role") in _ROLES
            )
        # A list of requests (JSON Lines): the first one decides; later bad ones get located errors.
        return (
            isinstance(data, list)
            and bool(data)
            and isinstance(data[0], dict)
            and _looks_like_messages(data[0].get("messages"))
        )

    def convert(self, doc: Document) -> list[Trace]:
        data = doc.data
        at = doc.at
        if _looks_like_messages(data) or isinstance(data, dict):
            return [self._one(doc, data, at, "$", Path(doc.path).stem)]
        records = at.arr(data, "a chat request object, a message list, or a list of requests")
        return Runs.listed(records, at, Path(doc.path).stem, partial(self._one, doc))

    def _one(self, doc: Document, record: Any, at: At, locator: str, default_id: str) -> Trace:
        b = Builder(doc, self.name)
        places: list[At] | None = None
        if isinstance(record, list):
            messages, tools, sampling, extra = record, [], None, {}
            msg_at = at
        else:
            req = at.obj(record, "a chat request {messages, tools?} or a message list")
            msg_at = at / "messages"
            messages = msg_at.arr(req.get("messages"), "a list of chat messages")
            tools = _tools(req.get("tools"), at / "tools")
            # the legacy function-calling API defines its functions here
            tools += _tools(req.get("functions"), at / "functions")
            sampling, dropped = sampling_from(req)
            if dropped:
                b.warn("sampling-invalid", f"ignored unusable sampling values: {', '.join(dropped)}")
            extra = {k: req[k] for k in ("metadata",) if isinstance(req.get(k), dict)}
            appended = _response_messages(req, at, b)
            if appended:
                places = [msg_at / i for i in range(len(messages))] + [p for p, _ in appended]
                messages = list(messages) + [m for _, m in appended]
        add_chat_messages(b, messages, msg_at, tools=tools, sampling=sampling, places=places)
        trace_id = record.get("id") if isinstance(record, dict) else None
        return b.build(
            trace_id=trace_id if isinstance(trace_id, str) and trace_id else default_id,
            fidelity="B",
            locator=locator,
            at=at,
            metadata=extra,
        )


def choices_skipped(b: Builder, held: str, n: int, where: str) -> None:
    """Say that of the `n` choices `held` (what holds them) only the first was imported: the others
    are alternatives (a response sampled with n > 1) the run did not go on with. `where` names the
    place ("at $.response.choices")."""
    b.warn(
        "choices-skipped",
        f"{held} holds {n} choices; only the first is imported as the assistant's turn ({where})",
    )


def _response_messages(req: dict[str, Any], at: At, b: Builder) -> list[tuple[At, dict[str, Any]]]:
    """The assistant message of an appended response (`choices[0].message`) and where it sits, if
    there is one; a first choice without a message object is refused at its place. The other
    choices of a response sampled with n > 1 are alternatives the run did not go on with: a warning
    says they were not imported."""
    resp = req.get("response")
    holder, holder_at = (resp, at / "response") if isinstance(resp, dict) else (req, at)
    choices = holder.get("choices")
    if not isinstance(choices, list) or not choices:
        return []
    if len(choices) > 1:
        choices_skipped(
            b, "the appended response", len(choices), f"at {(holder_at / 'choices').where()}"
        )
    first = choices[0]
    if not isinstance(first, dict):  # not a response's choice (a dataset's answer options)
        return []
    # A choice without its message (a streamed chunk's `delta`, a null) would drop the turn unsaid.
    place = holder_at / "choices" / 0 / "message"
    return [(place, place.obj(first.get("message"), "the response's assistant message {role, content}"))]
