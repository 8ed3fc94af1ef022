"""Scenarios with shared credit and exact Shapley values (for the Shapley estimators and their tests).

    long-and             `steps` decision steps of one agent; steps `a` and `b` choose BAD with
                         probability q (failure iff both are BAD); every other step but the last
                         flips a coin that changes nothing; the last step reports. Exact for any
                         length: phi_a = phi_b = (1 - q^2)/2, every other step 0. Too many players
                         for exact enumeration at a small budget, so `car blame` walks.
    research-team-world  `research-team` with a scorer that checks the world, not the answer text:
                         the extractor and the orchestrator write context-free text and the team's
                         figure is the verified one if the verifier checked, else the fetched page's.
                         Exact with agent players (u = unreliable, s = skip): an AND game,
                         searcher ((s - u*s) + (1 - u))/2 = 0.455, verifier ((u - u*s) + (1 - s))/2
                         = 0.405 at the defaults (they sum to 1 - u*s), orchestrator, extractor 0.

Why the second exists: holding is by position, so in `research-team` holding the orchestrator's final
turn forces its recorded wrong answer, and holding the extractor forces the recorded wrong figure.
There, both carry real Shapley credit (orchestrator about 0.42 at the defaults), which is the
honest answer for that scorer; `research-team-world` is the game in which they are bystanders.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from car.protocols import Turn
from car.sim.base import PROBABILITY, Range, Scenario, call, say
from car.sim.scenarios import RELIABLE, UNRELIABLE, ResearchTeam
from car.trace import Action, Actor

__all__ = ["LongAnd", "ResearchTeamWorld"]


@dataclass(frozen=True)
class LongAnd(Scenario):
    name: ClassVar[str] = "long-and"
    summary: ClassVar[str] = "the run failed because two of its many steps both chose BAD"
    defaults: ClassVar[dict[str, float]] = {"steps": 12, "a": 3, "b": 8, "q": 0.3}

    @classmethod
    def ranges_for(cls, params: Mapping[str, float]) -> Mapping[str, Range]:
        # The pivots are two decision steps, a before b, before the last step (which reports).
        steps = Range(3, whole=True)
        last = int(params["steps"]) - 1 if steps.holds(params["steps"]) else 2
        a = Range(0, last - 2, whole=True, what="a step index")
        first = int(params["a"]) if a.holds(params["a"]) else 0
        b = Range(first + 1, last - 1, whole=True, what="a step index after a")
        return {"steps": steps, "a": a, "b": b, "q": PROBABILITY}

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


@dataclass(frozen=True)
class ResearchTeamWorld(ResearchTeam):
    name: ClassVar[str] = "research-team-world"
    summary: ClassVar[str] = "the team reported an unverified figure from an unreliable source"

    def decide(self, step: int, actor: str, history: Sequence[Turn], u: float) -> Action:
        if step == 1:
            url = UNRELIABLE if u < self.p("unreliable") else RELIABLE
            return call("call_fetch", "fetch", "Fetching the best-looking source.", url=url)
        if step == 2:
            return say("EXTRACTED: the figure from the fetched page.")
        if step == 4:
            return say("ANSWER: submitting the team's figure.")
        return super().decide(step, actor, history, u)

    def failed(self, turns: Sequence[Turn]) -> bool:
        fetched = [
            str(c.arguments.get("url"))
            for t in turns
            if t.actor == "searcher"
            for c in t.action.tool_calls
        ]
        verified = any(
            c.name == "fetch" for t in turns if t.actor == "verifier" for c in t.action.tool_calls
        )
        answered = any(t.action.text.startswith("ANSWER:") for t in turns)
        return answered and not verified and any("forum" in u for u in fetched)
