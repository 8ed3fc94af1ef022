"""The replay engine: one agent loop that runs a recorded trace under an intervention plan.

A `Plan` says, for each decision step, whether it is held at its recorded action, resampled from the
policy, or forced to a given action. `Replay.run` copies every step before the first changed one from
the record (observations included: no policy call, no tool call), asks the environment to restore its
state there, and runs the loop live from that point until the environment says the episode is over or
the step cap (recorded length + slack) is hit. `Replay.fork` continues an existing rollout from any
intermediate step with a forced action; it is the primitive estimators use to share prefixes.

Every draw is keyed by (seed, replicate, step, kind): rollouts on the same replicate share the noise of
every step they both draw at, whatever order or concurrency they run in.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import numbers
from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar

import numpy as np

from car.errors import BackendError, RolloutError, one_line
from car.protocols import Decision, Environment, EnvStep, Mode, Policy, Scorer, Trajectory, Turn
from car.rng import EventKey
from car.trace import Action, Sampling, Step, Trace

__all__ = ["Plan", "Replay", "Rollout", "RowRunner", "Status", "gather_all"]

Status = Literal["ok", "error", "unscorable"]
T = TypeVar("T")


async def gather_all(jobs: Iterable[Awaitable[T]], limit: int | None = None) -> list[T]:
    """Await every job, at most `limit` at a time, and return their results in order.

    `jobs` may be lazy (a generator): with a `limit`, a fixed pool of `limit` workers (fewer when
    there are fewer jobs) takes the next job only when a slot frees, so a batch of any size holds at
    most `limit` jobs at once (the rest are not made yet). Without one, every job is started at once.

    On the first failure (or if the caller is cancelled) no further job is taken, and the started
    ones are cancelled and awaited before the exception propagates: no job outlives the call, so none
    is still making policy calls after the components are closed. A job never started is never made
    (a generator is closed) or, when it was made already (a list of coroutines), closed unawaited.
    """
    if limit is not None and limit < 1:
        _close(iter(jobs))
        raise ValueError(f"gather_all: limit must be at least 1, got {limit}")
    if limit is None:  # every job at once: one worker each
        jobs = list(jobs)
        limit = max(1, len(jobs))
    pending = iter(jobs)
    results: list[Any] = []
    stop = False

    def take() -> tuple[int, Awaitable[Any]] | None:
        job = next(pending, None)
        if job is None:
            return None
        results.append(None)
        return len(results) - 1, job

    async def worker(i: int, job: Awaitable[Any]) -> None:
        nonlocal stop
        while True:
            try:
                results[i] = await job
                # A job that never waits (a simulated agent) never hands the loop back: a Ctrl-C
                # or SIGTERM, which cancels the run through the loop, would wait for every job.
                await asyncio.sleep(0)
            except BaseException:
                stop = True  # the others take no further job
                raise
            taken = None if stop else take()
            if taken is None:
                return
            i, job = taken

    # A worker only for a job there is: a `limit` far above the plan's size (--concurrency 1000000)
    # started that many idle workers, which took minutes and gigabytes before the first rollout.
    tasks: list[asyncio.Future[None]] = []
    first: list[Awaitable[Any]] = []  # each worker's first job, taken before the worker runs
    try:
        while len(tasks) < limit and (taken := take()) is not None:
            first.append(taken[1])
            tasks.append(asyncio.ensure_future(worker(*taken)))
        await asyncio.gather(*tasks)
    except BaseException:
        stop = True
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        _close(iter(first))  # a worker cancelled before it ran never awaited its job
        _close(pending)
        raise
    return results


def _close(pending: Iterator[Awaitable[Any]]) -> None:
    """Drop the jobs `gather_all` never took: a generator is closed before it makes them; jobs made
    already (a list's coroutines) are closed, else Python warns that each was never awaited."""
    if isinstance(pending, Generator):
        pending.close()
        return
    for job in pending:
        if asyncio.iscoroutine(job):
            job.close()


@dataclass(frozen=True)
class Plan:
    """An intervention plan over step positions.

    Decision steps in `held` keep their recorded action; steps in `forced` take the given action;
    every other decision step (and every step past the recorded length) is resampled.
    """

    held: frozenset[int]
    forced: tuple[tuple[int, Action], ...] = ()

    @classmethod
    def hold(cls, steps: Iterable[int]) -> Plan:
        return cls(frozenset(steps))

    @classmethod
    def hold_all(cls, trace: Trace) -> Plan:
        return cls(frozenset(trace.decision_steps))

    @classmethod
    def resample_from(cls, trace: Trace, step: int) -> Plan:
        """Hold every decision step before `step`; resample `step` and everything after it."""
        return cls(frozenset(d for d in trace.decision_steps if d < step))

    @property
    def forced_map(self) -> Mapping[int, Action]:
        return dict(self.forced)

    def with_forced(self, step: int, action: Action) -> Plan:
        forced = tuple(sorted({**self.forced_map, step: action}.items(), key=lambda kv: kv[0]))
        return Plan(self.held - {step}, forced)

    def first_change(self, trace: Trace) -> int:
        """The first position whose action may differ from the record (len(steps) if none)."""
        forced = self.forced_map
        for d in trace.decision_steps:
            if d in forced:
                if forced[d].identity() != trace.steps[d].action.identity():
                    return d
            elif d not in self.held:
                return d
        return len(trace.steps)

    def describe(self) -> str:
        """A canonical text form (used in store keys and logs)."""
        held = ",".join(map(str, sorted(self.held)))
        forced = ";".join(f"{i}={a.signature()}@{_digest(a.identity())}" for i, a in self.forced)
        return f"hold[{held}]force[{forced}]"


@dataclass(frozen=True)
class Rollout:
    """One run of the agent under a plan. Errored and unscorable rollouts carry `value=None`."""

    plan: Plan
    replicate: int
    turns: tuple[Turn, ...]
    states: tuple[Any, ...]  # environment state before each turn; None where the turn was copied
    value: float | None
    status: Status
    error: str | None = None
    policy_calls: int = 0
    truncated: bool = False
    reused: bool = False  # a fork that found the forced action already there: no new work

    @property
    def outcome(self) -> float:
        """`value` as a number for estimators: NaN where the rollout errored or could not be scored."""
        return math.nan if self.value is None else self.value

    @property
    def diverged(self) -> bool:
        """Whether any held turn was decided in a context that differed from the recorded one."""
        return any(t.diverged for t in self.turns)


@dataclass
class Counters:
    rollouts: int = 0
    reused: int = 0
    policy_calls: int = 0
    env_calls: int = 0
    errors: int = 0
    unscorable: int = 0
    diverged: int = 0
    match_errors: int = 0  # match draws that failed (left out of the action-match rate)
    first_error: str | None = None  # a rollout's
    first_match_error: str | None = None  # a match draw's

    def erred_beyond(self, max_error_rate: float) -> bool:
        """Whether more than `max_error_rate` of the rollouts errored: the run is a backend failure."""
        return bool(self.rollouts) and self.errors / self.rollouts > max_error_rate

    @property
    def divergence_rate(self) -> float:
        """The share of rollouts with a held step whose context differed from the record's."""
        return self.diverged / self.rollouts if self.rollouts else 0.0


def _copied(step: Step) -> Turn:
    return Turn(step.index, step.actor, step.action, step.observations, Mode.COPIED)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Replay:
    """Runs rollouts of one trace with one policy, environment and scorer."""

    trace: Trace
    policy: Policy
    env: Environment
    scorer: Scorer
    seed: int = 0
    slack: int | None = None  # extra steps allowed past the recorded length (default: that length)
    counters: Counters = field(default_factory=Counters)

    def __post_init__(self) -> None:
        n = len(self.trace.steps)
        self._cap = n + (self.slack if self.slack is not None else max(n, 5))
        # The record as a rollout's copied turns, made once: a rollout's prefix and a match draw's
        # history are slices of it, not new turns for every rollout and draw.
        self._record = tuple(_copied(s) for s in self.trace.steps)
        self._rec_ids = [t.identity() for t in self._record]
        self._actors = {a.id: a for a in self.trace.actors}
        # Each actor's recorded sampling by step: a turn off the record (its position shifted, or
        # past the recorded end) decides with its actor's, not with none.
        self._sampling: dict[str, list[tuple[int, Sampling]]] = {}
        for s in self.trace.steps:
            if s.sampling is not None:
                self._sampling.setdefault(s.actor, []).append((s.index, s.sampling))

    @property
    def step_cap(self) -> int:
        """The most turns a rollout can run (recorded length + slack): bounds its policy calls."""
        return self._cap

    def key(self, replicate: int, step: int, kind: str) -> EventKey:
        return EventKey(self.seed, replicate, step, kind)

    # -- public entry points -------------------------------------------------------------------
    async def run(self, plan: Plan, replicate: int) -> Rollout:
        """Run one rollout of `plan` on `replicate`."""
        first = plan.first_change(self.trace)
        turns = list(self._record[:first])
        states: list[Any] = [None] * first
        if first == len(self.trace.steps):
            return await self._finish(plan, replicate, turns, states, 0, False)
        try:
            state = await self.env.restore(tuple(turns))
        except Exception as exc:  # a plugin failure ends this rollout, never the run
            return self._errored(plan, replicate, turns, states, 0, exc, f"step {first}")
        actor = self.trace.steps[first].actor
        return await self._live(plan, replicate, turns, states, state, first, actor, 0)

    async def fork(self, rollout: Rollout, step: int, action: Action) -> Rollout:
        """Continue `rollout` from its state before `step`, with `action` forced at `step`.

        If the rollout already took `action` there (or ended before `step`), the fork *is* that
        rollout under the new plan: it is returned at no cost, marked `reused`.
        """
        plan = rollout.plan.with_forced(step, action)
        if self.takes(rollout, step, action):
            self.counters.reused += 1
            return replace(rollout, plan=plan, reused=True)
        turns = list(rollout.turns[:step])
        states = list(rollout.states[:step])
        state = rollout.states[step]
        if state is None:
            try:
                state = await self.env.restore(tuple(turns))
            except Exception as exc:
                return self._errored(plan, rollout.replicate, turns, states, 0, exc, f"step {step}")
        actor = rollout.turns[step].actor
        return await self._live(plan, rollout.replicate, turns, states, state, step, actor, 0)

    @staticmethod
    def takes(rollout: Rollout, step: int, action: Action) -> bool:
        """Whether `rollout` already is its fork at `step` with `action` forced: it took that very
        action there (`Action.identity`; the same signature with other wording is not enough), or
        ended before `step`."""
        return step >= len(rollout.turns) or rollout.turns[step].action.same(action)

    def agrees(self, rollout: Rollout, start: int = 0) -> int:
        """The first position at or after `start` where `rollout` leaves the record, turn for turn
        (actions and observations); len(trace.steps) if it reproduced the whole recorded run.

        A rollout that agrees up to position j *is* the rollout of any plan that holds every decision
        before j and makes the same choices from j on, on the same replicate, draw for draw: such a plan
        copies the record up to j, and from j on every draw is keyed by the same events.
        """
        turns, n = rollout.turns, len(self.trace.steps)
        i = start
        while i < n and i < len(turns) and self.is_recorded(turns[i]):
            i += 1
        if i == n and (len(turns) != n or rollout.truncated):
            return n - 1  # the same steps, but the run went on: not the recorded run
        if i == len(turns) and i < n:
            return i - 1  # the run ended early: a plan changing step i would still act there
        return i

    async def sample_recorded(self, step: int, draw: int) -> Action:
        """Draw one action at the recorded context of `step` (for the action-match rate)."""
        rec = self.trace.steps[step]
        history = self._record[:step]
        decision = self._decision(step, rec.actor, history, True)
        self.counters.policy_calls += 1
        action = await self.policy.act(decision, self.key(draw, step, "match"))
        return _returned(action, Action, self.policy, "policy", "act")

    # -- the loop ------------------------------------------------------------------------------
    def _decision(
        self, index: int, actor: str, history: tuple[Turn, ...], history_on_record: bool
    ) -> Decision:
        rec = self.trace.steps[index] if index < len(self.trace.steps) else None
        on_record = rec is not None and rec.actor == actor and history_on_record
        explicit = rec.context if on_record and rec is not None and rec.context != "prefix" else None
        return Decision(
            step=index,
            actor=self._actors[actor],
            task=self.trace.task,
            history=history,
            sampling=(rec.sampling if rec is not None and rec.actor == actor else None)
            or self._nearest(actor, index),
            recorded_context=explicit if isinstance(explicit, tuple) else None,
            actors=self.trace.actors,
        )

    def _nearest(self, actor: str, index: int) -> Sampling | None:
        """The actor's recorded sampling at its latest recorded step before `index` (else its
        first): what it decided with when the record shows no step of it at `index`."""
        recorded = self._sampling.get(actor)
        if not recorded:
            return None
        before = [sampling for i, sampling in recorded if i < index]
        return before[-1] if before else recorded[0][1]

    def _on_record(self, history: tuple[Turn, ...] | list[Turn]) -> bool:
        n = len(self.trace.steps)
        return len(history) <= n and all(self.is_recorded(t) for t in history)

    def is_recorded(self, turn: Turn) -> bool:
        """Whether `turn` is its position's recorded turn (`Turn.identity`). A copied turn is, by
        construction, and so is one that holds the record's own action and observations: neither is
        encoded (the encoding is most of the cost of comparing turns in a long trace)."""
        if turn.mode is Mode.COPIED:
            return True
        rec = self.trace.steps[turn.index]
        if (
            turn.action is rec.action
            and turn.observations is rec.observations
            and turn.actor == rec.actor
        ):
            return True
        return turn.identity() == self._rec_ids[turn.index]

    async def _live(
        self,
        plan: Plan,
        replicate: int,
        turns: list[Turn],
        states: list[Any],
        state: Any,
        index: int,
        actor: str | None,
        calls: int,
    ) -> Rollout:
        rec = self.trace.steps
        forced = plan.forced_map
        on_record = self._on_record(turns)
        try:
            while actor is not None:
                if index >= self._cap:
                    return await self._finish(plan, replicate, turns, states, calls, True)
                who = self._actors.get(actor)
                if who is None:
                    raise RolloutError(f"environment named an unknown actor {actor!r}")
                recorded = rec[index] if index < len(rec) and rec[index].actor == actor else None
                diverged = False
                if index in forced:
                    action, mode = forced[index], Mode.FORCED
                    # Forcing the recorded action is holding it (a Shapley fork holds a player so):
                    # off the record, that is a held step whose context differs too.
                    diverged = not on_record and recorded is not None and action.same(recorded.action)
                elif not who.decides:
                    if recorded is None:
                        raise RolloutError(
                            f"step {index}: {actor!r} has no recorded turn here and does not decide"
                        )
                    action, mode = recorded.action, Mode.SCRIPTED
                elif index in plan.held and recorded is not None:
                    action, mode, diverged = recorded.action, Mode.HELD, not on_record
                else:
                    decision = self._decision(index, actor, tuple(turns), on_record)
                    calls += 1
                    self.counters.policy_calls += 1
                    drawn = await self.policy.act(decision, self.key(replicate, index, "policy"))
                    action = _returned(drawn, Action, self.policy, "policy", "act")
                    mode = Mode.RESAMPLED
                states.append(state)
                self.counters.env_calls += 1
                stepped = await self.env.step(
                    state, index, actor, action, self.key(replicate, index, "env")
                )
                result = _returned(stepped, EnvStep, self.env, "environment", "step")
                turn = Turn(index, actor, action, result.observations, mode, diverged)
                on_record = on_record and recorded is not None and self.is_recorded(turn)
                turns.append(turn)
                state, actor, index = result.state, result.next_actor, index + 1
        except Exception as exc:  # a plugin failure ends this rollout, never the run
            return self._errored(plan, replicate, turns, states, calls, exc, f"step {index}")
        return await self._finish(plan, replicate, turns, states, calls, False)

    async def _finish(
        self,
        plan: Plan,
        replicate: int,
        turns: list[Turn],
        states: list[Any],
        calls: int,
        truncated: bool,
    ) -> Rollout:
        traj = Trajectory(self.trace, tuple(turns), truncated)
        try:
            value = _score_value(
                self.scorer.spec, await self.scorer.score(traj, self.key(replicate, -1, "score"))
            )
        except Exception as exc:
            # A scorer's server that failed (a judge's) is a backend failure, not the scorer's
            # fault: its error does not start "scorer " (`car.attribution.scorer_failed`).
            at = "scoring" if isinstance(exc, BackendError) else f"scorer {self.scorer.spec!r}"
            return self._errored(plan, replicate, turns, states, calls, exc, at)
        self.counters.rollouts += 1
        status: Status = "ok" if value is not None else "unscorable"
        if value is None:
            self.counters.unscorable += 1
        rollout = Rollout(
            plan, replicate, tuple(turns), tuple(states), value, status, None, calls, truncated
        )
        if rollout.diverged:
            self.counters.diverged += 1
        return rollout

    def _errored(
        self,
        plan: Plan,
        replicate: int,
        turns: list[Turn],
        states: list[Any],
        calls: int,
        exc: BaseException,
        at: str,
    ) -> Rollout:
        """An errored rollout; its error says where it happened (`at`: the step, or the scorer)
        unless it already does."""
        message = describe_error(exc)
        if not message.startswith((at, "step ", "scorer ")):
            message = f"{at}: {message}"
        self.counters.rollouts += 1
        self.counters.errors += 1
        if self.counters.first_error is None:
            self.counters.first_error = message
        return Rollout(
            plan, replicate, tuple(turns), tuple(states), None, "error", message, calls, False
        )


def _score_value(spec: str, value: object) -> float | None:
    """A scorer's answer as car keeps it: a float in [0, 1], or None for "cannot score", which a
    scorer may also say with NaN (numpy's numbers are numbers too); anything else is an error."""
    if value is None:
        return None
    if isinstance(value, numbers.Real):
        number = float(value)
        if math.isnan(number):
            return None
        if 0.0 <= number <= 1.0:
            return number
    raise RolloutError(
        f"scorer {spec!r} returned {value!r}: a score is a number in [0, 1] (1 = failed), or None "
        "(or NaN) when it cannot score"
    )


class Reproductions:
    """The draws rollouts made at a decision step's recorded context (every turn before it the
    record's), and how many took the recorded action's signature: evidence on the action-match rate
    beside the match draws, at no cost (`car.attribution` uses it before it calls a step never
    reproduced)."""

    def __init__(self, decisions: Sequence[int]) -> None:
        self._position = {d: k for k, d in enumerate(decisions)}
        self.draws = [0] * len(decisions)
        self.hits = [0] * len(decisions)

    def note(self, replay: Replay, rollout: Rollout) -> None:
        rec = replay.trace.steps
        for turn in rollout.turns:
            if turn.index >= len(rec):
                return
            k = self._position.get(turn.index)
            if turn.mode is Mode.RESAMPLED and k is not None and turn.actor == rec[turn.index].actor:
                self.draws[k] += 1
                self.hits[k] += turn.action.signature() == rec[turn.index].action.signature()
            if not replay.is_recorded(turn):
                return  # later turns were drawn in a context the record does not have


@dataclass
class RowRunner:
    """Rows of arms on one replicate each, a rollout reused for every later arm it reproduces.

    Arm k < m resamples from decision k on (the decisions before it held); arm m is the factual arm
    (everything held). On one replicate, the rollout of arm k that reproduced the record up to arm
    j's first change *is* arm j's rollout, draw for draw (`Replay.agrees`): a row runs it once. Every
    arm of a row therefore has exactly the value it would have alone on that replicate, for fewer
    rollouts.
    """

    replay: Replay

    def __post_init__(self) -> None:
        trace = self.replay.trace
        self.decisions = trace.decision_steps
        self.m = len(self.decisions)
        self.n = len(trace.steps)
        # With a deterministic scorer the factual arm is the record, scored once, not a row's arm.
        self.exact = self.replay.scorer.deterministic
        self.seen = Reproductions(self.decisions)

    def arms(self, steps: Iterable[int] | None = None) -> list[int]:
        """The arms a row observes: `steps` (default every step's), then the factual unless exact."""
        return [*(range(self.m) if steps is None else steps), *([] if self.exact else [self.m])]

    async def record_value(self) -> float:
        """The factual arm's value when exact: the record copied and scored (replicate 0)."""
        return (await self.replay.run(Plan.hold_all(self.replay.trace), 0)).outcome

    def matrix(
        self, rows: Sequence[Mapping[int, float]], record: Sequence[float] = ()
    ) -> tuple[np.ndarray, np.ndarray]:
        """The outcome matrix [step arm, row] (NaN where a row did not observe the arm) and the
        factual values: `record` when exact, else each row's factual arm."""
        arms = np.full((self.m, len(rows)), math.nan)
        fact = np.full(len(rows), math.nan)
        for r, row in enumerate(rows):
            for arm, value in row.items():
                if arm == self.m:
                    fact[r] = value
                else:
                    arms[arm, r] = value
        return arms, (np.array(record, dtype=float) if self.exact else fact)

    def plan(self, arm: int) -> Plan:
        trace = self.replay.trace
        if arm == self.m:
            return Plan.hold_all(trace)
        return Plan.resample_from(trace, self.decisions[arm])

    def _start(self, arm: int) -> int:
        return self.n if arm == self.m else self.decisions[arm]

    async def row(
        self, arms: Sequence[int], replicate: int, on_value: Callable[[], None] | None = None
    ) -> tuple[dict[int, float], int]:
        """Observe `arms` (sorted) on `replicate`: {arm: value} (NaN: errored or unscorable) and the
        rollouts it cost; `on_value` is called once per arm observed."""
        out: dict[int, float] = {}
        cost = 0
        i = 0
        while i < len(arms):
            rollout = await self.replay.run(self.plan(arms[i]), replicate)
            cost += 1
            self.seen.note(self.replay, rollout)
            value = rollout.outcome
            start = self._start(arms[i])
            # Arm j is this very rollout when the record was reproduced up to j's first change.
            reach = self.replay.agrees(rollout, start) if rollout.status == "ok" else start
            out[arms[i]] = value
            i += 1
            if on_value is not None:
                on_value()
            while i < len(arms) and self._start(arms[i]) <= reach:
                out[arms[i]] = value
                i += 1
                if on_value is not None:
                    on_value()
        return out, cost


def describe_error(exc: BaseException) -> str:
    """An error as a report says it, in `one_line`: car's own errors by their message (they say what
    and where), any other by its type and message."""
    if isinstance(exc, RolloutError | BackendError):
        return one_line(str(exc))
    return one_line(f"{type(exc).__name__}: {exc}")


def _returned(value: object, kind: type[T], plugin: object, role: str, method: str) -> T:
    """What a plugin's `method` returned, which must be a `kind`: anything else ends the rollout
    with an error naming the plugin (a later `.signature()` or `.state` would fail far from the
    cause)."""
    if isinstance(value, kind):
        return value
    raise RolloutError(
        f"{role} {getattr(plugin, 'spec', type(plugin).__name__)!r} returned a "
        f"{type(value).__name__}: {method}() must return a car.{kind.__name__}"
    )
