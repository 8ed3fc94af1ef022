"""What the OpenAI and Anthropic policies share: key lookup, model resolution, sampling parameters,
and the base class that holds a policy's options, model, spec and HTTP backend, and counts how its
draws ended (refusals, answers cut at max tokens) for the report's notes."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import ClassVar

from car.backends.http import HttpBackend, notice
from car.backends.options import BackendOptions, cache_config, current
from car.backends.wire import Draw
from car.errors import COMMAND_LINE, BackendError, CarError, InputError
from car.protocols import Decision
from car.trace import Sampling, Trace

__all__ = ["ServerPolicy", "api_key", "recorded_models", "resolve_model", "sampling_params"]


class ServerPolicy:
    """A policy served over HTTP: `kind:MODEL`, the run's backend options, one `HttpBackend`."""

    kind: ClassVar[str] = ""

    def __init__(
        self,
        model: str | None,
        trace: Trace | None = None,
        *,
        spec: str | None = None,
        options: BackendOptions | None = None,
        http: HttpBackend | None = None,
    ) -> None:
        self.options = options or current()
        self.model = resolve_model(self.kind, model, trace)
        self.spec = spec or f"{self.kind}:{model or ''}"
        self.http = http or self.connect(self.options)
        self._endings: dict[str, _Endings] = {}
        self.started(trace)

    def connect(self, options: BackendOptions) -> HttpBackend:
        """The vendor's HTTP backend (when none is passed in)."""
        raise NotImplementedError

    def started(self, trace: Trace | None) -> None:
        """A subclass's own set-up, once the shared attributes are in place."""

    @property
    def cache_config(self) -> dict[str, object]:
        """What decides this policy's draws beyond its spec (stored rollouts are keyed by it)."""
        return cache_config(self.model, self.http.base_url, self.options)

    def model_for(self, decision: Decision) -> str:
        """The model to ask at this step: the spec's, else the one the step recorded."""
        model = self.model or (decision.sampling.model if decision.sampling else None)
        if not model:
            raise BackendError(f"{self.spec}: step {decision.step} records no model; name one")
        return model

    @property
    def usage(self) -> dict[str, int]:
        """Tokens the server reported for this policy's requests (input_tokens, output_tokens, ...):
        what `--price` turns into a cost."""
        return dict(self.http.stats.tokens)

    async def aclose(self) -> None:
        await self.http.aclose()

    def count_draw(self, model: str, draw: Draw, max_tokens: object) -> None:
        """Count a draw of `model` asked with `max_tokens` (None: not sent) by how it ended."""
        ends = self._endings.setdefault(model, _Endings())
        ends.draws += 1
        ends.refusals += draw.refused
        if draw.cut:
            ends.cut += 1
            ends.limits.add(max_tokens if isinstance(max_tokens, int) else None)

    def draw_notes(self) -> list[str]:
        """A line per model whose draws include refusals, and one for draws cut at max tokens: a
        match rate or a locus resting on them is worth knowing."""
        out = []
        for model, ends in sorted(self._endings.items()):
            who, of = f"{self.kind}:{model}", f"{{}} of {ends.draws} draws"
            if ends.refusals:
                out.append(f"{who}: {of.format(ends.refusals)} were refusals")
            if ends.cut:
                limits = [f"max_tokens {x}" for x in sorted(x for x in ends.limits if x is not None)]
                if None in ends.limits:
                    limits.append("the server's default max_tokens (none was sent)")
                out.append(f"{who}: {of.format(ends.cut)} were cut at {' or '.join(limits)}")
        return out


@dataclass
class _Endings:
    """How one model's draws ended."""

    draws: int = 0
    refusals: int = 0
    cut: int = 0
    limits: set[int | None] = field(default_factory=set)  # the max_tokens the cut draws were asked with


