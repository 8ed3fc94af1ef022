"""The HTTP layer every model backend shares: retries, an adaptive concurrency limit, secret hygiene.

- `post_json` retries 408, 409, 429, 5xx but 501, connection errors, timeouts and unparseable bodies
  (but an HTML page: a web server answering, not the API) with exponential backoff and full jitter,
  honouring `retry-after-ms` and `Retry-After` (seconds or an HTTP date), bounded by `max_attempts`
  and a cap per wait. Any other status fails at once; an HTML page in a 2xx or 4xx answer says to
  check the base URL.
- A server that has never answered is given up on: once one request has used all its attempts without
  any HTTP response (connection refused, no route, connections closed unanswered, nothing but
  timeouts) and no request to that server got one meanwhile, every later request fails at once with
  the same one-line `BackendError` instead of retrying in turn. The verdict belongs to the base URL,
  not the backend object, so a batch that builds a backend per trace finds a dead server once, not
  once per trace; it lasts `GIVE_UP_SECONDS` (a long-lived process tries again after that) and any
  HTTP response from the server clears it.
  A backend that has had an answer keeps its retries (a 503 or a timeout mid-run is transient).
- A server that answers but keeps failing is given up on too: once `GIVE_UP_AFTER` requests in a row
  for one model (no success between them) have used all their attempts, every later request for
  that model to that base URL fails at once with the error the last of them gave, for
  `GIVE_UP_SECONDS`; a success clears it. Without this a server that always fails (500s, an
  exhausted account) costs every rollout its full retries. Per model, because a proxy (LiteLLM) or
  a multi-model server can fail one model (a judge's) while it serves another (the policy's).
- OpenAI's 429 `insufficient_quota` is a billing limit, not a rate limit: it fails at once (and
  later requests for the model with it), whatever the status says.
- `post_json(..., optional=True)` is for a request whose failure the caller reads as an answer (a
  capability probe after the server has answered a plain request): it is tried once, and any error
  status but 429, a dropped connection, a timeout or a malformed body raises at once.
- `AdaptiveLimiter` is one limit per backend (base URL), shared by every rollout, judge and simulated
  environment that talks to that server: it halves on a 429 (once per congestion episode) and grows by
  one slot per `limit` successes, up to `max_concurrency`.
- Keys travel only in request headers. Every message that leaves this module goes through `redact`,
  and exceptions are re-raised `from None`, so neither the key nor httpx's own exception text can
  carry it into output, logs, reports or `--debug` tracebacks.

Errors: `BackendError` (exit 3) when a call finally fails; `HTTPStatusFailure`, its subclass, when the
server answered with a non-retryable status (capability probes read its `status`).
"""

from __future__ import annotations

import asyncio
import email.utils
import importlib.util
import json
import random
import re
import sys
import time
import urllib.parse
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from car.errors import COMMAND_LINE, BackendError

if importlib.util.find_spec("sniffio") is None:
    # httpcore retries `import sniffio` on every request when it is missing; each failed import
    # searches sys.path (a fifth of the client's CPU at 32 requests in flight). A None entry makes
    # that import fail at once, which is what httpcore expects.
    sys.modules.setdefault("sniffio", None)  # type: ignore[arg-type]

__all__ = [
    "AdaptiveLimiter",
    "HTTPStatusFailure",
    "HttpBackend",
    "Stats",
    "backoff_delay",
    "hide_credentials",
    "limiter_for",
    "notice",
    "redact",
    "retry_after_seconds",
]

RETRY_STATUSES = frozenset({408, 409, 429})  # and 5xx but 501 (`_retried`)
GIVE_UP_SECONDS = 30.0  # how long a server given up on is failed at once, per base URL
GIVE_UP_AFTER = 3  # requests in a row that used all their attempts before the server is given up on
_PER_SHARD = 8  # requests in flight per httpx client
MAX_WAIT = 60.0  # the longest single wait between attempts, whatever the server asks


