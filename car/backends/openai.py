"""`openai:MODEL`: a policy over an OpenAI-compatible Chat Completions server.

One backend serves OpenAI, vLLM, llama.cpp's server, Ollama's `/v1` and a LiteLLM proxy. Each decision
becomes one request: the actor's messages (recorded ones when still valid, else rebuilt from the
history), its tools, and only the sampling parameters the trace recorded or the user set.

Capabilities are probed once per server and model (`probe`) and cached for the process: whether `n > 1`
returns n choices, whether `seed` is accepted and repeatable, whether logprobs come back, and whether
temperature and top_p may be sent together. How the k samples of a step are drawn follows from them:

- seed accepted: one request per sample, seeded from the sample's event key (`EventKey.seed32`), so a
  seeded server (vLLM, llama.cpp, Ollama) reproduces every draw and arms that share a replicate share
  its noise (if the seed is repeatable; else the samples are uncoupled). A deterministic server would
  otherwise return k copies of one answer.
- no seed but `n`: concurrent samples of one identical request are merged into one request with `n`
  (they are exchangeable draws, and the prompt is processed once).
- neither: independent requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from car.backends.common import (
    ServerPolicy,
    api_key,
    http_backend,
    recorded_models,
    sampling_params,
)
from car.backends.http import HttpBackend, notice
from car.backends.options import BackendOptions, server_url
from car.backends.wire import (
    Draw,
    draw_from_openai,
    openai_choices,
    openai_messages,
    openai_tools,
)
from car.errors import BackendError
from car.protocols import Decision
from car.rng import EventKey
from car.trace import Action, Trace, canonical_json

if TYPE_CHECKING:
    from car.runner import Memo

__all__ = ["OPENAI_URL", "Capabilities", "OpenAIPolicy", "openai_backend", "probe"]

OPENAI_URL = "https://api.openai.com/v1"
MAX_N = 16  # largest n merged into one request


@dataclass(frozen=True)
class Capabilities:
    """What one server does with one model, as probed."""

    n: bool  # n > 1 returns n choices
    seed: bool  # `seed` is accepted
    seed_repeatable: bool  # the same seed gave the same answer twice
    logprobs: bool
    temperature_with_top_p: bool

    def describe(self) -> str:
        yes = [k for k, v in vars(self).items() if v]
        no = [k for k, v in vars(self).items() if not v]
        return f"supports {', '.join(yes) or 'nothing optional'}" + (
            f"; not {', '.join(no)}" if no else ""
        )


def openai_backend(opts: BackendOptions, *, name: str = "openai") -> HttpBackend:
    base = server_url(opts, "OPENAI_BASE_URL", OPENAI_URL)
    key = api_key(opts, "OPENAI_API_KEY", base_url=base, vendor_url=OPENAI_URL, vendor="OpenAI")
    headers = {"authorization": f"Bearer {key}"} if key else {}
    return http_backend(name, base, headers, key, opts, key_var=opts.api_key_env or "OPENAI_API_KEY")


async def _accepts(http: HttpBackend, body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The answer to an optional probe, or None: the server does not do that. Asked once the plain
    request has succeeded (the server is up, the key and model are right), so a failure here is
    about the parameter: llama.cpp answers `n > 1` with HTTP 500, others with 400 or 422. Not
    retried (but for 429): retrying a refusal only multiplies it."""
    try:
        return await http.post_json("chat/completions", body, optional=True)
    except BackendError:
        return None


def _choices(data: Mapping[str, Any]) -> int:
    """How many choices an answer holds (0 when `choices` is not a list: a malformed answer)."""
    choices = data.get("choices")
    return len(choices) if isinstance(choices, list) else 0


