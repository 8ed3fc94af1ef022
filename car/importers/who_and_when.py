"""Who&When / AG2 group-chat failure logs (fidelity class C: speaker and text only).

`{question, ground_truth, history: [{content, role, name?}], mistake_agent, mistake_step, mistake_reason,
system_prompt?}`. `history[i]` becomes step `i`, so the labelled `mistake_step` is the step car shows
with that index. The speaker is `name` when present (Algorithm-Generated, AG2 group chats) and `role`
otherwise (Hand-Crafted, Magentic-One: "Orchestrator (thought)"). A role's parenthesised qualifier
("(thought)", "(-> WebSurfer)") is the same agent speaking in another capacity: the actor is the agent
("Orchestrator") and the qualifier is kept in the step's metadata as `speaker`. Agents that have a
system prompt but never speak are actors too (with no steps). A null `content` is empty text; other
message fields (AG2 `tool_calls`, ...) are kept in the step's metadata as `fields`, with a warning.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from car.importers.base import At, Builder, Document
from car.trace import Outcome, Trace

__all__ = ["WhoAndWhen"]

_QUALIFIER = re.compile(r"^(?P<agent>.*?)\s*\((?P<what>[^()]*)\)\s*$")
_HUMAN = (
    "human",
    "user_proxy",
)
_TERMINALS = (
    "computer_terminal",
    "computerterminal",
)
_LABELS = ("mistake_agent", "mistake_step", "mistake_reason", "mistake_type")
_EXTRA = ("question_ID", "level", "is_correct", "is_corrected", "labels")


def _agent_of(speaker: str) -> str:
    m = _QUALIFIER.match(speaker)
    return m.group("agent") if m and m.group("agent") else speaker


def _kind(agent: str) -> str:
    key = agent.casefold()
    if key in _HUMAN:
        return "user"
    if key in _TERMINALS:
        return "tool"  # executes code and prints output: an environment, not a decision
    return "agent"


class WhoAndWhen:
    name = "who-and-when"
    description = "Who&When / AG2 group-chat failure logs (history with mistake_agent, mistake_step)"

    def sniff(self, data: Any, path: str) -> bool:
        return (
            isinstance(data, dict)
            and "history" in data
            and ("mistake_step" in data or "mistake_agent" in data)
        )

    def convert(self, doc: Document) -> list[Trace]:
        at = doc.at
        data = at.obj(doc.data, "a Who&When log (a JSON object)")
        history = (at / "history").arr(
            data.get("history"), "an array of messages ({content, role, name?})"
        )
        if not history:
            (at / "history").fail("at least one message", detail="the history is empty")
        prompts_raw = data.get("system_prompt")
        prompts: dict[str, str] = {}
        if prompts_raw is not None:
            for k, v in (at / "system_prompt").obj(prompts_raw).items():
                if v is not None:  # null: no prompt recorded for this agent
                    prompts[k] = (at / "system_prompt" / k).string(v)
        b = Builder(doc, self.name)
        for i, entry in enumerate(history):
            here = at / "history" / i
            msg = here.obj(entry, "a message object {content, role, name?}")
            # AG2 writes null content for a turn that only calls tools.
            content = (here / "content").opt_string(msg.get("content"), "the message text") or ""
            name = (here / "name").opt_string(msg.get("name"))
            role = (here / "role").opt_string(msg.get("role"))
            speaker = name or role
            if not speaker:
                here.fail("a speaker in 'name' or 'role'", msg.get("role"))
            agent = _agent_of(speaker)
            b.actor(agent, _kind(agent), system_prompt=prompts.get(agent))
            step_meta: dict[str, Any] = {"speaker": speaker} if speaker != agent else {}
            if name and role:
                step_meta["role"] = role
            extra = {k: v for k, v in msg.items() if k not in ("content", "name", "role")}
            if extra:
                # Tool calls and the like: class C replays text only, but nothing is thrown away.
                step_meta["fields"] = extra
                b.warn(
                    "items-skipped",
                    f"message fields car does not replay ({', '.join(map(repr, extra))}, first in "
                    f"history[{i}]) are kept in the steps' metadata as `fields`",
                )
            b.step(agent, content, metadata=step_meta)
        for agent, prompt in prompts.items():
            if prompt.strip():
                # An agent of the group chat who never spoke: keep it, and its prompt, as an actor.
                b.actor(agent, _kind(agent), system_prompt=prompt)

        labels: dict[str, Any] = {}
        step = data.get("mistake_step")
        if step is not None:
            labels["mistake_step"] = self._step_index(step, len(history), at / "mistake_step")
        for key in _LABELS:
            if key != "mistake_step" and key in data:
                labels[key] = data[key]
        meta: dict[str, Any] = {"who_and_when": labels} if labels else {}
        for key in ("question", "ground_truth", *_EXTRA):
            if key in data:
                meta[key] = data[key]
        ground = data.get("ground_truth")
        if isinstance(ground, str | int | float) and not isinstance(ground, bool):
            # Where answer-checking scorers look (`llm-judge:...?mode=extract`).
            meta["expected"] = ground
        if isinstance(labels.get("mistake_step"), int) and isinstance(data.get("mistake_agent"), str):
            idx = labels["mistake_step"]
            actual = _agent_of(history[idx].get("name") or history[idx].get("role") or "")
            if actual != data["mistake_agent"]:
                b.warn(
                    "label-speaker-mismatch",
                    f"mistake_agent {data['mistake_agent']!r} is not the speaker of the labelled step "
                    f"{idx} ({actual!r}); the step index is kept as labelled",
                )
        b.warn(
            "speaker-text-only",
            "speaker and text only: no tool calls, sampling parameters or per-agent view were recorded",
        )
        question = data.get("question")
        outcome = Outcome(
            failed=True,
            label="incorrect answer",
            detail=f"expected {ground}" if isinstance(ground, str | int | float) else None,
        )
        return [
            b.build(
                trace_id=self._trace_id(doc.path, data),
                fidelity="C",
                locator="$",
                at=at,
                task=question if isinstance(question, str) else "",
                outcome=outcome,
                metadata=meta,
            )
        ]

    @staticmethod
    def _step_index(value: Any, n: int, at: At) -> int:
        # Stored as a string of a 0-based index into history; accept an int too, nothing looser.
        if isinstance(value, bool):
            at.fail(f"a step index from 0 to {n - 1}", value)
        if isinstance(value, int):
            index = value
        elif isinstance(value, str) and re.fullmatch(r"[0-9]+", value.strip()):
            # Not str.isdigit(): it accepts "²" and other digits int() refuses.
            index = int(value.strip())
        else:
            at.fail(f"a step index from 0 to {n - 1} (a 0-based index into history)", value)
        if not 0 <= index < n:
            at.fail(
                f"a step index from 0 to {n - 1} (history has {n} message{'s' if n != 1 else ''})", value
            )
        return index

    @staticmethod
    def _trace_id(path: str, data: dict[str, Any]) -> str:
        p = Path(path)
        parent = p.parent.name
        stem = f"{parent}-{p.stem}" if parent else p.stem
        return f"who-and-when/{stem}"
