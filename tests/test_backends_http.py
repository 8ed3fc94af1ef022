"""The shared HTTP layer: Retry-After parsing, backoff, the adaptive limiter, redaction."""

from __future__ import annotations

import asyncio
import email.utils
import random

import pytest

from car.backends import http
from car.backends.http import (
    AdaptiveLimiter,
    HttpBackend,
    backoff_delay,
    redact,
    retry_after_seconds,
)
from car.errors import BackendError
from car.testing import Faults, LoopbackServer


def test_retry_after_prefers_milliseconds() -> None:
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == pytest.approx(0.25)
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"retry-after": "soon"}) is None


def test_retry_after_http_date() -> None:
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 7, usegmt=True)
    assert retry_after_seconds({"retry-after": date}, now=now) == pytest.approx(7, abs=1)


def test_backoff_honours_server_and_grows_otherwise() -> None:
    rng = random.Random(0)
    for _ in range(200):
        d = backoff_delay(0, 2.0, rng, base=0.5)
        assert 2.0 <= d <= 2.5
    # Full jitter: attempt i waits in [0, base * 2**i], capped.
    waits = [backoff_delay(3, None, rng, base=0.5) for _ in range(500)]
    assert max(waits) <= 4.0 and min(waits) >= 0
    assert max(waits) > 3.0  # it really uses the grown window
    assert backoff_delay(30, 1e6, rng) <= 61


def test_limiter_halves_once_per_episode_and_grows_slowly() -> None:
    lim = AdaptiveLimiter(16)
    epoch = lim.epoch
    lim.rate_limited(epoch)
    lim.rate_limited(epoch)  # a second 429 from the same episode does not cut again
    assert lim.limit == 8 and lim.cuts == 1
    lim.rate_limited(lim.epoch)
    assert lim.limit == 4
    for _ in range(4):
        lim.succeeded()
    assert 4.9 < lim.limit < 5.1  # one slot per `limit` successes
    for _ in range(10_000):
        lim.succeeded()
    assert lim.limit == 16
    for _ in range(20):
        lim.rate_limited(lim.epoch)
    assert lim.limit == 1 and lim.cuts == 6  # 16 to 8 to 4, then 16 to 1 in four: not twenty
    assert not lim.rate_limited(lim.epoch)  # at its minimum: nothing to cut


def test_limiter_bounds_requests_in_flight() -> None:
    lim = AdaptiveLimiter(3)
    peak = 0

    async def job() -> None:
        nonlocal peak
        async with lim.slot():
            peak = max(peak, lim.in_flight)
            await asyncio.sleep(0.001)

    async def main() -> None:
        await asyncio.gather(*(job() for _ in range(40)))

    asyncio.run(main())
    assert peak == 3 and lim.in_flight == 0


def test_redact_replaces_every_occurrence() -> None:
    assert redact("key sk-abc123 and sk-abc123", ("sk-abc123",)) == "key *** and ***"
    assert redact("abc", ("ab",)) == "abc"  # too short to be a key: left alone


def _post(server: LoopbackServer, **kw: object) -> dict[str, object]:
    async def main() -> dict[str, object]:
        http = HttpBackend(
            "test", server.url, {}, timeout=kw.pop("timeout", 2.0), backoff_base=0.01, **kw
        )  # type: ignore[arg-type]
        try:
            return await http.post_json(
                "chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            )
        finally:
            await http.aclose()

    return asyncio.run(main())


@pytest.mark.parametrize("fault", ["429", "500", "503", "drop", "malformed", "slow"])
def test_each_transient_fault_is_retried(fault: str) -> None:
    faults = Faults(script=[fault, fault], retry_after="0", retry_after_ms="5", slow_seconds=1.0)
    with LoopbackServer(faults=faults) as server:
        data = _post(server, timeout=0.4, max_attempts=4)
        assert data["choices"]
        assert server.count("chat/completions") == 3


def test_gives_up_after_bounded_attempts() -> None:
    with LoopbackServer(faults=Faults(rates={"500": 1.0})) as server:
        with pytest.raises(BackendError, match="gave up after 3 attempts; last: HTTP 500"):
            _post(server, max_attempts=3)
        assert server.count() == 3


def test_a_longer_wait_than_car_gives_is_named_in_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "MAX_WAIT", 0.01)
    with LoopbackServer(faults=Faults(rates={"429": 1.0}, retry_after="600")) as server:
        with pytest.raises(BackendError) as err:
            _post(server, max_attempts=2)
        assert server.count() == 2
    assert str(err.value).endswith(
        "gave up after 2 attempts; last: HTTP 429: rate limited, slow down (it asked for a wait of "
        "600s; car waits at most 0.01s between attempts)"
    )


