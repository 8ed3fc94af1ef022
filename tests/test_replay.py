"""The replay engine: prefix copying, forks, event-keyed randomness, errors as outcomes."""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Awaitable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from car import Action, Decision, EnvStep, EventKey, Plan, Replay, Trajectory, Turn
from car.protocols import Environment, Mode, Policy
from car.replay import gather_all
from car.specs import make_env, make_policy, make_scorer
from car.trace import Trace, load_trace, parse_trace
from tests.conftest import TRACES


@dataclass
class CountingPolicy:
    inner: Policy
    spec: str = "counting"
    calls: Counter[int] = field(default_factory=Counter)
    contexts: list[Decision] = field(default_factory=list)

    async def act(self, decision: Decision, key: EventKey) -> Action:
        self.calls[decision.step] += 1
        self.contexts.append(decision)
        return await self.inner.act(decision, key)


@dataclass
class CountingEnv:
    inner: Environment
    spec: str = "counting"
    steps: Counter[int] = field(default_factory=Counter)
    restores: list[int] = field(default_factory=list)

    async def restore(self, history: Sequence[Turn]) -> Any:
        self.restores.append(len(history))
        return await self.inner.restore(history)

    async def step(self, state: Any, index: int, actor: str, action: Action, key: EventKey) -> EnvStep:
        self.steps[index] += 1
        return await self.inner.step(state, index, actor, action, key)


def replay_for(name: str, seed: int = 0, **kw: Any) -> tuple[Replay, CountingPolicy, CountingEnv]:
    trace = load_trace(TRACES / f"{name}.json")
    spec = f"sim:{name}"
    policy = CountingPolicy(make_policy(spec, trace))
    env = CountingEnv(make_env(spec, trace))
    return Replay(trace, policy, env, make_scorer(spec, trace), seed=seed, **kw), policy, env


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_all_held_plan_is_the_record_copied() -> None:
    replay, policy, env = replay_for("support-refund")
    rollout = run(replay.run(Plan.hold_all(replay.trace), 0))
    assert rollout.value == 1.0 and rollout.status == "ok"
    assert all(t.mode is Mode.COPIED for t in rollout.turns)
    assert not policy.calls and not env.steps and not env.restores
    assert rollout.policy_calls == 0


def test_prefix_before_first_change_is_copied_not_executed() -> None:
    replay, policy, env = replay_for("research-team")
    rollout = run(replay.run(Plan.resample_from(replay.trace, 3), 0))
    assert [t.mode for t in rollout.turns[:3]] == [Mode.COPIED] * 3
    assert [t.action for t in rollout.turns[:3]] == [s.action for s in replay.trace.steps[:3]]
    assert [t.observations for t in rollout.turns[:3]] == [
        s.observations for s in replay.trace.steps[:3]
    ]
    assert set(policy.calls) == {3, 4}
    assert set(env.steps) == {3, 4}
    assert env.restores == [3]


def test_same_key_same_rollout_at_any_order() -> None:
    replay, _, _ = replay_for("and", seed=7)
    plans = [Plan.hold([]), Plan.hold([0]), Plan.hold([1])]

    async def forward() -> list[Any]:
        return [await replay.run(p, r) for p in plans for r in range(20)]

    async def backward() -> list[Any]:
        jobs = [(p, r) for p in plans for r in range(20)][::-1]
        out = await asyncio.gather(*(replay.run(p, r) for p, r in jobs))
        return out[::-1]

    a, b = run(forward()), run(backward())
    assert [x.turns for x in a] == [x.turns for x in b]
    assert [x.value for x in a] == [x.value for x in b]


def test_arms_on_one_replicate_share_downstream_noise() -> None:
    # In AND, step 1's draw does not depend on step 0, so holding step 0 or not leaves step 1's
    # choice unchanged on the same replicate (common random numbers), and changes it across replicates.
    replay, _, _ = replay_for("and", seed=3)
    free = [run(replay.run(Plan.hold([]), r)) for r in range(40)]
    held = [run(replay.run(Plan.hold([0]), r)) for r in range(40)]
    assert all(f.turns[1].action == h.turns[1].action for f, h in zip(free, held, strict=True))
    assert len({f.turns[1].action.text for f in free}) == 2


