"""One-shot text completions (system + user prompt in, text out) for the simulated environment and the
judge, over either backend. The seed comes from the event key when the server takes one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from car.backends.anthropic import DEFAULT_MAX_TOKENS, anthropic_backend, messages_call
from car.backends.http import HttpBackend
from car.backends.openai import capabilities, openai_backend
from car.backends.options import BackendOptions
from car.backends.wire import draw_from_openai, openai_choices
from car.errors import SpecError
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
            return (await messages_call(self.http, body, source=self.name)).action.text
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
        choice = openai_choices(data, source=self.name)[0]
        return draw_from_openai(choice, source=self.name, fallback_id="call").action.text

    async def aclose(self) -> None:
        await self.http.aclose()
