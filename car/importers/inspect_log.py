"""Inspect AI evaluation logs (`.eval` or `.json`; fidelity class A), read by `inspect_ai` itself.

The `.eval` zip layout changes between releases, so car reads logs only through
`inspect_ai.log.read_eval_log` (the optional extra `car-blame[inspect]`) and converts the dumped log.
One trace per sample (and epoch): each `model` event is a decision step whose context is the event's
exact input, with its tools and generation config (temperature, top_p, seed, max_tokens); each `tool`
event is the observation of the call with its id (a result given as content is its text; a failed
call's error message when it returned nothing, in a later input's tool message too); the
sample's first score gives the outcome (an incorrect answer is the failure). The actor is the
enclosing agent span's name, else "assistant".
A sample that errored before any model call (a rate limit, a cancel: routine in a large eval) is
skipped with a warning, and the log's other samples import.
A model is recorded by the name its API knows (`gpt-4o` for Inspect's `openai/gpt-4o`,
`deepseek-chat` for `openai-api/deepseek/deepseek-chat`), so `--policy openai:` asks for it as the
agent did. `reasoning` content parts are kept verbatim: a call's output's as its action's reasoning
(their text in its metadata), an input message's with that context message; `anthropic:` sends
Claude's (signed or redacted) back as the Messages API's blocks, other backends cannot (a warning
says so).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from car.errors import InputError
from car.importers import Runs
from car.importers.base import (
    At,
    Builder,
    Document,
    api_model,
    parse_arguments,
    sampling_from,
    text_of,
)
from car.importers.thinking import SeenReasoning, thinking_metadata
from car.trace import Message, Outcome, ToolCall, Trace

__all__ = ["INSTALL_HINT", "InspectLog", "convert_log"]

INSTALL_HINT = "pip install 'car-blame[inspect]'"
_ROLES = ("system", "user", "assistant", "tool")
# Inspect's model providers: a model is named `provider/model` (`openai-api/service/model` for an
# OpenAI-compatible service); the API knows it as `model`.
_PROVIDERS = frozenset(
    {
        *("openai", "anthropic", "google", "grok", "mistral", "deepseek", "moonshot", "meta"),
        *("perplexity", "bedrock", "sagemaker", "azureai", "groq", "together", "fireworks"),
        *("cloudflare", "hf-inference-providers", "sambanova", "hf", "vllm", "ollama", "sglang"),
        *("llama-cpp-python", "transformer_lens", "nnterp", "openrouter", "vertex", "mockllm"),
    }
)
_ROLE_LIT: dict[str, Literal["system", "user", "assistant", "tool"]] = {
    "system": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}
_MEDIA = ("image", "audio", "video", "document")  # content parts car does not import
_CORRECT = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}


def _read(path: str) -> dict[str, Any]:
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise InputError(
            f"{path}: this is an Inspect AI log; reading it needs the optional extra: {INSTALL_HINT}"
        ) from None
    try:
        log = read_eval_log(path, resolve_attachments=True)
    except Exception as exc:  # the reader's own failure on a damaged log: one line, named
        raise InputError(
            f"{path}: Inspect AI could not read this log: {type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:200]}"
        ) from None
    dumped: dict[str, Any] = log.model_dump(mode="json", exclude_none=True)
    return dumped


class InspectLog:
    name = "inspect"
    description = f"Inspect AI logs (.eval or .json; needs {INSTALL_HINT})"

    def sniff(self, data: Any, path: str) -> bool:
        if data is None:
            return path.endswith(".eval")
        return (
            isinstance(data, dict)
            and isinstance(data.get("eval"), dict)
            and "version" in data
            and ("samples" in data or "status" in data)
        )

    def convert(self, doc: Document) -> list[Trace]:
        return convert_log(_read(doc.path), doc)


def convert_log(log: dict[str, Any], doc: Document) -> Runs:
    """Convert a dumped `EvalLog` (the JSON log structure) into one trace per sample; a sample that
    cannot be imported (one that errored before any model call: a rate limit, a cancel) is kept
    as its error, so the others still import."""
    at = doc.at
    samples = (at / "samples").arr(log.get("samples") or [], "the log's samples")
    if not samples:
        at.fail("a log with samples", detail="this log has none (was it written with samples?)")
    task = log.get("eval", {}).get("task") if isinstance(log.get("eval"), dict) else None
    return Runs.each(enumerate(samples), lambda s: _sample(doc, s[1], at / "samples" / s[0], task))


def _message(value: Any, at: At, b: Builder, reasoning: list[tuple[At, dict[str, Any]]]) -> Message:
    """A chat message; its `reasoning` parts are also added to `reasoning`, where they were seen.
    An assistant message keeps them verbatim (`Message.reasoning`), so a recorded context sends
    them back where the backend can (`anthropic:`), as a rebuilt one does from the step's action."""
    m = at.obj(value, "a chat message {role, content}")
    role = (at / "role").string(m.get("role"), "a role")
    if role not in _ROLES:
        (at / "role").fail(f"a role ({', '.join(_ROLES)})", role)
    content = m.get("content")
    if isinstance(content, list):
        media = [j for j, p in enumerate(content) if isinstance(p, dict) and p.get("type") in _MEDIA]
        if media:
            b.attachments("images, audio or documents in messages", at / "content" / media[0])
    parts: list[tuple[At, dict[str, Any]]] = []
    if isinstance(content, list):
        parts = [
            (at / "content" / j, p)
            for j, p in enumerate(content)
            if isinstance(p, dict) and p.get("type") == "reasoning"
        ]
        reasoning += parts
    text = text_of(
        [p for p in content if not (isinstance(p, dict) and p.get("type") == "reasoning")]
        if isinstance(content, list)
        else content,
        at / "content",
    )
    if role == "tool":
        text = _with_error(text, m.get("error"))
    if "attachment://" in text:
        b.warn(
            "attachments-unresolved",
            "some message content refers to unresolved attachments (first at "
            f"{(at / 'content').where()})",
        )
    calls = tuple(
        _call(c, at / "tool_calls" / j)
        for j, c in enumerate((at / "tool_calls").arr(m.get("tool_calls") or []))
    )
    return Message(
        role=_ROLE_LIT[role],
        content=text,
        tool_calls=calls if role == "assistant" else (),
        tool_call_id=m.get("tool_call_id")
        if role == "tool" and isinstance(m.get("tool_call_id"), str)
        else None,
        reasoning=tuple(p for _, p in parts) if role == "assistant" else (),
    )