def test_fork_reuses_a_rollout_that_already_took_the_action() -> None:
    replay, policy, _ = replay_for("and", seed=1)
    trace = replay.trace
    for r in range(30):
        rollout = run(replay.run(Plan.hold([]), r))
        before = sum(policy.calls.values())
        forked = run(replay.fork(rollout, 0, trace.steps[0].action))
        if rollout.turns[0].action == trace.steps[0].action:
            assert forked.reused and forked.turns == rollout.turns
            assert sum(policy.calls.values()) == before
        else:
            assert not forked.reused
            assert forked.turns[0].mode is Mode.FORCED
            assert forked.turns[0].action == trace.steps[0].action
            # same replicate: step 1 draws the same noise
            assert forked.turns[1].action == rollout.turns[1].action
        assert forked.plan.forced_map == {0: trace.steps[0].action}


def test_fork_inside_the_copied_prefix_restores_state() -> None:
    replay, _policy, env = replay_for("support-refund")
    rollout = run(replay.run(Plan.resample_from(replay.trace, 2), 0))
    escalate = Action(text="PLAN: escalate to a human")
    forked = run(replay.fork(rollout, 1, escalate))
    assert forked.turns[0] == rollout.turns[0]
    assert forked.turns[1].action == escalate
    assert env.restores[-1] == 1
    assert forked.value == 0.0 or forked.turns[2].action.tool_calls[0].name == "issue_refund"


def test_held_step_after_a_change_records_divergence() -> None:
    replay, _, _ = replay_for("support-refund")
    trace = replay.trace
    plan = Plan.hold([0, 2, 3])  # resample the decision, hold the execution by position
    rollouts = [run(replay.run(plan, r)) for r in range(200)]
    for ro in rollouts:
        changed = ro.turns[1].action != trace.steps[1].action
        assert ro.turns[2].mode is Mode.HELD
        assert ro.diverged == changed
        assert ro.turns[2].action == trace.steps[2].action  # holding is by position
    rate = sum(ro.diverged for ro in rollouts) / len(rollouts)
    assert 0.45 < rate < 0.65  # P(plan escalate) = 0.55


def test_forcing_the_recorded_action_after_a_change_records_divergence() -> None:
    """A fork that forces the recorded action holds it (Shapley's forks hold a player so): after a
    changed step that is a held step whose context differs, as a step held by the plan is; forcing
    another action is no hold."""
    replay, _, _ = replay_for("support-refund")
    trace = replay.trace
    other = Action(text="PLAN: escalate to a human")
    seen = 0
    for r in range(60):
        base = run(replay.run(Plan.hold([0, 3]), r))  # re-decide step 1 and 2
        if base.turns[1].action == trace.steps[1].action:
            continue
        seen += 1
        held = run(replay.fork(base, 2, trace.steps[2].action))
        assert held.turns[2].mode is Mode.FORCED and held.turns[2].diverged and held.diverged
        assert not run(replay.fork(base, 2, other)).turns[2].diverged
    assert seen > 10
    # On the record the forced recorded action is no divergence.
    rec = run(replay.run(Plan.resample_from(trace, 2), 0))
    assert not run(replay.fork(rec, 2, trace.steps[2].action)).turns[2].diverged


def test_explicit_context_is_used_only_while_on_record() -> None:
    doc = load_trace(TRACES / "support-refund.json").model_dump(mode="json")
    for step in doc["steps"]:
        step["context"] = [{"role": "user", "content": f"recorded context of step {step['index']}"}]
    trace = parse_trace(doc)
    inner = make_policy("sim:support-refund", trace)
    policy = CountingPolicy(inner)
    replay = Replay(
        trace, policy, make_env("sim:support-refund", trace), make_scorer("sim:support-refund", trace)
    )
    for r in range(20):
        run(replay.run(Plan.resample_from(trace, 1), r))
    for d in policy.contexts:
        on_record = all(t.action == trace.steps[t.index].action for t in d.history)
        if on_record:
            assert d.messages()[0].content == f"recorded context of step {d.step}"
        else:
            assert d.recorded_context is None
            assert d.messages()[0].role == "system"


class Boom(Exception):
    pass


@dataclass
class FlakyPolicy:
    inner: Policy
    spec: str = "flaky"

    async def act(self, decision: Decision, key: EventKey) -> Action:
        if key.uniform() < 0.5:
            raise Boom("backend hiccup")
        return await self.inner.act(decision, key)


