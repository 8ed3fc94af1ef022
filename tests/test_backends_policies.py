"""The openai: and anthropic: policies against the loopback server: requests, probing, sampling."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import car
from car.backends import http as http_backend
from car.backends import openai as openai_backend
from car.backends.anthropic import AnthropicPolicy
from car.backends.openai import OpenAIPolicy, capabilities
from car.backends.openai import openai_backend as make_http
from car.backends.options import BackendOptions, configure
from car.backends.wire import (
    action_from_anthropic,
    action_from_openai,
    anthropic_messages,
    messages_from_anthropic,
    openai_messages,
    openai_tools,
    tool_schema,
)
from car.errors import BackendError, InputError
from car.importers import load_any
from car.protocols import Decision
from car.rng import EventKey
from car.sim import scenario_for
from car.testing import Faults, LoopbackServer, ScenarioModel
from car.trace import Action, Message, Sampling, Step, ToolCall, Trace, load_trace
from tests.conftest import ROOT

TRACE = str(ROOT / "traces" / "support-refund.json")


@pytest.fixture(autouse=True)
def _fresh_probe_cache() -> Iterator[None]:
    # Capabilities are cached per (server, model) for the process; every test gets new servers anyway,
    # but ports can be reused.
    openai_backend._CAPS.clear()
    http_backend._LIMITERS.clear()
    yield
    openai_backend._CAPS.clear()


def _options(server: LoopbackServer, **kw: Any) -> BackendOptions:
    return BackendOptions(base_url=server.url, backoff_base=0.01, **kw)


def _decision(trace: Trace, step: int) -> Decision:
    from car.replay import _copied

    rec = trace.steps[step]
    return Decision(
        step=step,
        actor=trace.actor(rec.actor),
        task=trace.task,
        history=tuple(_copied(s) for s in trace.steps[:step]),
        sampling=rec.sampling,
        actors=trace.actors,
    )


def _with_sampling(trace: Trace, sampling: Sampling) -> Trace:
    steps = tuple(Step(**{**s.model_dump(), "sampling": sampling}) for s in trace.steps)
    return Trace(**{**trace.model_dump(), "steps": steps})


def _refund_server(**kw: Any) -> LoopbackServer:
    return LoopbackServer({"support-refund": ScenarioModel(scenario_for("support-refund"))}, **kw)


def _chat_bodies(server: LoopbackServer) -> list[dict[str, Any]]:
    # Probe requests ask for "one random word"; the rest are decisions.
    return [
        b
        for p, b in server.requests
        if p.endswith("chat/completions") and "random word" not in json.dumps(b)
    ]


# -- capability probing ---------------------------------------------------------------------------
def _probe(server: LoopbackServer) -> openai_backend.Capabilities:
    async def main() -> openai_backend.Capabilities:
        http = make_http(_options(server))
        try:
            return await capabilities(http, "any")
        finally:
            await http.aclose()

    return asyncio.run(main())


@pytest.mark.parametrize(
    ("switches", "expected"),
    [
        ({}, dict(n=True, seed=True, seed_repeatable=True, logprobs=True, temperature_with_top_p=True)),
        ({"n": "reject"}, dict(n=False, seed=True, seed_repeatable=True)),
        ({"n": "ignore"}, dict(n=False)),  # Ollama-style: n accepted, one choice back
        ({"seed": "reject"}, dict(seed=False, seed_repeatable=False)),
        ({"seed": "ignore"}, dict(seed=True, seed_repeatable=False)),
        ({"logprobs": False}, dict(logprobs=False)),
        ({"temperature_with_top_p": False}, dict(temperature_with_top_p=False, n=True)),
    ],
)
def test_probe_reads_each_capability(switches: dict[str, Any], expected: dict[str, bool]) -> None:
    with LoopbackServer(**switches) as server:
        caps = _probe(server)
    for name, value in expected.items():
        assert getattr(caps, name) is value, name


@pytest.mark.parametrize("fault", ["429", "500", "drop", "malformed"])
def test_transient_faults_do_not_change_probe_conclusions(fault: str) -> None:
    faults = Faults(script=[fault] * 3, retry_after="0")
    with LoopbackServer(n="reject", faults=faults) as server:
        caps = _probe(server)
    assert caps == openai_backend.Capabilities(
        n=False, seed=True, seed_repeatable=True, logprobs=True, temperature_with_top_p=True
    )


def test_failed_probe_is_not_cached() -> None:
    with LoopbackServer(faults=Faults(script=["500"] * 6)) as server:
        with pytest.raises(BackendError):
            asyncio.run(_probe_with_attempts(server, 3))
        assert not openai_backend._CAPS
        caps = _probe(server)  # the outage is over: probe again, and now it works
    assert caps.n and caps.seed


async def _probe_with_attempts(server: LoopbackServer, attempts: int) -> None:
    http = make_http(_options(server, max_attempts=attempts))
    try:
        await capabilities(http, "any")
    finally:
        await http.aclose()


def test_probe_runs_once_for_concurrent_first_calls() -> None:
    trace = load_trace(TRACE)
    with _refund_server() as server:
        policy = OpenAIPolicy("support-refund", trace, options=_options(server))

        async def main() -> None:
            d = _decision(trace, 1)
            await asyncio.gather(*(policy.act(d, EventKey(0, r, 1, "policy")) for r in range(12)))
            await policy.aclose()

        asyncio.run(main())
        probes = [b for _, b in server.requests if "random word" in json.dumps(b)]
    assert len(probes) == 6  # base, n, seed, seed again, logprobs, top_p
    # Reasoning models reject temperature and max_tokens: the base probe sends neither.
    assert set(probes[0]) == {"model", "messages"}


# -- requests ------------------------------------------------------------------------------------
def test_request_is_rebuilt_from_the_trace() -> None:
    trace = _with_sampling(load_trace(TRACE), Sampling(temperature=0.7, max_tokens=300))
    with _refund_server() as server:
        policy = OpenAIPolicy("support-refund", trace, options=_options(server))

        async def main() -> car.Action:
            try:
                return await policy.act(_decision(trace, 2), EventKey(3, 0, 2, "policy"))
            finally:
                await policy.aclose()

        action = asyncio.run(main())
        body = _chat_bodies(server)[0]
    msgs = body["messages"]
    assert msgs[0] == {"role": "system", "content": trace.actors[0].system_prompt}
    assert msgs[1]["role"] == "user" and "A-1042" in msgs[1]["content"]
    assert msgs[2]["tool_calls"][0]["function"] == {
        "name": "lookup_order",
        "arguments": '{"order_id": "A-1042"}',  # the raw recorded string, byte for byte
    }
    assert msgs[3]["role"] == "tool" and msgs[3]["tool_call_id"] == "call_lookup"
    assert msgs[4] == {"role": "assistant", "content": "PLAN: refund the order"}
    assert [t["function"]["name"] for t in body["tools"]] == [
        "lookup_order",
        "issue_refund",
        "escalate",
    ]
    assert body["tools"][0]["function"]["parameters"]["properties"]["order_id"] == {"type": "string"}
    # Only what was recorded: temperature and max_tokens, never top_p; a seed from the event key.
    assert body["temperature"] == 0.7 and body["max_tokens"] == 300 and "top_p" not in body
    assert body["seed"] == EventKey(3, 0, 2, "policy").seed32()
    call = action.tool_calls[0]
    assert call.name in ("issue_refund", "escalate")
    assert call.arguments["order_id"] == "A-1042"
    assert json.loads(call.raw_arguments or "") == call.arguments


def test_user_overrides_are_sent_and_pair_dropped_when_rejected(capsys: Any) -> None:
    trace = _with_sampling(load_trace(TRACE), Sampling(temperature=0.2, top_p=0.5))
    with _refund_server(temperature_with_top_p=False) as server:
        policy = OpenAIPolicy("support-refund", trace, options=_options(server, temperature=1.3))

        async def main() -> None:
            await policy.act(_decision(trace, 1), EventKey(0, 0, 1, "policy"))
            await policy.aclose()

        asyncio.run(main())
        body = _chat_bodies(server)[0]
    assert body["temperature"] == 1.3 and "top_p" not in body
    assert "rejects temperature with top_p" in capsys.readouterr().err


def test_distinct_seeds_per_sample_and_reproducible_draws() -> None:
    trace = load_trace(TRACE)
    with _refund_server() as server:
        policy = OpenAIPolicy("support-refund", trace, options=_options(server))
        keys = [EventKey(5, r, 1, "policy") for r in range(16)]

        async def main() -> list[str]:
            d = _decision(trace, 1)
            out = await asyncio.gather(*(policy.act(d, k) for k in keys))
            again = await asyncio.gather(*(policy.act(d, k) for k in keys))
            await policy.aclose()
            assert [a.signature() for a in out] == [a.signature() for a in again]
            return [a.text for a in out]

        texts = asyncio.run(main())
        seeds = [b["seed"] for b in _chat_bodies(server)]
    assert len(set(seeds[:16])) == 16
    assert len(set(texts)) == 2  # both plans occur: the samples are not copies


def test_without_seed_samples_merge_into_n_requests() -> None:
    trace = load_trace(TRACE)
    with _refund_server(seed="reject") as server:
        policy = OpenAIPolicy("support-refund", trace, options=_options(server))

        async def main() -> list[car.Action]:
            d = _decision(trace, 1)
            out = await asyncio.gather(*(policy.act(d, EventKey(0, r, 1, "p")) for r in range(10)))
            await policy.aclose()
            return list(out)

        actions = asyncio.run(main())
        bodies = _chat_bodies(server)
    assert len(actions) == 10
    assert sum(int(b.get("n", 1)) for b in bodies) == 10
    assert len(bodies) < 10 and all("seed" not in b for b in bodies)


def test_without_seed_or_n_each_sample_is_its_own_request() -> None:
    trace = load_trace(TRACE)
    with _refund_server(seed="reject", n="reject") as server:
        policy = OpenAIPolicy("support-refund", trace, options=_options(server))

        async def main() -> None:
            d = _decision(trace, 1)
            await asyncio.gather(*(policy.act(d, EventKey(0, r, 1, "p")) for r in range(6)))
            await policy.aclose()

        asyncio.run(main())
        bodies = _chat_bodies(server)
    assert len(bodies) == 6 and all("n" not in b and "seed" not in b for b in bodies)


def test_model_defaults_to_the_recorded_one_and_warns_on_override(capsys: Any) -> None:
    trace = _with_sampling(load_trace(TRACE), Sampling(model="support-refund"))
    with _refund_server() as server:
        OpenAIPolicy(None, trace, options=_options(server))
        assert "recorded" not in capsys.readouterr().err
        OpenAIPolicy("gpt-other", trace, options=_options(server))
        err = capsys.readouterr().err
    assert "replaying with model 'gpt-other'" in err and "'support-refund'" in err
    with pytest.raises(InputError, match="records no model"):
        OpenAIPolicy(None, load_trace(TRACE), options=BackendOptions(base_url="http://127.0.0.1:9"))


def test_openai_needs_a_key_only_at_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(InputError, match="set OPENAI_API_KEY"):
        make_http(BackendOptions())
    make_http(BackendOptions(base_url="http://127.0.0.1:8000/v1"))  # local servers need none
    with pytest.raises(InputError, match="MY_KEY"):
        make_http(BackendOptions(base_url="http://127.0.0.1:8000/v1", api_key_env="MY_KEY"))


# -- Anthropic wire format --------------------------------------------------------------------------
def test_anthropic_request_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-test-0000-secret")
    trace = _with_sampling(load_trace(TRACE), Sampling(temperature=0.5))
    with _refund_server(api_key="ak-test-0000-secret") as server:
        opts = BackendOptions(base_url=server.anthropic_url, backoff_base=0.01)
        policy = AnthropicPolicy("support-refund", trace, options=opts)

        async def main() -> car.Action:
            try:
                return await policy.act(_decision(trace, 2), EventKey(0, 0, 2, "policy"))
            finally:
                await policy.aclose()

        action = asyncio.run(main())
        (path, body), *_ = server.requests
    assert path == "/v1/messages"
    assert body["system"] == trace.actors[0].system_prompt
    assert body["max_tokens"] == 1024 and body["temperature"] == 0.5
    assert "top_p" not in body and "seed" not in body
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert body["messages"][1]["content"][0] == {
        "type": "tool_use",
        "id": "call_lookup",
        "name": "lookup_order",
        "input": {"order_id": "A-1042"},
    }
    assert body["messages"][2]["content"][0]["type"] == "tool_result"
    assert body["tools"][1]["input_schema"]["properties"]["amount"] == {"type": "number"}
    assert action.tool_calls and action.tool_calls[0].arguments["order_id"] == "A-1042"


def test_anthropic_drops_top_p_when_the_pair_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    trace = _with_sampling(load_trace(TRACE), Sampling(temperature=0.5, top_p=0.9))
    with _refund_server(temperature_with_top_p=False) as server:
        opts = BackendOptions(base_url=server.anthropic_url, backoff_base=0.01)
        policy = AnthropicPolicy("support-refund", trace, options=opts)

        async def main() -> None:
            d = _decision(trace, 1)
            for r in range(3):
                await policy.act(d, EventKey(0, r, 1, "policy"))
            await policy.aclose()

        asyncio.run(main())
        bodies = [b for _, b in server.requests]
    assert "top_p" in bodies[0]  # both were recorded: sent together first
    assert all("top_p" not in b for b in bodies[1:])
    assert len(bodies) == 4


# tool_use inputs: an object, and what the API never sends but a compatible server or proxy may. The
# policy reads each as the importer reads the same block in a recorded conversation.
_INPUTS = [{"q": 1}, "ls -l", "", '{"q": 1}', "{oops", [1, "a"], 3, True, None]


@pytest.mark.parametrize("value", _INPUTS, ids=[json.dumps(v) for v in _INPUTS])
def test_a_sampled_anthropic_call_reads_as_the_importer_reads_the_recorded_one(
    tmp_path: Any, value: Any
) -> None:
    block = {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": value}
    (sampled,) = action_from_anthropic([block]).tool_calls
    record = {"messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": [block]}]}
    (tmp_path / "record.json").write_text(json.dumps(record))
    (recorded,) = load_any(tmp_path / "record.json", fmt="anthropic").steps[1].action.tool_calls
    if isinstance(value, dict):
        # an object holds no text to keep: the record has none, the policy keeps the JSON it read
        assert sampled.model_copy(update={"raw_arguments": None}) == recorded
    else:
        assert sampled == recorded
    assert Action(tool_calls=(sampled,)).signature() == Action(tool_calls=(recorded,)).signature()
    if value in ("ls -l", "{oops", [1, "a"], 3):
        text = value if isinstance(value, str) else json.dumps(value)
        assert (sampled.arguments, sampled.raw_arguments) == ({"_unparsed": text}, text)


def test_a_call_with_unparsed_arguments_goes_back_to_anthropic_as_an_object() -> None:
    # The Messages API takes only an object as input: a call whose arguments are not one (a
    # malformed argument string, a custom tool's free-form text) goes back as the object car keeps
    # of it, {"_unparsed": <text>}, and reads back to the same arguments.
    calls = (
        ToolCall(id="a", name="shell", arguments={"_unparsed": "ls -l"}, raw_arguments="ls -l"),
        ToolCall(id="b", name="get", arguments={"q": 1}, raw_arguments='{"q": 1}'),
    )
    _, sent = anthropic_messages([Message(role="assistant", tool_calls=calls)])
    assert [b["input"] for b in sent[1]["content"]] == [{"_unparsed": "ls -l"}, {"q": 1}]
    (back,) = messages_from_anthropic(None, sent)[1:]
    assert [c.arguments for c in back.tool_calls] == [c.arguments for c in calls]


def test_configure_is_scoped() -> None:
    from car.backends.options import current

    with configure(base_url="http://x/v1", timeout=3.0):
        assert current().base_url == "http://x/v1" and current().timeout == 3.0
    assert current().base_url is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"timeout": "30"}, "configure(): timeout: expected a number; got '30'"),
        ({"max_attempts": 0}, "configure(): max_attempts: expected at least 1; got 0"),
        ({"temperature": "hot"}, "configure(): temperature: expected a number; got 'hot'"),
        ({"bse_url": "http://x/v1"}, "configure(): unknown option 'bse_url'; did you mean 'base_url'?"),
    ],
)
def test_configure_refuses_what_the_settings_refuse(changes: dict[str, Any], message: str) -> None:
    """`configure(timeout="30")` was taken as is: every request of the run then failed inside
    (`TypeError: unsupported operand type(s) for +: 'float' and 'str'`), and the run reported errored
    rollouts; a misspelt option was a TypeError from the dataclass. They are checked as `[tool.car]`
    checks them, before any work."""
    from car.backends.options import current

    with pytest.raises(InputError) as caught, configure(**changes):
        pass
    assert str(caught.value) == message
    assert current() == BackendOptions()  # nothing was set
    with configure(timeout=30, thinking="2048", base_url=None) as opts:  # an int is a number
        assert (opts.timeout, opts.thinking, opts.base_url) == (30, "2048", None)


def test_a_failed_probe_whose_callers_were_cancelled_is_not_reported_unretrieved() -> None:
    # `asyncio.shield` drops its link to the probe when the waiting caller is cancelled (a rollout
    # ended by its batch); the probe's later failure must still count as read, or asyncio logs
    # "Task exception was never retrieved" on stderr at exit.
    import gc

    with LoopbackServer() as server:
        dead = server.url  # nothing listens there once the server has stopped
    reported: list[str] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: reported.append(ctx["message"]))
        http = make_http(BackendOptions(base_url=dead, max_attempts=2, backoff_base=0.01))
        caller = asyncio.ensure_future(capabilities(http, "m"))
        await asyncio.sleep(0.001)  # the probe is under way
        caller.cancel()
        probe = openai_backend._PROBES.pop((http.base_url, "m"))
        await asyncio.wait([probe])
        assert not probe.cancelled() and http.stats.failures == 1  # it failed (left unread here) ...
        await http.aclose()

    asyncio.run(main())
    gc.collect()
    assert reported == []  # ... and its failure was not reported as unread


# -- custom (free-form) tools ---------------------------------------------------------------------
CODE = "print('hi')\n"
GRAMMAR = {"type": "grammar", "grammar": {"syntax": "lark", "definition": 'start: "ls" | "pwd"'}}


def _custom_tool_trace(tmp_path: Any) -> Trace:
    """A chat log with a custom tool (grammar-constrained) beside a function tool, one recorded
    custom call and its result, read by the openai-chat importer."""
    shell = {"type": "custom", "custom": {"name": "shell", "description": "Runs", "format": GRAMMAR}}
    lookup = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    log = {
        "model": "gpt-5",
        "tools": [shell, lookup],
        "messages": [
            {"role": "user", "content": "list the files"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "type": "custom", "custom": {"name": "shell", "input": CODE}},
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
            {"role": "tool", "tool_call_id": "call_2", "content": "{}"},
            {"role": "assistant", "content": "done"},
        ],
    }
    path = tmp_path / "custom.json"
    path.write_text(json.dumps(log))
    return load_any(path, fmt="openai-chat")


def _custom_reply(request: httpx.Request) -> httpx.Response:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_9", "type": "custom", "custom": {"name": "shell", "input": "ls"}}],
    }
    return httpx.Response(200, json={"model": "gpt-5", "choices": [{"message": message}]})


def _custom_policy(trace: Trace, sent: list[dict[str, Any]]) -> OpenAIPolicy:
    async def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return _custom_reply(request)

    http = http_backend.HttpBackend(
        "openai", "http://127.0.0.1:9/v1", {}, transport=httpx.MockTransport(handler)
    )
    return OpenAIPolicy(None, trace, http=http)


def _act(policy: OpenAIPolicy, trace: Trace, step: int) -> car.Action:
    async def main() -> car.Action:
        try:
            return await policy.act(_decision(trace, step), EventKey(0, 0, step, "policy"))
        finally:
            await policy.aclose()

    return asyncio.run(main())


def test_custom_tools_and_calls_are_sent_as_custom(tmp_path: Any) -> None:
    trace = _custom_tool_trace(tmp_path)
    sent: list[dict[str, Any]] = []
    _act(_custom_policy(trace, sent), trace, 2)
    body = next(b for b in sent if "random word" not in json.dumps(b))
    # The custom tool goes out as a custom tool, its grammar intact; the function tool as before.
    assert body["tools"] == [
        {"type": "custom", "custom": {"name": "shell", "description": "Runs", "format": GRAMMAR}},
        {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}},
    ]
    # The recorded custom call goes back as a custom call with its input byte for byte; its result
    # is an ordinary tool message.
    assert body["messages"][1]["tool_calls"] == [
        {"id": "call_1", "type": "custom", "custom": {"name": "shell", "input": CODE}},
        {"id": "call_2", "type": "function", "function": {"name": "lookup", "arguments": "{}"}},
    ]
    assert body["messages"][2] == {"role": "tool", "content": "a.txt", "tool_call_id": "call_1"}


def test_a_sampled_custom_call_reads_as_the_importer_reads_the_recorded_one(tmp_path: Any) -> None:
    trace = _custom_tool_trace(tmp_path)
    action = _act(_custom_policy(trace, []), trace, 2)
    assert action.tool_calls == (
        ToolCall(id="call_9", name="shell", arguments={"_unparsed": "ls"}, raw_arguments="ls"),
    )
    # The same input as the record gives the same action signature (what action-match compares),
    # for free-form text and for input that happens to be a JSON object.
    recorded = trace.steps[1].action.tool_calls[0]
    for text, record in (
        (CODE, recorded),
        ('{"a": 1}', ToolCall(id="r", name="shell", arguments={"a": 1})),
    ):
        sampled = action_from_openai(
            {"tool_calls": [{"id": "x", "type": "custom", "custom": {"name": "shell", "input": text}}]},
            fallback_id="c",
        )
        assert sampled.signature() == Action(tool_calls=(record,)).signature()
        assert sampled.tool_calls[0].raw_arguments == text


def test_custom_tool_shapes_on_the_chat_wire() -> None:
    # The Responses API's flat custom tool goes out as a Chat Completions custom tool; an Anthropic
    # client tool, which may also say type "custom", keeps its JSON schema and stays a function.
    responses = {"type": "custom", "name": "shell", "format": {"type": "text"}}
    anthropic = {"type": "custom", "name": "lookup", "input_schema": {"type": "object"}}
    assert openai_tools([responses, anthropic]) == [
        {"type": "custom", "custom": {"name": "shell", "format": {"type": "text"}}},
        {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}},
    ]
    assert tool_schema({"type": "custom", "custom": {"name": "shell"}}).name == "shell"
    # A hand-written custom call without raw_arguments sends what the importers would have kept.
    calls = (
        ToolCall(id="a", name="shell", arguments={"_unparsed": "ls -l"}),
        ToolCall(id="b", name="shell", arguments={"path": "/"}),
        ToolCall(id="c", name="shell"),
    )
    sent = openai_messages([Message(role="assistant", tool_calls=calls)], [responses])
    assert [c["custom"]["input"] for c in sent[0]["tool_calls"]] == ["ls -l", '{"path": "/"}', ""]
