"""A rollout stands for another only when it took the very same action: a tool call with the same
signature but other wording is another action for every later step (and for the scorer).

The scenario: step 0 calls pick(choice=BAD|GOOD) with free text "confident" or "unsure", drawn
independently of the choice; step 1 says BAD with probability 0.9 after "confident" and 0.2 after
"unsure"; the run fails when it ends on BAD, whatever was picked. The record is pick(BAD) said
"confident", then BAD. Holding step 0 at the record gives p_1 = 0.9; re-deciding it gives
p_0 = 0.5 * 0.9 + 0.5 * 0.2 = 0.55. Reusing a draw of pick(BAD) said "unsure" as the held arm mixes in
0.2 and pulls p_1 down to about 0.725.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

import car
from car.protocols import Turn
from car.replay import Plan, Replay, RowRunner
from car.sim.base import Scenario, SimEnvironment, SimPolicy, SimScorer, call, say
from car.trace import Action, Actor, Outcome, Step, ToolCall, Trace


@dataclass(frozen=True)
class TextMatters(Scenario):
    name: ClassVar[str] = "text-matters"
    summary: ClassVar[str] = "the wording of a tool call changes the next decision"
    task: ClassVar[str] = "pick"
    defaults: ClassVar[dict[str, float]] = {"q": 0.5}
    actors: ClassVar[tuple[Actor, ...]] = (Actor(id="agent", system_prompt="pick one"),)

    def decide(self, step: int, actor: str, history: Sequence[Turn], u: float) -> Action:
        if step == 0:
            choice = "BAD" if u < self.p("q") else "GOOD"
            text = "confident" if (u * 1e6) % 1 < 0.5 else "unsure"  # independent of the choice
            return call("c0", "pick", text, choice=choice)
        confident = history[0].action.text == "confident"
        return say("BAD" if u < (0.9 if confident else 0.2) else "GOOD")

    def next_actor(self, step: int, history: Sequence[Turn]) -> str | None:
        return "agent" if step == 0 else None

    def failed(self, turns: Sequence[Turn]) -> bool:
        return turns[-1].action.text == "BAD"


SCENARIO = TextMatters()
TRACE = Trace(
    id="text-matters",
    task=SCENARIO.task,
    actors=SCENARIO.actors,
    steps=(
        Step(index=0, actor="agent", action=call("c0", "pick", "confident", choice="BAD")),
        Step(index=1, actor="agent", action=say("BAD")),
    ),
    outcome=Outcome(failed=True),
)
SPEC = "sim:text-matters"


def _replay(seed: int) -> Replay:
    return Replay(
        TRACE,
        SimPolicy(SCENARIO, SPEC),
        SimEnvironment(SCENARIO, SPEC),
        SimScorer(SCENARIO, SPEC),
        seed=seed,
    )


def test_identity_sees_wording_and_arguments_as_sent_but_not_call_ids() -> None:
    a = Action(text="ok", tool_calls=(ToolCall(id="1", name="f", arguments={"x": 1}),))
    assert (
        a.identity()
        == a.model_copy(
            update={"tool_calls": (ToolCall(id="2", name="f", arguments={"x": 1}),)}
        ).identity()
    )
    assert a.identity() != a.model_copy(update={"text": "OK"}).identity()
    assert a.signature() == a.model_copy(update={"text": "OK"}).signature()
    raw = ToolCall(id="1", name="f", arguments={"x": 1}, raw_arguments='{"x": 1}')
    spaced = ToolCall(id="1", name="f", arguments={"x": 1}, raw_arguments='{"x":1}')
    assert Action(tool_calls=(raw,)).identity() != Action(tool_calls=(spaced,)).identity()
    thought = a.model_copy(update={"reasoning": ({"type": "thinking", "thinking": "hm"},)})
    assert a.identity() != thought.identity()


def test_row_reuse_keeps_the_held_arm_on_the_recorded_wording() -> None:
    """The held arm's rescue estimate is unbiased: mean p_1 over 20 seeds x 64 rows is 0.9 (it was
    0.73 when a draw with the same signature stood for the recorded action)."""
    means = []
    for seed in range(20):
        runner = RowRunner(_replay(seed))

        async def rows(r: RowRunner = runner) -> Any:
            record = [await r.record_value()]
            return r.matrix([(await r.row(r.arms(), k))[0] for k in range(64)], record)

        arms, _ = asyncio.run(rows())
        means.append(arms.mean(axis=1))
    p0, p1 = np.mean(means, axis=0)
    assert abs(p1 - 0.9) < 0.04  # standard error about 0.0084
    assert abs(p0 - 0.55) < 0.06  # standard error about 0.014


def test_a_fork_is_not_served_by_a_draw_with_other_wording() -> None:
    async def go() -> tuple[bool, bool]:
        replay = _replay(0)
        recorded = TRACE.steps[0].action
        for r in range(64):
            rollout = await replay.run(Plan.resample_from(TRACE, 0), r)
            took = rollout.turns[0].action
            if took.signature() == recorded.signature() and took.text != recorded.text:
                fork = await replay.fork(rollout, 0, recorded)
                return fork.reused, fork.turns[0].action.text == recorded.text
        raise AssertionError("no draw of pick(BAD) said otherwise in 64 replicates")

    reused, recorded_wording = asyncio.run(go())
    assert not reused and recorded_wording


def test_exact_shapley_credits_the_wording_decision() -> None:
    """Exact Shapley over the two steps: v(empty) = 0.55, v({0}) = 0.9, v({1}) = v(N) = 1, so
    phi = (0.175, 0.275). Means over 30 seeds; with the coarse reuse they were about
    (0.09, 0.36)."""
    phis = []
    for seed in range(30):
        report = car.blame(
            TRACE,
            policy=SimPolicy(SCENARIO, SPEC),
            env=SimEnvironment(SCENARIO, SPEC),
            scorer=SimScorer(SCENARIO, SPEC),
            method="shapley",
            shapley_method="exact",
            budget=200,
            seed=seed,
            match_samples=0,
        )
        assert report.shapley is not None
        phis.append([p.value for p in report.shapley.players])
    phi0, phi1 = np.mean(phis, axis=0)
    assert abs(phi0 - 0.175) < 0.04 and abs(phi1 - 0.275) < 0.04
