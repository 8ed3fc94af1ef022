"""Model backends against faults a review found: refusals and content filtering, llama.cpp's answer to
`n > 1`, servers that always fail or whose account is out of quota, answers of the wrong shape,
servers that ignore `seed`, and where an `api_key_env` setting came from."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
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
from car.backends.wire import action_from_anthropic, action_from_openai
from car.errors import COMMAND_LINE, BackendError, InputError
from car.importers import load_any
from car.rng import EventKey
from car.sim import scenario_for
from car.testing import Faults, LoopbackServer, ScenarioModel, TextModel
from car.trace import Action, Message, Trace, load_trace
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


# -- 1. refusals, content filtering, answers cut at max tokens ---------------------------------------
def test_a_sampled_refusal_is_the_action_text_as_the_importer_reads_a_recorded_one(
    tmp_path: Path,
) -> None:
    refusal = "I can't help with that."
    chat = {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "refusal": refusal},
        ],
    }
    (tmp_path / "chat.json").write_text(json.dumps(chat))
    recorded = load_any(tmp_path / "chat.json").steps[1].action
    sampled = action_from_openai({"content": None, "refusal": refusal}, fallback_id="c")
    assert sampled.text == refusal
    assert sampled.signature() == recorded.signature()  # a sampled refusal matches a recorded one


def test_refusals_are_draws_and_the_notes_count_them() -> None:
    trace = load_trace(TRACE)
    with _server(faults=Faults(rates={"refusal": 1.0})) as server:
        policy = _policy("openai", server, trace)
        actions = _draw(policy, trace, samples=3)
    assert [a.text for a in actions if isinstance(a, Action)] == [REFUSAL] * 3
    assert "openai:support-refund: 3 of 3 draws were refusals" in policy.notes()


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_an_answer_withheld_by_a_content_filter_is_an_error_naming_the_backend(kind: str) -> None:
    trace = load_trace(TRACE)
    # The probe gets through (6 requests); every decision is filtered.
    faults = Faults(script=["ok"] * 6 if kind == "openai" else [], rates={"content_filter": 1.0})
    with _server(faults=faults) as server:
        policy = _policy(kind, server, trace)
        (result,) = _draw(policy, trace)
        decisions = _decisions(server)
    assert isinstance(result, BackendError)
    assert str(result).startswith(f"{kind}:support-refund: ")
    assert "refus" in str(result) or "content filter" in str(result)
    assert decisions == 1  # not retried
    assert not any("draws" in n for n in policy.notes())  # and not counted as a draw


def test_a_refusal_with_text_over_anthropic_is_a_draw() -> None:
    trace = load_trace(TRACE)
    with _server(faults=Faults(rates={"refusal": 1.0})) as server:
        policy = _policy("anthropic", server, trace)
        (action,) = _draw(policy, trace)
    assert isinstance(action, Action) and action.text == REFUSAL
    assert "anthropic:support-refund: 1 of 1 draws were refusals" in policy.notes()


@pytest.mark.parametrize(
    ("kind", "max_tokens", "limit"),
    [
        ("openai", 64, "max_tokens 64"),
        ("openai", None, "the server's default max_tokens (none was sent)"),
        ("anthropic", None, "max_tokens 1024"),
    ],
)
def test_draws_cut_at_max_tokens_are_counted(kind: str, max_tokens: int | None, limit: str) -> None:
    trace = load_trace(TRACE)
    with _server(faults=Faults(rates={"length": 1.0})) as server:
        policy = _policy(kind, server, trace, max_tokens=max_tokens)
        actions = _draw(policy, trace, samples=4)
    assert all(isinstance(a, Action) for a in actions)
    assert f"{kind}:support-refund: 4 of 4 draws were cut at {limit}" in policy.notes()


def test_the_report_says_how_many_draws_were_cut() -> None:
    faults = Faults(script=["ok"] * 6, rates={"length": 0.5}, seed=1)
    with _server(faults=faults) as server, configure(base_url=server.url, max_tokens=200):
        report = car.blame(TRACE, policy=POLICY, samples=4, match_samples=2, method="contrastive")
    line = next(n for n in report.notes if "draws were cut" in n)
    assert line.startswith("openai:support-refund: ") and line.endswith("at max_tokens 200")


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
        url = server.url
    assert sent == 1  # no retry, and the next request failed at once
    assert "\n" not in first and "insufficient_quota" in first and "billing" in first
    assert "not a rate limit" in first and first.startswith("openai: ")
    assert second == first
    summary = http.summary() or ""  # said "1 requests"
    assert summary.startswith(f"openai at {url}: 1 request, 0 retried"), summary


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


def test_a_model_that_keeps_failing_does_not_give_up_on_the_others_of_its_server(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A proxy (LiteLLM) or a multi-model server whose judge model is down, its policy model up:
    the judge's requests using all their attempts gave up on the whole base URL, and the policy's
    requests failed at once with the judge's error (the match draws all failed, `not measured`)."""

    def down(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]], u: float) -> Action:
        raise RuntimeError("upstream for this model is down")  # the server answers HTTP 500

    models = {"support-refund": ScenarioModel(scenario_for("support-refund")), "judge": down}
    with LoopbackServer(models) as server, configure(base_url=server.url, backoff_base=0.0):
        report = car.blame(
            TRACE, policy=POLICY, scorer="llm-judge:openai:judge", samples=3, match_samples=2
        )
    assert report.budget.errored == report.budget.rollouts  # the judge's server failed them all
    assert report.match_rate.n == 8  # but the policy's model answered every match draw
    assert not any(n.startswith("openai at ") for n in report.notes), report.notes


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


