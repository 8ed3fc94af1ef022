"""Anthropic Messages conversations (fidelity class B: the conversation only).

`{system?, messages: [{role: user|assistant, content: str | [blocks]}], tools?, model?, ...}`, a bare
message list, or a JSON array / JSON Lines of such requests. Blocks: `text`; `tool_use {id, name,
input}` (an object, with no raw string to keep; an input that is not one, which the API never sends
but a proxy or a log may hold, is kept by the importers' rule, `parse_any_arguments`: its text, the
string itself or else its JSON, under `_unparsed` unless it is a JSON object); `tool_result
{tool_use_id, content, is_error}` becomes an observation of the step that made the call;
`server_tool_use` / `mcp_tool_use` are calls too, answered inside the same turn by `*_tool_result
{tool_use_id, content}` blocks (their content kept as text, or as JSON when it is not text);
`thinking` and `redacted_thinking` blocks are kept verbatim in step metadata (a replay cannot send
them back: a warning says so); images and documents are not imported, nor are block types car does
not know (a warning names them). Integer ids are read as their decimal strings.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

from car.importers import Runs
from car.importers.base import At, Builder, Document, parse_any_arguments, sampling_from, text_of
from car.importers.thinking import not_replayed, thinking_metadata
from car.trace import ToolCall, Trace

__all__ = ["AnthropicMessages"]

_ANTHROPIC_BLOCKS = (
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "server_tool_use",
    "web_search_tool_result",
    "document",
)
_ATTACHMENTS = (
    "image",
    "document",
    "file",
    "container_upload",
)
_COMPACTION = (
    "compaction",
    "context_management",
)


def _blocks(messages: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if isinstance(messages, list):
        for m in messages[:200]:
            if isinstance(m, dict) and isinstance(m.get("content"), list):
                out += [b for b in m["content"] if isinstance(b, dict)]
    return out


def _is_request(value: Any) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
        return False
    msgs = value["messages"]
    if not all(isinstance(m, dict) and m.get("role") in ("user", "assistant") for m in msgs[:200]):
        return False
    tools = value.get("tools")
    if isinstance(tools, list) and any(isinstance(t, dict) and "input_schema" in t for t in tools):
        return True
    if "system" in value or "stop_reason" in value:
        return True
    return any(b.get("type") in _ANTHROPIC_BLOCKS for b in _blocks(msgs))


class AnthropicMessages:
    name = "anthropic"
    description = "Anthropic Messages conversations ({system?, messages, tools?} with content blocks)"

    def sniff(self, data: Any, path: str) -> bool:
        if _is_request(data):
            return True
        if isinstance(data, list) and data and all(isinstance(m, dict) for m in data[:50]):
            if all(m.get("role") in ("user", "assistant") for m in data[:200]):
                # `stop_reason`: an assistant turn saved as the whole API response object.
                return any("stop_reason" in m for m in data[:200]) or any(
                    b.get("type") in _ANTHROPIC_BLOCKS for b in _blocks(data)
                )
            return all(_is_request(r) for r in data[:20])
        return False

    def convert(self, doc: Document) -> list[Trace]:
        data, at = doc.data, doc.at
        stem = Path(doc.path).stem
        if isinstance(data, dict) or (
            isinstance(data, list) and data and isinstance(data[0], dict) and "role" in data[0]
        ):
            return [self._one(doc, data, at, "$", stem)]
        records = at.arr(data, "an Anthropic request {system?, messages} or a list of them")
        return Runs.listed(records, at, stem, partial(self._one, doc))

    def _one(self, doc: Document, record: Any, at: At, locator: str, default_id: str) -> Trace:
        b = Builder(doc, self.name)
        sampling = None
        tools: list[dict[str, Any]] = []
        system = ""
        if isinstance(record, list):
            messages, msg_at = record, at
        else:
            req = at.obj(record, "an Anthropic request {system?, messages, tools?}")
            msg_at = at / "messages"
            messages = msg_at.arr(req.get("messages"), "a list of messages")
            system = text_of(req.get("system"), at / "system")
            for i, t in enumerate((at / "tools").arr(req.get("tools") or [], "a list of tools")):
                tools.append((at / "tools" / i).obj(t, "a tool definition {name, input_schema}"))
            sampling, dropped = sampling_from(req)
            if dropped:
                b.warn("sampling-invalid", f"ignored unusable sampling values: {', '.join(dropped)}")
        b.actor("assistant", "agent", system_prompt=system or None, tools=tools)
        thinking: list[tuple[At, bool]] = []  # where each thinking block sits; is it redacted
        for i, raw in enumerate(messages):
            here = msg_at / i
            msg = here.obj(raw, "a message {role, content}")
            role = (here / "role").string(msg.get("role"), "'user' or 'assistant'")
            if role not in ("user", "assistant"):
                (here / "role").fail("'user' or 'assistant' (system is a top-level field)", role)
            content = msg.get("content")
            if isinstance(content, str):
                blocks: list[Any] = [{"type": "text", "text": content}]
            else:
                blocks = (here / "content").arr(content, "a string or a list of content blocks")
            if role == "assistant":
                self._assistant(b, blocks, here / "content", sampling, thinking)
            else:
                self._user(b, blocks, here / "content")
        if thinking:
            b.warn("thinking-not-replayed", not_replayed(thinking, "thinking block", "redacted"))
        return b.build(trace_id=default_id, fidelity="B", locator=locator, at=at)

    def _assistant(
        self, b: Builder, blocks: list[Any], at: At, sampling: Any, seen: list[tuple[At, bool]]
    ) -> None:
        texts: list[str] = []
        calls: list[ToolCall] = []
        thinking: list[dict[str, Any]] = []
        results: list[tuple[str, str, bool]] = []  # server tools run inside the turn
        for j, raw in enumerate(blocks):
            blk = (at / j).obj(raw, "a content block {type, ...}")
            kind = (at / j / "type").string(blk.get("type"), "a block type")
            if kind == "text":
                texts.append((at / j / "text").string(blk.get("text", "")))
            elif kind.endswith("_tool_result"):
                # web_search_tool_result, code_execution_tool_result, mcp_tool_result, ...: the
                # result of a server_tool_use call of this same turn.
                call_id = (at / j / "tool_use_id").call_id(blk.get("tool_use_id"), "the tool_use id")
                content = blk.get("content")
                error = blk.get("is_error") is True or (
                    isinstance(content, dict) and str(content.get("type", "")).endswith("_error")
                )
                results.append((call_id, _result_text(content, at / j / "content"), error))
            elif kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
                name = (at / j / "name").string(blk.get("name"), "the tool name")
                if not name:
                    (at / j / "name").fail("a non-empty tool name", name)
                call_id = (at / j / "id").call_id(blk.get("id"), "the tool_use id")
                args, raw = parse_any_arguments(blk.get("input"), at / j / "input")
                calls.append(ToolCall(id=call_id, name=name, arguments=args, raw_arguments=raw))
            elif kind in ("thinking", "redacted_thinking"):
                thinking.append(blk)
                seen.append((at / j, kind == "redacted_thinking"))
            elif kind in _COMPACTION:
                b.warn("compaction", "the conversation was compacted: earlier turns are summarised")
            elif kind in _ATTACHMENTS:
                b.attachments("images or documents", at / j)
            else:
                _skipped(b, kind)
        b.step(
            "assistant",
            "\n".join(texts),
            calls,
            sampling=sampling,
            metadata=_thinking(thinking),
            reasoning=thinking,
        )
        for call_id, content, error in results:
            if not b.observe(call_id, content, is_error=error):
                b.observe_orphan(call_id, content, is_error=error)

    def _user(self, b: Builder, blocks: list[Any], at: At) -> None:
        texts: list[str] = []
        for j, raw in enumerate(blocks):
            blk = (at / j).obj(raw, "a content block {type, ...}")
            kind = (at / j / "type").string(blk.get("type"), "a block type")
            if kind == "tool_result":
                call_id = (at / j / "tool_use_id").call_id(blk.get("tool_use_id"), "the tool_use id")
                content = text_of(blk.get("content"), at / j / "content")
                parts = blk["content"] if isinstance(blk.get("content"), list) else []
                for k, part in enumerate(parts):
                    part_kind = part.get("type") if isinstance(part, dict) else None
                    if part_kind in _ATTACHMENTS:
                        b.attachments("images in tool results", at / j / "content" / k)
                    elif isinstance(part_kind, str) and part_kind != "text":
                        _skipped(b, part_kind)  # search_result and the like: no text of their own
                error = blk.get("is_error") is True
                if not b.observe(call_id, content, is_error=error):
                    b.observe_orphan(call_id, content, is_error=error)
            elif kind == "text":
                texts.append((at / j / "text").string(blk.get("text", "")))
            elif kind in _ATTACHMENTS:
                b.attachments("images or documents", at / j)
            elif kind in _COMPACTION:
                b.warn("compaction", "the conversation was compacted: earlier turns are summarised")
            else:
                _skipped(b, kind)
        if texts:
            b.actor("user", "user")
            b.step("user", "\n".join(texts))


def _thinking(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """Step metadata for a turn's thinking: its readable text (a redacted block has none, only its
    encrypted `data`)."""
    return thinking_metadata([blk["thinking"] for blk in blocks if isinstance(blk.get("thinking"), str)])


def _skipped(b: Builder, kind: str) -> None:
    b.warn("items-skipped", f"content blocks of type {kind!r} were not imported")


def _result_text(content: Any, at: At) -> str:
    """A server tool's result as text: text blocks joined, anything else (search results, an error
    object) as its JSON, so nothing is lost."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "text" for p in content
    ):
        return text_of(content, at)
    return json.dumps(content, ensure_ascii=False)
