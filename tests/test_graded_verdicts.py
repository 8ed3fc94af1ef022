"""Verdicts on graded scores keep their promise whatever the scores' distribution.

A deterministic judge scores the record 0.5. Re-deciding step 0 mostly gives 0.37 or 0.39 (by step
1's choice) and, 3.5% of the time, 1.0. The true effects are 0.0971 and 0: at --min-effect 0.1 no
step is the locus. A Student-t bound cannot see a rare 1.0 that did not come up, and named step 0 in
54 of 200 seeds, where the Bonferroni-adjusted one-sided test promises at most 1.25%.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import car
from car.protocols import Trajectory, Turn
from car.rng import EventKey
from car.sim.base import Scenario, SimEnvironment, SimPolicy, say
from car.trace import Action, Actor, Outcome, Step, Trace


@dataclass(frozen=True)
class RareHigh(Scenario):
    name: ClassVar[str] = "rare-high"
    summary: ClassVar[str] = "a judge that rarely gives the top score"
    task: ClassVar[str] = "choose"
    defaults: ClassVar[dict[str, float]] = {"rare": 0.035, "record": 0.01}
    actors: ClassVar[tuple[Actor, ...]] = (Actor(id="agent", system_prompt="choose"),)

    def decide(self, step: int, actor: str, history: Sequence[Turn], u: float) -> Action:
        if step == 0:
            if u < self.p("record"):
                return say("A")
            return say("C" if u >= 1 - self.p("rare") else "B")
        return say("Y" if u < 0.5 else "Z")

    def next_actor(self, step: int, history: Sequence[Turn]) -> str | None:
        return "agent" if step == 0 else None

    def failed(self, turns: Sequence[Turn]) -> bool:
        return True


class Judge:
    spec = "judge"
    deterministic = True

    def __init__(self, recorded: float = 0.5) -> None:
        self.recorded = recorded

    async def score(self, trajectory: Trajectory, key: EventKey) -> float:
        first, second = (t.action.text for t in trajectory.turns)
        if first == "A":
            return self.recorded
        if first == "C":
            return 1.0
        return 0.37 if second == "Y" else 0.39


TRACE = Trace(
    id="rare-high",
    task="choose",
    actors=RareHigh.actors,
    steps=(
        Step(index=0, actor="agent", action=say("A")),
        Step(index=1, actor="agent", action=say("Y")),
    ),
    outcome=Outcome(failed=True),
)


def _locus(seed: int, judge: Judge) -> int | None:
    model = RareHigh()
    report = car.blame(
        TRACE,
        policy=SimPolicy(model, "sim:rare-high"),
        env=SimEnvironment(model, "sim:rare-high"),
        scorer=judge,
        seed=seed,
        samples=32,
        match_samples=0,
        method="contrastive",
    )
    return report.locus


def test_a_rare_top_score_that_did_not_come_up_names_no_false_locus() -> None:
    loci = [_locus(seed, Judge()) for seed in range(200)]
    assert sum(locus is not None for locus in loci) <= 5  # 1.25% of 200 is 2.5


def test_a_real_graded_effect_is_still_found() -> None:
    """The record scored 0.9: re-deciding step 0 removes about 0.5 of it, step 1 nothing."""
    loci = [_locus(seed, Judge(recorded=0.9)) for seed in range(50)]
    assert sum(locus == 0 for locus in loci) >= 48
