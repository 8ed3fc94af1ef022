"""Simulated scenarios: small probabilistic agents over the message history, with exact answers.

A scenario is a stochastic program: at each decision it reads the history (the turns so far, as a real
agent reads its messages) and draws an action with probabilities it can state exactly. The same
`Replay` engine drives it as drives a real model, through the `Policy`, `Environment` and `Scorer`
adapters below, so the scenarios test the whole pipeline against closed-form truths.

Every draw inverts one uniform number taken from the event key: two rollouts that share a replicate
make the same choice at a step whenever their probabilities agree (common random numbers).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from car.errors import SpecError
from car.protocols import Decision, EnvStep, Mode, Trajectory, Turn
from car.rng import EventKey
from car.trace import Action, Actor, Observation, Outcome, ReplaySpecs, Step, ToolCall, Trace

__all__ = ["PROBABILITY", "Range", "Scenario", "SimEnvironment", "SimPolicy", "SimScorer", "call", "say"]


@dataclass(frozen=True)
class Range:
    """The values a scenario parameter can take: `low` to `high` (both included), whole numbers
    when `whole` (a count, a step index, a cell)."""

    low: float
    high: float = math.inf
    whole: bool = False
    what: str = ""  # how the message names the value ("a probability"); else by its kind

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high and (not self.whole or value == int(value))

    def describe(self) -> str:
        what = self.what or ("a whole number" if self.whole else "a number")
        low = _number(self.low)
        if self.high == math.inf:
            return f"{what} >= {low}"
        return f"{what} in [{low}, {_number(self.high)}]"


def _number(x: float) -> str:
    return str(int(x)) if x == int(x) else repr(x)


PROBABILITY = Range(0, 1, what="a probability")


@functools.lru_cache(maxsize=4096)
def say(text: str) -> Action:
    """A text-only action. Actions are frozen, so one object serves every draw of the same text:
    no validation per draw, and its identity is worked out once (`Action.identity` caches by object)."""
    return Action(text=text)


def call(call_id: str, name: str, text: str = "", **arguments: Any) -> Action:
    import json

    return Action(
        text=text,
        tool_calls=(
            ToolCall(id=call_id, name=name, arguments=arguments, raw_arguments=json.dumps(arguments)),
        ),
    )


@dataclass(frozen=True)
class Scenario:
    """Base class: subclasses define actors, the decision program, the world and the failure."""

    name: ClassVar[str]
    summary: ClassVar[str]
    defaults: ClassVar[Mapping[str, float]] = {}
    params: Mapping[str, float] = field(default_factory=dict)

    # The values each parameter can take, for the values of the others (`params`: every parameter,
    # defaults filled in). A value outside its range runs, but answers another question (a negative
    # slip, a probability of 1.7) or none, so traces and `record` refuse it.
    ranges: ClassVar[Mapping[str, Range]] = {}

    @classmethod
    def ranges_for(cls, params: Mapping[str, float]) -> Mapping[str, Range]:
        return cls.ranges

    def described(self) -> str:
        """The scenario with its parameters, for a message: "scenario 'planted-pivot' (p=0)"."""
        params = ", ".join(f"{k}={self.p(k):g}" for k in self.defaults)
        return f"scenario {self.name!r}" + (f" ({params})" if params else "")

    @classmethod
    def range_problem(cls, params: Mapping[str, float]) -> tuple[str, str] | None:
        """The first parameter outside its range and what is valid, or None. `params` are finite
        numbers, checked in the order of `defaults` (a range may depend on an earlier parameter)."""
        merged = {**cls.defaults, **params}
        ranges = cls.ranges_for(merged)
        for key in cls.defaults:
            valid = ranges.get(key)  # a scenario declares no range for a parameter it leaves open
            if valid is not None and not valid.holds(merged[key]):
                if key in params:
                    return key, f"expected {valid.describe()}, got {_number(merged[key])}"
                return key, (
                    f"parameter {key!r} is not given and its default {_number(merged[key])} does not "
                    f"fit the others: expected {valid.describe()}"
                )
        return None

    def p(self, name: str) -> float:
        return float(self.params.get(name, self.defaults[name]))

    # -- what subclasses define ------------------------------------------------------------------
    task: ClassVar[str]
    actors: ClassVar[tuple[Actor, ...]]

    def decide(self, step: int, actor: str, history: Sequence[Turn], u: float) -> Action:
        """The action at `step` given the history and a uniform draw `u` in [0, 1)."""
        raise NotImplementedError

    def observe(self, step: int, actor: str, action: Action) -> tuple[Observation, ...]:
        """The observations that follow `action` (tool results)."""
        return ()

    def next_actor(self, step: int, history: Sequence[Turn]) -> str | None:
        """Who acts after `step` (None ends the episode). `history` includes step `step`."""
        raise NotImplementedError

    def failed(self, turns: Sequence[Turn]) -> bool:
        raise NotImplementedError

    def first_actor(self) -> str:
        """Who acts at step 0."""
        return self.actors[0].id

    def departure(self, trace: Trace) -> str | None:
        """Where `trace` leaves this scenario's program, or None when it follows it: who decides at
        each decision step, and when runs end (a scripted turn, a user's, may sit anywhere). The
        program knows nothing else: a `sim:` spec on another agent's trace would fail in every
        rollout, so it is refused before any."""
        decisions = set(trace.decision_steps)
        expected: str | None = self.first_actor()
        history: list[Turn] = []
        for step in trace.steps:
            if step.index in decisions:
                if expected is None:
                    return f"its runs end before step {step.index}, where {step.actor!r} decides"
                if step.actor != expected:
                    return f"step {step.index} is by {step.actor!r}, where {expected!r} acts in it"
            history.append(Turn(step.index, step.actor, step.action, step.observations, Mode.COPIED))
            try:
                expected = self.next_actor(step.index, history)
            except Exception:  # a program that reads what its own runs hold
                return f"it cannot read step {step.index}'s action as one of its own"
        return None

    def canonical(self, turns: Sequence[Turn]) -> bool:
        """Whether a failing run is the one the shipped trace is meant to show."""
        return True

    # A scenario whose world is random (a slippery move, a flaky tool) says so here and overrides
    # `observe_random`; the draw comes from the environment's event key.
    stochastic_env: ClassVar[bool] = False

    def observe_random(
        self, step: int, actor: str, action: Action, history: Sequence[Turn], u: float
    ) -> tuple[Observation, ...]:
        """The observations that follow `action` in a random world, given a uniform draw `u`."""
        return self.observe(step, actor, action)

    # A scenario whose failure label is itself random (outcome noise, a noisy judge) says so here and
    # overrides `value`; its scorer is then not deterministic and the factual arm is estimated.
    stochastic_score: ClassVar[bool] = False

    def value(self, turns: Sequence[Turn], u: float) -> float:
        """The scorer's value for a finished run, given a uniform draw `u` (used when stochastic)."""
        return 1.0 if self.failed(turns) else 0.0


@dataclass
class SimPolicy:
    scenario: Scenario
    spec: str

    async def act(self, decision: Decision, key: EventKey) -> Action:
        return self.scenario.decide(decision.step, decision.actor.id, decision.history, key.uniform())


@dataclass
class SimEnvironment:
    scenario: Scenario
    spec: str

    async def restore(self, history: Sequence[Turn]) -> tuple[Turn, ...]:
        # The world is a function of the history, so the history is the whole state.
        return tuple(history)

    async def step(
        self, state: tuple[Turn, ...], index: int, actor: str, action: Action, key: EventKey
    ) -> EnvStep:
        if self.scenario.stochastic_env:
            obs = self.scenario.observe_random(index, actor, action, state, key.uniform())
        else:
            obs = self.scenario.observe(index, actor, action)
        history = (*state, Turn(index, actor, action, obs, Mode.RESAMPLED))
        return EnvStep(obs, history, self.scenario.next_actor(index, history))


@dataclass
class SimScorer:
    scenario: Scenario
    spec: str
    deterministic: bool = True

    def __post_init__(self) -> None:
        if self.scenario.stochastic_score:
            self.deterministic = False

    async def score(self, trajectory: Trajectory, key: EventKey) -> float | None:
        if self.scenario.stochastic_score:
            return self.scenario.value(trajectory.turns, key.uniform())
        return 1.0 if self.scenario.failed(trajectory.turns) else 0.0


async def _rollout(scenario: Scenario, seed: int, attempt: int) -> list[Turn]:
    turns: list[Turn] = []
    actor: str | None = scenario.first_actor()
    deciders = {a.id for a in scenario.actors}
    index = 0
    while actor is not None and actor in deciders and index < 100:
        u = EventKey(seed, attempt, index, "record").uniform()
        action = scenario.decide(index, actor, turns, u)
        turns.append(Turn(index, actor, action, scenario.observe(index, actor, action), Mode.COPIED))
        actor = scenario.next_actor(index, turns)
        index += 1
    return turns


def record(scenario: Scenario, *, seed: int = 0, max_attempts: int = 100_000) -> Trace:
    """Run the scenario until it fails in its canonical way and return that run as a trace."""
    import asyncio

    for attempt in range(max_attempts):
        turns = asyncio.run(_rollout(scenario, seed, attempt))
        if scenario.failed(turns) and scenario.canonical(turns):
            break
    else:  # parameters can rule the failure out (research-team with unreliable=1, skip=0)
        raise SpecError(
            f"{scenario.described()}: no canonical failure in {max_attempts} attempts; do its "
            "parameters allow one?"
        )
    steps = tuple(
        Step(index=t.index, actor=t.actor, action=t.action, observations=t.observations) for t in turns
    )
    return failing_trace(scenario, steps, seed)


def failing_trace(scenario: Scenario, steps: tuple[Step, ...], seed: int) -> Trace:
    """A recorded failing run of `scenario`: it names the scenario as its default components and
    keeps the parameters that make `sim:NAME` reproduce it."""
    spec = f"sim:{scenario.name}"
    params = {k: scenario.p(k) for k in scenario.defaults}
    return Trace(
        id=f"{scenario.name}-{seed}",
        task=scenario.task,
        actors=scenario.actors,
        steps=steps,
        outcome=Outcome(failed=True, label="failure", detail=scenario.summary),
        replay=ReplaySpecs(policy=spec, env=spec, scorer=spec),
        metadata={"sim": {"scenario": scenario.name, "params": params, "seed": seed}},
    )
