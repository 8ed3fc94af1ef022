"""Planted-truth models: binary-choice agents whose exact answers follow by enumeration.

Each model is a `Scenario` (so the real `Replay` engine drives it, exactly as it drives an LLM agent)
that also states its probabilities: step k chooses BAD with probability `bad_prob(k, earlier choices)`
and a finished run fails with probability `fail_prob(choices)`. From these, `truth` computes every
quantity car estimates, by walking the tree of choices:

- `v(S) = P(fail | hold the steps in S at their recorded choice, resample the rest)`;
- the rescue curve `p_k = v({decisions before k})`, effects `v(N) - p_k`, adjacent drops;
- exact Shapley values over steps or over agents (players whose steps change nothing are null).

The walk branches only on steps that are resampled, relevant and uncertain (0 < p < 1), so long,
near-deterministic traces (n = 50 with three uncertain steps) are as cheap as three-step ones: a model
may name the steps that can matter (`relevant`); all others must leave every probability unchanged.
Nothing here is hard-coded: tests check the walk against the closed forms of `docs/validation.md`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol, overload

from car.errors import SpecError
from car.protocols import Turn
from car.sim.base import PROBABILITY, Range, Scenario, failing_trace, say
from car.trace import Action, Actor, Step, Trace

__all__ = [
    "PLANTED",
    "BinaryModel",
    "Cascade",
    "Chain",
    "ExactModel",
    "Graded",
    "LongTrace",
    "Mediated",
    "NoisyJudge",
    "PlantedAnd",
    "PlantedOr",
    "PlantedPivot",
    "Team",
    "Truth",
    "choices",
    "shapley_values",
    "truth",
]


def _is_bad(action: Action) -> bool:
    return action.text.endswith("BAD")


def choices(turns: Sequence[Turn]) -> tuple[bool, ...]:
    """The BAD/GOOD choices of a (partial) run, in step order."""
    return tuple(_is_bad(t.action) for t in turns)


class _Choices(Sequence[bool]):
    """`choices(turns)`, worked out on first use: most steps' probabilities never look at them, and
    working them out at every step of a long run costs time quadratic in its length."""

    __slots__ = ("_bad", "_turns")

    def __init__(self, turns: Sequence[Turn]) -> None:
        self._turns = turns
        self._bad: tuple[bool, ...] | None = None

    def _all(self) -> tuple[bool, ...]:
        if self._bad is None:
            self._bad = choices(self._turns)
        return self._bad

    @overload
    def __getitem__(self, i: int) -> bool: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[bool]: ...
    def __getitem__(self, i: int | slice) -> bool | Sequence[bool]:
        return self._all()[i]

    def __iter__(self) -> Iterator[bool]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._turns)


@dataclass(frozen=True)
class BinaryModel(Scenario):
    """Base class: n steps, each choosing BAD or GOOD; the run fails as a function of the choices."""

    task: ClassVar[str] = "Planted model: at each step choose GOOD or BAD; the run is then scored."
    actors: ClassVar[tuple[Actor, ...]] = (Actor(id="agent", system_prompt="Planted model."),)

    # -- what subclasses define ------------------------------------------------------------------
    def size(self) -> int:
        raise NotImplementedError

    def bad_prob(self, step: int, bad: Sequence[bool]) -> float:
        """P(step chooses BAD | the earlier choices `bad`)."""
        raise NotImplementedError

    def fail_prob(self, bad: tuple[bool, ...]) -> float:
        """The expected scorer value of a finished run with choices `bad`."""
        raise NotImplementedError

    def recorded(self) -> tuple[bool, ...]:
        """The choices of the recorded (failing) run."""
        raise NotImplementedError

    def actor_of(self, step: int) -> str:
        return self.actors[0].id

    def first_actor(self) -> str:
        return self.actor_of(0)

    def relevant(self) -> frozenset[int] | None:
        """Steps whose choice can change any probability; None means all of them."""
        return None

    # -- Scenario hooks: the same program the replay engine runs ---------------------------------
    def decide(self, step: int, actor: str, history: Sequence[Turn], u: float) -> Action:
        bad = u < self.bad_prob(step, _Choices(history))
        return say(f"step {step}: choose {'BAD' if bad else 'GOOD'}")

    def next_actor(self, step: int, history: Sequence[Turn]) -> str | None:
        return self.actor_of(step + 1) if step + 1 < self.size() else None

    def failed(self, turns: Sequence[Turn]) -> bool:
        return self.fail_prob(choices(turns)) >= 0.5

    def value(self, turns: Sequence[Turn], u: float) -> float:
        return 1.0 if u < self.fail_prob(choices(turns)) else 0.0

    def canonical(self, turns: Sequence[Turn]) -> bool:
        return choices(turns) == self.recorded()

    # -- the recorded run ------------------------------------------------------------------------
    def recorded_trace(self, seed: int = 0) -> Trace:
        """The recorded failing run, built from `recorded()` (no rejection sampling needed)."""
        rec = self.recorded()
        if len(rec) != self.size():
            raise ValueError(f"{self.name}: recorded() has {len(rec)} choices, size() is {self.size()}")
        steps: list[Step] = []
        for k, b in enumerate(rec):
            p = self.bad_prob(k, rec[:k])
            if (p if b else 1 - p) <= 0:
                raise SpecError(f"{self.described()}: the recorded choice at step {k} has probability 0")
            steps.append(
                Step(
                    index=k,
                    actor=self.actor_of(k),
                    action=say(f"step {k}: choose {'BAD' if b else 'GOOD'}"),
                )
            )
        if self.fail_prob(rec) <= 0:
            raise SpecError(f"{self.described()}: the recorded run cannot fail")
        return failing_trace(self, tuple(steps), seed)

    # -- exact answers ---------------------------------------------------------------------------
    def expected(self, held: frozenset[int]) -> float:
        """Exact v(S): the failure probability with the steps in `held` at their recorded choice."""
        n, rec, rel = self.size(), self.recorded(), self.relevant()

        def walk(k: int, bad: tuple[bool, ...], weight: float) -> float:
            if k == n:
                return weight * self.fail_prob(bad)
            if k in held or (rel is not None and k not in rel):
                # Irrelevant steps change nothing, so any choice stands for all of them.
                return walk(k + 1, (*bad, rec[k]), weight)
            p = self.bad_prob(k, bad)
            total = 0.0
            if p > 0:
                total += walk(k + 1, (*bad, True), weight * p)
            if p < 1:
                total += walk(k + 1, (*bad, False), weight * (1 - p))
            return total

        return walk(0, (), 1.0)

    def deterministic_outcome(self) -> bool:
        """Whether the scorer's value is a function of the choices (then v(N) is known exactly)."""
        n = self.size()
        values = {self.fail_prob(b) for b in itertools.product((False, True), repeat=min(n, 12))}
        return not self.stochastic_score and values <= {0.0, 1.0}


