"""`llm-sim:[openai:|anthropic:]MODEL[?OPTIONS]`: the recorded environment, with a model for calls it
never saw. Options: `base_url`, `api_key_env`, `temperature`, `max_tokens` (its own server and
settings; default: the run's), as for `llm-judge:`.

A call identical to a recorded one (tool name plus canonical arguments) gets the recorded observation,
exactly like `recorded`. A call the record does not contain is answered by the model, prompted with the
tool's schema, the recorded outputs of that tool (and a few of others) and the task: a grounded guess,
never a live side effect. Turn order follows the record; the episode ends where the record ends.
The number of simulated observations is reported, so a blame run that leaned on them says so.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

from car.backends.complete import (
    SERVER_OPTIONS,
    BackendKind,
    Completer,
    parse_backend_model,
    server_options,
)
from car.backends.http import hide_credentials
from car.backends.options import BackendOptions, current
from car.backends.wire import tool_schema
from car.builtins import RecordedEnvironment
from car.errors import SpecError
from car.rng import EventKey
from car.trace import Observation, ToolCall, Trace, task_of

__all__ = ["LLMSimEnvironment", "parse_llm_sim"]

_SYSTEM = (
    "You simulate one tool of a software environment for a replayed agent run. Reply with the tool's "
    "output only, in exactly the format of the recorded outputs shown; no commentary, no code fences. "
    "Stay consistent with the recorded facts."
)
_SHOW = 8  # recorded outputs of the same tool shown to the model
_CONTEXT = 3  # recorded outputs of other tools shown for context
_CLIP = 1500


def _clip(text: str) -> str:
    return text if len(text) <= _CLIP else text[:_CLIP] + " …"


def parse_llm_sim(spec: str, arg: str, base: BackendOptions) -> tuple[BackendKind, str, BackendOptions]:
    """The backend, model and server settings from the spec's argument
    (`[openai:|anthropic:]MODEL[?OPTIONS]`), checked without connecting: a trace naming this
    environment is checked with it when it loads."""
    target, _, query = arg.partition("?")
    kind, model = parse_backend_model(spec, target)
    opts = dict(parse_qsl(query, keep_blank_values=True))
    what = f"environment {spec!r}"
    server = server_options(what, opts, base)
    if opts:
        raise SpecError(
            f"{what}: unknown option {sorted(opts)[0]!r}; options: {', '.join(SERVER_OPTIONS)}"
        )
    return kind, model, server


class LLMSimEnvironment(RecordedEnvironment):
    """Recorded observations for seen calls; model-simulated ones for unseen calls."""

    def __init__(
        self, trace: Trace, arg: str, *, spec: str | None = None, options: BackendOptions | None = None
    ) -> None:
        super().__init__(trace, hide_credentials(spec or f"llm-sim:{arg}"))  # shown in the report
        kind, model, server = parse_llm_sim(self.spec, arg, options or current())
        self.complete = Completer(kind, model, server, name=self.spec)
        self.simulated = 0
        self._examples: dict[str, list[tuple[ToolCall, Observation]]] = {}
        for step in trace.steps:
            by_id = {o.call_id: o for o in step.observations}
            for call in step.action.tool_calls:
                if call.id in by_id:
                    self._examples.setdefault(call.name, []).append((call, by_id[call.id]))
        self._schemas = {tool_schema(t).name: tool_schema(t) for a in trace.actors for t in a.tools}

    @property
    def cache_config(self) -> dict[str, object]:
        """The model's server and settings, which decide the observations it simulates: stored
        rollouts are keyed by them."""
        return self.complete.cache_config

    async def unseen(self, call: ToolCall, j: int, index: int, key: EventKey) -> Observation:
        text = await self.complete(_SYSTEM, self._prompt(call), key.at(kind=f"env-sim{j}"))
        self.simulated += 1
        return Observation(call_id=call.id, content=text.strip())

    def _prompt(self, call: ToolCall) -> str:
        schema = self._schemas.get(call.name)
        parts = [f"Task of the run: {_clip(_task(task_of(self.trace)))}"]
        if schema is not None:
            parts.append(
                f"Tool `{schema.name}`: {schema.description or '(no description)'}\n"
                f"Parameters (JSON schema): {json.dumps(schema.parameters, ensure_ascii=False)}"
            )
        same = self._examples.get(call.name, [])[:_SHOW]
        if same:
            parts.append(
                "Recorded calls of this tool and their outputs:\n"
                + "\n".join(f"{c.signature()} -> {_clip(o.content)}" for c, o in same)
            )
        others = [e for n, ex in self._examples.items() if n != call.name for e in ex][:_CONTEXT]
        if others:
            parts.append(
                "Other recorded tool outputs (context):\n"
                + "\n".join(f"{c.signature()} -> {_clip(o.content)}" for c, o in others)
            )
        parts.append(f"Now simulate this call:\n{call.signature()}\nOutput:")
        return "\n\n".join(parts)

    def notes(self) -> list[str]:
        out = []
        if self.simulated:
            out.append(
                f"{self.spec}: {self.simulated} tool observations were simulated by the model "
                "(calls the record never saw)"
            )
        out += self.complete.endings("used as the tool's output")
        summary = self.complete.http.summary()
        if summary:
            out.append(summary)
        return out

    @property
    def usage(self) -> dict[str, int]:
        return self.complete.usage

    async def aclose(self) -> None:
        await self.complete.aclose()


def _task(task: str | dict[str, Any]) -> str:
    return task if isinstance(task, str) else json.dumps(task, ensure_ascii=False)
