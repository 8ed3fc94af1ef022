"""Model backends against faults a review found: llama.cpp's answer to `n > 1`, and servers that
always fail or whose account is out of quota."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

import car
from car.backends import http as http_backend
from car.backends import openai as openai_backend
from car.backends.anthropic import AnthropicPolicy
from car.backends.common import ServerPolicy
from car.backends.http import HttpBackend
from car.backends.openai import OpenAIPolicy, capabilities
from car.backends.openai import openai_backend as make_http
from car.backends.options import BackendOptions, configure
from car.errors import BackendError
from car.rng import EventKey
from car.sim import scenario_for
from car.testing import Faults, LoopbackServer, ScenarioModel
from car.trace import Action, Trace
from tests.conftest import ROOT
from tests.test_backends_policies import _decision

TRACE = str(ROOT / "traces" / "support-refund.json")
POLICY = "openai:support-refund"
REFUSAL = "I'm sorry, but I can't help with that."  # what the loopback server's "refusal" says


@pytest.fixture(autouse=True)
def _fresh_caches() -> Iterator[None]:
    # Capabilities, limits and verdicts are kept per base URL for the process; ports get reused.
    openai_backend._CAPS.clear()
    http_backend._LIMITERS.clear()
    http_backend._REACHABILITY.clear()
    yield
    openai_backend._CAPS.clear()
    http_backend._REACHABILITY.clear()


def _server(**kw: Any) -> LoopbackServer:
    return LoopbackServer({"support-refund": ScenarioModel(scenario_for("support-refund"))}, **kw)


def _options(url: str, **kw: Any) -> BackendOptions:
    return BackendOptions(base_url=url, backoff_base=0.0, **kw)


def _policy(kind: str, server: LoopbackServer, trace: Trace, **kw: Any) -> ServerPolicy:
    """The `kind:support-refund` policy served by `server`."""
    if kind == "openai":
        return OpenAIPolicy("support-refund", trace, options=_options(server.url, **kw))
    return AnthropicPolicy("support-refund", trace, options=_options(server.anthropic_url, **kw))


def _draw(policy: ServerPolicy, trace: Trace, samples: int = 1) -> list[Action | BaseException]:
    """`samples` draws of step 1, each its action or the exception it raised."""

    async def main() -> list[Action | BaseException]:
        assert isinstance(policy, OpenAIPolicy | AnthropicPolicy)
        try:
            d = _decision(trace, 1)
            keys = (EventKey(0, r, 1, "policy") for r in range(samples))
            return await asyncio.gather(*(policy.act(d, k) for k in keys), return_exceptions=True)
        finally:
            await policy.aclose()

    return asyncio.run(main())


def _decisions(server: LoopbackServer) -> int:
    """Requests that were decisions, not capability probes (those ask for "random word"s)."""
    return sum(1 for _, b in server.requests if "random word" not in json.dumps(b))


# -- 2. llama.cpp answers n > 1 with HTTP 500 -----------------------------------------------------------
def test_a_500_to_the_n_probe_means_no_n_asked_once_and_cached() -> None:
    async def main(server: LoopbackServer) -> list[openai_backend.Capabilities]:
        http = make_http(_options(server.url))
        try:
            return [await capabilities(http, "any"), await capabilities(http, "any")]
        finally:
            await http.aclose()

    with LoopbackServer(n="reject-500") as server:
        first, again = asyncio.run(main(server))
        n_requests = sum(1 for _, b in server.requests if b.get("n"))
        total = len(server.requests)
    assert not first.n and first.seed and first.seed_repeatable
    assert again == first and openai_backend._CAPS  # cached: the second call asked nothing
    assert n_requests == 1  # not retried
    assert total == 6


def test_blame_goes_on_against_a_server_that_rejects_n_with_500() -> None:
    # Without seeds, n would merge samples: the probe's answer decides how samples are drawn.
    with _server(n="reject-500", seed="reject") as server, configure(base_url=server.url):
        report = car.blame(TRACE, policy=POLICY, samples=4, match_samples=2, method="contrastive")
        n_requests = sum(1 for _, b in server.requests if b.get("n"))
    assert report.status == "ok" and report.budget.errored == 0
    assert n_requests == 1
    assert any("not n, seed" in n and "independent, uncoupled" in n for n in report.notes)


# -- 3. quota and a server that always fails ----------------------------------------------------------
def _post(http: HttpBackend, times: int) -> list[str]:
    async def main() -> list[str]:
        out = []
        try:
            for _ in range(times):
                try:
                    await http.post_json("chat/completions", {"model": "any", "messages": []})
                    out.append("ok")
                except BackendError as exc:
                    out.append(str(exc))
        finally:
            await http.aclose()
        return out

    return asyncio.run(main())


def test_insufficient_quota_is_not_retried_and_says_billing() -> None:
    with LoopbackServer(faults=Faults(rates={"quota": 1.0})) as server:
        http = make_http(_options(server.url, max_attempts=6))
        first, second = _post(http, 2)
        sent = len(server.requests)
    assert sent == 1  # no retry, and the next request failed at once
    assert "\n" not in first and "insufficient_quota" in first and "billing" in first
    assert "not a rate limit" in first and first.startswith("openai: ")
    assert second == first


def test_requests_stop_retrying_after_three_in_a_row_used_all_their_attempts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(http_backend, "_now", lambda: clock[0])
    # Nine 500s: three requests of three attempts each; then the server answers again.
    with LoopbackServer(faults=Faults(script=["500"] * 9)) as server:
        http = make_http(_options(server.url, max_attempts=3))
        errors = _post(http, 5)
        assert len(server.requests) == 9  # requests 4 and 5 failed at once
        assert all("gave up after 3 attempts; last: HTTP 500" in e for e in errors[:3])
        assert errors[3] == errors[4] == errors[2]  # the same error
        assert "at once" in (http.summary() or "")
        clock[0] += http_backend.GIVE_UP_SECONDS  # a while later the server is tried again
        http = make_http(_options(server.url, max_attempts=3))
        assert _post(http, 1) == ["ok"]
        assert len(server.requests) == 10


def test_one_attempt_per_request_gives_nothing_up() -> None:
    # With max_attempts 1 there are no retries to save: failures in a row do not stop requests.
    with LoopbackServer(faults=Faults(script=["500"] * 4)) as server:
        http = make_http(_options(server.url, max_attempts=1))
        results = _post(http, 5)
        assert len(server.requests) == 5
    assert results[-1] == "ok"


def test_a_blame_against_a_server_that_always_fails_ends_quickly() -> None:
    faults = Faults(script=["ok"] * 6, rates={"500": 1.0})  # the probe gets through
    with (
        _server(faults=faults) as server,
        configure(base_url=server.url, max_attempts=6, backoff_base=0.001),
    ):
        report = car.blame(
            TRACE, policy=POLICY, samples=8, match_samples=2, concurrency=2, method="contrastive"
        )
        sent = len(server.requests)
    assert report.status == "backend-errors"
    rollouts = report.budget.rollouts
    assert report.budget.errored == rollouts - 1  # all but the copied record
    # Every rollout retrying in full would send 6 per rollout; three exhaust theirs (plus the
    # ones in flight meanwhile), the rest fail at once.
    assert sent < 6 + 6 * 6
    assert rollouts * 6 > 3 * sent
