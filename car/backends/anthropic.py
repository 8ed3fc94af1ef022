"""`anthropic:MODEL`: a policy over the Anthropic Messages API.

The request carries the system prompt top-level, tool calls as `tool_use` blocks and tool results as
`tool_result` blocks in user turns (`car.backends.wire.anthropic_messages`). `max_tokens` is required by
the API: the recorded value, else the user's, else 1024.

The API has no `seed` and no `n`: every sample is an independent request, and arms cannot share noise
(common random numbers are unavailable; the report says so). Temperature and top_p are never sent
together unless both were recorded (or both set by the user); if the model then rejects the pair, top_p
is dropped with a notice.
"""

from __future__ import annotations

from typing import Any

from car.backends.common import ServerPolicy, api_key, sampling_params
from car.backends.http import HttpBackend, HTTPStatusFailure, notice
from car.backends.options import BackendOptions, server_url
from car.backends.wire import action_from_anthropic, anthropic_messages, anthropic_tools
from car.errors import BackendError
from car.protocols import Decision
from car.rng import EventKey
from car.trace import Action, Trace

__all__ = ["ANTHROPIC_URL", "ANTHROPIC_VERSION", "AnthropicPolicy", "anthropic_backend"]

ANTHROPIC_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024


def anthropic_backend(opts: BackendOptions, *, name: str = "anthropic") -> HttpBackend:
    base = server_url(opts, "ANTHROPIC_BASE_URL", ANTHROPIC_URL)
    key = api_key(opts, "ANTHROPIC_API_KEY", base_url=base, vendor_url=ANTHROPIC_URL, vendor="Anthropic")
    headers = {"anthropic-version": ANTHROPIC_VERSION}
    if key:
        headers["x-api-key"] = key
    return HttpBackend(
        name,
        base,
        headers,
        secrets=(key,) if key else (),
        timeout=opts.timeout,
        max_attempts=opts.max_attempts,
        max_concurrency=opts.max_concurrency,
        backoff_base=opts.backoff_base,
    )


async def messages_call(http: HttpBackend, body: dict[str, Any]) -> Action:
    data = await http.post_json("v1/messages", body)
    content = data.get("content")
    if not isinstance(content, list):
        raise BackendError(f"{http.name}: the server answered without content blocks")
    return action_from_anthropic([b for b in content if isinstance(b, dict)])


class AnthropicPolicy(ServerPolicy):
    """Draws actions from the Messages API. See the module docstring."""

    kind = "anthropic"

    def connect(self, options: BackendOptions) -> HttpBackend:
        return anthropic_backend(options)

    def started(self, trace: Trace | None) -> None:
        self._pair_rejected = False
        notice(
            f"{self.spec}: the Messages API has no seed: samples are independent and arms cannot "
            "share noise (common random numbers unavailable)"
        )

    async def act(self, decision: Decision, key: EventKey) -> Action:
        model = self.model_for(decision)
        system, messages = anthropic_messages(decision.messages())
        params = sampling_params(self.options, decision.sampling)
        body: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "max_tokens": int(params.pop("max_tokens", DEFAULT_MAX_TOKENS)),
            **params,
        }
        if system:
            body["system"] = system
        if decision.actor.tools:
            body["tools"] = anthropic_tools(decision.actor.tools)
        if self._pair_rejected:
            body.pop("top_p", None)
        try:
            return await messages_call(self.http, body)
        except HTTPStatusFailure as exc:
            both = "temperature" in body and "top_p" in body
            if exc.status == 400 and both and "top_p" in exc.body:
                self._pair_rejected = True
                notice(f"{self.spec}: the model rejects temperature with top_p; dropping top_p")
                body.pop("top_p")
                return await messages_call(self.http, body)
            raise

    def notes(self) -> list[str]:
        out = [f"{self.spec}: no seed in the Messages API: samples are independent (no coupling)"]
        summary = self.http.summary()
        if summary:
            out.append(summary)
        return out