def test_plugin_errors_end_the_rollout_not_the_run() -> None:
    trace = load_trace(TRACES / "pivot.json")
    replay = Replay(
        trace,
        FlakyPolicy(make_policy("sim:pivot", trace)),
        make_env("sim:pivot", trace),
        make_scorer("sim:pivot", trace),
    )
    rollouts = [run(replay.run(Plan.hold([]), r)) for r in range(50)]
    errored = [r for r in rollouts if r.status == "error"]
    assert errored and len(errored) < 50
    assert all(r.value is None and "Boom: backend hiccup" in (r.error or "") for r in errored)
    assert replay.counters.errors == len(errored)
    assert replay.counters.rollouts == 50


@dataclass
class BadScorer:
    spec: str = "bad"
    deterministic: bool = True

    async def score(self, trajectory: Trajectory, key: EventKey) -> float | None:
        return 2.0


def test_scorer_out_of_range_is_an_error() -> None:
    trace = load_trace(TRACES / "pivot.json")
    replay = Replay(trace, make_policy("sim:pivot", trace), make_env("sim:pivot", trace), BadScorer())
    ro = run(replay.run(Plan.hold([]), 0))
    assert ro.status == "error" and "a score is a number in [0, 1]" in (ro.error or "")


@pytest.mark.parametrize("value", [math.nan, np.float64("nan"), np.float32(0.25), True])
def test_nan_is_cannot_score_and_numpy_numbers_are_numbers(value: Any) -> None:
    """NaN is "cannot score" (the method's convention, beside None): it was an error, so a judge
    that answered NaN pushed the run towards `backend-errors`. numpy's float32 was an error too."""

    class NumpyScorer:
        spec = "numpy-scorer"
        deterministic = True

        async def score(self, trajectory: Trajectory, key: EventKey) -> Any:
            return value

    trace = load_trace(TRACES / "pivot.json")
    replay = Replay(trace, make_policy("sim:pivot", trace), make_env("sim:pivot", trace), NumpyScorer())
    ro = run(replay.run(Plan.hold([]), 0))
    if isinstance(value, float) and math.isnan(value):
        assert ro.status == "unscorable" and ro.value is None
        assert replay.counters.unscorable == 1 and replay.counters.errors == 0
    else:
        assert ro.status == "ok" and ro.value == float(value)


def test_a_scorer_returning_text_is_named() -> None:
    """A string made the range check raise TypeError, and the error did not name the scorer."""

    class TextScorer:
        spec = "text-scorer"
        deterministic = True

        async def score(self, trajectory: Trajectory, key: EventKey) -> Any:
            return "failed"

    trace = load_trace(TRACES / "pivot.json")
    replay = Replay(trace, make_policy("sim:pivot", trace), make_env("sim:pivot", trace), TextScorer())
    ro = run(replay.run(Plan.hold([]), 0))
    assert ro.status == "error"
    assert "scorer 'text-scorer' returned 'failed': a score is a number in [0, 1]" in (ro.error or "")


def _recorded_trace() -> Trace:
    return load_trace(TRACES / "support-refund.json")


def test_recorded_environment_serves_identical_calls_and_refuses_new_ones() -> None:
    trace = _recorded_trace()
    replay = Replay(
        trace,
        make_policy("sim:support-refund", trace),
        make_env("recorded", trace),
        make_scorer("tool-called:issue_refund", trace),
    )
    rollouts = [run(replay.run(Plan.resample_from(trace, 1), r)) for r in range(60)]
    ok = [r for r in rollouts if r.status == "ok"]
    bad = [r for r in rollouts if r.status == "error"]
    assert ok and bad
    for r in ok:
        assert r.turns[2].action.tool_calls[0].name == "issue_refund"
        assert r.turns[2].observations == trace.steps[2].observations
    for r in bad:
        assert "never saw the call escalate(" in (r.error or "")


@dataclass
class EndlessEnv:
    spec: str = "endless"

    async def restore(self, history: Sequence[Turn]) -> None:
        return None

    async def step(self, state: None, index: int, actor: str, action: Action, key: EventKey) -> EnvStep:
        return EnvStep((), None, actor)


@dataclass
class Chatter:
    spec: str = "chatter"

    async def act(self, decision: Decision, key: EventKey) -> Action:
        return Action(text=f"still talking at {decision.step}")


def test_step_cap_truncates_runaway_rollouts() -> None:
    trace = load_trace(TRACES / "pivot.json")
    replay = Replay(trace, Chatter(), EndlessEnv(), make_scorer("regex:talking", trace), slack=4)
    ro = run(replay.run(Plan.hold([]), 0))
    assert ro.truncated and len(ro.turns) == len(trace.steps) + 4


