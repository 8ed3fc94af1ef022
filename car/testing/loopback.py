"""A loopback model server: real HTTP on 127.0.0.1, OpenAI and Anthropic wire formats, scripted faults.

    from car.sim import scenario_for
    from car.testing import LoopbackServer, ScenarioModel

    with LoopbackServer({"support-refund": ScenarioModel(scenario_for("support-refund"))}) as server:
        # car blame traces/support-refund.json --policy openai:support-refund --base-url {server.url}
        ...

The "model" behind a name is any function `(messages, tools, u) -> Action`: `ScenarioModel` rebuilds
the turns of a simulated scenario from the conversation and runs the scenario's decision program, so a
blame run against the server has an exact answer; `TextModel` answers with a word drawn from `u`.
It answers at `/v1/chat/completions` and `/v1/messages` only, as vLLM and Ollama do: any other path
(a base URL without `/v1`, or with one too many) is a 404 "no route".
`u` comes from the request's `seed` and the choice index when seeds are honoured (the server is then
deterministic, like vLLM or llama.cpp), else from the server's own generator.

Faults (`Faults`) are a script consumed one request at a time, then random rates: "429" (with
`Retry-After` and optionally `retry-after-ms`), "500", "503", "slow" (answers after `slow_seconds`),
"drop" (closes the connection without answering), "malformed" (200 with a body that is not JSON),
"echo" (400 whose message repeats the credentials received, to test that clients redact them),
"quota" (OpenAI's 429 `insufficient_quota`: the account is out of credit). Faults that shape a
200 answer: "refusal" (the model declines: OpenAI `message.refusal`, Anthropic a text with
`stop_reason: "refusal"`), "content_filter" (the answer withheld: OpenAI `finish_reason:
"content_filter"` with no content, Anthropic `stop_reason: "refusal"` with none), "length" (the
model's answer, ended at max tokens: `finish_reason: "length"`, `stop_reason: "max_tokens"`),
"bad_shape" (JSON of the wrong shape: OpenAI `tool_calls` an object, Anthropic `content` one).
Capability switches: `n` ("ok" | "reject" | "reject-500" | "ignore"; "reject-500" answers as
llama.cpp's server does, HTTP 500 "Only one completion choice is allowed"), `seed` ("honour" |
"ignore" | "reject"), `logprobs`, `temperature_with_top_p`. `latency` delays every answer
(benchmarks).

Thinking (Anthropic): with `thinking` in a request the answer begins with a signed `thinking` block
(`loopback_thinking`), and the request is held to the Messages API's rules: a budget of at least 1024
below `max_tokens`, no temperature but 1, no top_p below 0.95, thinking blocks whose signatures
verify, and each message of the assistant turn a request continues (a tool-use loop since the last
user message that is more than tool results, or a prefill) beginning with thinking.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from car.backends.wire import messages_from_anthropic, messages_from_openai
from car.protocols import Mode, Turn
from car.rng import EventKey
from car.sim.base import Scenario
from car.trace import Action, Message, Observation, ToolCall

__all__ = [
    "Faults",
    "LoopbackServer",
    "ModelFn",
    "ScenarioModel",
    "TextModel",
    "loopback_thinking",
]

ModelFn = Callable[[Sequence[Message], Sequence[Mapping[str, Any]], float], Action]
_Reply = tuple[int, bytes, dict[str, str]]
Fault = Literal[
    "ok",
    "429",
    "500",
    "503",
    "slow",
    "drop",
    "malformed",
    "echo",
    "quota",
    "refusal",
    "content_filter",
    "length",
    "bad_shape",
]
NMode = Literal["ok", "reject", "reject-500", "ignore"]
SeedMode = Literal["honour", "ignore", "reject"]
REFUSAL = "I'm sorry, but I can't help with that."  # the text of a "refusal" fault's answer


@dataclass
class Faults:
    """Which requests fail and how: `script` first (one entry per request), then `rates`."""

    script: list[str] = field(default_factory=list)
    rates: dict[str, float] = field(default_factory=dict)
    retry_after: str | None = "0"
    retry_after_ms: str | None = None
    slow_seconds: float = 2.0
    seed: int = 0

    def __post_init__(self) -> None:
        """A misspelt fault would be no fault: the test meant to exercise it would pass untried."""
        known = get_args(Fault)
        for where, names in (("script", self.script), ("rates", list(self.rates))):
            for name in names:
                if name not in known:
                    raise ValueError(
                        f"Faults: unknown fault {name!r} in {where}; faults: {', '.join(known)}"
                    )
        for name, rate in self.rates.items():
            if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1:
                raise ValueError(f"Faults: the rate of {name!r} must be in [0, 1], got {rate}")


@dataclass
class TextModel:
    """Answers every conversation with a word and a number drawn from `u` (probes, simulated tools)."""

    words: tuple[str, ...] = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf")

    def __call__(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]], u: float
    ) -> Action:
        word = self.words[int(u * len(self.words)) % len(self.words)]
        return Action(text=f"{word}-{int(u * 1e9)}")


@dataclass
class ScenarioModel:
    """A simulated scenario's decision program, reading its history back from the conversation.

    The deciding actor is the one whose system prompt opens the conversation. Its own assistant turns
    and tool results, and other actors' turns rendered as named user messages, become the history.
    A conversation that opens with no actor's system prompt is answered as `TextModel` answers it.
    """

    scenario: Scenario

    def __call__(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]], u: float
    ) -> Action:
        system = next((m.content for m in messages if m.role == "system"), None)
        actor = next((a for a in self.scenario.actors if a.system_prompt == system), None)
        if actor is None:
            # Not a conversation of the scenario (a capability probe, a judge's or a simulated
            # tool's prompt): answer as a model does, at random. The scenario's program decides by
            # turn count alone, so it would answer the seed probe alike whatever the seed.
            return TextModel()(messages, tools, u)
        turns: list[Turn] = []
        task_seen = False
        for m in messages:
            if m.role == "system":
                continue
            if m.role == "user" and not m.name and not task_seen:
                task_seen = True
                continue
            if m.role == "assistant":
                action = Action(text=m.content, tool_calls=m.tool_calls)
                turns.append(Turn(len(turns), actor.id, action, (), Mode.COPIED))
            elif m.role == "tool" and turns:
                last = turns[-1]
                obs = (*last.observations, Observation(call_id=m.tool_call_id, content=m.content))
                turns[-1] = Turn(last.index, last.actor, last.action, obs, Mode.COPIED)
            elif m.role == "user":
                turns.append(_other_turn(len(turns), m))
        return self.scenario.decide(len(turns), actor.id, turns, u)


def _other_turn(index: int, m: Message) -> Turn:
    """Another actor's turn from its rendering "text\\n[tool] args\\n[result] content"."""
    text: list[str] = []
    calls: list[ToolCall] = []
    obs: list[Observation] = []
    for line in m.content.split("\n"):
        if line.startswith("[result] "):
            cid = calls[len(obs)].id if len(obs) < len(calls) else None
            obs.append(Observation(call_id=cid, content=line[len("[result] ") :]))
        elif line.startswith("[") and "] " in line and not text[1:]:
            name, raw = line[1:].split("] ", 1)
            try:
                args = json.loads(raw)
            except ValueError:
                args = {}
            calls.append(ToolCall(id=f"call_{index}_{len(calls)}", name=name, arguments=args))
        else:
            text.append(line)
    action = Action(text="\n".join(text), tool_calls=tuple(calls))
    return Turn(index, m.name or "user", action, tuple(obs), Mode.COPIED)