def test_client_errors_fail_at_once() -> None:
    with LoopbackServer(api_key="right-key") as server:
        with pytest.raises(BackendError, match="HTTP 401"):
            _post(server, max_attempts=5)
        assert server.count() == 1


def test_usage_counters_under_one_set_of_names() -> None:
    from car.backends.http import Stats

    stats = Stats()
    stats.count_usage({"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15})
    stats.count_usage({"input_tokens": 5, "output_tokens": 2, "cache_read_input_tokens": 40})
    stats.count_usage({"input_tokens": -1, "output_tokens": True, "prompt_tokens": "7"})
    stats.count_usage(None)
    assert stats.tokens == {"input_tokens": 17, "output_tokens": 5, "cache_read_input_tokens": 40}


def _dead_url() -> str:
    with LoopbackServer() as server:
        return server.url  # nothing listens there once the server has stopped


def test_a_server_that_never_answered_fails_fast_after_one_request() -> None:
    async def main() -> tuple[str, str, int]:
        http = HttpBackend("test", _dead_url(), {}, max_attempts=3, backoff_base=0.001)
        body = {"model": "m", "messages": []}
        with pytest.raises(BackendError) as first:
            await http.post_json("chat/completions", body)
        sent = http.stats.requests
        with pytest.raises(BackendError) as second:
            await http.post_json("chat/completions", body)
        assert http.stats.requests == sent  # nothing more was sent
        await http.aclose()
        return str(first.value), str(second.value), sent

    first, second, sent = asyncio.run(main())
    assert sent == 3 and "cannot reach" in first and "no answer in 3 attempts" in first
    assert second == first


def test_a_server_that_answered_keeps_its_retries() -> None:
    async def main() -> None:
        body = {"model": "m", "messages": []}
        with LoopbackServer() as server:
            http = HttpBackend("test", server.url, {}, max_attempts=3, backoff_base=0.001)
            await http.post_json("chat/completions", body)
        for _ in range(2):  # the server went away mid-run: each request still retries
            sent = http.stats.requests
            with pytest.raises(BackendError, match="gave up after 3 attempts"):
                await http.post_json("chat/completions", body)
            assert http.stats.requests == sent + 3
        await http.aclose()

    asyncio.run(main())


# -- a server that never answered: one verdict per base URL, for every backend of the process ------
from collections.abc import Awaitable, Callable, Iterator  # noqa: E402 - appended section

import httpx  # noqa: E402

from car.backends import http as http_backend  # noqa: E402

URL = "http://127.0.0.1:9/v1"  # never contacted: every request goes to a MockTransport
BODY = {"model": "m", "messages": []}


@pytest.fixture(autouse=True)
def _no_verdicts() -> Iterator[None]:
    # Verdicts live for the process (per base URL); a test must neither see nor leave one.
    http_backend._REACHABILITY.clear()
    yield
    http_backend._REACHABILITY.clear()


class _Server:
    """A MockTransport whose server is up (answers 200) or down (refuses connections)."""

    def __init__(self, up: bool) -> None:
        self.up = up
        self.sent = 0
        self.on_request: Callable[[], Awaitable[None]] | None = None

    async def handler(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        if self.on_request is not None:
            await self.on_request()
        if not self.up:
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(200, json={"choices": []})

    def backend(self, name: str = "test") -> HttpBackend:
        return HttpBackend(
            name, URL, {}, max_attempts=3, backoff_base=0.0, transport=httpx.MockTransport(self.handler)
        )


async def _fails(http: HttpBackend) -> str:
    with pytest.raises(BackendError) as info:
        await http.post_json("chat/completions", BODY)
    return str(info.value)


def test_a_dead_server_is_found_once_per_process_not_once_per_backend() -> None:
    # `car blame DIR` builds a backend per trace: each used to spend all its retries (7 traces, ~51 s).
    async def main() -> None:
        dead = _Server(up=False)
        first = await _fails(dead.backend("openai"))
        assert dead.sent == 3 and "openai: cannot reach http://127.0.0.1:9/v1" in first
        for name in ("openai", "openai-judge"):  # later traces, and other components, of the run
            again = await _fails(dead.backend(name))
            assert again == first.replace("openai:", f"{name}:", 1)  # each says who asked
        assert dead.sent == 3  # nothing more was sent

    asyncio.run(main())


def test_the_verdict_lapses_so_a_long_lived_process_tries_again(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(http_backend, "_now", lambda: clock[0])

    async def main() -> None:
        server = _Server(up=False)
        await _fails(server.backend())
        clock[0] += http_backend.GIVE_UP_SECONDS - 1
        await _fails(server.backend())
        assert server.sent == 3  # still given up on
        clock[0] += 1
        server.up = True
        assert await server.backend().post_json("chat/completions", BODY) == {"choices": []}
        assert server.sent == 4  # tried again, and it answered

    asyncio.run(main())


def test_any_answer_from_the_server_clears_the_verdict() -> None:
    async def main() -> None:
        server = _Server(up=True)
        old = server.backend()
        await old.post_json("chat/completions", BODY)  # a backend that has had an answer ...
        server.up = False
        assert "cannot reach" in await _fails(server.backend())  # ... a new one gives up on it
        sent = server.sent
        assert "gave up after 3 attempts" in await _fails(old)  # the old one keeps its retries
        assert server.sent == sent + 3
        server.up = True
        await old.post_json("chat/completions", BODY)  # the server answers again: verdict gone
        assert await server.backend().post_json("chat/completions", BODY) == {"choices": []}

    asyncio.run(main())


def test_no_verdict_while_the_server_answers_other_requests() -> None:
    async def main() -> None:
        up = _Server(up=True)
        down = _Server(up=False)  # the same base URL: this backend's requests are the unlucky ones
        answered = up.backend()

        async def meanwhile() -> None:
            await answered.post_json("chat/completions", BODY)

        down.on_request = meanwhile
        message = await _fails(down.backend())
        assert "gave up after 3 attempts" in message and "cannot reach" not in message
        down.on_request = None
        await _fails(down.backend())
        assert down.sent == 6  # not given up on: the next backend tried in full

    asyncio.run(main())


def test_a_report_counts_only_the_limit_cuts_its_own_429s_made() -> None:
    """Every report of a batch said "concurrency limit cut N times" with N the server's cuts in all
    (other traces' too), and cuts at the minimum, which changed nothing, counted."""
    url = "http://127.0.0.1:9/limits"

    def backend(script: list[int], concurrency: int) -> HttpBackend:
        async def handler(request: httpx.Request) -> httpx.Response:
            return httpx.Response(script.pop(0) if script else 200, json={"choices": []})

        return HttpBackend(
            "test",
            url,
            {},
            max_attempts=5,
            backoff_base=0.0,
            max_concurrency=concurrency,
            transport=httpx.MockTransport(handler),
        )

    async def main() -> None:
        first = backend([429, 429, 429], 32)
        await first.post_json("chat/completions", BODY)
        assert first.summary() == (
            "test at http://127.0.0.1:9/limits: 4 requests, 3 retried (429 x3), 0 failed; "
            "concurrency limit cut 3 times by its 429s, now 4"
        )
        second = backend([500], 32)  # the next trace's backend: same server, same limiter
        await second.post_json("chat/completions", BODY)
        assert (
            second.summary()
            == "test at http://127.0.0.1:9/limits: 2 requests, 1 retried (500 x1), 0 failed"
        )
        floor = backend([429], 1)  # one request at a time: a 429 has nothing to cut
        await floor.post_json("chat/completions", BODY)
        assert floor.summary() is not None and floor.summary().endswith(
            "; concurrency limit 1 (not cut by its 429s: already cut, or at its minimum)"
        )

    http_backend._LIMITERS.pop(url, None)
    try:
        asyncio.run(main())
    finally:
        http_backend._LIMITERS.pop(url, None)


def _page(title: str) -> str:
    return f"<!DOCTYPE html>\n<html><head><title>{title}</title></head><body>{'x' * 300}</body></html>"


def _answered_with_a_page(status: int, title: str, **kw: int) -> tuple[int, str]:
    """Requests sent and the error raised when every answer is an HTML page titled `title`."""
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(status, text=_page(title), headers={"content-type": "text/html"})

    async def main() -> None:
        http = HttpBackend(
            "openai",
            "http://127.0.0.1:9/v1",
            {},
            backoff_base=0.0,
            transport=httpx.MockTransport(handler),
            **kw,
        )
        try:
            await http.post_json("chat/completions", {"model": "m"})
        finally:
            await http.aclose()

    with pytest.raises(BackendError) as caught:
        asyncio.run(main())
    return len(sent), str(caught.value)


@pytest.mark.parametrize("status", [200, 404, 405, 501])
def test_a_web_page_answering_fails_at_once_and_asks_for_the_base_url(status: int) -> None:
    """A web server at the base URL (`python -m http.server` answers POST with 501, a web app with
    its page): a 200 page was retried as a malformed body, a 501 as a server error, six attempts
    each, then the error quoted the page's markup and said nothing of the URL."""
    sent, error = _answered_with_a_page(status, "My App")
    assert sent == 1
    assert error == (
        f"openai: http://127.0.0.1:9/v1/chat/completions: HTTP {status}"
        + (" with" if status == 200 else ":")
        + " an HTML page ('My App'), not the model API's JSON: is the base URL right?"
    )


def test_a_proxys_error_page_is_retried_and_named_by_its_title() -> None:
    sent, error = _answered_with_a_page(502, "502 Bad Gateway", max_attempts=3)
    assert sent == 3
    assert error.endswith("last: HTTP 502: an HTML page ('502 Bad Gateway')")


def test_a_password_in_the_base_url_is_kept_out_of_messages() -> None:
    """`--base-url http://user:PASSWORD@host/v1` (basic auth to a proxy): errors, the report's
    network note and the JSON printed the password."""
    password = "pw-7f3a9c1e-SECRET"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, json={"error": {"message": "upstream failed"}})

    async def main(url: str) -> tuple[str, str | None]:
        http = HttpBackend(
            "openai", url, {}, max_attempts=2, backoff_base=0.0, transport=httpx.MockTransport(handler)
        )
        try:
            await http.post_json("chat/completions", {"model": "m"})
        except BackendError as exc:
            return str(exc), http.summary()
        finally:
            await http.aclose()
        raise AssertionError("no error")

    for url in (f"http://user:{password}@127.0.0.1:9/v1", f"http://{password}@127.0.0.1:9/v1"):
        error, summary = asyncio.run(main(url))
        assert "HTTP 500: upstream failed" in error and summary is not None
        assert password not in error + summary and "***@127.0.0.1:9/v1" in error + summary


def test_a_server_that_takes_requests_but_answers_too_late_is_not_said_to_be_down() -> None:
    """Nothing but read timeouts (a local model slower than `timeout`): the line asked "is the server
    running, and is the base URL right?", of a server that took every request."""
    faults = Faults(rates={"slow": 1.0}, slow_seconds=1.0)
    with LoopbackServer(faults=faults) as server, pytest.raises(BackendError) as caught:
        _post(server, timeout=0.2, max_attempts=2)
    message = str(caught.value)
    assert "no answer in 2 attempts (last: timed out after 0.2s (ReadTimeout))" in message
    assert "is the server running" not in message
    assert message.endswith(
        "did not answer in time: is it busy, or does it need a longer timeout "
        "(car.backends.options.configure(timeout=SECONDS), or the `timeout` setting)?"
    )


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: Faults(rates={"4299": 0.1}),
            "Faults: unknown fault '4299' in rates; faults: ok, 429, 500, 503, slow, drop, "
            "malformed, echo, quota, refusal, content_filter, length, bad_shape",
        ),
        (lambda: Faults(script=["500", "slwo"]), "Faults: unknown fault 'slwo' in script; faults: ok"),
        (lambda: Faults(rates={"429": 1.5}), "Faults: the rate of '429' must be in [0, 1], got 1.5"),
        (lambda: Faults(rates={"429": "0.1"}), "Faults: the rate of '429' must be in [0, 1], got 0.1"),
        (
            lambda: LoopbackServer(n="rejct"),  # type: ignore[arg-type]
            "LoopbackServer: n must be ok, reject, reject-500 or ignore, got 'rejct'",
        ),
        (
            lambda: LoopbackServer(seed="honor"),  # type: ignore[arg-type]
            "LoopbackServer: seed must be honour, ignore or reject, got 'honor'",
        ),
    ],
)
def test_a_misspelt_fault_or_switch_is_refused(make: Callable[[], object], message: str) -> None:
    """`Faults(rates={"4299": 0.1})` and `LoopbackServer(n="rejct")` were taken: the server then
    answered every request as if there were no fault and no switch, so a test of retries passed
    without a single retry."""
    with pytest.raises(ValueError) as info:
        make()
    assert str(info.value).startswith(message)
