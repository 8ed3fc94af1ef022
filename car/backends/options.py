"""Settings shared by every HTTP backend of one run, and the context they travel in.

Spec strings name a backend and a model (`openai:gpt-4o`); everything else (where the server is, which
environment variable holds the key, timeouts, explicit sampling overrides) comes from `BackendOptions`.
The command line and `car.config` set them with `configure`; library users can do the same, or build
`OpenAIPolicy` / `AnthropicPolicy` objects directly.
"""

from __future__ import annotations

import contextlib
import os
import re
import urllib.parse
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

from car.errors import InputError

__all__ = [
    "MIN_THINKING_BUDGET",
    "BackendOptions",
    "base_url_problem",
    "configure",
    "current",
    "describe_thinking",
    "server_url",
    "thinking_config",
]


@dataclass(frozen=True)
class BackendOptions:
    """How to reach model servers. Keys never live here: only the *name* of the variable holding one."""

    base_url: str | None = None  # default: OPENAI_BASE_URL / ANTHROPIC_BASE_URL, else the vendor URL
    api_key_env: str | None = None  # default: OPENAI_API_KEY / ANTHROPIC_API_KEY
    timeout: float = 120.0  # seconds per request
    max_attempts: int = 6  # tries per request, first one included
    max_concurrency: int = 32  # ceiling of the adaptive limit (requests in flight per backend)
    backoff_base: float = 0.5  # seconds; attempt i waits up to base * 2**i (full jitter)
    temperature: float | None = None  # explicit overrides: sent even when the trace recorded none
    top_p: float | None = None
    max_tokens: int | None = None
    thinking: str | None = None  # Anthropic thinking: "off", "adaptive" or a budget (`thinking_config`)


MIN_THINKING_BUDGET = 1024  # the Messages API's smallest extended-thinking budget


def thinking_config(value: str) -> dict[str, Any] | None:
    """The Messages API `thinking` object for a `--thinking` value: "off" (None: not sent),
    "adaptive", or a token budget for extended thinking. ValueError says what is accepted."""
    text = value.strip().lower()
    if text == "off":
        return None
    if text == "adaptive":
        return {"type": "adaptive"}
    if re.fullmatch(r"[0-9]+", text) and int(text) >= MIN_THINKING_BUDGET:
        return {"type": "enabled", "budget_tokens": int(text)}
    raise ValueError(f"must be off, adaptive or a budget of at least {MIN_THINKING_BUDGET} tokens")


def describe_thinking(config: dict[str, Any] | None) -> str:
    """A `thinking` object in words: off, adaptive, or a budget of N tokens."""
    if config is None or config.get("type") == "disabled":
        return "off"
    budget = config.get("budget_tokens")
    return f"on, a budget of {budget} tokens" if budget is not None else str(config.get("type"))


_OPTIONS: ContextVar[BackendOptions] = ContextVar("car_backend_options", default=BackendOptions())  # noqa: B039 - frozen value


def current() -> BackendOptions:
    """The options in effect in this context."""
    return _OPTIONS.get()


def base_url_problem(url: str) -> str | None:
    """Why `url` cannot be a model server's base URL, or None if it can."""
    problem = "not an http:// or https:// URL with a host (e.g. http://localhost:8000/v1)"
    try:
        # Any of these raises ValueError on an unbalanced or invalid [IPv6] host, or a port that is
        # not a number or out of range.
        parts = urllib.parse.urlsplit(url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        return problem
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        return problem
    # The client that will send the requests is the last word: urlsplit lets through what httpx
    # refuses (`http://[::1]x/v1`, control characters). Imported here so `import car` stays light.
    import httpx

    try:
        httpx.URL(url)
    except httpx.InvalidURL:
        return problem
    return None


def server_url(opts: BackendOptions, env_var: str, vendor_url: str) -> str:
    """The base URL to use: `opts.base_url`, else the environment variable `env_var`, else the
    vendor's. A malformed one is an `InputError` that names where it came from."""
    url, source = (opts.base_url, "--base-url") if opts.base_url else (os.environ.get(env_var), env_var)
    if not url:
        return vendor_url
    problem = base_url_problem(url)
    if problem:
        raise InputError(f"{source} {url!r}: {problem}")
    return url


@contextlib.contextmanager
def configure(**changes: Any) -> Iterator[BackendOptions]:
    """Set backend options for the code inside the `with` block (None leaves a field unchanged).
    A name or value `[tool.car]` would refuse is an `InputError`, before any work."""
    from car.config import check_backend_options  # car.config imports this module

    opts = replace(_OPTIONS.get(), **check_backend_options(changes))
    token = _OPTIONS.set(opts)
    try:
        yield opts
    finally:
        _OPTIONS.reset(token)


def cache_config(model: str | None, base_url: str, opts: BackendOptions) -> dict[str, object]:
    """What decides a model-server policy's draws beyond its spec: stored rollouts are keyed by it."""
    return {
        "model": model,
        "base_url": base_url,
        "temperature": opts.temperature,
        "top_p": opts.top_p,
        "max_tokens": opts.max_tokens,
        "thinking": opts.thinking,
    }
