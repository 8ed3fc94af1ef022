"""The policy and scorer `bench.scale_speed` replays its text traces with (`--policy FILE@policy`).

The policy stands in for a model at next to no cost: it returns the recorded action as a new object
(as a model's answer would be) and re-decides one time in ten, saying `[fix]` or `[noise]` after the
recorded text. The scorer calls the run failed unless a `[fix]` was said at or before the step named in
`metadata.mistake_step`, so the steps up to it can rescue the run and the later ones cannot.
"""

from __future__ import annotations

from car import Action, Decision, EventKey, Trace, Trajectory

REDECIDE = 0.1


class CopyPolicy:
    spec = "scale_plugin.py@policy"

    def __init__(self, trace: Trace) -> None:
        self.trace = trace

    async def act(self, decision: Decision, key: EventKey) -> Action:
        steps = self.trace.steps
        recorded = steps[decision.step].action if decision.step < len(steps) else Action(text="done")
        u = key.uniform()
        if u < REDECIDE:
            return Action(text=recorded.text + (" [fix]" if u < REDECIDE / 2 else " [noise]"))
        return recorded.model_copy()


class FixScorer:
    spec = "scale_plugin.py@scorer"
    deterministic = True

    def __init__(self, trace: Trace) -> None:
        self.last = int(trace.metadata["mistake_step"])

    async def score(self, trajectory: Trajectory, key: EventKey) -> float:
        fixed = any(t.index <= self.last and t.action.text.endswith("[fix]") for t in trajectory.turns)
        return 0.0 if fixed else 1.0


def policy(trace: Trace) -> CopyPolicy:
    return CopyPolicy(trace)


def scorer(trace: Trace) -> FixScorer:
    return FixScorer(trace)
