"""The three seams of car: `Policy`, `Environment` and `Scorer`, and the values that cross them.

All three are async (they do I/O in real backends). Each is constructed for one trace by a factory
named by a spec string (see `car.specs`), so none of them needs the trace passed on every call.

- A `Policy` draws an action for a `Decision` (the context an actor decides from), given an `EventKey`.
- An `Environment` restores its state from a history, executes an action's tool calls and says who
  acts next. States are values: `step` must not mutate the state it is given, which is what makes
  `fork` (continue a rollout from any intermediate state) correct.
- A `Scorer` maps a finished `Trajectory` to a value in [0, 1] (1 = the failure being debugged), or
  None (or NaN) when it cannot score that trajectory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from car.rng import EventKey
from car.trace import Action, Actor, Message, Observation, Sampling, Trace

__all__ = [
    "Decision",
    "EnvStep",
    "Environment",
    "Mode",
    "Policy",
    "Scorer",
    "Trajectory",
    "Turn",
    "render_messages",
]


class Mode(StrEnum):
    """How a turn of a rollout came about."""

    COPIED = "copied"  # copied from the record, before the first changed step: nothing ran
    HELD = "held"  # recorded action forced at its position after the first change
    RESAMPLED = "resampled"  # drawn afresh from the policy
    FORCED = "forced"  # a given action (fork)
    SCRIPTED = "scripted"  # a non-deciding actor's recorded turn replayed by position


@dataclass(frozen=True, slots=True)
class Turn:
    """One executed (or copied) step of a rollout."""

    index: int
    actor: str
    action: Action
    observations: tuple[Observation, ...]
    mode: Mode
    diverged: bool = False  # a held turn whose context differed from the recorded one

    def identity(self) -> str:
        """Who acted, the action's `identity` and what followed it: two turns with one identity are
        the same to every later step."""
        obs = "|".join(f"{o.call_id}:{o.is_error}:{o.content}" for o in self.observations)
        return f"{self.actor}#{self.action.identity()}#{obs}"


@dataclass(frozen=True)
class Decision:
    """Everything an actor decides from at one step of a rollout."""

    step: int
    actor: Actor
    task: str | dict[str, Any]
    history: tuple[Turn, ...]
    sampling: Sampling | None
    recorded_context: tuple[Message, ...] | None = None  # explicit context, if still valid
    actors: tuple[Actor, ...] = field(default=())

    def messages(self) -> tuple[Message, ...]:
        """The chat messages this actor sees: the recorded ones if they still apply, else rebuilt."""
        if self.recorded_context is not None:
            return self.recorded_context
        return render_messages(self.actor, self.task, self.history, self.actors)


def render_messages(
    actor: Actor, task: str | dict[str, Any], history: Sequence[Turn], actors: Sequence[Actor] = ()
) -> tuple[Message, ...]:
    """Rebuild an actor's chat view from a history ("prefix" contexts, fidelity class B and C).

    The actor's own turns become assistant messages followed by their tool results; other actors'
    turns become named user messages (with their tool calls and results rendered as text) unless the
    actor's view is "own".
    """
    import json

    kinds = {a.id: a.kind for a in actors}
    out: list[Message] = []
    if actor.system_prompt:
        out.append(Message(role="system", content=actor.system_prompt))
    task_text = task if isinstance(task, str) else json.dumps(task, ensure_ascii=False)
    if task_text:
        out.append(Message(role="user", content=task_text))
    for turn in history:
        if turn.actor == actor.id:
            out.append(
                Message(
                    role="assistant",
                    content=turn.action.text,
                    tool_calls=turn.action.tool_calls,
                    reasoning=turn.action.reasoning,
                )
            )
            out.extend(
                Message(role="tool", content=o.content, tool_call_id=o.call_id)
                for o in turn.observations
            )
        elif actor.view == "all" or kinds.get(turn.actor) == "user":
            parts = [turn.action.text] if turn.action.text else []
            parts += [f"[{c.name}] {c.raw_arguments or c.arguments}" for c in turn.action.tool_calls]
            parts += [f"[result] {o.content}" for o in turn.observations]
            out.append(Message(role="user", name=turn.actor, content="\n".join(parts)))
    return tuple(out)


@dataclass(frozen=True)
class EnvStep:
    """What an environment returns for one turn."""

    observations: tuple[Observation, ...]
    state: Any
    next_actor: str | None  # None: the episode is over


@dataclass(frozen=True)
class Trajectory:
    """A finished rollout as the scorer sees it."""

    trace: Trace
    turns: tuple[Turn, ...]
    truncated: bool = False

    @property
    def final_text(self) -> str:
        """The last non-empty text said by a deciding actor (the run's answer)."""
        deciders = {a.id for a in self.trace.actors if a.kind == "agent"}
        for turn in reversed(self.turns):
            if turn.actor in deciders and turn.action.text.strip():
                return turn.action.text
        return ""

    def is_record(self) -> bool:
        """Whether this trajectory is exactly the recorded run."""
        rec = self.trace.steps
        return len(rec) == len(self.turns) and all(
            t.actor == s.actor and t.action.same(s.action) and t.observations == s.observations
            for t, s in zip(self.turns, rec, strict=True)
        )


@runtime_checkable
class Policy(Protocol):
    """Draws actions for deciding actors. `spec` names it in reports."""

    # Read-only members (a property here), so a frozen dataclass or a property satisfies them too:
    # car never sets them on a component it is given.
    @property
    def spec(self) -> str: ...

    async def act(self, decision: Decision, key: EventKey) -> Action: ...


@runtime_checkable
class Environment(Protocol):
    """Executes actions and decides turn order; states are immutable values."""

    @property
    def spec(self) -> str: ...

    async def restore(self, history: Sequence[Turn]) -> Any:
        """The state after `history` (a prefix of the record or of a rollout), without re-execution."""
        ...

    async def step(self, state: Any, index: int, actor: str, action: Action, key: EventKey) -> EnvStep:
        """Execute the action's tool calls from `state`; return observations and the next actor."""
        ...


@runtime_checkable
class Scorer(Protocol):
    """Maps a finished trajectory to [0, 1] (1 = failure) or None or NaN ("cannot score")."""

    @property
    def spec(self) -> str: ...

    @property
    def deterministic(self) -> bool:
        """Same trajectory, same value: lets car score the factual run once."""
        ...

    async def score(self, trajectory: Trajectory, key: EventKey) -> float | None: ...