class HTTPStatusFailure(BackendError):
    """The server answered with a status that retrying cannot fix (400, 401, 404, ...)."""

    def __init__(self, message: str, status: int, body: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


_NOTICED: set[str] = set()


def notice(message: str) -> None:
    """Say something once per process on stderr (stdout carries only the report)."""
    if message not in _NOTICED:
        _NOTICED.add(message)
        print(f"car: {message}", file=sys.stderr)


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """`text` with every secret replaced by `***` (secrets shorter than 4 characters are ignored)."""
    for s in secrets:
        if len(s) >= 4:
            text = text.replace(s, "***")
    return text


_USERINFO = re.compile(r"(://)([^/@\s?#&]*)@")


def hide_credentials(text: str) -> str:
    """`text` with the credential of every URL in it replaced by `***` (`http://user:***@host`,
    `http://***@host`): for a spec shown as it was given, whose `base_url=` may carry one."""

    def hidden(found: re.Match[str]) -> str:
        user, colon, _ = found.group(2).partition(":")
        return f"{found.group(1)}{user}:***@" if colon else f"{found.group(1)}***@"

    return _USERINFO.sub(hidden, text)


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """How long the server asked us to wait: `retry-after-ms`, else `Retry-After` (seconds or date)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if ra is None:
        return None
    try:
        return max(0.0, float(ra))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(ra).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def backoff_delay(
    attempt: int, retry_after: float | None, rng: random.Random, *, base: float = 0.5
) -> float:
    """The wait before attempt `attempt + 1`: the server's request if any, else full-jitter backoff."""
    if retry_after is not None:
        # A little jitter on top, so rollouts told the same instant do not return in lockstep.
        return min(MAX_WAIT, retry_after) + rng.uniform(0, min(1.0, base))
    return rng.uniform(0, min(MAX_WAIT, base * 2**attempt))


class AdaptiveLimiter:
    """A concurrency limit that adapts: halve on rate limiting, grow by one per `limit` successes."""

    def __init__(self, maximum: int, *, initial: int | None = None, minimum: int = 1) -> None:
        self.maximum = max(1, maximum)
        self.minimum = max(1, min(minimum, self.maximum))
        self.limit = float(min(self.maximum, initial if initial is not None else self.maximum))
        self.in_flight = 0
        self.epoch = 0  # bumped on every cut: a 429 from before the last cut does not cut again
        self.cuts = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> int:
        while self.in_flight >= int(self.limit):
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if fut in self._waiters:
                    self._waiters.remove(fut)
                self._wake()
                raise
        self.in_flight += 1
        return self.epoch

    def release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        free = int(self.limit) - self.in_flight
        while free > 0 and self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                free -= 1

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[int]:
        epoch = await self.acquire()
        try:
            yield epoch
        finally:
            self.release()

    def rate_limited(self, epoch: int) -> bool:
        """A request that started in `epoch` was told to slow down; whether that cut the limit (a
        429 from before the last cut, or with the limit at its minimum already, does not)."""
        if epoch != self.epoch or self.limit <= self.minimum:
            return False
        self.limit = max(float(self.minimum), self.limit / 2)
        self.epoch += 1
        self.cuts += 1
        return True

    def succeeded(self) -> None:
        if self.limit < self.maximum:
            self.limit = min(float(self.maximum), self.limit + 1.0 / self.limit)
            self._wake()


_LIMITERS: dict[str, AdaptiveLimiter] = {}


def limiter_for(base_url: str, maximum: int) -> AdaptiveLimiter:
    """The one limiter of the server at `base_url` (created on first use)."""
    key = base_url.rstrip("/")
    lim = _LIMITERS.get(key)
    if lim is None or lim.maximum != maximum:
        lim = _LIMITERS[key] = AdaptiveLimiter(maximum)
    return lim


@dataclass
class _Reachability:
    """What this process has seen of the server at one base URL (shared by every backend of it)."""

    answered_at: float = float("-inf")  # `_now()` of the latest HTTP response, whatever its status
    verdict: str | None = None  # "cannot reach ...": why requests fail at once (without the name)
    until: float = 0.0  # `_now()` when the verdict lapses
    # Per model (a proxy's models can fail one by one): requests in a row, no success between
    # them, that used all their attempts; and the error later requests fail with at once (without
    # the name), with the `_now()` when it lapses.
    exhausted: dict[str, int] = field(default_factory=dict)
    failing: dict[str, tuple[str, float]] = field(default_factory=dict)


_REACHABILITY: dict[str, _Reachability] = {}
_now = time.monotonic  # a seam, so tests can move the clock without sleeping


def _reachability(base_url: str) -> _Reachability:
    key = base_url.rstrip("/")
    state = _REACHABILITY.get(key)
    if state is None:
        state = _REACHABILITY[key] = _Reachability()
    return state


# A response's `usage` counters under car's names: OpenAI's chat API says prompt/completion, the
# Anthropic API input/output (and its prompt-cache counters, priced apart).
_USAGE_NAMES = {
    "prompt_tokens": "input_tokens",
    "completion_tokens": "output_tokens",
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_creation_input_tokens": "cache_creation_input_tokens",
    "cache_read_input_tokens": "cache_read_input_tokens",
}


@dataclass
class Stats:
    requests: int = 0
    retries: int = 0
    rate_limited: int = 0
    limit_cuts: int = 0  # cuts of the shared limiter that this backend's 429s made
    failures: int = 0
    failed_at_once: int = 0  # failures without a request: the server was given up on
    by_reason: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)  # summed `usage` of the answers

    def note(self, reason: str) -> None:
        self.by_reason[reason] = self.by_reason.get(reason, 0) + 1

    def count_usage(self, usage: object) -> None:
        if not isinstance(usage, Mapping):
            return
        for name, ours in _USAGE_NAMES.items():
            value = usage.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                self.tokens[ours] = self.tokens.get(ours, 0) + value