@dataclass(frozen=True)
class Truth:
    """Exact answers for one model (decision positions = steps 0..n-1)."""

    v_all: float
    v_none: float
    fail: tuple[float, ...]  # p_k: hold the steps before k, resample from k
    shapley: tuple[float, ...]  # per step
    deterministic: bool  # the scorer's value is a function of the choices

    @property
    def effects(self) -> tuple[float, ...]:
        return tuple(self.v_all - p for p in self.fail)

    @property
    def rescue(self) -> tuple[float, ...]:
        return tuple(1 - p for p in self.fail)

    @property
    def drops(self) -> tuple[float, ...]:
        nxt = (*self.fail[1:], self.v_all)
        return tuple(b - a for a, b in zip(self.fail, nxt, strict=True))

    def locus(self, min_effect: float = 0.0) -> int | None:
        """The point of commitment: the latest step whose effect exceeds `min_effect`."""
        above = [k for k, e in enumerate(self.effects) if e > min_effect + 1e-12]
        return max(above) if above else None


class ExactModel(Protocol):
    """What `truth` needs: a size, exact v(S), the steps that can matter, and the scorer's kind."""

    name: ClassVar[str]

    def size(self) -> int: ...

    def expected(self, held: frozenset[int]) -> float: ...

    def relevant(self) -> frozenset[int] | None: ...

    def deterministic_outcome(self) -> bool: ...