def api_key(
    opts: BackendOptions, default_var: str, *, base_url: str, vendor_url: str, vendor: str
) -> str | None:
    """The key from the environment (never from a flag or a file), or None for keyless local servers."""
    var = opts.api_key_env or default_var
    key = os.environ.get(var, "").strip()
    if key:
        return key
    if opts.api_key_env:
        error = InputError(f"{_key_env_source(var)}: that environment variable is not set or empty")
        error.located = True
        raise error
    if base_url.rstrip("/") == vendor_url.rstrip("/"):
        raise InputError(
            f"{vendor} needs an API key: set {default_var} in the environment "
            f"(or name another variable with {_key_env_option()})"
        )
    return None


def http_backend(
    name: str,
    base_url: str,
    headers: dict[str, str],
    key: str | None,
    opts: BackendOptions,
    *,
    key_var: str,
) -> HttpBackend:
    """The vendor backend's HTTP client for `base_url`, sending `headers` (which carry `key`, read
    from the environment variable `key_var` and kept out of every error message) with the retry,
    timeout and concurrency settings of `opts`."""
    refused = (
        f"is the key in {key_var} the one this server takes?"
        if key
        else f"no API key was sent: set {key_var} (or name another variable with {_key_env_option()})"
    )
    return HttpBackend(
        name,
        base_url,
        headers,
        secrets=(key,) if key else (),
        refused_key=refused,
        timeout=opts.timeout,
        max_attempts=opts.max_attempts,
        max_concurrency=opts.max_concurrency,
        backoff_base=opts.backoff_base,
    )


def _key_env_source(name: str) -> str:
    """Where the `api_key_env` setting `name` came from, as `server_url` names a base URL's source:
    a `CAR_API_KEY_ENV` variable or the configuration file that holds this name (the command line
    wins over both, so a flag with another name was not read from them), else `--api-key-env` (from
    Python, `configure`)."""
    for var, value in os.environ.items():
        if var.startswith("CAR_") and var[4:].lower() == "api_key_env" and value == name:
            return f"environment variable {var}={name}"
    from car.config import find_config  # only on this error path: it reads the configuration file

    try:
        found = find_config()
    except CarError:  # an unreadable file is reported where the settings are read
        found = None
    if found is not None and found[1].get("api_key_env") == name:
        path, _ = found
        where = f"{path}: [tool.car]" if path.name == "pyproject.toml" else str(path)
        return f"{where}: api_key_env = {name!r}"
    return _key_env_option(name)


def _key_env_option(name: str | None = None) -> str:
    """How to set `api_key_env` (to `name`): the flag while `car` runs, `configure` from Python."""
    if COMMAND_LINE.get():
        return "--api-key-env" + (f" {name}" if name else "")
    return f"car.backends.options.configure(api_key_env={repr(name) if name else 'NAME'})"


def recorded_models(trace: Trace | None) -> set[str]:
    if trace is None:
        return set()
    return {s.sampling.model for s in trace.steps if s.sampling is not None and s.sampling.model}


def resolve_model(kind: str, model: str | None, trace: Trace | None) -> str | None:
    """The model to ask for: the spec's, else the recorded one. Warns when they differ."""
    recorded = recorded_models(trace)
    if model:
        other = sorted(recorded - {model})
        if other:
            notice(
                f"{kind}: replaying with model {model!r} but the trace recorded "
                f"{', '.join(map(repr, other))}: the match rate will tell how faithful that is"
            )
        return model
    if len(recorded) > 1:
        notice(f"{kind}: the trace recorded several models; each step uses its own")
    if not recorded:
        raise InputError(
            f"policy '{kind}:': the trace records no model ($.steps[].sampling.model); "
            f"name one: --policy {kind}:MODEL"
        )
    return None  # per step, from the record


def sampling_params(opts: BackendOptions, sampling: Sampling | None) -> dict[str, float | int]:
    """The parameters to send: the recorded ones, overridden by what the user set explicitly."""
    rec = sampling or Sampling()
    out: dict[str, float | int] = {}
    for name in ("temperature", "top_p", "max_tokens"):
        value = getattr(opts, name)
        if value is None:
            value = getattr(rec, name)
        if value is not None:
            out[name] = value
    return out
