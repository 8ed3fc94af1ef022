"""A long planted run for the permutation (fork-walk) estimator: many decision steps, two that matter.

    long-and   `steps` decision steps of one agent; steps `a` and `b` choose BAD with probability q
               (failure iff both are BAD); every other step but the last flips a coin that changes
               nothing; the last step reports.

Exact (any number of steps): phi_a = phi_b = (1 - q^2)/2; every other player 0; v(empty) = q^2.
Too many players for exact enumeration at a small budget, so `car blame` walks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from car.protocols import Turn
from car.sim.base import Scenario, say
from car.trace import Action, Actor

__all__ = ["LongAnd"]


@dataclass(frozen=True)
class LongAnd(Scenario):
    name: ClassVar[str] = "long-and"
    summary: ClassVar[str] = "the run failed because two of its many steps both chose BAD"
    defaults: ClassVar[dict[str, float]] = {"steps": 12, "a": 3, "b": 8, "q": 0.3}
    task: ClassVar[str] = "Planted model: many choices, two of which matter; the last step reports."
    actors: ClassVar[tuple[Actor, ...]] = (Actor(id="agent", system_prompt="Planted model."),)

    def _n(self) -> int:
        return int(self.p("steps"))

    def _pivots(self) -> tuple[int, int]:
        return int(self.p("a")), int(self.p("b"))

    def decide(self, step: int, actor: str, history: Sequence[Turn], u: float) -> Action:
        if step == self._n() - 1:
            return say(f"step {step}: report {'FAIL' if self.failed(history) else 'OK'}")
        if step in self._pivots():
            return say(f"step {step}: choose {'BAD' if u < self.p('q') else 'GOOD'}")
        return say(f"step {step}: note {'heads' if u < 0.5 else 'tails'}")

    def next_actor(self, step: int, history: Sequence[Turn]) -> str | None:
        return "agent" if step + 1 < self._n() else None

    def failed(self, turns: Sequence[Turn]) -> bool:
        a, b = self._pivots()
        bad = {t.index for t in turns if t.action.text.endswith("BAD")}
        return a in bad and b in bad
