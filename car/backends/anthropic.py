"""`anthropic:MODEL`: a policy over the Anthropic Messages API.

The request carries the system prompt top-level, tool calls as `tool_use` blocks and tool results as
`tool_result` blocks in user turns (`car.backends.wire.anthropic_messages`). `max_tokens` is required by
the API: the recorded value, else the user's, else 1024.

The API has no `seed` and no `n`: every sample is an independent request, and arms cannot share noise
(common random numbers are unavailable; the report says so). Temperature and top_p are never sent
together unless both were recorded (or both set by the user); if the model then rejects the pair, top_p
is dropped with a notice.

Thinking: a model that thought while recording thinks while replaying. The `thinking` settings are
sent as recorded (`Sampling.thinking`), else as `--thinking` says (off, adaptive or a budget), else,
for an actor whose recorded turns carry thinking blocks but whose settings were not recorded, with a
budget of 4096 tokens (the report says so). Earlier turns' thinking blocks go back verbatim with their
turns (the API requires those of a tool-use loop, signed and unchanged), and a drawn action keeps its
own. With thinking on, `max_tokens` is raised above the budget where needed, and a temperature other
than 1 or a top_p below 0.95, which the API refuses then, is not sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from car.backends.common import ServerPolicy, api_key, http_backend, sampling_params
from car.backends.http import HttpBackend, HTTPStatusFailure, notice
from car.backends.options import BackendOptions, describe_thinking, server_url, thinking_config
from car.backends.wire import (
    Draw,
    anthropic_messages,
    anthropic_thinking,
    anthropic_tools,
    draw_from_anthropic,
)
from car.errors import InputError
from car.protocols import Decision
from car.rng import EventKey
from car.trace import Action, Sampling, Step, Trace

__all__ = ["ANTHROPIC_URL", "ANTHROPIC_VERSION", "AnthropicPolicy", "anthropic_backend"]

ANTHROPIC_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024
DEFAULT_THINKING = {"type": "enabled", "budget_tokens": 4096}  # thought while recording, unrecorded


def anthropic_backend(opts: BackendOptions, *, name: str = "anthropic") -> HttpBackend:
    base = server_url(opts, "ANTHROPIC_BASE_URL", ANTHROPIC_URL)
    key = api_key(opts, "ANTHROPIC_API_KEY", base_url=base, vendor_url=ANTHROPIC_URL, vendor="Anthropic")
    headers = {"anthropic-version": ANTHROPIC_VERSION}
    if key:
        headers["x-api-key"] = key
    return http_backend(name, base, headers, key, opts, key_var=opts.api_key_env or "ANTHROPIC_API_KEY")


async def messages_call(http: HttpBackend, body: dict[str, Any], *, source: str = "") -> Draw:
    """One Messages API request's answer; errors name `source` (default: the backend's name)."""
    data = await http.post_json("v1/messages", body)
    return draw_from_anthropic(data, source=source or http.name)


class AnthropicPolicy(ServerPolicy):
    """Draws actions from the Messages API. See the module docstring."""

    kind = "anthropic"
    accepts_thinking = True  # `--thinking` means something to this policy (car.specs.make_policy)

    def connect(self, options: BackendOptions) -> HttpBackend:
        return anthropic_backend(options)

    def started(self, trace: Trace | None) -> None:
        self._pair_rejected = False
        steps = trace.steps if trace is not None else ()
        # The actors the record shows thinking (the API's own blocks in their turns).
        self._thinkers = {s.actor for s in steps if anthropic_thinking(s.action.reasoning)}
        # What thinking changes in the requests follows from the trace and the options alone: said
        # now, and kept in the report's notes (a rerun served from the store says it too).
        self._thinking_notes = [f"{self.spec}: {line}" for line in self._thinking_changes(steps)]
        for line in self._thinking_notes:
            notice(line)
        if trace is not None and self.sends_reasoning(trace):
            self._thinking_notes.append(
                f"{self.spec}: the record's thinking blocks are sent back with their turns, as recorded"
            )
        notice(
            f"{self.spec}: the Messages API has no seed: samples are independent and arms cannot "
            "share noise (common random numbers unavailable)"
        )

    def sends_reasoning(self, trace: Trace) -> bool:
        """Whether every recorded turn with reasoning is sent back with it: each holds the Messages
        API's own signed blocks (`anthropic_thinking`), so the import's `thinking-not-replayed`
        warning does not apply to this replay (`car.attribution`)."""
        turns = [s.action.reasoning for s in trace.steps if s.action.reasoning]
        return bool(turns) and all(anthropic_thinking(r) for r in turns)

    def _thinking_changes(self, steps: Sequence[Step]) -> list[str]:
        """How thinking makes the requests differ from the record or from the user's settings, one
        line each; a setting the user gave that the API refuses with thinking on is an error."""
        out: list[str] = []
        if self.options.thinking is not None:
            out.append(
                f"thinking {describe_thinking(thinking_config(self.options.thinking))} (--thinking)"
            )
        elif self._thinkers and not any(s.sampling is not None and s.sampling.thinking for s in steps):
            out.append(
                "the trace shows thinking but not its settings: replayed with a budget of "
                f"{DEFAULT_THINKING['budget_tokens']} tokens (set --thinking)"
            )
        for step in steps:
            thinking = self._thinking(step.actor, step.sampling)
            if thinking is None:
                continue
            body = self._params(step.sampling)
            for name, value in self._think(body, thinking):
                given = getattr(self.options, name, None)
                if given is not None and name != "max_tokens":
                    flag = "--" + name.replace("_", "-")
                    raise InputError(
                        f"{flag} {given}: the Messages API refuses it with thinking on "
                        "(--thinking off replays without thinking)"
                    )
                out.append(
                    f"max_tokens raised to {value}, above the thinking budget"
                    if name == "max_tokens"
                    else f"recorded {name} {value} not sent: the API refuses it with thinking on"
                )
        return list(dict.fromkeys(out))

    async def act(self, decision: Decision, key: EventKey) -> Action:
        model = self.model_for(decision)
        system, messages = anthropic_messages(decision.messages())
        body: dict[str, Any] = {"model": model, "messages": messages, **self._params(decision.sampling)}
        if system:
            body["system"] = system
        if decision.actor.tools:
            body["tools"] = anthropic_tools(decision.actor.tools)
        if self._pair_rejected:
            body.pop("top_p", None)
        thinking = self._thinking(decision.actor.id, decision.sampling)
        if thinking is not None:
            self._think(body, thinking)  # what it changes was said at the start
        try:
            draw = await messages_call(self.http, body, source=self.spec)
        except HTTPStatusFailure as exc:
            both = "temperature" in body and "top_p" in body
            if not (exc.status == 400 and both and "top_p" in exc.body):
                raise
            self._pair_rejected = True
            notice(f"{self.spec}: the model rejects temperature with top_p; dropping top_p")
            body.pop("top_p")
            draw = await messages_call(self.http, body, source=self.spec)
        self.count_draw(model, draw, body.get("max_tokens"))
        return draw.action

    def _params(self, sampling: Sampling | None) -> dict[str, Any]:
        """The sampling part of a request: the recorded parameters, the user's overrides, and
        `max_tokens`, which the API requires."""
        params: dict[str, Any] = sampling_params(self.options, sampling)
        params["max_tokens"] = int(params.get("max_tokens", DEFAULT_MAX_TOKENS))
        return params

    def _thinking(self, actor: str, sampling: Sampling | None) -> dict[str, Any] | None:
        """The `thinking` settings for a decision of `actor` recorded with `sampling`: the user's,
        else the recorded ones, else the default for an actor the record shows thinking; None: none
        sent."""
        if self.options.thinking is not None:
            return thinking_config(self.options.thinking)
        if sampling is not None and sampling.thinking:
            return dict(sampling.thinking)
        return dict(DEFAULT_THINKING) if actor in self._thinkers else None

    @staticmethod
    def _think(body: dict[str, Any], thinking: dict[str, Any]) -> list[tuple[str, Any]]:
        """Add `thinking` to a request and make the rest of it what the API accepts with it; the
        (parameter, value) pairs that changed: max_tokens raised above the budget, a temperature
        other than 1 or a top_p below 0.95 (refused with thinking on) left out."""
        body["thinking"] = thinking
        changed: list[tuple[str, Any]] = []
        if thinking.get("type") == "disabled":
            return changed
        budget = thinking.get("budget_tokens")
        if isinstance(budget, int) and body["max_tokens"] <= budget:
            body["max_tokens"] = budget + DEFAULT_MAX_TOKENS
            changed.append(("max_tokens", body["max_tokens"]))
        refused = {"temperature": body.get("temperature", 1) != 1, "top_p": body.get("top_p", 1) < 0.95}
        changed += [(k, body.pop(k)) for k, no in refused.items() if no]
        return changed

    def notes(self) -> list[str]:
        out = [f"{self.spec}: no seed in the Messages API: samples are independent (no coupling)"]
        out += self._thinking_notes
        out += self.draw_notes()
        summary = self.http.summary()
        if summary:
            out.append(summary)
        return out