def shapley_values(model: ExactModel, players: Sequence[Sequence[int]]) -> tuple[float, ...]:
    """Exact Shapley values of the game v(S) over `players` (groups of steps held together).

    Players none of whose steps is relevant are null (value 0) and are left out of the enumeration,
    which keeps long traces with a few uncertain steps exact.
    """
    rel = model.relevant()
    live = [i for i, g in enumerate(players) if rel is None or any(s in rel for s in g)]
    m = len(live)
    if m > 16:
        raise ValueError(f"{model.name}: {m} non-null players is too many to enumerate")
    cache: dict[int, float] = {}

    def v(mask: int) -> float:
        if mask not in cache:
            held = frozenset(s for j in range(m) if mask >> j & 1 for s in players[live[j]])
            cache[mask] = model.expected(held)
        return cache[mask]

    phi = [0.0] * len(players)
    fact = [math.factorial(i) for i in range(m + 1)]
    for j in range(m):
        total = 0.0
        for mask in range(1 << m):
            if mask >> j & 1:
                continue
            s = bin(mask).count("1")
            total += fact[s] * fact[m - s - 1] / fact[m] * (v(mask | 1 << j) - v(mask))
        phi[live[j]] = total
    return tuple(phi)


def truth(model: ExactModel) -> Truth:
    """Every exact answer for `model` (per-step Shapley values included)."""
    n = model.size()
    fail = tuple(model.expected(frozenset(range(k))) for k in range(n))
    deterministic = model.deterministic_outcome()
    return Truth(
        v_all=model.expected(frozenset(range(n))),
        v_none=fail[0] if n else 0.0,
        fail=fail,
        shapley=shapley_values(model, [[k] for k in range(n)]),
        deterministic=deterministic,
    )


def _report_step(fail: bool) -> float:
    # The last step reports the outcome: deterministic given the history (the failure is committed).
    return 1.0 if fail else 0.0


@dataclass(frozen=True)
class PlantedPivot(BinaryModel):
    """CAR §5 pivot: step 1 is BAD with probability p and decides the run; step 2 reports.

    Exact: p_0 = p_1 = p, p_2 = 1 = v(N); locus 1; phi_1 = 1 - p, phi_0 = phi_2 = 0.
    """

    name: ClassVar[str] = "planted-pivot"
    summary: ClassVar[str] = "the run failed because step 1 chose BAD"
    defaults: ClassVar[dict[str, float]] = {"p": 0.9}
    ranges: ClassVar[dict[str, Range]] = dict.fromkeys(defaults, PROBABILITY)

    def size(self) -> int:
        return 3

    def bad_prob(self, step: int, bad: Sequence[bool]) -> float:
        if step == 1:
            return self.p("p")
        return _report_step(self._fail(bad)) if step == 2 else 0.0

    def _fail(self, bad: Sequence[bool]) -> bool:
        return bad[1]

    def fail_prob(self, bad: tuple[bool, ...]) -> float:
        return 1.0 if self._fail(bad) else 0.0

    def recorded(self) -> tuple[bool, ...]:
        return (False, True, True)

    def relevant(self) -> frozenset[int] | None:
        return frozenset({1, 2})