def _first_text(data: Mapping[str, Any] | None) -> str | None:
    if data is None:
        return None
    try:
        msg = data["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        return None
    return canonical_json([msg.get("content"), msg.get("tool_calls")])


# The seed probe's prompt, sent at temperature 1 (which reasoning models accept too): its answer
# varies from draw to draw unless a seed fixes it, so two equal answers to one seed show the seed
# at work. A fixed prompt at the default temperature fooled the probe: a model that answered it
# the same way every time passed for a server that repeats seeds.
_RANDOM = "Reply with one random word and a random number between 1 and 1000000, nothing else."


async def probe(http: HttpBackend, model: str) -> Capabilities:
    """Ask the server, with tiny requests, what it supports. The plain request is retried by the
    HTTP layer and, if it still fails, so does the probe (never concluding "unsupported" from an
    outage); the optional ones are asked once it succeeded, each once (`_accepts`)."""
    # No temperature or max_tokens in the base request: reasoning models reject both.
    base: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": "Reply with one random word."}],
    }
    await http.post_json("chat/completions", base)  # auth, model name, reachability: fail loudly
    seeded = {
        **base,
        "messages": [{"role": "user", "content": _RANDOM}],
        "temperature": 1.0,
        "seed": 12345,
    }
    results = await asyncio.gather(
        _accepts(http, {**base, "n": 2}),
        _accepts(http, seeded),
        _accepts(http, {**base, "logprobs": True}),
        _accepts(http, {**base, "temperature": 1.0, "top_p": 0.9}),
        return_exceptions=True,  # let every probe finish before failing: no request left behind
    )
    for r in results:
        if isinstance(r, BaseException):
            raise r
    n_resp, seed_a, logp, both = (r if isinstance(r, dict) else None for r in results)
    n_ok = n_resp is not None and _choices(n_resp) == 2
    seed_ok = seed_a is not None
    repeatable = False
    if seed_ok:
        seed_b = await _accepts(http, seeded)
        repeatable = seed_b is not None and _first_text(seed_a) == _first_text(seed_b)
    logprobs_ok = False
    if logp is not None and _choices(logp):
        first = logp["choices"][0]
        logprobs_ok = isinstance(first, dict) and first.get("logprobs") is not None
    return Capabilities(n_ok, seed_ok, repeatable, logprobs_ok, both is not None)


_CAPS: dict[tuple[str, str], Capabilities] = {}
_PROBES: dict[tuple[str, str], asyncio.Task[Capabilities]] = {}


async def capabilities(http: HttpBackend, model: str) -> Capabilities:
    """The cached capabilities of (server, model), probing once; concurrent callers share the probe."""
    key = (http.base_url, model)
    if key in _CAPS:
        return _CAPS[key]
    task = _PROBES.get(key)
    if task is None or task.get_loop() is not asyncio.get_running_loop():
        task = _PROBES[key] = asyncio.ensure_future(probe(http, model))
        # Callers cancelled while waiting (`shield`) leave nobody to read a failure: read it here, or
        # asyncio logs "Task exception was never retrieved" at exit.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
    try:
        caps = await asyncio.shield(task)
    finally:
        if task.done():
            _PROBES.pop(key, None)
    _CAPS[key] = caps
    return caps