class LoopbackServer:
    """See the module docstring. Use as a context manager; `url` is the OpenAI base URL (".../v1"),
    `anthropic_url` the Anthropic one; `requests` logs (path, body) of every request received."""

    def __init__(
        self,
        models: Mapping[str, ModelFn] | None = None,
        *,
        default: ModelFn | None = None,
        latency: float = 0.0,
        faults: Faults | None = None,
        n: NMode = "ok",
        seed: SeedMode = "honour",
        logprobs: bool = True,
        temperature_with_top_p: bool = True,
        api_key: str | None = None,
        echo_auth: bool = False,
        answer_model: str | None = None,
    ) -> None:
        for switch, value, allowed in (("n", n, get_args(NMode)), ("seed", seed, get_args(SeedMode))):
            if value not in allowed:  # else every request would be answered as by the default
                raise ValueError(
                    f"LoopbackServer: {switch} must be {', '.join(allowed[:-1])} or {allowed[-1]}, "
                    f"got {value!r}"
                )
        self.models = dict(models or {})
        self.default = default if default is not None else TextModel()
        self.latency = latency
        self.faults = faults or Faults()
        self.n_mode = n
        self.seed_mode = seed
        self.logprobs = logprobs
        self.temperature_with_top_p = temperature_with_top_p
        self.api_key = api_key
        self.echo_auth = echo_auth
        self.answer_model = answer_model
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.outcomes: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._rng = random.Random(self.faults.seed)
        self._script = list(self.faults.script)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> LoopbackServer:
        """Serve on 127.0.0.1 (a free port) from an event loop in a background thread."""
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        async def serve() -> None:
            self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0, backlog=512)
            ready.set()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(serve())
            self._loop.run_forever()
            # Shut down: cancel connection handlers, let them unwind, close the loop.
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.close()

        self._thread = threading.Thread(target=run, name="car-loopback", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def close(self) -> None:
        loop, server = self._loop, self._server
        if loop is None or server is None:
            return

        async def stop() -> None:
            server.close()
            for writer in list(self._writers):
                writer.close()
            loop.stop()

        asyncio.run_coroutine_threadsafe(stop(), loop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._loop = self._server = self._thread = None

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        assert self._server is not None, "start the server first"
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def count(self, path_suffix: str = "") -> int:
        with self._lock:
            return sum(1 for p, _ in self.requests if p.endswith(path_suffix))

    # -- behaviour -----------------------------------------------------------------------------
    def _next_fault(self) -> str:
        with self._lock:
            if self._script:
                return self._script.pop(0)
            x = self._rng.random()
            for name, rate in self.faults.rates.items():
                if x < rate:
                    return name
                x -= rate
            return "ok"

    def _u(self, seed: int | None, choice: int, step: int) -> float:
        if seed is not None and self.seed_mode == "honour":
            return EventKey(seed, choice, step, "loopback").uniform()
        with self._lock:
            return self._rng.random()

    def _model(self, name: str) -> ModelFn | None:
        return self.models.get(name, self.default if not self.models or "*" in self.models else None)

    # -- the wire ------------------------------------------------------------------------------
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """HTTP/1.1 with keep-alive: read a request, answer it in one write, repeat."""
        self._writers.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = ([*lines[0].split(" "), "", ""])[:3]
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                raw = await reader.readexactly(int(headers.get("content-length") or 0))
                try:
                    reply = await self._respond(method, path, headers, raw)
                except Exception as exc:  # a model function failed: say so, as a server would
                    reply = self._error(headers, 500, f"model failed: {type(exc).__name__}: {exc}")
                if reply is None:  # "drop": close without a word
                    break
                status, body, extra = reply
                head_out = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
                head_out += ["content-type: application/json", f"content-length: {len(body)}"]
                head_out += [f"{k}: {v}" for k, v in extra.items()]
                writer.write(("\r\n".join(head_out) + "\r\n\r\n").encode("latin-1") + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass  # the client closed the connection (or gave up waiting)
        except asyncio.CancelledError:
            # The server is closing with a request still waiting for its answer. Ending quietly:
            # Python 3.11's stream callback logs a cancelled handler as an exception, traceback
            # and all.
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    def _error(
        self, headers: Mapping[str, str], status: int, message: str, extra: Mapping[str, str] = {}
    ) -> _Reply:
        if self.echo_auth:
            message += f" (credentials received: {_credentials(headers)!r})"
        body = json.dumps({"error": {"message": message, "type": "loopback"}}).encode()
        return status, body, dict(extra)

    async def _respond(
        self, method: str, path: str, headers: Mapping[str, str], raw: bytes
    ) -> _Reply | None:
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        with self._lock:
            self.requests.append((path, body if isinstance(body, dict) else {}))
        if self.latency:
            await asyncio.sleep(self.latency)
        fault = self._next_fault()
        with self._lock:
            self.outcomes[fault] += 1
        if fault == "drop":
            return None
        if fault == "slow":
            await asyncio.sleep(self.faults.slow_seconds)
        if fault == "429":
            extra = {}
            if self.faults.retry_after is not None:
                extra["retry-after"] = self.faults.retry_after
            if self.faults.retry_after_ms is not None:
                extra["retry-after-ms"] = self.faults.retry_after_ms
            return self._error(headers, 429, "rate limited, slow down", extra)
        if fault in ("500", "503"):
            return self._error(headers, int(fault), "internal error")
        if fault == "malformed":
            return 200, b'{"choices": [ {"message": ', {}
        if fault == "echo":
            return self._error(headers, 400, f"bad request from key {_credentials(headers)}")
        if fault == "quota":
            quota = {
                "message": "You exceeded your current quota, please check your plan and billing"
                " details.",
                "type": "insufficient_quota",
                "code": "insufficient_quota",
            }
            return 429, json.dumps({"error": quota}).encode(), {}
        if self.api_key is not None and _credentials(headers) != self.api_key:
            return self._error(headers, 401, "invalid API key")
        if method != "POST":
            return self._error(headers, 405, "POST only")
        if not isinstance(body, dict):
            return self._error(headers, 400, "the body is not a JSON object")
        if path.rstrip("/") == "/v1/chat/completions":
            return self._chat(headers, body, fault)
        if path.rstrip("/") == "/v1/messages":
            return self._messages(headers, body, fault)
        return self._error(headers, 404, f"no route {path}")

    def _chat(self, headers: Mapping[str, str], body: dict[str, Any], fault: str = "ok") -> _Reply:
        srv = self
        name = str(body.get("model"))
        model = srv._model(name)
        if model is None:
            return self._error(headers, 404, f"model {name!r} not found")
        n = int(body.get("n") or 1)
        if n > 1 and srv.n_mode == "reject":
            return self._error(headers, 400, "only n=1 is supported")
        if n > 1 and srv.n_mode == "reject-500":  # llama.cpp's server
            return self._error(headers, 500, "Only one completion choice is allowed")
        if n > 1 and srv.n_mode == "ignore":
            n = 1
        seed = body.get("seed")
        if seed is not None and srv.seed_mode == "reject":
            return self._error(headers, 400, "unrecognized request argument: seed")
        if "temperature" in body and "top_p" in body and not srv.temperature_with_top_p:
            return self._error(headers, 400, "temperature and top_p cannot both be specified")
        messages = messages_from_openai(body.get("messages") or [])
        tools = body.get("tools") or []
        step = sum(1 for m in messages if m.role != "system")
        choices = []
        for i in range(n):
            action = model(messages, tools, srv._u(seed if isinstance(seed, int) else None, i, step))
            msg: dict[str, Any] = {"role": "assistant", "content": action.text or None}
            if action.tool_calls:
                msg["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                    }
                    for c in action.tool_calls
                ]
            finish = "tool_calls" if action.tool_calls else "stop"
            if fault == "refusal":
                msg = {"role": "assistant", "content": None, "refusal": REFUSAL}
                finish = "stop"
            elif fault == "content_filter":
                msg, finish = {"role": "assistant", "content": None}, "content_filter"
            elif fault == "length":
                finish = "length"
            elif fault == "bad_shape":
                msg["tool_calls"] = {"id": "call_0", "function": "lookup_order"}
            choices.append(
                {
                    "index": i,
                    "message": msg,
                    "finish_reason": finish,
                    "logprobs": {"content": []} if body.get("logprobs") and srv.logprobs else None,
                }
            )
        answer = {
            "id": f"chatcmpl-{len(srv.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": srv.answer_model or name,
            "choices": choices,
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        return 200, json.dumps(answer).encode(), {}

    def _messages(self, headers: Mapping[str, str], body: dict[str, Any], fault: str = "ok") -> _Reply:
        srv = self
        name = str(body.get("model"))
        model = srv._model(name)
        if model is None:
            return self._error(headers, 404, f"model {name!r} not found")
        for extra in ("seed", "n"):
            if extra in body:
                return self._error(headers, 400, f"{extra}: Extra inputs are not permitted")
        if "max_tokens" not in body:
            return self._error(headers, 400, "max_tokens: Field required")
        if "temperature" in body and "top_p" in body and not srv.temperature_with_top_p:
            return self._error(
                headers, 400, "temperature and top_p cannot both be specified for this model"
            )
        thinking = body.get("thinking")
        if thinking is not None:
            problem = _thinking_problem(body)
            if problem:
                return self._error(headers, 400, problem)
        messages = messages_from_anthropic(body.get("system"), body.get("messages") or [])
        step = sum(1 for m in messages if m.role != "system")
        action = model(messages, body.get("tools") or [], srv._u(None, 0, step))
        content: list[dict[str, Any]] = []
        if thinking is not None and thinking.get("type") != "disabled":
            content.append(loopback_thinking(f"step {step}: deciding"))
        if action.text:
            content.append({"type": "text", "text": action.text})
        content += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
            for c in action.tool_calls
        ]
        stop = "tool_use" if action.tool_calls else "end_turn"
        shaped: object = content
        if fault == "refusal":
            shaped, stop = [{"type": "text", "text": REFUSAL}], "refusal"
        elif fault == "content_filter":
            shaped, stop = [], "refusal"
        elif fault == "length":
            stop = "max_tokens"
        elif fault == "bad_shape":
            shaped = content[0] if content else {"type": "text", "text": ""}
        answer = {
            "id": f"msg_{len(srv.requests)}",
            "type": "message",
            "role": "assistant",
            "model": srv.answer_model or name,
            "content": shaped,
            "stop_reason": stop,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        return 200, json.dumps(answer).encode(), {}


def loopback_thinking(text: str) -> dict[str, Any]:
    """A thinking block as the loopback server signs it (a trace recorded from it replays there)."""
    return {"type": "thinking", "thinking": text, "signature": _sign(text)}


def _sign(text: str) -> str:
    return hashlib.sha256(f"loopback:{text}".encode()).hexdigest()[:24]


def _thinking_problem(body: Mapping[str, Any]) -> str | None:
    """Why the Messages API would refuse this request's thinking, or None."""
    cfg = body["thinking"]
    kind = cfg.get("type") if isinstance(cfg, dict) else None
    if kind == "enabled":
        budget = cfg.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            return "thinking.budget_tokens: must be at least 1024"
        if budget >= int(body.get("max_tokens", 0)):
            return "max_tokens must be greater than thinking.budget_tokens"
    elif kind not in ("adaptive", "disabled"):
        return f"thinking.type: unknown {kind!r}"
    if kind == "disabled":
        return None
    if body.get("temperature", 1) != 1:
        return "temperature may only be set to 1 when thinking is enabled"
    if body.get("top_p", 1) < 0.95:
        return "top_p must be at least 0.95 when thinking is enabled"
    messages = body.get("messages") or []
    for i, m in enumerate(messages):
        for j, b in enumerate(_blocks(m)):
            if b.get("type") == "thinking" and b.get("signature") != _sign(str(b.get("thinking"))):
                return f"messages.{i}.content.{j}: invalid signature in thinking block"
    # The assistant turn the request continues (since the last user message that is more than tool
    # results: a tool-use loop, or a prefill) must begin each of its messages with thinking.
    turn = max(
        (i for i, m in enumerate(messages) if m.get("role") == "user" and not _results_only(m)),
        default=-1,
    )
    for i in range(turn + 1, len(messages)):
        blocks = _blocks(messages[i])
        first = blocks[0].get("type") if blocks else None
        if messages[i].get("role") == "assistant" and first not in ("thinking", "redacted_thinking"):
            return (
                f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                f"{first!r}. When thinking is enabled, a final assistant message must start with a "
                "thinking block"
            )
    return None


def _results_only(message: Mapping[str, Any]) -> bool:
    blocks = _blocks(message)
    return bool(blocks) and all(b.get("type") == "tool_result" for b in blocks)


def _blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _credentials(headers: Mapping[str, str]) -> str:
    auth = headers.get("authorization") or ""
    return auth[7:] if auth.lower().startswith("bearer ") else headers.get("x-api-key", "")


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
}
_REASONS |= {429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m car.testing`: serve scenarios until interrupted; prints the base URL.

    Running the server in its own process matters for throughput measurements: in-process, the
    server's threads and the client's event loop contend for one interpreter lock.
    """
    import argparse

    from car.sim import SCENARIOS, scenario_for

    ap = argparse.ArgumentParser(
        prog="python -m car.testing",
        description="A local model server speaking the OpenAI and Anthropic APIs, to try `car blame`\n"
        "against a real HTTP backend offline (and to test and benchmark backends). Each\n"
        "--scenario serves a model of that name that decides as the simulated scenario's\n"
        "policy does, so a blame run against it has an exact answer; any other model name\n"
        "answers with a random word. Prints its base URL, then serves until interrupted.",
        epilog="example:\n"
        "  python -m car.testing --scenario support-refund      # prints http://127.0.0.1:PORT/v1\n"
        "  car blame traces/support-refund.json --policy openai:support-refund \\\n"
        "      --base-url http://127.0.0.1:PORT/v1              # names step 1\n"
        "  (anthropic:support-refund works too; no API key is needed)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--scenario",
        action="append",
        default=[],
        choices=sorted(SCENARIOS),
        metavar="NAME",
        help=f"serve this scenario's model (repeatable): {', '.join(sorted(SCENARIOS))}",
    )
    ap.add_argument(
        "--latency", type=float, default=0.0, metavar="SECONDS", help="added to every answer"
    )
    ap.add_argument(
        "--n",
        choices=["ok", "reject", "reject-500", "ignore"],
        default="ok",
        help="how the server treats n > 1 (several choices per request; default: ok; reject-500:"
        " HTTP 500 as llama.cpp's server)",
    )
    ap.add_argument(
        "--seed",
        choices=["honour", "ignore", "reject"],
        default="honour",
        help="how the server treats a request's seed (default: honour, answers are then deterministic)",
    )
    args = ap.parse_args(argv)
    models: dict[str, ModelFn] = {name: ScenarioModel(scenario_for(name)) for name in args.scenario}
    models["*"] = TextModel()
    server = LoopbackServer(models, latency=args.latency, n=args.n, seed=args.seed).start()
    print(server.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


if __name__ == "__main__":
    main()