def _tool_result(value: Any, at: At, b: Builder) -> str:
    """A tool event's result as the text the model was given: a string as it is; content (a
    ContentText, ContentImage, ... or a list of them) as its text, media warned about as in
    messages; any other value (a number, a boolean) as its JSON; none as no text."""
    if value is None or isinstance(value, str):
        return value or ""
    parts = [value] if isinstance(value, dict) else value
    if isinstance(parts, list) and all(
        isinstance(p, dict) and isinstance(p.get("type"), str) for p in parts
    ):
        media = [j for j, p in enumerate(parts) if p["type"] in _MEDIA]
        if media:
            b.attachments(
                "images, audio or documents in tool results", at / media[0] if parts is value else at
            )
        return text_of(parts, at)  # its text parts (media and reasoning have none)
    return json.dumps(value, ensure_ascii=False)


def _with_error(text: str, error: Any) -> str:
    """A tool's result as text: a call that failed (its `ToolCallError`) and returned nothing has
    the error's message as its result, in a tool event and in a later call's input alike."""
    message = error.get("message") if isinstance(error, dict) else None
    return message if not text and isinstance(message, str) else text


def _call(value: Any, at: At) -> ToolCall:
    c = at.obj(value, "a tool call {id, function, arguments}")
    name = (at / "function").string(c.get("function"), "the tool (function) name")
    if not name:
        (at / "function").fail("a non-empty tool name", name)
    args, raw = parse_arguments(c.get("arguments"), at / "arguments")
    return ToolCall(
        id=(at / "id").string(c.get("id"), "the call id"), name=name, arguments=args, raw_arguments=raw
    )