def test_non_deciding_actor_is_replayed_by_position() -> None:
    doc = load_trace(TRACES / "pivot.json").model_dump(mode="json")
    doc["actors"].append({"id": "user", "kind": "user"})
    doc["steps"][2]["actor"] = "user"
    trace = parse_trace({**doc, "replay": None})
    assert trace.decision_steps == (0, 1)

    @dataclass
    class Script:
        spec: str = "script"

        async def restore(self, history: Sequence[Turn]) -> None:
            return None

        async def step(
            self, state: None, index: int, actor: str, action: Action, key: EventKey
        ) -> EnvStep:
            nxt = trace.steps[index + 1].actor if index + 1 < len(trace.steps) else None
            return EnvStep((), None, nxt)

    replay = Replay(trace, make_policy("sim:pivot", trace), Script(), make_scorer("regex:.", trace))
    ro = run(replay.run(Plan.hold([]), 0))
    assert ro.turns[2].mode is Mode.SCRIPTED and ro.turns[2].action == trace.steps[2].action


def test_event_keys_are_stable_and_distinct() -> None:
    k = EventKey(1, 2, 3, "policy")
    assert k.uniform() == EventKey(1, 2, 3, "policy").uniform()
    others = {
        EventKey(1, 2, 3, "env").uniform(),
        EventKey(1, 2, 4, "policy").uniform(),
        EventKey(1, 3, 3, "policy").uniform(),
        EventKey(2, 2, 3, "policy").uniform(),
    }
    assert k.uniform() not in others and len(others) == 4
    assert EventKey(1, 2, -1, "score").uniform() == EventKey(1, 2, -1, "score").uniform()
    assert 0 <= k.seed32() < 2**31


def test_event_key_derivation_is_pinned() -> None:
    # Every seeded figure in the docs and the bench depends on these digests: a change to the
    # derivation must be deliberate (and regenerate them), never a side effect.
    k = EventKey(1, 2, 3, "policy")
    assert k.uniform() == 0.31273018830888677
    assert k.seed32() == 1836479395
    assert k.generator().random() == 0.9361257613444035


def test_event_key_uniforms_are_uniform_and_independent_across_kinds() -> None:
    from scipy import stats

    policy = np.array([EventKey(7, r, 2, "policy").uniform() for r in range(20_000)])
    env = np.array([EventKey(7, r, 2, "env").uniform() for r in range(20_000)])
    assert stats.kstest(policy, "uniform").pvalue > 1e-3
    assert abs(np.corrcoef(policy, env)[0, 1]) < 4 / np.sqrt(20_000)


@pytest.mark.parametrize("step", [0, 1, 2])
def test_resample_from_holds_exactly_the_earlier_decisions(step: int) -> None:
    trace = load_trace(TRACES / "pivot.json")
    plan = Plan.resample_from(trace, step)
    assert plan.held == frozenset(range(step))
    assert plan.first_change(trace) == step
    assert Plan.hold_all(trace).first_change(trace) == len(trace.steps)
    forced_same = Plan.hold([]).with_forced(0, trace.steps[0].action)
    assert forced_same.first_change(trace) == 1


def test_gather_all_returns_in_order_within_the_limit() -> None:
    in_flight, peak = 0, 0

    async def job(i: int) -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.001 * (5 - i % 5))
        in_flight -= 1
        return i

    assert asyncio.run(gather_all((job(i) for i in range(20)), limit=3)) == list(range(20))
    assert peak == 3


@pytest.mark.parametrize("limit", [None, 2])
def test_gather_all_leaves_no_job_running_after_a_failure(limit: int | None) -> None:
    """A failed job cancels the others before the error propagates: none is left making calls
    after the caller closes its components."""
    finished: list[int] = []

    async def job(i: int) -> int:
        if i == 1:
            raise RuntimeError("store write failed")
        await asyncio.sleep(0.05)
        finished.append(i)
        return i

    async def go() -> None:
        with pytest.raises(RuntimeError, match="store write failed"):
            await gather_all((job(i) for i in range(8)), limit)
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert others == []
        await asyncio.sleep(0.1)

    asyncio.run(go())
    assert finished == []


