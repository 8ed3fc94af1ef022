"""One-shot text completions (system + user prompt in, text out) for the simulated environment and the
judge, over either backend. The seed comes from the event key when the server takes one."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, Literal

from car.backends.anthropic import DEFAULT_MAX_TOKENS, anthropic_backend, messages_call
from car.backends.http import HttpBackend
from car.backends.openai import capabilities, openai_backend
from car.backends.options import BackendOptions, base_url_problem, cache_config
from car.backends.wire import Draw, draw_from_openai, openai_choices
from car.errors import SpecError
from car.rng import EventKey

__all__ = ["SERVER_OPTIONS", "Completer", "parse_backend_model", "server_options"]

# What a judge or simulated environment may set for its own server, after `?` in its spec; without
# them it uses the run's (--base-url, --api-key-env, --temperature, --max-tokens).
SERVER_OPTIONS = ("base_url", "api_key_env", "temperature", "max_tokens")

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


def server_options(what: str, given: dict[str, str], base: BackendOptions) -> BackendOptions:
    """`base` with the `SERVER_OPTIONS` found in `given` (a spec's `?` options, taken out of it):
    a component that talks to another server than the policy's (a hosted judge beside a local
    policy) says so in its own spec. `what` names it in errors."""
    changes: dict[str, Any] = {}
    url = given.pop("base_url", None)
    if url is not None:
        problem = base_url_problem(url)
        if problem:
            raise SpecError(f"{what}: base_url {url!r} is {problem}")
        changes["base_url"] = url
    key = given.pop("api_key_env", None)
    if key is not None:
        if not key:
            raise SpecError(f"{what}: api_key_env names the variable holding the key; got nothing")
        if not os.environ.get(key, "").strip():  # said here: the key's lookup would blame a flag
            raise SpecError(f"{what}: api_key_env={key}: that environment variable is not set or empty")
        changes["api_key_env"] = key
    temperature = given.pop("temperature", None)
    if temperature is not None:
        try:
            changes["temperature"] = float(temperature)
        except ValueError:
            changes["temperature"] = -1.0
        if not 0 <= changes["temperature"] <= 2:
            raise SpecError(f"{what}: temperature must be a number from 0 to 2, got {temperature!r}")
    tokens = given.pop("max_tokens", None)
    if tokens is not None:
        if not (tokens.isascii() and tokens.isdigit() and int(tokens) >= 1):
            raise SpecError(f"{what}: max_tokens must be a whole number >= 1, got {tokens!r}")
        changes["max_tokens"] = int(tokens)
    return replace(base, **changes) if changes else base


@dataclass
class Completer:
    kind: BackendKind
    model: str
    options: BackendOptions
    name: str

    def __post_init__(self) -> None:
        make = openai_backend if self.kind == "openai" else anthropic_backend
        self.http: HttpBackend = make(self.options, name=self.name)
        self.answers = 0
        self.refusals = 0  # answers that were the model declining (`draw` tells the caller which)
        self.cut = 0  # answers stopped at max tokens

    def _counted(self, draw: Draw) -> Draw:
        self.answers += 1
        self.refusals += draw.refused
        self.cut += draw.cut
        return draw

    def endings(self, what: str, refused: str | None = None) -> list[str]:
        """Lines for the report when answers were refusals or cut at max tokens; `what` says what
        became of them ("used as the tool's output"), `refused` of the refusals when that differs."""
        out = []
        if self.refusals:
            out.append(
                f"{self.name}: {self.refusals} of {self.answers} answers were refusals "
                f"({refused or what})"
            )
        if self.cut:
            out.append(
                f"{self.name}: {self.cut} of {self.answers} answers were cut at max tokens ({what})"
            )
        return out

    @property
    def cache_config(self) -> dict[str, object]:
        """What decides its answers beyond the spec that named it (the server and its settings): the
        stored rollouts of a component that asks it are keyed by it."""
        return cache_config(self.model, self.http.base_url, self.options)

    @property
    def usage(self) -> dict[str, int]:
        """Tokens the server reported for these completions (what `--price` turns into a cost)."""
        return dict(self.http.stats.tokens)

    async def __call__(self, system: str, user: str, key: EventKey, *, max_tokens: int = 512) -> str:
        return (await self.draw(system, user, key, max_tokens=max_tokens)).action.text

    async def draw(self, system: str, user: str, key: EventKey, *, max_tokens: int = 512) -> Draw:
        """The answer with how the model ended it (a refusal, a cut at max tokens)."""
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
            return self._counted(await messages_call(self.http, body, source=self.name))
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
        return self._counted(draw_from_openai(choice, source=self.name, fallback_id="call"))

    async def aclose(self) -> None:
        await self.http.aclose()
