"""Work that grows with the trace is done once per trace, not once per rollout."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from car import sim
from car.protocols import Turn
from car.replay import Plan, Replay
from car.runner import Runner

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
