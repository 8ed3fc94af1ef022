"""Settings shared by every HTTP backend of one run, and the context they travel in.

Spec strings name a backend and a model (`openai:gpt-4o`); everything else (where the server is, which
environment variable holds the key, timeouts, explicit sampling overrides) comes from `BackendOptions`.
The command line and `car.config` set them with `configure`; library users can do the same, or build
`OpenAIPolicy` / `AnthropicPolicy` objects directly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["BackendOptions", "configure", "current"]


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


_OPTIONS: ContextVar[BackendOptions] = ContextVar("car_backend_options", default=BackendOptions())  # noqa: B039 - frozen value


def current() -> BackendOptions:
    """The options in effect in this context."""
    return _OPTIONS.get()


@contextlib.contextmanager
def configure(**changes: Any) -> Iterator[BackendOptions]:
    """Set backend options for the code inside the `with` block (None leaves a field unchanged)."""
    opts = replace(_OPTIONS.get(), **{k: v for k, v in changes.items() if v is not None})
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
    }