class OpenAIPolicy(ServerPolicy):
    """Draws actions from a Chat Completions server. See the module docstring."""

    kind = "openai"

    def connect(self, options: BackendOptions) -> HttpBackend:
        return openai_backend(options)

    def started(self, trace: Trace | None) -> None:
        self._recorded = recorded_models(trace)
        self._seen_models: set[str] = set()
        self._used: dict[str, Capabilities] = {}  # what each model's samples were drawn with
        self._memo: Memo | None = None
        self._pending: dict[str, list[tuple[int, asyncio.Future[Action]]]] = {}
        self._flushing: set[asyncio.Task[None]] = set()

    def use_memo(self, memo: Memo) -> None:
        """Take back the capabilities the stored samples were drawn with: a rerun served from the
        store never asks the server, yet its report says how those samples were coupled."""
        self._memo = memo
        for model in {self.model} if self.model else self._recorded:
            stored = memo.get(model)
            if stored is not None:
                self._used[model] = Capabilities(**stored)

    async def act(self, decision: Decision, key: EventKey) -> Action:
        model = self.model_for(decision)
        caps = await capabilities(self.http, model)
        if model not in self._used and self._memo is not None:
            self._memo.put(model, asdict(caps))
        self._used[model] = caps
        body: dict[str, Any] = {
            "model": model,
            "messages": openai_messages(decision.messages(), decision.actor.tools),
            **sampling_params(self.options, decision.sampling),
        }
        if decision.actor.tools:
            body["tools"] = openai_tools(decision.actor.tools)
        if "temperature" in body and "top_p" in body and not caps.temperature_with_top_p:
            body.pop("top_p")
            notice(f"{self.spec}: the server rejects temperature with top_p; sending temperature only")
        if caps.seed:
            body["seed"] = key.seed32()
            return await self._one(body, decision.step)
        if caps.n:
            return await self._merged(body, key, decision.step)
        return await self._one(body, decision.step)

    async def _one(self, body: dict[str, Any], step: int) -> Action:
        data = await self.http.post_json("chat/completions", body)
        draw = self._draws(data, 1, step)[0]
        if isinstance(draw, BackendError):
            raise draw
        return self._drawn(body, draw)

    def _drawn(self, body: Mapping[str, Any], draw: Draw) -> Action:
        self.count_draw(str(body.get("model")), draw, body.get("max_tokens"))
        return draw.action

    def _draws(self, data: Mapping[str, Any], want: int, step: int) -> list[Draw | BackendError]:
        """Up to `want` choices' draws, a choice that is no draw (withheld by a content filter, of
        the wrong shape) as its error: the other choices of an n-request still count."""
        choices = openai_choices(data, source=self.spec)
        got = data.get("model")
        if isinstance(got, str) and got not in self._seen_models:
            self._seen_models.add(got)
            asked = str(self.model or "")
            known = self._recorded | {asked}
            if not any(got == m or got.startswith(m) for m in known if m):
                notice(f"{self.spec}: the server answered with model {got!r}")
        out: list[Draw | BackendError] = []
        for i, choice in enumerate(choices[:want]):
            try:
                out.append(
                    draw_from_openai(choice, source=self.spec, fallback_id=f"call_{step}_{i}", index=i)
                )
            except BackendError as exc:
                out.append(exc)
        return out

    async def _merged(self, body: dict[str, Any], key: EventKey, step: int) -> Action:
        """Join concurrent draws of the identical request into one request with `n`."""
        group_key = canonical_json(body)
        fut: asyncio.Future[Action] = asyncio.get_running_loop().create_future()
        group = self._pending.get(group_key)
        if group is None:
            group = self._pending[group_key] = []
            task = asyncio.get_running_loop().create_task(self._flush(group_key, body, step))
            self._flushing.add(task)  # the loop keeps only weak references to tasks
            task.add_done_callback(self._flushing.discard)
        group.append((key.seed32(), fut))
        return await fut

    async def _flush(self, group_key: str, body: dict[str, Any], step: int) -> None:
        await asyncio.sleep(0.002)  # let the other samples of this step join
        group = sorted(self._pending.pop(group_key), key=lambda sf: sf[0])
        for start in range(0, len(group), MAX_N):
            chunk = group[start : start + MAX_N]
            try:
                if len(chunk) == 1:
                    actions: list[Action | BackendError] = [await self._one(body, step)]
                else:
                    data = await self.http.post_json("chat/completions", {**body, "n": len(chunk)})
                    actions = [
                        d if isinstance(d, BackendError) else self._drawn(body, d)
                        for d in self._draws(data, len(chunk), step)
                    ]
                    while len(actions) < len(chunk):  # the server returned fewer choices
                        actions.append(await self._one(body, step))
            except BaseException as exc:
                for _, f in chunk:
                    if not f.done():
                        f.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise
                continue
            for (_, f), action in zip(chunk, actions, strict=True):
                if f.done():
                    continue
                if isinstance(action, BackendError):
                    f.set_exception(action)
                else:
                    f.set_result(action)

    def notes(self) -> list[str]:
        """Lines for the report: what the server supports and anything that went wrong on the wire."""
        out = []
        for model, caps in sorted(self._used.items()):
            if caps.seed and caps.seed_repeatable:
                how = "seeded per sample (common random numbers)"
            elif caps.seed:
                how = "seeded per sample but uncoupled: the server does not repeat a seed's answer"
            else:
                how = "merged into n-requests, uncoupled" if caps.n else "independent, uncoupled"
            out.append(f"{self.spec}: {model} {caps.describe()}; samples {how}")
        out += self.draw_notes()
        summary = self.http.summary()
        if summary:
            out.append(summary)
        return out