def _sample(doc: Document, value: Any, at: At, task: Any) -> Trace:
    s = at.obj(value, "a sample")
    b = Builder(doc, "inspect")
    events = (at / "events").arr(s.get("events") or [], "the sample's events")
    spans: dict[str, tuple[str, str, str | None]] = {}  # id -> (type, name, parent)
    stack: list[str] = []
    condensed = 0
    reasoning = SeenReasoning(inputs_kept=True)
    for i, raw in enumerate(events):
        here = at / "events" / i
        ev = here.obj(raw, "an event {event, ...}")
        kind = ev.get("event")
        if kind == "span_begin":
            sid = str(ev.get("id", ""))
            spans[sid] = (str(ev.get("type", "")), str(ev.get("name", "")), stack[-1] if stack else None)
            stack.append(sid)
        elif kind == "span_end":
            if stack:
                stack.pop()
        elif kind == "model":
            actor = _agent(spans, ev.get("span_id") or (stack[-1] if stack else None))
            seen_in: list[tuple[At, dict[str, Any]]] = []
            inputs = [
                _message(m, here / "input" / j, b, seen_in)
                for j, m in enumerate((here / "input").arr(ev.get("input") or []))
            ]
            for place, part in seen_in:  # mostly earlier outputs, repeated
                reasoning.input(place, part)
            if not inputs and ev.get("input_refs"):
                # A condensed log whose message pool the reader did not expand: no exact input.
                condensed += 1
                b.warn(
                    "inputs-unresolved",
                    "some model inputs are condensed references car could not resolve",
                )
            tools = [t for t in (here / "tools").arr(ev.get("tools") or []) if isinstance(t, dict)]
            system = next((m.content for m in inputs if m.role == "system"), None)
            b.actor(actor, "agent", system_prompt=system, tools=tools)
            cfg = ev.get("config")
            config: dict[str, Any] = cfg if isinstance(cfg, dict) else {}
            model = api_model(ev.get("model"), _PROVIDERS, compatible="openai-api")
            sampling, dropped = sampling_from({**config, "model": model})
            if dropped:
                b.warn("sampling-invalid", f"ignored unusable sampling values: {', '.join(dropped)}")
            if ev.get("error"):
                b.warn("model-call-failed", "some model calls failed; their steps have no action")
            out_raw = ev.get("output")
            output: dict[str, Any] = out_raw if isinstance(out_raw, dict) else {}
            choices = (here / "output" / "choices").arr(output.get("choices") or [])
            produced: list[tuple[At, dict[str, Any]]] = []
            if choices and isinstance(choices[0], dict) and "message" in choices[0]:
                msg_at = here / "output" / "choices" / 0 / "message"
                out = _message(choices[0]["message"], msg_at, b, produced)
            else:
                out = Message(role="assistant")
                b.warn("model-output-missing", "some model events have no output (the call failed)")
            for place, part in produced:
                reasoning.output(place, part, part.get("redacted") is True)
            b.step(
                actor,
                out.content,
                out.tool_calls,
                context=inputs or None,
                sampling=sampling,
                metadata=_thinking([part for _, part in produced]),
                reasoning=[part for _, part in produced],
            )
        elif kind == "tool":
            call_id = (here / "id").string(ev.get("id"), "the tool call id")
            error = ev.get("error")
            content = _with_error(_tool_result(ev.get("result"), here / "result", b), error)
            if not b.observe(call_id, content, is_error=error is not None):
                b.observe_orphan(call_id, content, is_error=error is not None)
        elif isinstance(kind, str) and "compact" in kind:
            b.warn("compaction", "the conversation was compacted: later inputs hold a summary")
    reasoning.warn(b, "reasoning part", "redacted")
    err = s.get("error")
    if isinstance(err, dict):
        why = " ".join(str(err.get("message", "")).split())[:160]
        if b.n_steps == 0:
            at.fail("a sample with at least one model call", detail=f"the sample errored: {why}")
        b.warn("sample-error", f"the sample ended with an error: {why}")
    sample_id = s.get("id")
    epoch = s.get("epoch")
    name = f"inspect/{task or Path(doc.path).stem}/{sample_id}" + (f"/epoch-{epoch}" if epoch else "")
    inp = s.get("input")
    return b.build(
        trace_id=name,
        fidelity="A" if not condensed else "B",
        locator=f"sample {sample_id}" + (f" epoch {epoch}" if epoch else ""),
        at=at,
        task=inp if isinstance(inp, str) else "",
        outcome=_outcome(s.get("scores")),
        metadata={k: s[k] for k in ("id", "epoch", "target") if k in s},
    )


def _thinking(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Step metadata for a call's reasoning parts. A redacted part's `reasoning` is the encrypted
    data, so its readable text is the `summary` some providers give beside it."""
    texts = [p.get("summary" if p.get("redacted") is True else "reasoning") for p in parts]
    return thinking_metadata([t if isinstance(t, str) else "" for t in texts])


def _agent(spans: dict[str, tuple[str, str, str | None]], span_id: Any) -> str:
    seen: set[str] = set()
    sid = span_id if isinstance(span_id, str) else None
    while sid and sid in spans and sid not in seen:
        seen.add(sid)
        kind, name, parent = spans[sid]
        if kind == "agent" and name:
            return name
        sid = parent
    return "assistant"


def _outcome(scores: Any) -> Outcome:
    if not isinstance(scores, dict) or not scores:
        return Outcome()
    name, score = next(iter(scores.items()))
    value = score.get("value") if isinstance(score, dict) else None
    correct: float | None = None
    if isinstance(value, str) and value in _CORRECT:
        correct = _CORRECT[value]
    elif isinstance(value, bool):
        correct = 1.0 if value else 0.0
    elif isinstance(value, int | float) and 0 <= value <= 1:
        correct = float(value)
    if correct is None:
        return Outcome(label=f"{name}: {value}")
    return Outcome(failed=correct < 1, score=1.0 - correct, label=f"{name}: {value}")
