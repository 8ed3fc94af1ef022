"""The shared HTTP layer: Retry-After parsing, backoff, the adaptive limiter, redaction."""

from __future__ import annotations

import asyncio
import email.utils
import random

import pytest

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
    assert lim.limit == 1


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
