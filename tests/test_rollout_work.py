"""Work that grows with the trace is done once per trace, not once per rollout."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest

from car import sim
from car.protocols import Turn
from car.replay import Plan, Replay, Rollout
from car.runner import Runner
from car.specs import make_env
from car.store import MemoryStore
from car.trace import Action, load_trace
from tests.conftest import TRACES

KINDS = ("policy", "env", "scorer")


def _replay(trace_len: int) -> Replay:
    trace = sim.record("long", n=trace_len)
    comps = [sim.make(k, "long", trace, "sim:long") for k in KINDS]
    return Replay(trace, *comps)


def test_rollouts_through_a_runner_encode_the_record_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each rollout gets an engine of its own (its counters are what the store keeps); the recorded
    # turns' identities are the trace's, worked out once, not again for every rollout.
    managed = Runner().bind(_replay(40))
    trace = managed.trace
    encoded: Counter[int] = Counter()
    identity = Turn.identity

    def counting(turn: Turn) -> str:
        encoded[turn.index] += 1
        return identity(turn)

    monkeypatch.setattr(Turn, "identity", counting)

    async def rollouts() -> None:
        for replicate in range(10):
            await managed.run(Plan.hold_all(trace), replicate)

    asyncio.run(rollouts())
    assert max(encoded.values(), default=0) <= 1


def test_a_stored_rollout_keeps_the_records_turns_by_position_not_their_text() -> None:
    # A rollout copies the record up to its first change: storing those turns' text would store the
    # trace again with every rollout (a 130-step imported run: about 100 KB each).
    trace = load_trace(TRACES / "support-refund.json")
    comps = [sim.make(k, "support-refund", trace, "sim:support-refund") for k in KINDS]
    lookup = json.dumps(trace.steps[0].observations[0].content)  # the copied first step's result
    store = MemoryStore()
    plans = [Plan.hold_all(trace), Plan.resample_from(trace, 2), Plan.resample_from(trace, 0)]

    async def rollouts() -> list[Rollout]:
        managed = Runner(store).bind(Replay(trace, *comps, seed=3))
        return [await managed.run(plan, r) for plan in plans for r in range(4)]

    fresh = asyncio.run(rollouts())
    stored = [payload for *_, payload in store.added]
    assert len(stored) == len(fresh)
    assert all(lookup not in json.dumps(p) for p in stored[:8])  # step 0 copied: kept by position
    again = asyncio.run(rollouts())  # every rollout read back from the store
    assert len(store.added) == len(fresh)
    assert [(r.value, r.turns) for r in again] == [(r.value, r.turns) for r in fresh]
    assert [[t.identity() for t in r.turns] for r in again] == [
        [t.identity() for t in r.turns] for r in fresh
    ]


def test_the_records_turns_are_made_once_not_for_each_rollout_and_draw(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A rollout copies the record up to its first change, and a match draw decides at the recorded
    # context: both take the record's turns as they are, instead of making them anew each time (on
    # an 800-step trace, 2.5 million turns for the match draws alone).
    replay = _replay(40)
    trace = replay.trace
    last = trace.decision_steps[-1]
    made: list[int] = []
    init = Turn.__init__

    def counting(turn: Turn, index: int, *args: object) -> None:
        made.append(index)
        init(turn, index, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Turn, "__init__", counting)

    async def work() -> None:
        for r in range(10):
            await replay.sample_recorded(last, r)
            await replay.run(Plan.resample_from(trace, last), r)

    asyncio.run(work())
    assert made and min(made) >= last  # only the turns run live


def test_the_recorded_environment_keeps_its_state_on_a_turn_that_calls_no_tool() -> None:
    # A text-only turn serves nothing: its state is the one before it, not a copy of it (an
    # imported run's turns are mostly text, and copying the served counts was work on every one).
    trace = load_trace(TRACES / "support-refund.json")
    replay = Replay(
        trace,
        sim.make("policy", "support-refund", trace, "sim:support-refund"),
        make_env("recorded", trace),
        sim.make("scorer", "support-refund", trace, "sim:support-refund"),
    )
    # Step 1 (a plan, no tool call) said otherwise: the rollout runs live from there.
    plan = Plan.hold_all(trace).with_forced(1, Action(text="PLAN: refund the order now"))
    rollout = asyncio.run(replay.run(plan, 0))
    assert rollout.status == "ok"
    before = rollout.states  # the environment's state before each turn (None: copied)
    assert before[0] is None and before[1] is not None
    assert before[2] is before[1]  # step 1 called nothing
    assert before[3] is not before[2]  # step 2's call was served: its count moved
    assert before[3]['issue_refund({"amount":129.0,"order_id":"A-1042"})'] == 1
    assert rollout.turns[2].observations == trace.steps[2].observations


def test_without_a_store_no_rollout_or_draw_works_out_a_store_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A store key is a digest of the plan's description (and a forced action's identity): work for
    # every rollout and draw, of no use with --no-store.
    import car.runner

    keys: list[str] = []
    real = car.runner.event_key

    def counting(kind: str, *parts: object) -> str:
        keys.append(kind)
        return real(kind, *parts)

    monkeypatch.setattr(car.runner, "event_key", counting)

    async def work(runner: Runner) -> None:
        managed = runner.bind(_replay(20))
        trace = managed.trace
        step = trace.decision_steps[-1]
        ro = await managed.run(Plan.resample_from(trace, step), 0)
        await managed.fork(ro, step, Action(text="another action"))
        await managed.sample_recorded(step, 0)

    asyncio.run(work(Runner()))
    assert keys == []
    asyncio.run(work(Runner(MemoryStore())))
    assert keys == ["run", "fork", "match"]
