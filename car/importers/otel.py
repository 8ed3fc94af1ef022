"""OTLP/JSON traces with OpenTelemetry GenAI or OpenInference attributes (fidelity class A when the
message content was captured).

`{resourceSpans: [{resource, scopeSpans: [{spans: [...]}]}]}` (or JSON Lines of such requests, as the
collector's file exporter writes them; `resourceLogs` lines among them hold the GenAI events that
instrumentations export as log records, read as events of the span they were emitted in). One car
trace per trace id. Each model-call span
(`gen_ai.operation.name` chat / text_completion / generate_content, `openinference.span.kind` LLM, or
OpenLLMetry's `llm.request.type` chat / completion) is a decision step whose context is the exact
input of that call; when model spans nest (a framework span around the client span) the innermost is
the call. A call that failed (span status error) and has no output is left out with a warning: the
retry that follows is the call the run went on with; a trace whose every call failed is skipped, and
the file's other traces import. Tool spans (`execute_tool`, TOOL, OpenLLMetry's
`traceloop.span.kind` tool) are observations of the step that made the call, matched by call id,
else by tool name and arguments, else by tool name in start order (a tool span before the first
model call is a step of the tool actor `environment`). The actor is `gen_ai.agent.name` on the span
or its nearest agent ancestor (`invoke_agent`, AGENT spans, OpenLLMetry agent spans).

Content is read from, in order: `gen_ai.input.messages` / `gen_ai.output.messages` (parts model, JSON
string or structured, on the span or on its `gen_ai.client.inference.operation.details` event), the
older per-message events (`gen_ai.user.message`, `gen_ai.choice`, ..., as span events or log records,
and `gen_ai.content.prompt` / `gen_ai.content.completion`), the flattened `gen_ai.prompt.N.*` /
`gen_ai.completion.N.*` style, and OpenInference `llm.input_messages.N.message.*`. Ids may be hex or
base64; `intValue` may be a string. Tool-call ids follow every importer's rule: an integer is its
decimal string, a boolean or a fraction is refused naming the attribute (or the place in the JSON
content) that holds it. `reasoning` parts (OpenInference's `reasoning` contents, and an OpenAI-style
message's reasoning fields) of a call's output messages are kept verbatim in its step's metadata;
context messages hold text and tool calls only, so a replay cannot send them back (a warning says
so). A tool result given inside an output message (a server or built-in tool the provider ran) is an
observation of that call's step. Message parts car cannot import are named in a warning. A tool call
without a name is refused, as in every importer: it cannot be replayed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from car.importers import Runs
from car.importers.base import ENVIRONMENT, Builder, Document, parse_any_arguments, sampling_from
from car.importers.genai_content import (
    Msg,
    Unimported,
    as_text,
    attr_id,
    json_value,
    make_call,
    reasoning_sealed,
    reasoning_text,
    sampling_values,
    span_messages,
    system_instructions,
    to_message,
    tool_definitions,
)
from car.importers.otlp import Span, Unplaced, read_spans
from car.importers.thinking import (
    CHAT_REASONING,
    SeenReasoning,
    chat_reasoning_texts,
    thinking_metadata,
)
from car.trace import ToolCall, Trace

__all__ = ["CAPTURE_HINT", "OtlpJson"]

CAPTURE_HINT = (
    "message content was not captured: set OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true "
    "(OpenInference: unset OPENINFERENCE_HIDE_INPUTS / OPENINFERENCE_HIDE_OUTPUTS) and record again; "
    "an instrumentation that exports content as log events needs those logs (resourceLogs) in the "
    "same file as the spans"
)


def _export(value: Any) -> bool:
    return isinstance(value, dict) and (
        isinstance(value.get("resourceSpans"), list) or isinstance(value.get("resourceLogs"), list)
    )


_CALL_ID_KEYS = ("gen_ai.tool.call.id", "tool_call.id", "tool.id")  # GenAI, then OpenInference


class OtlpJson:
    name = "otel"
    description = "OTLP/JSON traces with OpenTelemetry GenAI (gen_ai.*) or OpenInference (llm.*) spans"

    def sniff(self, data: Any, path: str) -> bool:
        if isinstance(data, dict):
            return isinstance(data.get("resourceSpans"), list)
        # JSON Lines of exports: spans, and the logs the same file exporter wrote beside them
        return (
            isinstance(data, list)
            and bool(data)
            and all(_export(r) for r in data[:20])
            and any(isinstance(r.get("resourceSpans"), list) for r in data)
        )

    def convert(self, doc: Document) -> list[Trace]:
        spans, unplaced = read_spans(doc)
        by_trace: dict[str, list[Span]] = {}
        for s in spans:
            by_trace.setdefault(s.trace_id, []).append(s)

        def lost(trace_id: str) -> list[Unplaced]:
            # A record of a trace the file does not hold may be any run's (or none's): every run
            # names it beside its own.
            return [u for u in unplaced if u.trace_id == trace_id or u.trace_id not in by_trace]

        # a trace that cannot be imported (every model call failed) is skipped, not the file
        traces = Runs.each(by_trace.items(), lambda item: self._trace(doc, *item, lost(item[0])))
        if not traces.entries:
            doc.at.fail(
                "model-call spans (gen_ai.operation.name = chat, openinference.span.kind = LLM, or "
                "llm.request.type = chat)",
                detail=f"found {len(spans)} span{'s' if len(spans) != 1 else ''} and no model call",
            )
        return traces

    def _trace(
        self, doc: Document, trace_id: str, spans: list[Span], unplaced: list[Unplaced]
    ) -> Trace | None:
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
        missing_input = missing_output = uncaptured = 0
        failed: list[Span] = []
        reasoning = SeenReasoning()
        unimported = Unimported()
        for s in calls:
            actor = self._agent(s, ancestors(s))
            inputs, outputs, recorded_in, recorded_out = span_messages(s, b, unimported, len(steps))
            if s.error and not outputs:
                # A failed call made no decision (a retry usually follows): no step, and no capture
                # hint, since nothing was left uncaptured.
                failed.append(s)
                continue
            for place, part in (r for m in inputs for r in m.reasoning):  # mostly earlier outputs
                reasoning.input(place, part)
            produced = [r for m in outputs for r in m.reasoning]
            for place, part in produced:
                reasoning.output(place, part, reasoning_sealed(part))
            system = system_instructions(s.attrs)
            if system:
                told = Msg("system", system, at=s.place("gen_ai.system_instructions"))
                inputs = [told, *[m for m in inputs if m.role != "system"]]
            tools = tool_definitions(s)
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
            # Content recorded but unreadable is no capture problem: `content-unparsed` names it.
            if not recorded_in or not recorded_out:
                uncaptured += 1
            said = [m for m in outputs if not m.in_turn]
            text = "\n".join(m.text for m in said if m.text)
            out_calls = [c for m in said for c in m.calls]
            sampling, dropped = sampling_from(sampling_values(s.attrs))
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
                    "thinking": [part for _, part in produced],
                    # results of server or built-in tools, given inside the output
                    "obs": [(m.call_id, m.text, False) for m in outputs if m.in_turn],
                }
            )
        reasoning.warn(b, "reasoning part", "redacted")
        unimported.warn(b)
        early = self._attach_tools(b, spans, steps)
        if failed:
            self._failed(b, trace_id, failed, bool(steps or early))
        _answer_results_without_ids(b, steps)
        self._observations_from_inputs(steps)
        for t, call, result in early:
            # A tool ran before the first model call (setup, a retrieval): the environment's step.
            b.actor(ENVIRONMENT, "tool")
            b.step(ENVIRONMENT, "", [call], metadata=_span_meta(t))
            b.observe(call.id, result, is_error=t.error)
        for st in steps:
            context = [to_message(m) for m in st["inputs"]] if st["inputs"] else None
            b.step(
                st["actor"],
                st["text"],
                st["calls"],
                context=context,
                sampling=st["sampling"],
                metadata={**_span_meta(st["span"]), **_thinking(st["thinking"])},
                reasoning=st["thinking"],
            )
            for call_id, content, error in st["obs"]:
                if not b.observe(call_id, content, is_error=error):
                    b.observe_orphan(call_id or "?", content, is_error=error)
        if unplaced:
            kinds = ", ".join(sorted({u.name for u in unplaced}))
            b.warn(
                "orphan-log-record",
                f"GenAI log records whose span is not in the file were not imported: "
                f"{len(unplaced)} ({kinds}), the first at {unplaced[0].at.where()}; export a run's "
                "spans and logs to the same file",
            )
        if uncaptured:
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
    def _failed(b: Builder, trace_id: str, failed: list[Span], anything_else: bool) -> None:
        """Say which failed model calls were left out; refuse a trace that holds nothing else."""
        first = failed[0]
        reason = first.status_message or first.attrs.get("error.type")
        why = f": {reason}" if isinstance(reason, str) and reason else ""
        n = len(failed)
        if not anything_else:
            first.at.fail(
                "a model call that did not fail",
                detail=f"every model call of trace {trace_id} failed (span status error, no "
                f"output){why}; nothing to import",
            )
        b.warn(
            "model-call-failed",
            f"{n} model call{'s' if n != 1 else ''} failed (span status error, no output) and "
            f"{'were' if n != 1 else 'was'} left out: a failed call made no decision (first at "
            f"{first.at.where()}{why})",
        )

    @staticmethod
    def _agent(span: Span, ancestors: Iterable[Span]) -> str:
        for s in (span, *ancestors):
            # pydantic-ai (version 1 and 2) names its "agent run" span's agent in agent_name
            name = (
                s.attrs.get("gen_ai.agent.name")
                or s.attrs.get("agent.name")
                or (s.attrs.get("agent_name") if s.name == "agent run" else None)
            )
            if isinstance(name, str) and name:
                return name
            if s.is_agent and s is not span:
                entity = s.attrs.get("traceloop.entity.name")  # OpenLLMetry names it "<name>.agent"
                named = entity if isinstance(entity, str) and entity else s.name
                if named:
                    return named
        return "assistant"

    @staticmethod
    def _attach_tools(
        b: Builder, spans: list[Span], steps: list[dict[str, Any]]
    ) -> list[tuple[Span, ToolCall, str]]:
        """Attach each tool span's result to the step whose call it answers; returns the tool spans
        that precede every model call, as (span, its call, its result). A span without a call id
        answers an open call of its name whose arguments are the span's (parallel calls of one tool
        may start in any order), else the first open call of its name; the latest step first."""
        early: list[tuple[Span, ToolCall, str]] = []
        for t in (s for s in spans if s.is_tool):
            a = t.attrs
            name, what = _tool_name(t)
            key = next((k for k in _CALL_ID_KEYS if a.get(k) not in (None, "")), _CALL_ID_KEYS[0])
            call_id = attr_id(t, key, a.get(key))
            result = next((a[k] for k in _RESULT_KEYS if k in a), None)
            args = _tool_arguments(a)
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
                given = None if args is None else parse_any_arguments(json_value(args), t.at)[0]
                for same_args in (True, False) if given is not None else (False,):
                    for st in reversed(before):
                        answered = {o[0] for o in st["obs"]}
                        match = next(
                            (
                                c
                                for c in st["calls"]
                                if c.name == name
                                and c.id not in answered
                                and (not same_args or c.arguments == given)
                            ),
                            None,
                        )
                        if match is not None:
                            target, call_id = st, match.id
                            break
                    if target is not None:
                        break
            if target is None and before and not before[-1]["captured"]:
                # The model's output was not captured: the tool span is the only record of the call.
                target = before[-1]
                cid = call_id or f"span_{t.span_id}"
                parsed = json_value(args) if isinstance(args, str) else args
                c = make_call(cid, name, parsed, t.at, cid, name_at=t.at, what=what)
                target["calls"].append(c)
                call_id = c.id
                b.warn("calls-from-tool-spans", "tool calls were rebuilt from tool spans")
            if target is None:
                if before:
                    before[-1]["obs"].append((None, as_text(result), t.error))
                else:
                    cid = call_id or f"span_{t.span_id}"
                    parsed = json_value(args) if isinstance(args, str) else args
                    c = make_call(cid, name, parsed, t.at, cid, name_at=t.at, what=what)
                    early.append((t, c, as_text(result)))
                b.warn(
                    "orphan-tool-span",
                    "some tool spans match no recorded call; kept as plain observations of the "
                    f"step before them, or, before the first model call, as steps of the tool actor "
                    f"{ENVIRONMENT!r}",
                )
                continue
            target["obs"].append((call_id, as_text(result), t.error))
        return early

    @staticmethod
    def _observations_from_inputs(steps: list[dict[str, Any]]) -> None:
        """Tool results that only appear in a later call's input become observations too.

        Each call's input repeats the results seen so far, so the k-th result for an id in an input
        is new when fewer than k earlier calls with that id are answered; a new result answers the
        earliest unanswered call with its id (ids may repeat across turns).
        """
        makers: dict[str, list[int]] = {}  # call id -> the steps that made such a call, in order
        for k, st in enumerate(steps):
            for c in dict.fromkeys(c.id for c in st["calls"]):
                makers.setdefault(c, []).append(k)

        def answered(k: int, call_id: str) -> bool:
            return any(o[0] == call_id for o in steps[k]["obs"])

        for k, st in enumerate(steps):
            seen: dict[str, int] = {}
            for m in st["inputs"]:
                if m.role != "tool" or not m.call_id:
                    continue
                seen[m.call_id] = seen.get(m.call_id, 0) + 1
                earlier = [i for i in makers.get(m.call_id, ()) if i < k]
                open_ = [i for i in earlier if not answered(i, m.call_id)]
                if open_ and seen[m.call_id] > len(earlier) - len(open_):
                    steps[open_[0]]["obs"].append((m.call_id, m.text, m.error))


def _answer_results_without_ids(b: Builder, steps: list[dict[str, Any]]) -> None:
    """Give the tool results recorded without a call id the id of the call they answer.

    OpenAI's legacy function calling records no call ids: a result is a message of role `function`
    naming the function, or nothing at all (OpenLLMetry writes neither an id nor the name), and
    OpenLLMetry's events give a tool message its content alone. Each input repeats the earlier
    results in order, so in each input they answer the calls the steps before it made, in order: a
    result answers the first call no earlier result of that input answered, the first of its name
    when there is one, as `openai-chat` pairs results without an id. The call of the input's
    assistant message it follows, recorded without an id too, takes that id, so the context's tool
    message answers a call before it; a result from before the run (a first request that repeats
    an earlier conversation) answers that call alone. One that answers no recorded call is named.
    """
    for k, st in enumerate(steps):
        left = [c for earlier in steps[:k] for c in earlier["calls"]]
        # this input's calls recorded without an id (`span_messages` names them) not answered yet
        unkeyed: list[tuple[Msg, int]] = []
        for m in st["inputs"]:
            unkeyed += [(m, j) for j, c in enumerate(m.calls) if c.id.startswith(f"call_{k}_in_")]
            if m.role not in ("tool", "function"):
                continue
            if m.call_id:
                i = next((i for i, c in enumerate(left) if c.id == m.call_id), None)
                if i is not None:
                    del left[i]
                continue
            if m.in_turn:  # a server tool's result answers the call of the turn it is given in
                continue
            i = _first(left, m.name)
            call = left.pop(i) if i is not None else None
            i = _first([said.calls[j] for said, j in unkeyed], m.name)
            if i is not None:
                said, j = unkeyed.pop(i)
                if call is None:  # a call from before the run, made by no step
                    call = said.calls[j]
                said.calls[j] = said.calls[j].model_copy(update={"id": call.id})
            if call is None:
                b.warn(
                    "orphan-tool-result",
                    "tool results recorded without a call id answer no call recorded before them "
                    "(a first request may repeat an earlier conversation): each stays in its "
                    "input's context, a tool message answering no call, and is no step's "
                    f"observation; first at {m.at.where()}",
                )
                continue
            m.role, m.call_id = "tool", call.id
            b.warn(
                "results-paired-by-order",
                "tool results recorded without a call id (OpenAI's legacy function results, and "
                "tool messages without one) were paired with the calls made before them, in order "
                f"(by name where the result names one); first at {m.at.where()}",
            )


def _first(calls: list[ToolCall], name: str | None) -> int | None:
    """The index of the first of `calls` named `name`, else of the first; None when there is none."""
    return next((i for i, c in enumerate(calls) if c.name == name), 0 if calls else None)


# What a call rebuilt from a tool span is named by, refused when there is none
_SPAN_TOOL_NAME = (
    "the tool name in gen_ai.tool.name, tool.name or the span's name (a tool call is rebuilt from "
    "this span)"
)
_TRACELOOP_TOOL_NAME = (
    "the tool name in gen_ai.tool.name, tool.name, traceloop.entity.name or the span's name (a tool "
    "call is rebuilt from this span)"
)
# Where a tool span holds its result: GenAI, OpenInference, OpenLLMetry, pydantic-ai (version 1 and 2)
_RESULT_KEYS = ("gen_ai.tool.call.result", "output.value", "traceloop.entity.output", "tool_response")


def _tool_name(t: Span) -> tuple[Any, str]:
    """A tool span's tool name, and what a call rebuilt from it is refused as when it has none.
    OpenLLMetry names its tool spans `<name>.tool`, the name itself is traceloop.entity.name."""
    a = t.attrs
    if t.traceloop_kind == "tool":
        named = a.get("gen_ai.tool.name") or a.get("tool.name") or a.get("traceloop.entity.name")
        return named or t.name, _TRACELOOP_TOOL_NAME
    return a.get("gen_ai.tool.name") or a.get("tool.name") or t.name, _SPAN_TOOL_NAME


def _tool_arguments(a: dict[str, Any]) -> Any:
    """A tool span's arguments, as recorded (None when it records none). OpenLLMetry records a
    decorated function's input as `{"args": [...], "kwargs": {...}}`: with no positional arguments,
    the keyword arguments are the call's."""
    for key in ("gen_ai.tool.call.arguments", "tool.parameters", "input.value", "tool_arguments"):
        if key in a:
            return a[key]
    entity = json_value(a.get("traceloop.entity.input"))
    if isinstance(entity, dict) and isinstance(entity.get("kwargs"), dict) and not entity.get("args"):
        return entity["kwargs"]
    return None


def _span_meta(span: Span) -> dict[str, Any]:
    return {"span_id": span.span_id, "span_name": span.name}


def _thinking(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Step metadata for a call's reasoning parts (their readable text: `reasoning_text`), and the
    reasoning fields of OpenAI-style messages (`{field: value}`, read by `chat_reasoning_texts`)."""
    fields = [p for p in parts if len(p) == 1 and next(iter(p)) in CHAT_REASONING]
    # a part with no readable text (encrypted, redacted) adds none, as in the other importers
    texts = [text for p in parts if p not in fields and (text := reasoning_text(p))]
    return thinking_metadata(texts + chat_reasoning_texts(fields))