class HttpBackend:
    """JSON over HTTP POST to one server, with retries, the shared limiter and redacted errors."""

    def __init__(
        self,
        name: str,
        base_url: str,
        headers: Mapping[str, str],
        *,
        secrets: tuple[str, ...] = (),
        refused_key: str | None = None,
        timeout: float = 120.0,
        max_attempts: int = 6,
        max_concurrency: int = 32,
        backoff_base: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = name
        self.base_url = base_url.rstrip("/")
        self._headers = dict(headers)
        self._secrets = tuple(s for s in (*secrets, _url_secret(self.base_url)) if s)
        self._refused_key = refused_key  # what a 401 or 403 adds: where the key came from, or none
        self.timeout = timeout
        self.max_attempts = max(1, max_attempts)
        self.backoff_base = backoff_base
        self.limiter = limiter_for(self.base_url, max_concurrency)
        self.stats = Stats()
        self._transport = transport
        self._clients: list[httpx.AsyncClient] = []
        self._turn = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed_in: asyncio.AbstractEventLoop | None = None
        self._rng = random.Random()  # jitter only: it never touches results
        self._answered = False  # any HTTP response to this backend so far, whatever its status
        self._reach = _reachability(self.base_url)

    def __repr__(self) -> str:  # never show headers
        return f"HttpBackend({self.name!r}, {self.base_url!r})"

    def _redact(self, text: str) -> str:
        return redact(text, self._secrets)

    def _get_client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._closed_in is loop:
            # Closed by its owner in this loop: a straggling task must not open a new connection
            # that nobody would close.
            raise BackendError(f"{self.name}: the backend was closed")
        if not self._clients or self._loop is not loop:
            # Clients belong to one event loop (`car.blame` runs one loop per call). Several small
            # pools instead of one large one: a single httpx pool serialises under many concurrent
            # requests (bench/throughput.py measured 168 against 455 calls/s at 32 in flight).
            shards = max(1, -(-self.limiter.maximum // _PER_SHARD))
            per = -(-(self.limiter.maximum + 8) // shards)
            self._clients = [
                httpx.AsyncClient(
                    timeout=self.timeout,
                    headers=self._headers,
                    transport=self._transport,
                    limits=httpx.Limits(max_connections=per, max_keepalive_connections=per),
                    # Plain-HTTP servers (local vLLM, llama.cpp, Ollama) need no CA bundle.
                    verify=self.base_url.startswith("https://"),
                )
                for _ in range(shards)
            ]
            self._loop = loop
        self._turn = (self._turn + 1) % len(self._clients)
        return self._clients[self._turn]

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        self._closed_in = loop
        clients, self._clients = self._clients, []
        if self._loop is loop:
            for client in clients:
                await client.aclose()

    async def post_json(
        self, path: str, body: Mapping[str, Any], *, optional: bool = False
    ) -> dict[str, Any]:
        """POST `body` to `path`; the parsed JSON object, or `BackendError` once retries run out.
        `optional`: only a 429 is retried; any other failure raises at once (see the module
        docstring), as `HTTPStatusFailure` when the server answered with an error status."""
        url = f"{self.base_url}/{path.lstrip('/')}"
        payload = json.dumps(body).encode()
        model = str(body.get("model", ""))
        headers = {"content-type": "application/json"}
        last = "no attempt made"
        slow = False  # the last attempt was sent but not answered in time (the server is there)
        closed = False  # the last attempt's connection was taken, then closed without an answer
        started = _now()
        for attempt in range(self.max_attempts):
            verdict = self._given_up(model)
            if verdict is not None:
                self.stats.failures += 1
                self.stats.failed_at_once += 1
                raise BackendError(verdict) from None
            retry_after: float | None = None
            rate_limited = False
            async with self.limiter.slot() as epoch:
                self.stats.requests += 1
                try:
                    resp = await self._get_client().post(url, content=payload, headers=headers)
                    text = resp.text
                except httpx.TimeoutException as exc:
                    last = f"timed out after {self.timeout:g}s ({type(exc).__name__})"
                    slow, closed = isinstance(exc, httpx.ReadTimeout), False
                    self.stats.note("timeout")
                except httpx.TransportError as exc:
                    last = f"connection failed ({type(exc).__name__}: {exc})"
                    # Refused (nothing listens) or taken, then closed (something does, but does
                    # not answer HTTP there: another protocol, http:// to an https:// port).
                    slow, closed = False, not isinstance(exc, httpx.ConnectError)
                    self.stats.note("connection")
                else:
                    self._answered = True
                    self._reach.answered_at = _now()
                    self._reach.verdict = None  # it answers: nobody gives up on it any more
                    status = resp.status_code
                    if 200 <= status < 300:
                        try:
                            data = json.loads(text)
                        except ValueError:
                            if _html_title(text) is not None:  # a web page: retrying cannot help
                                self.stats.failures += not optional
                                message = f"{url}: HTTP {status} with {_error_text(text)}{_NOT_API}"
                                message = self._redact(f"{self.name}: {message}")
                                raise HTTPStatusFailure(message, status, self._redact(text)) from None
                            last = f"HTTP {status} with a body that is not JSON: {text[:80]!r}"
                            self.stats.note("malformed")
                        else:
                            if isinstance(data, dict):
                                self._reach.exhausted.pop(model, None)  # it works: nobody
                                self._reach.failing.pop(model, None)  # gives up on it
                                self.limiter.succeeded()
                                self.stats.count_usage(data.get("usage"))
                                return data
                            last = f"HTTP {status} with JSON that is not an object: {text[:80]!r}"
                            self.stats.note("malformed")
                    elif status == 429 and _out_of_quota(text):
                        self.stats.failures += 1
                        self.stats.note("429 insufficient_quota")
                        failing = (
                            f"{url}: HTTP 429 insufficient_quota: the account is out of quota or "
                            "credit, a billing limit and not a rate limit (retrying cannot help; "
                            "check the plan and billing details)"
                        )
                        self._give_up(model, failing)
                        message = self._redact(f"{self.name}: {failing}")
                        raise HTTPStatusFailure(message, status, self._redact(text)) from None
                    elif status == 429 or (not optional and _retried(status)):
                        retry_after = retry_after_seconds(resp.headers)
                        last = f"HTTP {status}: {_error_text(text)}"
                        if retry_after is not None and retry_after > MAX_WAIT:
                            last += (
                                f" (it asked for a wait of {retry_after:.0f}s; car waits at most "
                                f"{MAX_WAIT:g}s between attempts)"
                            )
                        self.stats.note(str(status))
                        if status == 429:
                            rate_limited = True
                            self.stats.rate_limited += 1
                            self.stats.limit_cuts += self.limiter.rate_limited(epoch)
                    else:
                        self.stats.failures += not optional  # a probe's "no" is an answer
                        advice = _NOT_API if _html_title(text) is not None else ""
                        if status in (401, 403) and self._refused_key and not advice:
                            advice = f"; {self._refused_key}"
                        if status == 404 and not advice:
                            advice = _no_route(self.base_url, path, text)
                        message = f"{url}: HTTP {status}: {_error_text(text)}{advice}"
                        message = self._redact(f"{self.name}: {message}")
                        raise HTTPStatusFailure(message, status, self._redact(text)) from None
            if optional and not rate_limited:
                raise BackendError(self._redact(f"{self.name}: {url}: {last}")) from None
            if attempt + 1 < self.max_attempts:
                self.stats.retries += 1
                await asyncio.sleep(
                    backoff_delay(attempt, retry_after, self._rng, base=self.backoff_base)
                )
        self.stats.failures += 1
        # Given up on only if the server answered nobody while this request tried: a response to
        # another request meanwhile means it is up, and this one was unlucky.
        tries = f"{self.max_attempts} attempt" + ("s" if self.max_attempts > 1 else "")
        if not self._answered and self._reach.answered_at < started:
            longer = (
                "--timeout SECONDS, or the `timeout` setting"
                if COMMAND_LINE.get()
                else "car.backends.options.configure(timeout=SECONDS), or the `timeout` setting"
            )
            if slow:
                advice = (
                    "it took the request but did not answer in time: is it busy, or does it need "
                    f"a longer timeout ({longer})?"
                )
            elif closed:
                advice = (
                    "something there takes connections but closes them without an answer: is "
                    "the base URL right (its port, http:// or https://)?"
                )
            else:
                advice = "is the server running, and is the base URL right?"
            self._reach.verdict = self._redact(
                f"cannot reach {self.base_url}: no answer in {tries} (last: {last}); {advice}"
            )
            self._reach.until = _now() + GIVE_UP_SECONDS
            raise BackendError(self._redact(f"{self.name}: {self._reach.verdict}")) from None
        given_up = f"{url}: gave up after {tries}; last: {last}"
        if self.max_attempts > 1:  # with one attempt there are no retries to save
            exhausted = self._reach.exhausted[model] = self._reach.exhausted.get(model, 0) + 1
            if exhausted >= GIVE_UP_AFTER:
                self._give_up(model, given_up)
        raise BackendError(self._redact(f"{self.name}: {given_up}")) from None

    def _give_up(self, model: str, failing: str) -> None:
        """Fail every request for `model` to this server at once with `failing` for a while
        (module docstring)."""
        self._reach.failing[model] = (self._redact(failing), _now() + GIVE_UP_SECONDS)

    def _given_up(self, model: str) -> str | None:
        """The error a request for `model` fails with at once while the server is given up on
        (for that model, or for all: it never answered), else None. A backend that has had an
        answer keeps its retries when the server never answered others, but not when it answers
        that model with failures only (`failing`)."""
        reach = self._reach
        if model in reach.failing:
            failing, until = reach.failing[model]
            if _now() < until:
                return self._redact(f"{self.name}: {failing}")
            del reach.failing[model]  # long enough: try again (one more exhausted request gives up)
        if self._answered or reach.verdict is None:
            return None
        if _now() >= reach.until:
            reach.verdict = None  # long enough: try the server again
            return None
        return self._redact(f"{self.name}: {reach.verdict}")

    def summary(self) -> str | None:
        """One line for the report when anything went wrong on the wire, else None."""
        s = self.stats
        if not s.retries and not s.failures:
            return None
        reasons = ", ".join(f"{k} x{v}" for k, v in sorted(s.by_reason.items()))
        return (
            f"{self.name} at {self._redact(self.base_url)}: {s.requests} request"
            + ("" if s.requests == 1 else "s")
            + f", {s.retries} retried"
            + (f" ({reasons})" if reasons else "")
            + f", {s.failures} failed"
            + (f" ({s.failed_at_once} at once: the server was given up on)" if s.failed_at_once else "")
            + _limit_line(s.limit_cuts, s.rate_limited, self.limiter)
        )


def _limit_line(cuts: int, rate_limited: int, limiter: AdaptiveLimiter) -> str:
    """What this backend's 429s did to the server's concurrency limit (shared by every backend of
    the server: its other cuts belong to other traces' reports)."""
    now = int(limiter.limit)
    if cuts:
        return (
            f"; concurrency limit cut {'once' if cuts == 1 else f'{cuts} times'} by its 429s, now {now}"
        )
    if rate_limited:
        return f"; concurrency limit {now} (not cut by its 429s: already cut, or at its minimum)"
    return ""


def _out_of_quota(body: str) -> bool:
    """Whether an error body is OpenAI's `insufficient_quota` (its `error.code` or `error.type`)."""
    try:
        data = json.loads(body)
    except ValueError:
        return False
    err = data.get("error") if isinstance(data, dict) else None
    return isinstance(err, dict) and "insufficient_quota" in (err.get("code"), err.get("type"))


def _url_secret(url: str) -> str | None:
    """The credential a URL carries (`http://user:PASSWORD@host`, or a lone `http://TOKEN@host`),
    which httpx sends as basic auth: it is kept out of messages as the key is."""
    parts = urllib.parse.urlsplit(url)
    return parts.password or parts.username


def _retried(status: int) -> bool:
    """Whether an error status is worth another attempt: 501 Not Implemented never changes (a web
    server that takes no POST, such as `python -m http.server` on port 8000, vLLM's default)."""
    return status in RETRY_STATUSES or (status >= 500 and status != 501)


# Said of an HTML page that answers a request the API would answer with JSON (a 5xx page from a
# proxy in front of the server is retried and says nothing of the URL).
_NOT_API = ", not the model API's JSON: is the base URL right?"


def _no_route(base_url: str, path: str, body: str) -> str:
    """What a 404 for `path` adds when the server knows no such endpoint (not a model it does not
    know): a base URL (no trailing slash) without the `/v1` an OpenAI-compatible server serves
    under, or with one too many."""
    if "model" in _error_text(body).lower():
        return ""
    v1 = base_url.endswith("/v1")
    if path.startswith("v1/") and v1:
        return f": is the base URL right? The API's path adds /v1 to it: try {base_url[:-3]}"
    if not path.startswith("v1/") and not v1:
        return (
            f": is the base URL right? An OpenAI-compatible API is served under /v1: try {base_url}/v1"
        )
    return ": is the base URL right?"


def _html_title(body: str) -> str | None:
    """The title of an HTML page ("" when it has none), or None: the body is not HTML."""
    head = body.lstrip()[:512].lower()
    if not head.startswith(("<!doctype html", "<html")):
        return None
    found = re.search(r"<title[^>]*>(.*?)</title>", body[:4096], re.IGNORECASE | re.DOTALL)
    return " ".join(found.group(1).split())[:80] if found else ""


def _error_text(body: str) -> str:
    """The server's own error message if it sent one, an HTML page by its title, else the start
    of the body, on one line."""
    title = _html_title(body)
    if title is not None:
        return f"an HTML page ({title!r})" if title else "an HTML page"
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return " ".join(err["message"].split())[:300]
        if isinstance(err, str):
            return " ".join(err.split())[:300]
    return " ".join(body.split())[:200] or "(empty body)"