# -- 4. answers of the wrong shape --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("message", "field"),
    [
        ({"content": None, "tool_calls": {"oops": 1}}, "message.tool_calls an object"),
        ({"content": None, "tool_calls": [{"function": "x"}]}, "tool_calls[0].function a string"),
        ({"content": None, "tool_calls": ["x"]}, "tool_calls[0] a string"),
        ({"content": 42}, "message.content a number"),
        ({"tool_calls": [{"function": {"name": 7, "arguments": "{}"}}]}, "function.name a number"),
    ],
)
def test_a_message_of_the_wrong_shape_is_a_backend_error_naming_backend_and_field(
    message: dict[str, Any], field: str
) -> None:
    with pytest.raises(BackendError) as info:
        action_from_openai(message, fallback_id="c", source="openai:gpt-x")
    assert str(info.value).startswith("openai:gpt-x: ") and field in str(info.value)


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ([{"type": "tool_use", "id": "t", "name": ["x"], "input": 3}], "content[0].name a list"),
        (["text"], "content[0] a string"),
        ([{"type": "text", "text": 5}], "content[0].text a number"),
    ],
)
def test_anthropic_blocks_of_the_wrong_shape_are_backend_errors(content: list[Any], field: str) -> None:
    with pytest.raises(BackendError) as info:
        action_from_anthropic(content, source="anthropic:claude-x")
    assert str(info.value).startswith("anthropic:claude-x: ") and field in str(info.value)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_malformed_answer_from_a_server_names_the_policy(kind: str) -> None:
    trace = load_trace(TRACE)
    faults = Faults(script=["ok"] * 6 if kind == "openai" else [], rates={"bad_shape": 1.0})
    with _server(faults=faults) as server:
        (result,) = _draw(_policy(kind, server, trace), trace)
    assert isinstance(result, BackendError), repr(result)
    assert str(result).startswith(f"{kind}:support-refund: the server answered with ")


def test_choices_that_are_not_a_list_name_the_policy() -> None:
    def handler(request: httpx.Request) -> httpx.Response:  # every answer's choices are an object
        return httpx.Response(200, json={"choices": {"0": {"message": {"content": "hi"}}}})

    url = "http://127.0.0.1:9/v1"  # never contacted: the transport answers
    http = HttpBackend("openai", url, {}, transport=httpx.MockTransport(handler))
    trace = load_trace(TRACE)
    policy = OpenAIPolicy("m", trace, options=_options(url), http=http)
    (result,) = _draw(policy, trace)
    assert isinstance(result, BackendError), repr(result)
    assert str(result) == "openai:m: the server answered with choices an object, expected a list"


# -- 5. a server that ignores seed --------------------------------------------------------------------
def test_a_server_that_ignores_seed_is_said_to_draw_uncoupled_samples() -> None:
    # The default model answers with a random word: what a real model does asked for one.
    trace = load_trace(TRACE)
    with LoopbackServer(seed="ignore") as server:
        policy = OpenAIPolicy("any", trace, options=_options(server.url))
        _draw(policy, trace)
    (line,) = [n for n in policy.notes() if "samples" in n]
    assert "not seed_repeatable" in line and "uncoupled" in line
    assert "common random numbers" not in line


