"""A small tabular stochastic world with exact answers by dynamic programming.

`Corridor` is a gridworld of `length` cells: cell 0 is a cliff, the last cell the goal, both absorbing.
For `horizon` steps the agent calls `move(direction)` with direction left, stay or right, drawn from a
policy table that depends on its cell (three actions, so the binary models' shortcuts do not apply);
the move slips to the opposite direction with probability `slip` (a random world: the environment's
event key draws it). The run fails when it ends on the cliff. The agent reads its cell from the last
tool result, as a real agent reads its messages.

Exact answers follow the engine's own semantics: the steps before the first changed one are copied
from the record (moves and their recorded outcomes), and from there the dynamic programme
V_k(s) = sum_a pi_k(a | s) sum_s' T(s' | s, a) V_{k+1}(s') runs with pi_k forcing the recorded
action at held steps. Every v(S), the rescue curve and the Shapley values follow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from car.errors import SpecError
from car.protocols import Turn
from car.rng import EventKey
from car.sim.base import PROBABILITY, Range, Scenario, call, failing_trace
from car.trace import Action, Actor, Observation, Step, Trace

__all__ = ["Corridor"]

MOVES = ("left", "stay", "right")
_DELTA = {"left": -1, "stay": 0, "right": 1}
_FLIP = {"left": "right", "stay": "stay", "right": "left"}


@dataclass(frozen=True)
class Corridor(Scenario):
    """A corridor with a cliff (see the module docstring). Start: cell `start`."""

    name: ClassVar[str] = "corridor"
    summary: ClassVar[str] = "the agent walked off the cliff"
    defaults: ClassVar[dict[str, float]] = {"length": 5, "horizon": 6, "slip": 0.2, "start": 2}
    task: ClassVar[str] = "Reach the goal at the right end of the corridor; cell 0 is a cliff."
    actors: ClassVar[tuple[Actor, ...]] = (
        Actor(id="agent", system_prompt="Move with the move tool.", tools=({"name": "move"},)),
    )
    stochastic_env: ClassVar[bool] = True

    @classmethod
    def ranges_for(cls, params: Mapping[str, float]) -> Mapping[str, Range]:
        # A start on the cliff or the goal would never move: the agent starts between them.
        length = Range(3, whole=True)
        last = int(params["length"]) - 1 if length.holds(params["length"]) else 2
        return {
            "length": length,
            "horizon": Range(1, whole=True),
            "slip": PROBABILITY,
            "start": Range(1, last - 1, whole=True, what="a cell"),
        }

    def size(self) -> int:
        return int(self.p("horizon"))

    def policy(self, cell: int) -> tuple[float, float, float]:
        """P(left), P(stay), P(right) in `cell`: careless next to the cliff, keen elsewhere."""
        if cell == 1:
            return (0.35, 0.25, 0.4)
        return (0.25, 0.15, 0.6)

    def transition(self, cell: int, move: str) -> list[tuple[int, float]]:
        last = int(self.p("length")) - 1
        if cell in (0, last):
            return [(cell, 1.0)]
        slip = self.p("slip")
        go = min(max(cell + _DELTA[move], 0), last)
        if move == "stay":
            return [(cell, 1.0)]
        back = min(max(cell + _DELTA[_FLIP[move]], 0), last)
        return [(go, 1 - slip), (back, slip)]

    # -- the program the replay engine runs ----------------------------------------------------------
    def cell(self, history: Sequence[Turn]) -> int:
        for t in reversed(history):
            for o in t.observations:
                return int(o.content.split()[-1])
        return int(self.p("start"))

    def decide(self, step: int, actor: str, history: Sequence[Turn], u: float) -> Action:
        probs = self.policy(self.cell(history))
        acc = 0.0
        move = MOVES[-1]
        for name, p in zip(MOVES, probs, strict=True):
            acc += p
            if u < acc:
                move = name
                break
        return call(f"call_{step}", "move", direction=move)

    def observe_random(
        self, step: int, actor: str, action: Action, history: Sequence[Turn], u: float
    ) -> tuple[Observation, ...]:
        move = str(action.tool_calls[0].arguments["direction"])
        acc = 0.0
        outcomes = self.transition(self.cell(history), move)
        cell = outcomes[-1][0]
        for c, p in outcomes:
            acc += p
            if u < acc:
                cell = c
                break
        return (Observation(call_id=action.tool_calls[0].id, content=f"cell {cell}"),)

    def next_actor(self, step: int, history: Sequence[Turn]) -> str | None:
        return "agent" if step + 1 < self.size() else None

    def failed(self, turns: Sequence[Turn]) -> bool:
        return self.cell(turns) == 0

    # -- the recorded run --------------------------------------------------------------------------
    def _run(self, seed: int, attempt: int) -> list[Turn]:
        from car.protocols import Mode

        turns: list[Turn] = []
        for k in range(self.size()):
            action = self.decide(k, "agent", turns, EventKey(seed, attempt, k, "record").uniform())
            u = EventKey(seed, attempt, k, "record-env").uniform()
            obs = self.observe_random(k, "agent", action, turns, u)
            turns.append(Turn(k, "agent", action, obs, Mode.COPIED))
        return turns

    def recorded_trace(self, seed: int = 0) -> Trace:
        """The first failing run of the seeded sequence of attempts."""
        attempts = 10_000
        for attempt in range(attempts):
            turns = self._run(seed, attempt)
            if self.failed(turns):
                break
        else:  # parameters can rule the fall out (a horizon too short to reach the cliff)
            raise SpecError(
                f"{self.described()}: no failing run in {attempts} attempts; do its parameters "
                "allow one?"
            )
        steps = tuple(
            Step(index=t.index, actor=t.actor, action=t.action, observations=t.observations)
            for t in turns
        )
        return failing_trace(self, steps, seed)

    # -- exact answers -----------------------------------------------------------------------------
    def recorded_path(self) -> tuple[list[str], list[int]]:
        """The recorded moves and the cell before each step (plus the final cell)."""
        turns = self.recorded_trace().steps
        moves = [str(s.action.tool_calls[0].arguments["direction"]) for s in turns]
        cells = [int(self.p("start"))] + [int(s.observations[0].content.split()[-1]) for s in turns]
        return moves, cells

    def expected(self, held: frozenset[int]) -> float:
        """Exact v(S) under the engine's semantics (copied prefix, then live with held moves)."""
        moves, cells = self.recorded_path()
        h = self.size()
        first = next((k for k in range(h) if k not in held), h)
        if first == h:
            return 1.0 if cells[h] == 0 else 0.0
        last = int(self.p("length")) - 1
        value = {c: 1.0 if c == 0 else 0.0 for c in range(last + 1)}
        for k in range(h - 1, first - 1, -1):
            new = {}
            for c in range(last + 1):
                held_move = [(moves[k], 1.0)]
                dist = held_move if k in held else list(zip(MOVES, self.policy(c), strict=True))
                new[c] = sum(pa * pt * value[c2] for a, pa in dist for c2, pt in self.transition(c, a))
            value = new
        return value[cells[first]]

    def relevant(self) -> frozenset[int] | None:
        return None

    def deterministic_outcome(self) -> bool:
        return True