def test_gather_all_makes_a_job_only_when_a_worker_is_free() -> None:
    """A batch planned lazily holds at most `limit` jobs at once, however large it is: the jobs
    waiting for a slot are not made yet (as coroutines and tasks they cost a kilobyte or more apiece,
    and callers plan up to physical memory / 1 KB of them)."""
    made = finished = most_held = 0
    release = asyncio.Event()

    async def job(i: int) -> int:
        nonlocal finished
        await release.wait()
        finished += 1
        return i

    def jobs() -> Iterator[Awaitable[int]]:
        nonlocal made, most_held
        for i in range(1000):
            made += 1
            most_held = max(most_held, made - finished)
            yield job(i)

    async def go() -> None:
        task = asyncio.ensure_future(gather_all(jobs(), limit=4))
        for _ in range(5):
            await asyncio.sleep(0)
        assert made == 4  # while the first jobs wait, the 996 others are not made
        release.set()
        assert await task == list(range(1000))

    asyncio.run(go())
    assert most_held == 4


def test_gather_all_starts_no_worker_beyond_its_jobs() -> None:
    """A limit far above the plan's size (`--concurrency 1000000`) started that many workers, idle
    but each a task: minutes and gigabytes before the first rollout of a three-step trace."""
    tasks_seen: list[int] = []

    async def job(i: int) -> int:
        tasks_seen.append(len(asyncio.all_tasks()))
        await asyncio.sleep(0)
        return i

    assert asyncio.run(gather_all((job(i) for i in range(3)), limit=10_000)) == [0, 1, 2]
    assert max(tasks_seen) <= 4  # the caller and one worker a job


@pytest.mark.parametrize("limit", [None, 2])
def test_gather_all_takes_no_job_after_a_failure(limit: int | None) -> None:
    """A failure stops the batch: a generator is closed without making the jobs it had left."""
    made, closed = 0, False

    async def job(i: int) -> int:
        await asyncio.sleep(0)
        if i == 3:
            raise RuntimeError("policy unreachable")
        return i

    def jobs() -> Iterator[Awaitable[int]]:
        nonlocal made, closed
        try:
            for i in range(10 if limit is None else 10_000):
                made += 1
                yield job(i)
        finally:
            closed = True

    with pytest.raises(RuntimeError, match="policy unreachable"):
        asyncio.run(gather_all(jobs(), limit))
    assert closed
    # 0 to 3: a worker hands the loop back after each job, so 3 fails before the slot 2 freed takes 4
    assert made == (10 if limit is None else 4)


@pytest.mark.parametrize("limit", [None, 1])
def test_gather_all_cancelled_before_its_jobs_start_closes_them(limit: int | None) -> None:
    """Ctrl-C as a batch of jobs was being started: each job is closed, not left for Python to warn
    about ("coroutine ... was never awaited", printed under `car: interrupted`)."""
    import inspect

    async def job() -> None:
        await asyncio.sleep(1)

    jobs = [job(), job()]

    async def go() -> None:
        task = asyncio.ensure_future(gather_all(jobs, limit))
        await asyncio.sleep(0)  # gather_all has made its workers; none has taken a job
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert [inspect.getcoroutinestate(j) for j in jobs] == ["CORO_CLOSED", "CORO_CLOSED"]


def test_a_turn_off_the_record_decides_with_its_actors_recorded_sampling() -> None:
    """A rollout whose turns shift position (or run past the recorded end) still decides with the
    actor's recorded settings, the latest before that position: it decided with none, so a model
    backend sent its defaults (no temperature, another max_tokens or thinking budget) on exactly
    the counterfactual rollouts blame is measured on."""
    from car.trace import Sampling, Step

    trace = load_trace(TRACES / "support-refund.json")
    cold, warm = Sampling(temperature=0.2, max_tokens=4096), Sampling(temperature=0.7)
    steps = list(trace.steps)
    steps[0] = Step(**{**steps[0].model_dump(), "sampling": cold})
    steps[2] = Step(**{**steps[2].model_dump(), "sampling": warm})
    trace = Trace(**{**trace.model_dump(), "steps": tuple(steps)})
    replay = Replay(
        trace,
        make_policy("sim:support-refund", trace),
        make_env("sim:support-refund", trace),
        make_scorer("sim:support-refund", trace),
    )
    seen = [replay._decision(k, "support", (), False).sampling for k in range(6)]
    assert seen == [cold, cold, warm, warm, warm, warm]
    # An actor that recorded none still gets none.
    bare = Replay(
        load_trace(TRACES / "support-refund.json"),
        make_policy("sim:support-refund", trace),
        make_env("sim:support-refund", trace),
        make_scorer("sim:support-refund", trace),
    )
    assert bare._decision(5, "support", (), False).sampling is None