@dataclass(frozen=True)
class PlantedAnd(PlantedPivot):
    """CAR §5 AND: steps 0 and 1 are BAD with probability q each; failure iff both; step 2 reports.

    Exact: v(empty) = q^2, v({0}) = v({1}) = q, v({0,1}) = 1; phi_0 = phi_1 = (1 - q^2)/2, phi_2 = 0;
    p_0 = q^2, p_1 = q, p_2 = 1; locus 1.
    """

    name: ClassVar[str] = "planted-and"
    summary: ClassVar[str] = "the run failed because steps 0 and 1 both chose BAD"
    defaults: ClassVar[dict[str, float]] = {"q": 0.3}
    ranges: ClassVar[dict[str, Range]] = dict.fromkeys(defaults, PROBABILITY)

    def bad_prob(self, step: int, bad: Sequence[bool]) -> float:
        return _report_step(self._fail(bad)) if step == 2 else self.p("q")

    def _fail(self, bad: Sequence[bool]) -> bool:
        return bad[0] and bad[1]

    def recorded(self) -> tuple[bool, ...]:
        return (True, True, True)

    def relevant(self) -> frozenset[int] | None:
        return None


@dataclass(frozen=True)
class PlantedOr(PlantedAnd):
    """Overdetermination: steps 0 and 1 BAD with probability q each; failure if either is BAD.

    Recorded: both BAD. Exact: p_0 = 1 - (1 - q)^2, p_1 = p_2 = 1; locus 0; phi_0 = phi_1 = (1-q)^2/2.
    """

    name: ClassVar[str] = "planted-or"
    summary: ClassVar[str] = "the run failed because steps 0 and 1 chose BAD (either suffices)"

    def _fail(self, bad: Sequence[bool]) -> bool:
        return bad[0] or bad[1]


@dataclass(frozen=True)
class Chain(PlantedPivot):
    """Decide, then execute: step 0 plans BAD with probability a; step 1 executes the plan, slipping
    either way with probability s; failure iff the executed action is BAD; step 2 reports.

    Exact: p_0 = a(1-s) + (1-a)s, p_1 = 1 - s, p_2 = 1; with min_effect > s the locus is the decision
    (step 0), not the execution. Shapley values by enumeration.
    """

    name: ClassVar[str] = "chain"
    summary: ClassVar[str] = "a BAD plan was decided, then executed"
    defaults: ClassVar[dict[str, float]] = {"a": 0.4, "s": 0.05}
    ranges: ClassVar[dict[str, Range]] = dict.fromkeys(defaults, PROBABILITY)

    def bad_prob(self, step: int, bad: Sequence[bool]) -> float:
        if step == 0:
            return self.p("a")
        s = self.p("s")
        if step == 1:
            return 1 - s if bad[0] else s
        return _report_step(self._fail(bad))

    def recorded(self) -> tuple[bool, ...]:
        return (True, True, True)

    def relevant(self) -> frozenset[int] | None:
        return None


@dataclass(frozen=True)
class Mediated(Chain):
    """A mediated chain: step 0's choice changes step 1's probability (hi after BAD, lo after GOOD);
    step 2 is BAD with probability c independently; failure iff steps 1 and 2 are both BAD.

    Step 0 has a total effect (through step 1) but no direct one: p_0 = (a hi + (1-a) lo) c,
    p_1 = hi c, p_2 = c, v(N) = 1; locus 2; Shapley credits step 0 only through the mediation.
    """

    name: ClassVar[str] = "mediated"
    summary: ClassVar[str] = "an early choice made a later failure likely"
    defaults: ClassVar[dict[str, float]] = {"a": 0.5, "hi": 0.8, "lo": 0.1, "c": 0.5}
    ranges: ClassVar[dict[str, Range]] = dict.fromkeys(defaults, PROBABILITY)

    def size(self) -> int:
        return 3

    def bad_prob(self, step: int, bad: Sequence[bool]) -> float:
        if step == 0:
            return self.p("a")
        if step == 1:
            return self.p("hi") if bad[0] else self.p("lo")
        return self.p("c")

    def _fail(self, bad: Sequence[bool]) -> bool:
        return bad[1] and bad[2]


