"""The rollout runner: where every rollout an estimator asks for is looked up, limited and counted.

`Runner.bind(replay)` returns a `ManagedReplay`: the same engine (`run`, `fork`, `sample_recorded`), but
each request first consults the resumable store, then waits for a slot of the runner's *global*
concurrency limit (shared by every trace of a batch), runs, and stores the finished rollout. Any
estimator that draws its rollouts through the replay object (contrastive today, Shapley next) is
resumable without knowing it.

Budget accounting (the choice, documented): a rollout an estimator receives counts once, whether it was
computed now or read from the store. The report's budget is therefore identical for a resumed and an
uninterrupted run. What this process actually spent is in `RunnerStats.fresh` (rollouts and policy
calls computed now) versus `RunnerStats.stored` (served from the store).

Token usage is an optional protocol: a policy, environment or scorer may expose `usage`, a mapping of
cumulative token counts (`input_tokens`, `output_tokens`; the built-in model backends count what the
server reports); the batch sums them after each trace.

What a policy learns while drawing and reports on (how an OpenAI-compatible server's samples were
coupled, which its capabilities decide) is another optional protocol: a policy with `use_memo(memo)`
is handed a `Memo` when it is bound to a store, its own rows beside the rollouts. A rerun served
from the store asks the server nothing, so without them its report would lose those lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
from collections.abc import AsyncIterator, Awaitable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

from car.protocols import Mode, Turn
from car.replay import Counters, Plan, Replay, Rollout
from car.store import RolloutCache, event_key, namespace
from car.trace import Action, Observation, Trace

__all__ = [
    "Grant",
    "Limiter",
    "ManagedReplay",
    "Memo",
    "Runner",
    "RunnerStats",
    "component_config",
    "usage_of",
]


class Grant(Protocol):
    """Asks the run-wide budget for work a trace did not plan (an automatic Shapley run): `rollouts`
    and `policy_calls` wanted, after the trace has spent `spent_rollouts` and `spent_calls` (what it
    really used, which replaces its estimate in the budget); answers (rollouts, policy calls) granted.
    """

    def __call__(
        self, rollouts: int, policy_calls: int, *, spent_rollouts: int, spent_calls: int
    ) -> Awaitable[tuple[int, int]]: ...


def component_config(component: object) -> dict[str, Any]:
    """The configuration a component declares for store keys (`cache_config`), beyond its spec.

    A backend whose behaviour depends on settings not visible in its spec string (a base URL, a
    temperature, a prompt file) should expose them as a JSON-able mapping `cache_config`, so that
    changing them does not reuse rollouts made with the old settings.
    """
    cfg = getattr(component, "cache_config", None)
    if callable(cfg):
        cfg = cfg()
    out = dict(cfg) if isinstance(cfg, Mapping) else {}
    installed = getattr(component, "car_plugin_distribution", None)
    if isinstance(installed, str):  # an entry point's: its package's name and version
        out["_distribution"] = installed
    spec = str(getattr(component, "spec", ""))
    if "@" in spec:
        # A plugin file's code decides its rollouts: edit the file and its old rollouts no longer apply.
        path = Path(spec.rpartition("@")[0])
        with contextlib.suppress(OSError):
            out["_code_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def usage_of(*components: object) -> dict[str, int]:
    """Token counters the components report through the optional `usage` attribute, summed by name
    (the policy's calls, an LLM judge's, an LLM-simulated environment's); empty if none reports."""
    total: dict[str, int] = {}
    for component in components:
        usage = getattr(component, "usage", None)
        if isinstance(usage, Mapping):
            for k, v in usage.items():
                if isinstance(v, int | float):
                    total[str(k)] = total.get(str(k), 0) + int(v)
    return total


class Limiter(Protocol):
    """A concurrency limit held elsewhere (for example by a Ray actor)."""

    async def acquire(self) -> None: ...

    async def release(self) -> None: ...


@dataclass(frozen=True)
class Memo:
    """A policy's own rows in the store, in the namespace of the rollouts it draws (see the module
    docstring). A name is written once: the first payload stored under it stays."""

    store: RolloutCache
    ns: str
    trace_hash: str

    def get(self, name: str) -> dict[str, Any] | None:
        return self.store.get(self.ns, event_key("memo", name))

    def put(self, name: str, payload: Mapping[str, Any]) -> None:
        self.store.put(self.ns, event_key("memo", name), self.trace_hash, "memo", payload)


@dataclass
class RunnerStats:
    fresh: int = 0  # rollouts computed by this process
    stored: int = 0  # rollouts served from the store
    fresh_draws: int = 0  # match draws computed
    stored_draws: int = 0  # match draws served from the store
    fresh_policy_calls: int = 0


@dataclass
class Runner:
    """Shared by every trace of a run: the store (optional) and the global concurrency limit."""

    store: RolloutCache | None = None
    concurrency: int = 8
    stats: RunnerStats = field(default_factory=RunnerStats)
    limiter: Limiter | None = None  # a limit shared beyond this process (the Ray executor's)
    parent: Runner | None = None
    grant: Grant | None = None  # the run-wide budget's answer for one trace's unplanned work

    def __post_init__(self) -> None:
        self._limit: asyncio.Semaphore | None = None

    def child(self, grant: Grant | None = None) -> Runner:
        """A runner for one trace: the same store and limit, its own statistics (which also add up
        in this one), and what the run's budget grants that trace."""
        return Runner(self.store, self.concurrency, limiter=self.limiter, parent=self, grant=grant)

    def count(self, name: str, n: int = 1) -> None:
        runner: Runner | None = self
        while runner is not None:
            setattr(runner.stats, name, getattr(runner.stats, name) + n)
            runner = runner.parent

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self.parent is not None:
            async with self.parent.slot():
                yield
            return
        if self.limiter is not None:
            await self.limiter.acquire()
            try:
                yield
            finally:
                await self.limiter.release()
            return
        # Created lazily: a semaphore belongs to the event loop that first uses it.
        if self._limit is None:
            self._limit = asyncio.Semaphore(self.concurrency)
        async with self._limit:
            yield

    def bind(self, replay: Replay) -> ManagedReplay:
        """The replay with store lookups, the global limit and accounting in front of it."""
        specs = {
            "policy": replay.policy.spec,
            "env": replay.env.spec,
            "scorer": replay.scorer.spec,
        }
        config = {
            "policy": component_config(replay.policy),
            "env": component_config(replay.env),
            "scorer": component_config(replay.scorer),
        }
        trace_hash = replay.trace.content_hash()
        ns = namespace(trace_hash, specs, config, replay.seed, replay.slack)
        use_memo = getattr(replay.policy, "use_memo", None)
        if self.store is not None and callable(use_memo):
            use_memo(Memo(self.store, ns, trace_hash))
        return ManagedReplay(
            replay.trace,
            replay.policy,
            replay.env,
            replay.scorer,
            seed=replay.seed,
            slack=replay.slack,
            counters=replay.counters,
            runner=self,
            ns=ns,
            trace_hash=trace_hash,
        )


# -- serialisation of what a stored rollout needs -------------------------------------------------
def _turn_json(t: Turn, trace: Trace) -> dict[str, Any]:
    # A new encoding of turns needs a new `car.store.ROW_FORMAT`.
    rec = trace.steps[t.index] if t.index < len(trace.steps) else None
    if (
        rec is not None
        and t.action is rec.action  # the very action: equal values may differ in JSON (1 and 1.0)
        and t.actor == rec.actor
        and t.observations == rec.observations
    ):
        # Its position's recorded turn (copied, held, scripted, forced to it): kept by position, or
        # every stored rollout would hold the text of the record up to its first change.
        return {"i": t.index, "m": t.mode.value, "d": t.diverged}
    return {
        "i": t.index,
        "a": t.actor,
        "act": t.action.model_dump(mode="json", exclude_defaults=True),
        "o": [o.model_dump(mode="json", exclude_defaults=True) for o in t.observations],
        "m": t.mode.value,
        "d": t.diverged,
    }


def _turn(d: Mapping[str, Any], trace: Trace) -> Turn:
    if "act" not in d:  # the recorded turn at its position
        rec = trace.steps[int(d["i"])]
        return Turn(rec.index, rec.actor, rec.action, rec.observations, Mode(d["m"]), bool(d["d"]))
    return Turn(
        int(d["i"]),
        str(d["a"]),
        Action.model_validate(d["act"]),
        tuple(Observation.model_validate(o) for o in d["o"]),
        Mode(d["m"]),
        bool(d["d"]),
    )


def _counters_json(c: Counters) -> dict[str, Any]:
    return {
        "rollouts": c.rollouts,
        "policy_calls": c.policy_calls,
        "env_calls": c.env_calls,
        "errors": c.errors,
        "unscorable": c.unscorable,
        "diverged": c.diverged,
    }


def _add(into: Counters, delta: Mapping[str, Any], first_error: str | None) -> None:
    for name in ("rollouts", "policy_calls", "env_calls", "errors", "unscorable", "diverged"):
        setattr(into, name, getattr(into, name) + int(delta.get(name, 0)))
    if into.first_error is None and first_error is not None:
        into.first_error = first_error


@dataclass
class ManagedReplay(Replay):
    """A `Replay` whose rollouts go through a `Runner` (store, global limit, accounting)."""

    runner: Runner = field(default_factory=Runner)
    ns: str = ""
    trace_hash: str = ""

    @cached_property
    def _engine(self) -> Replay:
        return Replay(self.trace, self.policy, self.env, self.scorer, seed=self.seed, slack=self.slack)

    def _inner(self) -> Replay:
        # A private engine per request: its counters are exactly this rollout's increments, which
        # is what gets stored, so a stored rollout is counted as the fresh one was. A copy of one
        # engine, not a new one: a new engine encodes every recorded turn again (`_rec_ids`), work
        # that grows with the trace, for every rollout.
        inner = copy.copy(self._engine)
        inner.counters = Counters()
        return inner

    async def _managed(self, kind: str, key: str, plan: Plan, replicate: int, work: Any) -> Rollout:
        store = self.runner.store
        if store is not None:
            hit = store.get(self.ns, key)
            if hit is not None:
                self.runner.count("stored")
                _add(self.counters, hit["counters"], hit.get("error"))
                return Rollout(
                    plan,
                    replicate,
                    tuple(_turn(t, self.trace) for t in hit["turns"]),
                    (None,) * len(hit["turns"]),
                    hit["value"],
                    hit["status"],
                    hit.get("error"),
                    int(hit["policy_calls"]),
                    bool(hit["truncated"]),
                )
        inner = self._inner()
        async with self.runner.slot():
            rollout: Rollout = await work(inner)
        self.runner.count("fresh")
        self.runner.count("fresh_policy_calls", inner.counters.policy_calls)
        _add(self.counters, _counters_json(inner.counters), inner.counters.first_error)
        if store is not None and rollout.status != "error":  # errors are retried on resume
            store.put(
                self.ns,
                key,
                self.trace_hash,
                kind,
                {
                    "value": rollout.value,
                    "status": rollout.status,
                    "error": rollout.error,
                    "policy_calls": rollout.policy_calls,
                    "truncated": rollout.truncated,
                    "turns": [_turn_json(t, self.trace) for t in rollout.turns],
                    "counters": _counters_json(inner.counters),
                },
            )
        return rollout

    @property
    def _keyed(self) -> bool:
        # Without a store no key is looked up, so none is worked out (digests for every rollout).
        return self.runner.store is not None

    async def run(self, plan: Plan, replicate: int) -> Rollout:
        key = event_key("run", plan.describe(), replicate) if self._keyed else ""
        return await self._managed(
            "run", key, plan, replicate, lambda inner: Replay.run(inner, plan, replicate)
        )

    async def fork(self, rollout: Rollout, step: int, action: Action) -> Rollout:
        if self.takes(rollout, step, action):
            return await Replay.fork(self, rollout, step, action)  # free reuse: nothing to store
        plan = rollout.plan.with_forced(step, action)
        key = ""
        if self._keyed:
            parts = (rollout.plan.describe(), step, action.identity(), rollout.replicate)
            key = event_key("fork", *parts)
        result = await self._managed(
            "fork",
            key,
            plan,
            rollout.replicate,
            lambda inner: Replay.fork(inner, rollout, step, action),
        )
        return replace(result, plan=plan)

    async def sample_recorded(self, step: int, draw: int) -> Action:
        store = self.runner.store
        key = event_key("match", step, draw) if self._keyed else ""
        if store is not None:
            hit = store.get(self.ns, key)
            if hit is not None:
                self.runner.count("stored_draws")
                self.counters.policy_calls += 1
                return Action.model_validate(hit["action"])
        async with self.runner.slot():
            action = await Replay.sample_recorded(self, step, draw)
        self.runner.count("fresh_draws")
        self.runner.count("fresh_policy_calls")
        if store is not None:
            store.put(
                self.ns,
                key,
                self.trace_hash,
                "match",
                {"action": action.model_dump(mode="json", exclude_defaults=True)},
            )
        return action
