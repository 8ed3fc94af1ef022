"""Built-in environments and scorers that work on any trace.

- `RecordedEnvironment` (`recorded`): serves the recorded observation for an identical call (tool name
  plus canonical arguments). A call it has never seen ends the rollout as an error: it never guesses.
  Turn order follows the record by position; the episode ends where the record ends.
- `ToolCalledScorer` (`tool-called:NAME`): 1 if any turn called tool NAME.
- `RegexScorer` (`regex:PATTERN`): 1 if the final answer matches PATTERN (Python `re.search`).
- `RecordedScorer` (`recorded`): the trace's own outcome, for the recorded run only; any other
  trajectory cannot be scored with it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from car.errors import InputError, RolloutError
from car.protocols import EnvStep, Trajectory, Turn
from car.rng import EventKey
from car.trace import Action, Observation, ToolCall, Trace

__all__ = ["RecordedEnvironment", "RecordedScorer", "RegexScorer", "ToolCalledScorer"]


@dataclass
class RecordedEnvironment:
    """Replays recorded observations for calls identical to recorded ones."""

    trace: Trace
    spec: str = "recorded"
    _served: dict[str, list[Observation]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._served = {}
        for step in self.trace.steps:
            by_id = {o.call_id: o for o in step.observations}
            for call in step.action.tool_calls:
                obs = by_id.get(call.id)
                if obs is not None:
                    self._served.setdefault(call.signature(), []).append(obs)

    async def restore(self, history: Sequence[Turn]) -> Counter[str]:
        # The state is how often each call signature has been served (repeated calls replay in order).
        return Counter(c.signature() for t in history for c in t.action.tool_calls)

    async def step(
        self, state: Counter[str], index: int, actor: str, action: Action, key: EventKey
    ) -> EnvStep:
        steps = self.trace.steps
        nxt = steps[index + 1].actor if index + 1 < len(steps) else None
        if not action.tool_calls:
            # Nothing served: the state is the same value (states are never mutated), not a copy.
            return EnvStep((), state, nxt)
        new = Counter(state)
        observations = []
        for j, call in enumerate(action.tool_calls):
            sig = call.signature()
            recorded = self._served.get(sig)
            if recorded:
                obs = recorded[min(new[sig], len(recorded) - 1)]
                observations.append(
                    Observation(call_id=call.id, content=obs.content, is_error=obs.is_error)
                )
            else:
                observations.append(await self.unseen(call, j, index, key))
            new[sig] += 1
        return EnvStep(tuple(observations), new, nxt)

    async def unseen(self, call: ToolCall, j: int, index: int, key: EventKey) -> Observation:
        """The observation for a call the record never saw (the j-th call of step `index`)."""
        raise RolloutError(
            f"step {index}: the recorded environment never saw the call {call.signature()}; "
            "choose an environment that can execute it (--env)"
        )


@dataclass
class ToolCalledScorer:
    name: str
    spec: str = ""
    deterministic: bool = True

    def __post_init__(self) -> None:
        self.spec = self.spec or f"tool-called:{self.name}"

    async def score(self, trajectory: Trajectory, key: EventKey) -> float | None:
        called = any(c.name == self.name for t in trajectory.turns for c in t.action.tool_calls)
        return 1.0 if called else 0.0


@dataclass
class RegexScorer:
    pattern: str
    spec: str = ""
    deterministic: bool = True

    def __post_init__(self) -> None:
        self.spec = self.spec or f"regex:{self.pattern}"
        try:
            self._re = re.compile(self.pattern)
        except re.error as exc:
            raise InputError(f"scorer 'regex:{self.pattern}': invalid pattern: {exc}") from None

    async def score(self, trajectory: Trajectory, key: EventKey) -> float | None:
        return 1.0 if self._re.search(trajectory.final_text) else 0.0


@dataclass
class RecordedScorer:
    trace: Trace
    spec: str = "recorded"
    deterministic: bool = True

    def __post_init__(self) -> None:
        if self.trace.outcome.value is None:
            raise InputError(
                f"scorer 'recorded': trace {self.trace.id!r} records no outcome "
                "($.outcome.failed or $.outcome.score)"
            )

    async def score(self, trajectory: Trajectory, key: EventKey) -> float | None:
        return self.trace.outcome.value if trajectory.is_record() else None