@dataclass(frozen=True)
class Graded(BinaryModel):
    """Graded effects with outcome noise: four independent steps (BAD with probability q_k) each add
    weight w_k to the failure score; the scorer's value is continuous, with mean
    f = 0.05 + sum_k w_k BAD_k and uniform noise of half-width min(f, 1 - f). Not deterministic: the
    factual arm v(N) = 0.95 is estimated by replay. Exact answers by enumeration (additive game:
    phi_k = w_k (1 - q_k)).
    """

    name: ClassVar[str] = "graded"
    summary: ClassVar[str] = "several steps each made the failure more likely"
    defaults: ClassVar[dict[str, float]] = {}
    stochastic_score: ClassVar[bool] = True
    q: ClassVar[tuple[float, ...]] = (0.5, 0.3, 0.6, 0.4)
    w: ClassVar[tuple[float, ...]] = (0.1, 0.4, 0.1, 0.3)

    def size(self) -> int:
        return 4

    def bad_prob(self, step: int, bad: Sequence[bool]) -> float:
        return self.q[step]

    def fail_prob(self, bad: tuple[bool, ...]) -> float:
        return 0.05 + sum(w for w, b in zip(self.w, bad, strict=False) if b)

    def value(self, turns: Sequence[Turn], u: float) -> float:
        f = self.fail_prob(choices(turns))
        return f + (2 * u - 1) * min(f, 1 - f)

    def recorded(self) -> tuple[bool, ...]:
        return (True, True, True, True)


@dataclass(frozen=True)
class Cascade(BinaryModel):
    """A history-dependent cascade: step k is BAD with probability base + gain * (BAD choices so far),
    capped at 0.9; the run fails when at least `need` of the n = 6 steps are BAD.

    Recorded: steps 1, 2 and 3 BAD. Exact answers by enumeration (2^6 paths).
    """

    name: ClassVar[str] = "cascade"
    summary: ClassVar[str] = "early mistakes made later ones likelier until the run failed"
    defaults: ClassVar[dict[str, float]] = {"base": 0.15, "gain": 0.25, "need": 3}
    ranges: ClassVar[dict[str, Range]] = {
        "base": PROBABILITY,
        "gain": Range(0),  # a step's probability is capped at 0.9 however large the gain
        "need": Range(1, 6, whole=True),  # BAD steps of the 6
    }

    def size(self) -> int:
        return 6

    def bad_prob(self, step: int, bad: Sequence[bool]) -> float:
        return min(0.9, self.p("base") + self.p("gain") * sum(bad))

    def fail_prob(self, bad: tuple[bool, ...]) -> float:
        return 1.0 if sum(bad) >= self.p("need") else 0.0

    def recorded(self) -> tuple[bool, ...]:
        return (False, True, True, True, False, False)


@dataclass(frozen=True)
class NoisyJudge(PlantedAnd):
    """The AND model scored by a noisy judge that flips the label with probability eps.

    Exact: every v(S) of the AND model mapped by v -> eps + (1 - 2 eps) v; Shapley values scale by
    (1 - 2 eps).
    """

    name: ClassVar[str] = "noisy-judge"
    summary: ClassVar[str] = "a judge flagged the run (it errs with probability eps)"
    defaults: ClassVar[dict[str, float]] = {"q": 0.3, "eps": 0.1}
    ranges: ClassVar[dict[str, Range]] = dict.fromkeys(defaults, PROBABILITY)
    stochastic_score: ClassVar[bool] = True

    def fail_prob(self, bad: tuple[bool, ...]) -> float:
        eps = self.p("eps")
        return 1 - eps if self._fail(bad) else eps


