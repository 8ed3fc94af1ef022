"""One-shot text completions (system + user prompt in, text out) for the simulated environment and the
judge, over either backend. The seed comes from the event key when the server takes one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from car.backends.anthropic import DEFAULT_MAX_TOKENS, anthropic_backend, messages_call
from car.backends.http import HttpBackend
from car.backends.openai import capabilities, openai_backend
from car.backends.options import BackendOptions
from car.backends.wire import action_from_openai
from car.errors import BackendError, SpecError
from car.rng import EventKey

__all__ = ["Completer", "parse_backend_model"]

BackendKind = Literal["openai", "anthropic"]


def parse_backend_model(what: str, arg: str) -> tuple[BackendKind, str]:
    """`openai:MODEL`, `anthropic:MODEL` or a bare `MODEL` (OpenAI-compatible)."""
    kind, sep, model = arg.partition(":")
    if sep and kind in ("openai", "anthropic"):
        if not model:
            raise SpecError(f"{what}: name a model after '{kind}:'")
        return ("openai" if kind == "openai" else "anthropic"), model
    if not arg:
        raise SpecError(f"{what}: name a model, e.g. {what.split(':')[0]}:openai:gpt-4o-mini")
    return "openai", arg


@dataclass
class Completer:
    kind: BackendKind
    model: str
    options: BackendOptions
    name: str

    def __post_init__(self) -> None:
        make = openai_backend if self.kind == "openai" else anthropic_backend
        self.http: HttpBackend = make(self.options, name=self.name)

    @property
    def usage(self) -> dict[str, int]:
        """Tokens the server reported for these completions (what `--price` turns into a cost)."""
        return dict(self.http.stats.tokens)

    async def __call__(self, system: str, user: str, key: EventKey, *, max_tokens: int = 512) -> str:
        opts = self.options
        if self.kind == "anthropic":
            body: dict[str, Any] = {
                "model": self.model,
                "system": system,
                "messages": [{"role": "user", "content": [{"type": "text", "text": user}]}],
                "max_tokens": opts.max_tokens or max_tokens or DEFAULT_MAX_TOKENS,
            }
            if opts.temperature is not None:
                body["temperature"] = opts.temperature
            return (await messages_call(self.http, body)).text
        caps = await capabilities(self.http, self.model)
        body = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "max_tokens": opts.max_tokens or max_tokens,
        }
        if opts.temperature is not None:
            body["temperature"] = opts.temperature
        if caps.seed:
            body["seed"] = key.seed32()
        data = await self.http.post_json("chat/completions", body)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise BackendError(f"{self.name}: the server answered without choices")
        return action_from_openai(choices[0].get("message") or {}, fallback_id="call").text

    async def aclose(self) -> None:
        await self.http.aclose()
