"""OpenAI Responses API items (fidelity class B: the conversation only).

A list of input/output items, or an object holding them: `{instructions?, input: str | [items],
output?: [items], tools?, model?, ...}` (a request, a stored response, or both merged), or a list
(or JSON Lines) of such objects, one run each (`Runs.listed`: one that cannot be imported is skipped
in its place). Items:
messages (`{type: "message"?, role, content: str | [{type: input_text|output_text, text}]}`),
`function_call {call_id, name, arguments: <JSON string>}` (consecutive calls form one parallel step
with the assistant text before them), `custom_tool_call {call_id, name, input: <text>}` (a custom
tool's free-form input, read as openai-chat reads it: none is empty input, with a warning),
`function_call_output {call_id, output}` (an observation of the step that made the call; an
output of parts is its text, images and files warned about),
`reasoning` (kept verbatim in the metadata of the step it precedes, with its encrypted_content: a
replay cannot send it back, and a warning says so) and `compaction` (warned about).
A request that continues a conversation the API keeps (`previous_response_id`, `conversation`) holds
only the new turns, and a stored response without its `input` none of them: the task and earlier turns
are not in the file, and a warning (`inputs-unresolved`) says so.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from car.importers import Runs
from car.importers.base import At, Builder, Document, parse_arguments, sampling_from, text_of
from car.importers.openai_chat import custom_input
from car.importers.thinking import not_replayed, thinking_metadata
from car.trace import ToolCall, Trace

__all__ = ["OpenAIResponses"]


# An Anthropic assistant turn saved as the API's response object is `{"type": "message", "role",
# "content": [blocks], "stop_reason", ...}`: it must not pass for a Responses message item, whose
# content parts are input_text / output_text / refusal / ... and never these Anthropic blocks.
_ANTHROPIC_BLOCKS = ("tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use")


def _is_anthropic(item: dict[str, Any]) -> bool:
    content = item.get("content")
    return "stop_reason" in item or (
        isinstance(content, list)
        and any(isinstance(p, dict) and p.get("type") in _ANTHROPIC_BLOCKS for p in content)
    )


def _is_items(value: Any) -> bool:
    if not isinstance(value, list) or not value:
        return False
    typed = [v for v in value[:200] if isinstance(v, dict) and isinstance(v.get("type"), str)]
    if any(_is_anthropic(v) for v in value[:200] if isinstance(v, dict) and "role" in v):
        return False
    return bool(typed) and any(
        t["type"] in ("function_call", "function_call_output", "reasoning", "compaction")
        or (t["type"] == "message" and isinstance(t.get("content"), list))
        for t in typed
    )


def _is_run(value: Any) -> bool:
    """A request, a stored response, or both merged: `{input?, output?, ...}` holding items."""
    if not isinstance(value, dict):
        return False
    if value.get("object") == "response" and isinstance(value.get("output"), list):
        return True
    return _is_items(value.get("input")) or _is_items(value.get("output"))


def _history_missing(obj: dict[str, Any]) -> str | None:
    """Why the earlier turns of the run in `obj` are not in the file, if they are not: the request
    continues a conversation the API keeps (`previous_response_id`, `conversation`: its `input` holds
    only the new turns), or the file holds a response without the `input` of its request."""
    held: list[str] = []
    previous = obj.get("previous_response_id")
    if isinstance(previous, str) and previous:
        held.append(f"previous_response_id {previous!r}")
    conversation = obj.get("conversation")
    if isinstance(conversation, dict):
        conversation = conversation.get("id")
    if isinstance(conversation, str) and conversation:
        held.append(f"conversation {conversation!r}")
    inp = obj.get("input")
    if held:
        why = (
            f"the run continues a conversation the API keeps ({' and '.join(held)}): the earlier "
            "turns, the task among them, are held server-side and not in the file"
        )
    elif inp is None or inp == []:
        why = (
            "the file holds no input (a response saved without its request's input): the task and "
            "earlier turns are not in the file"
        )
    else:
        return None
    rid = obj.get("id")
    rid = rid if isinstance(rid, str) and rid else "{response_id}"
    return (
        f"{why}; replay starts from the turns the file holds. Export the full input list sent on each "
        f"turn, or fetch the response's input items (GET /v1/responses/{rid}/input_items)"
    )


_ATTACHMENTS = ("input_image", "input_file", "input_audio")


def _attachments(b: Builder, content: Any, at: At) -> None:
    """Warn when the content parts at `at` (a message's, or a function_call_output's) hold images or
    files, which are not imported."""
    if isinstance(content, list):
        j = next(
            (j for j, p in enumerate(content) if isinstance(p, dict) and p.get("type") in _ATTACHMENTS),
            None,
        )
        if j is not None:
            b.attachments("images or files", at / j)


class OpenAIResponses:
    name = "openai-responses"
    description = "OpenAI Responses items (function_call / function_call_output; {input, output})"

    def sniff(self, data: Any, path: str) -> bool:
        if _is_items(data):
            return True
        if isinstance(data, list):  # a list (or JSON Lines) of requests or stored responses
            return bool(data) and all(_is_run(r) for r in data[:20])
        return _is_run(data)

    def convert(self, doc: Document) -> list[Trace]:
        data, at = doc.data, doc.at
        stem = Path(doc.path).stem
        if isinstance(data, list) and not _is_items(data):
            records = at.arr(data, "a list of Responses requests or responses {input, output}")
            return Runs.listed(records, at, stem, partial(self._one, doc))
        return [self._one(doc, data, at, "$", stem)]

    def _one(self, doc: Document, data: Any, at: At, locator: str, default_id: str) -> Trace:
        b = Builder(doc, self.name)
        sampling = None
        if isinstance(data, list):
            parts = [(data, at)]
            instructions = None
            tools: list[Any] = []
        else:
            obj = at.obj(data, "a list of Responses items or {input, output}")
            parts = []
            inp = obj.get("input")
            if isinstance(inp, str):
                parts.append(([{"role": "user", "content": inp}], at / "input"))
            elif inp is not None:
                parts.append(((at / "input").arr(inp, "a string or a list of items"), at / "input"))
            if obj.get("output") is not None:
                parts.append(((at / "output").arr(obj["output"], "a list of items"), at / "output"))
            instructions = text_of(obj.get("instructions"), at / "instructions") or None
            tools = (at / "tools").arr(obj.get("tools") or [], "a list of tools")
            sampling, dropped = sampling_from(obj)
            if dropped:
                b.warn("sampling-invalid", f"ignored unusable sampling values: {', '.join(dropped)}")
            missing = _history_missing(obj)
            if missing:
                b.warn("inputs-unresolved", missing)
        b.actor(
            "assistant",
            "agent",
            system_prompt=instructions,
            tools=[t for t in tools if isinstance(t, dict)],
        )
        pending: dict[str, Any] | None = None  # the assistant step being assembled
        seen: list[tuple[At, bool]] = []  # where each reasoning item sits; is it encrypted

        def flush() -> None:
            nonlocal pending
            if pending is not None:
                meta = thinking_metadata(pending["thinking"])
                summaries = [t for t in pending["summaries"] if t]
                if summaries:
                    meta["reasoning"] = "\n".join(summaries)
                b.step(
                    "assistant",
                    pending["text"],
                    pending["calls"],
                    sampling=sampling,
                    metadata=meta,
                    reasoning=pending["items"],
                )
                pending = None

        def current() -> dict[str, Any]:
            nonlocal pending
            if pending is None:
                pending = {"text": "", "calls": [], "items": [], "thinking": [], "summaries": []}
            return pending

        for items, items_at in parts:
            for i, raw in enumerate(items):
                here = items_at / i
                item = here.obj(raw, "a Responses item {type, ...}")
                kind = item.get("type", "message" if "role" in item else None)
                kind = (here / "type").string(kind, "an item type (message, function_call, ...)")
                if kind == "message":
                    role = (here / "role").string(item.get("role"), "a role")
                    text = text_of(item.get("content"), here / "content")
                    _attachments(b, item.get("content"), here / "content")
                    if role == "assistant":
                        cur = current()
                        if cur["calls"]:
                            flush()
                            cur = current()
                        cur["text"] = f"{cur['text']}\n{text}" if cur["text"] else text
                    elif role in ("system", "developer") and b.n_steps == 0 and pending is None:
                        b.add_system_prompt("assistant", text)  # after `instructions`, if any
                    else:
                        flush()
                        b.actor("user", "user")
                        b.step("user", text, metadata={"role": role} if role != "user" else None)
                elif kind in ("function_call", "custom_tool_call"):
                    name = (here / "name").string(item.get("name"), "the function name")
                    if not name:
                        (here / "name").fail("a non-empty function name", name)
                    call_id = item.get("call_id", item.get("id"))
                    call_id = (here / "call_id").call_id(call_id, "the call_id")
                    if kind == "function_call":
                        key, value = "arguments", item.get("arguments")
                    else:
                        key, value = "input", custom_input(item, here, b)
                    args, raw_args = parse_arguments(value, here / key)
                    current()["calls"].append(
                        ToolCall(id=call_id, name=name, arguments=args, raw_arguments=raw_args)
                    )
                elif kind in ("function_call_output", "custom_tool_call_output"):
                    flush()
                    call_id = (here / "call_id").call_id(item.get("call_id"), "the call_id")
                    output = text_of(item.get("output"), here / "output")
                    _attachments(b, item.get("output"), here / "output")  # output may be parts
                    if not b.observe(call_id, output):
                        b.observe_orphan(call_id, output)
                elif kind == "reasoning":
                    # Kept whole: the summary, the raw reasoning_text parts and the encrypted_content
                    # a stateless caller sends back. The summary keeps its own key, as before.
                    cur = current()
                    cur["items"].append(item)
                    seen.append((here, bool(item.get("encrypted_content"))))
                    if isinstance(item.get("summary"), list):
                        cur["summaries"].append(text_of(item["summary"], here / "summary"))
                    if isinstance(item.get("content"), list):
                        cur["thinking"].append(text_of(item["content"], here / "content"))
                elif kind == "compaction":
                    b.warn(
                        "compaction",
                        "a compaction item replaced earlier turns: the prefix before it is a summary",
                    )
                else:
                    b.warn("items-skipped", f"items of type {kind!r} were not imported")
        flush()
        if seen:
            b.warn(
                "thinking-not-replayed", not_replayed(seen, "reasoning item", "with encrypted_content")
            )
        rid = data.get("id") if isinstance(data, dict) else None
        return b.build(
            trace_id=rid if isinstance(rid, str) and rid else default_id,
            fidelity="B",
            locator=locator,
            at=at,
        )