@dataclass(frozen=True)
class LongTrace(BinaryModel):
    """A near-deterministic long trace: n steps (default 30) that each keep their recorded GOOD choice
    with probability 0.9-1 and change nothing, three uncertain steps (BAD with probability q) at 30%,
    60% and 90% of the run, failure iff at least two of them are BAD; the last step reports.

    Exact: the failure is a 2-of-3 majority of the key steps; irrelevant steps are null players.
    """

    name: ClassVar[str] = "long"
    summary: ClassVar[str] = "two of three risky steps in a long run went wrong"
    defaults: ClassVar[dict[str, float]] = {"n": 30, "q": 0.4}
    # Below 8 steps (but 5) two of the three key steps coincide.
    ranges: ClassVar[dict[str, Range]] = {"n": Range(8, whole=True), "q": PROBABILITY}

    def size(self) -> int:
        return int(self.p("n"))

    def keys(self) -> tuple[int, int, int]:
        n = self.size()
        return (round(0.3 * (n - 1)), round(0.6 * (n - 1)), round(0.9 * (n - 1)) - 1)

    def relevant(self) -> frozenset[int] | None:
        return frozenset({*self.keys(), self.size() - 1})

    def bad_prob(self, step: int, bad: Sequence[bool]) -> float:
        if step in self.keys():
            return self.p("q")
        if step == self.size() - 1:
            return _report_step(self._fail(bad))
        return 0.1 * ((step * 7) % 11) / 10  # slips of 0-10% that change nothing

    def _fail(self, bad: Sequence[bool]) -> bool:
        return sum(bad[k] for k in self.keys() if k < len(bad)) >= 2

    def fail_prob(self, bad: tuple[bool, ...]) -> float:
        return 1.0 if self._fail(bad) else 0.0

    def recorded(self) -> tuple[bool, ...]:
        keys = self.keys()
        return tuple(k in keys or k == self.size() - 1 for k in range(self.size()))


@dataclass(frozen=True)
class Team(BinaryModel):
    """Three agents: a planner (steps 0 and 3), a coder (step 1) and a reviewer (step 2).

    The planner picks a risky design with probability a; the coder then writes a bug with probability
    hi (lo after a safe design); the reviewer misses a bug with probability m; the planner's final
    step ships and reports. Failure iff a bug shipped. Agent players: planner, coder, reviewer.
    """

    name: ClassVar[str] = "team"
    summary: ClassVar[str] = "a bug written after a risky design slipped through review"
    defaults: ClassVar[dict[str, float]] = {"a": 0.5, "hi": 0.6, "lo": 0.1, "m": 0.4}
    ranges: ClassVar[dict[str, Range]] = dict.fromkeys(defaults, PROBABILITY)
    actors: ClassVar[tuple[Actor, ...]] = (
        Actor(id="planner", system_prompt="You design and ship."),
        Actor(id="coder", system_prompt="You write the code."),
        Actor(id="reviewer", system_prompt="You review the code."),
    )
    order: ClassVar[tuple[str, ...]] = ("planner", "coder", "reviewer", "planner")

    def size(self) -> int:
        return 4

    def actor_of(self, step: int) -> str:
        return self.order[step]

    def bad_prob(self, step: int, bad: Sequence[bool]) -> float:
        if step == 0:
            return self.p("a")
        if step == 1:
            return self.p("hi") if bad[0] else self.p("lo")
        if step == 2:
            return self.p("m")
        return _report_step(self._fail(bad))

    def _fail(self, bad: Sequence[bool]) -> bool:
        return bad[1] and bad[2]

    def fail_prob(self, bad: tuple[bool, ...]) -> float:
        return 1.0 if self._fail(bad) else 0.0

    def recorded(self) -> tuple[bool, ...]:
        return (True, True, True, True)

    def agents(self) -> list[list[int]]:
        """Agent-level players: the steps of each actor."""
        return [[k for k in range(self.size()) if self.order[k] == a.id] for a in self.actors]


PLANTED: tuple[type[BinaryModel], ...] = (
    PlantedPivot,
    PlantedAnd,
    PlantedOr,
    Chain,
    Mediated,
    Graded,
    Cascade,
    NoisyJudge,
    LongTrace,
    Team,
)
