"""ATIF, the Agent Trajectory Interchange Format (fidelity class B: the conversation only).

Harbor's format, also written by other agent tools: `{schema_version: "ATIF-v1.N", session_id,
trajectory_id?, agent: {name, version, model_name?, tool_definitions?, extra?}, steps: [...],
notes?, final_metrics?, continued_trajectory_ref?, extra?, subagent_trajectories?}`. A step is
`{step_id, source: system|user|agent, message, timestamp?, model_name?, reasoning_effort?,
reasoning_content?, tool_calls?: [{tool_call_id, function_name, arguments}], observation?:
{results: [{source_call_id?, content?, subagent_trajectory_ref?}]}, metrics?, is_copied_context?,
llm_call_count?, extra?}`; since v1.6 `message` and a result's `content` may be a list of parts
(`{type: "text", text}`, `{type: "image", source}`). A JSON array or JSON Lines file of trajectories
holds one run each.

An agent step is a decision step of the agent (the actor is named after `agent.name`); its results
are its observations, keyed by `source_call_id` (a result without one is a plain observation of its
step). User steps are steps of the actor "user"; system steps before any other step are the agent's
system prompt, later ones inputs like a user turn. `reasoning_content` is kept verbatim as the
action's reasoning. Embedded subagent trajectories (v1.7) are not imported, and a warning says so.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

from car.importers import Runs
from car.importers.base import (
    At,
    Builder,
    Document,
    parse_any_arguments,
    sampling_from,
    text_of,
)
from car.importers.thinking import not_replayed, thinking_metadata
from car.trace import ToolCall, Trace

__all__ = ["Atif"]

USER = "user"
_SOURCES = "'system', 'user' or 'agent'"
# Per-step metrics that are one number each; token-id and logprob arrays are left out.
_METRICS = ("prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd")


def _is_atif(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("schema_version"), str)
        and value["schema_version"].startswith("ATIF-")
        and isinstance(value.get("steps"), list)
    )


class Atif:
    name = "atif"
    description = "ATIF agent trajectories ({schema_version: 'ATIF-v1.x', session_id, agent, steps})"

    def sniff(self, data: Any, path: str) -> bool:
        if _is_atif(data):
            return True
        return isinstance(data, list) and bool(data) and all(_is_atif(r) for r in data[:20])

    def convert(self, doc: Document) -> list[Trace]:
        at, data = doc.at, doc.data
        stem = Path(doc.path).name.removesuffix(".json").removesuffix(".jsonl") or "run"
        if isinstance(data, dict):
            return [self._one(doc, data, at, "$", stem)]
        records = at.arr(data, "an ATIF trajectory or a list of them")
        return Runs.listed(records, at, stem, partial(self._one, doc))

    def _one(self, doc: Document, record: Any, at: At, locator: str, default_id: str) -> Trace:
        root = at.obj(record, "an ATIF trajectory {schema_version, session_id, agent, steps}")
        steps = (at / "steps").arr(root.get("steps"), "the trajectory's steps (a list)")
        agent = (at / "agent").obj(root.get("agent") or {}, "the agent {name, version, model_name?}")
        name = agent.get("name")
        actor = name if isinstance(name, str) and name and name != USER else "agent"
        model = agent.get("model_name") if isinstance(agent.get("model_name"), str) else None
        b = Builder(doc, self.name)
        b.actor(actor, "agent", tools=_tools(agent.get("tool_definitions"), at / "agent"))
        seen: list[tuple[At, bool]] = []
        for i, raw in enumerate(steps):
            self._step(b, raw, at / "steps" / i, actor, model, seen)
        if seen:
            b.warn("thinking-not-replayed", not_replayed(seen, "reasoning_content field", "redacted"))
        subagents = root.get("subagent_trajectories")
        if isinstance(subagents, list) and subagents:
            b.warn(
                "items-skipped",
                f"{len(subagents)} embedded subagent trajector{'ies' if len(subagents) != 1 else 'y'}"
                f" were not imported; import each as a trajectory of its own (at "
                f"{(at / 'subagent_trajectories').where()})",
            )
        meta: dict[str, Any] = {"schema_version": root["schema_version"]} if _is_atif(root) else {}
        for key in ("session_id", "trajectory_id", "notes", "final_metrics", "extra"):
            if root.get(key) is not None:
                meta[key] = root[key]
        if root.get("continued_trajectory_ref") is not None:
            meta["continued_trajectory_ref"] = root["continued_trajectory_ref"]
        if agent:
            meta["agent"] = {k: v for k, v in agent.items() if k != "tool_definitions"}
        trace_id = next(
            (v for v in (root.get("session_id"), root.get("trajectory_id")) if isinstance(v, str) and v),
            default_id,
        )
        return b.build(trace_id=trace_id, fidelity="B", locator=locator, at=at, metadata=meta)

    def _step(
        self,
        b: Builder,
        raw: Any,
        here: At,
        actor: str,
        model: str | None,
        seen: list[tuple[At, bool]],
    ) -> None:
        st = here.obj(raw, "a step {step_id, source, message}")
        source = (here / "source").string(st.get("source"), f"the step's source ({_SOURCES})")
        if source not in ("system", "user", "agent"):
            (here / "source").fail(f"the step's source ({_SOURCES})", source)
        step_id = st.get("step_id")
        if step_id is not None and (not isinstance(step_id, int) or isinstance(step_id, bool)):
            (here / "step_id").fail("the step's ordinal (an integer)", step_id)
        text = _text(b, st.get("message"), here / "message")
        calls_raw = st.get("tool_calls") or []
        calls = [
            _call(c, here / "tool_calls" / j)
            for j, c in enumerate((here / "tool_calls").arr(calls_raw, "a list of tool calls"))
        ]
        observation = st.get("observation")
        if source == "system" and b.n_steps == 0 and not calls and observation is None:
            b.add_system_prompt(actor, text)
            return
        meta = _metadata(st)
        reasoning: list[dict[str, Any]] = []
        thought = st.get("reasoning_content")
        if thought is not None and thought != "":
            thought = (here / "reasoning_content").string(thought, "the reasoning (a string)")
            reasoning.append({"reasoning_content": thought})
            meta.update(thinking_metadata([thought]))
            seen.append((here / "reasoning_content", False))
        if source == "agent":
            step_model = st.get("model_name")
            step_model = step_model if isinstance(step_model, str) and step_model else model
            sampling, _ = sampling_from({"model": step_model}) if step_model else (None, [])
            b.step(actor, text, calls, sampling=sampling, metadata=meta, reasoning=reasoning)
        else:
            b.actor(USER, "user")
            if source == "system":  # an instruction injected mid-run is an input, like a user turn
                meta = {"role": "system", **meta}
            b.step(USER, text, calls, metadata=meta, reasoning=reasoning)
        if observation is not None:
            _observe(b, observation, here / "observation")


def _text(b: Builder, value: Any, at: At) -> str:
    """A message or a result's content as text: a string, or (v1.6) a list of parts whose text parts
    are joined; other parts (images, audio) are not imported, and a warning names their kinds."""
    if isinstance(value, list):
        media = [
            j for j, p in enumerate(value) if isinstance(p, dict) and p.get("type") not in (None, "text")
        ]
        if media:
            kinds = sorted({str(value[j]["type"]) for j in media})  # "image", "audio", ...
            b.attachments(f"{' and '.join(kinds)} parts in messages or results", at / media[0])
    if value is not None and not isinstance(value, str | list):
        at.fail("a string or a list of content parts", value)
    return text_of(value, at)


def _call(value: Any, at: At) -> ToolCall:
    call = at.obj(value, "a tool call {tool_call_id, function_name, arguments}")
    name = (at / "function_name").string(call.get("function_name"), "the tool name")
    if not name:
        (at / "function_name").fail("a non-empty tool name", name)
    call_id = call.get("tool_call_id")
    if call_id is None:  # required by the spec; a call without one is still a call
        call_id = f"call_{at.loc[-3]}_{at.loc[-1]}" if len(at.loc) >= 3 else "call"
    call_id = (at / "tool_call_id").call_id(call_id, "the tool_call_id")
    arguments, raw = parse_any_arguments(call.get("arguments"), at / "arguments")
    return ToolCall(id=call_id, name=name, arguments=arguments, raw_arguments=raw)


def _observe(b: Builder, value: Any, at: At) -> None:
    obs = at.obj(value, "an observation {results: [...]}")
    results = (at / "results").arr(obs.get("results") or [], "a list of results")
    for k, raw in enumerate(results):
        here = at / "results" / k
        result = here.obj(raw, "a result {source_call_id?, content?}")
        content = _text(b, result.get("content"), here / "content")
        refs = result.get("subagent_trajectory_ref")
        if result.get("content") is None and refs is not None:
            # A delegated run's result may be only a reference to its trajectory: keep that.
            content = json.dumps(refs, ensure_ascii=False)
        error = result.get("is_error") is True
        call_id = result.get("source_call_id")
        if call_id is None:
            b.observe(None, content, is_error=error)
            continue
        call_id = (here / "source_call_id").call_id(call_id, "the tool_call_id the result answers")
        if not b.observe(call_id, content, is_error=error):
            b.observe_orphan(call_id, content, is_error=error)


def _metadata(st: dict[str, Any]) -> dict[str, Any]:
    """What a step records beside its turn, kept in the step's metadata."""
    meta: dict[str, Any] = {}
    for key in ("step_id", "timestamp", "reasoning_effort", "llm_call_count"):
        if st.get(key) is not None:
            meta[key] = st[key]
    if st.get("is_copied_context") is True:
        meta["copied_context"] = True  # copied from an earlier trajectory, not decided in this run
    metrics = st.get("metrics")
    if isinstance(metrics, dict):
        kept = {k: metrics[k] for k in _METRICS if isinstance(metrics.get(k), int | float)}
        if kept:
            meta["metrics"] = kept
    if isinstance(st.get("extra"), dict) and st["extra"]:
        meta["extra"] = st["extra"]
    return meta


def _tools(value: Any, at: At) -> list[dict[str, Any]]:
    """The agent's tool definitions (`tool_definitions`), OpenAI's `{type: "function", function}`
    wrapper removed as in openai-chat."""
    if value is None:
        return []
    out: list[dict[str, Any]] = []
    for i, t in enumerate((at / "tool_definitions").arr(value, "a list of tool definitions")):
        tool = (at / "tool_definitions" / i).obj(t, "a tool definition")
        fn = tool.get("function")
        out.append(fn if isinstance(fn, dict) else tool)
    return out