def test_a_scenario_served_without_seeds_is_said_to_draw_uncoupled_samples() -> None:
    """`python -m car.testing --scenario support-refund --seed ignore`: the scenario's model answered
    the seed probe (no system prompt of the scenario's) by turn count, alike whatever the seed, and
    the report claimed common random numbers for a server that ignores seeds."""
    trace = load_trace(TRACE)
    with _server(seed="ignore") as server:
        policy = _policy("openai", server, trace)
        _draw(policy, trace)
    (line,) = [n for n in policy.notes() if "samples" in n]
    assert "not seed_repeatable" in line and "uncoupled" in line


def _same_answer_to_plain_questions(
    messages: Sequence[Message], tools: Sequence[Mapping[str, Any]], u: float
) -> Action:
    """A model that answers a plain question the same way every time (as a model does at a low
    default temperature) and a request for a random number at random."""
    if "random number" in messages[-1].content:
        return TextModel()(messages, tools, u)
    return Action(text="banana")


def test_the_seed_probe_is_not_fooled_by_a_model_that_always_answers_alike() -> None:
    async def main(server: LoopbackServer) -> openai_backend.Capabilities:
        http = make_http(_options(server.url))
        try:
            return await capabilities(http, "any")
        finally:
            await http.aclose()

    with LoopbackServer(default=_same_answer_to_plain_questions, seed="ignore") as server:
        caps = asyncio.run(main(server))
        seeded = [b for _, b in server.requests if "seed" in b]
    assert caps.seed and not caps.seed_repeatable
    assert seeded and all(b.get("temperature") == 1.0 for b in seeded)


# -- 6. where api_key_env came from ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("file", "text", "where"),
    [
        ("car.toml", 'api_key_env = "VLLM_KEY"\n', "car.toml: api_key_env = 'VLLM_KEY'"),
        (
            "pyproject.toml",
            '[tool.car]\napi_key_env = "VLLM_KEY"\n',
            "pyproject.toml: [tool.car]: api_key_env = 'VLLM_KEY'",
        ),
    ],
)
def test_an_unset_key_variable_named_in_the_configuration_names_the_file(
    run_cli: Any, monkeypatch: pytest.MonkeyPatch, file: str, text: str, where: str
) -> None:
    monkeypatch.delenv("VLLM_KEY", raising=False)
    Path(file).write_text(text)
    result = run_cli("blame", TRACE, "--policy", POLICY, "--base-url", "http://127.0.0.1:9/v1")
    assert result.code == 2
    assert where in result.err and "not set or empty" in result.err
    assert "--api-key-env" not in result.err


def test_a_missing_key_says_how_a_script_names_another_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """From Python it said "(or name another variable with --api-key-env)", a flag a script has
    no way to give."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(InputError) as info:
        car.blame(ROOT / "traces" / "support-refund.json", policy="openai:gpt-4o")
    assert str(info.value) == (
        "OpenAI needs an API key: set OPENAI_API_KEY in the environment (or name another "
        "variable with car.backends.options.configure(api_key_env=NAME))"
    )


def test_an_unset_key_variable_names_its_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_KEY", raising=False)
    opts = BackendOptions(base_url="http://127.0.0.1:9/v1", api_key_env="VLLM_KEY")
    # Not in the environment or a file: the flag set it, or from Python `configure` (which the
    # message named as the flag, `--api-key-env VLLM_KEY`, that a script has no way to give).
    with pytest.raises(InputError) as info:
        make_http(opts)
    assert str(info.value) == (
        "car.backends.options.configure(api_key_env='VLLM_KEY'): that environment variable is not "
        "set or empty"
    )
    token = COMMAND_LINE.set(True)
    try:
        with pytest.raises(InputError, match=r"^--api-key-env VLLM_KEY: "):
            make_http(opts)
    finally:
        COMMAND_LINE.reset(token)
    monkeypatch.setenv("CAR_API_KEY_ENV", "VLLM_KEY")
    with pytest.raises(InputError, match=r"^environment variable CAR_API_KEY_ENV=VLLM_KEY: "):
        make_http(opts)


def test_closing_the_loopback_server_with_a_request_in_flight_logs_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`python -m car.testing` interrupted (or a test's server closed) while a request waited for
    its answer printed asyncio's "Exception in callback ... CancelledError" traceback (Python 3.11)."""
    server = LoopbackServer(latency=60).start()
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

    def ask() -> None:
        with contextlib.suppress(httpx.HTTPError):  # the server closes the connection
            httpx.post(f"{server.url}/chat/completions", json=body, timeout=60)

    client = threading.Thread(target=ask)
    client.start()
    while server.count() == 0:  # the request is in, and waits for its answer
        threading.Event().wait(0.01)
    server.close()
    client.join(30)
    assert not client.is_alive()
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []
