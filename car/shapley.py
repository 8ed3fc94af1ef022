"""Shapley credit over steps or agents, played through the one replay engine.

The game: players are groups of decision steps (one step each, all steps of one actor, or groups the
user names); `v(S) = P(fail | hold the steps of S at their recorded actions, resample the rest)`.
Decision steps that belong to no player are held (they are the background the question is asked in).

- `exact`: every coalition S on each replicate. Coalitions are built in order of their players'
  first steps, S from S minus its latest player, by the walks' fork rule below; with shared seeds a
  coalition also takes any earlier rollout of the replicate that is its own run draw for draw, so a
  replicate costs one rollout per distinct run it contains, at most 2^n. Each replicate gives the
  exact Shapley value of its own game (`car.estimators.shapley.estimate_replicates`); replicates are
  independent, so a Student-t interval across them is valid, and efficiency holds per replicate.
  v(N) is the record copied: with a deterministic scorer it is known after one scoring and no policy
  call, and gets no rollouts.
- `permutation` (what `auto` runs): antithetic pairs of walks. A walk starts from the pair's
  v(empty) rollout and adds players in order; the rollout for S + {i} is a fork of the S rollout at
  i's first step whose action differs from the record, with i's later steps held (a fork is the S
  rollout itself when it already took i's recorded actions: zero cost). This is exact, not an
  approximation: the prefix before the fork has the same law under S and S + {i}, and past the fork
  the rollout follows S + {i}'s plan. Pairs never share rollouts with each other.

With shared seeds (the default) every fork continues on its replicate (common random numbers);
without, on a fresh one. Budgets are in rollouts (live runs; reused forks are free) and optionally in
policy calls; a replicate or pair is only started when its worst case fits, so the budget is never
exceeded and no unit is cut short.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from car.arguments import check_arguments
from car.errors import BudgetError, InputError, option_name
from car.estimators.shapley import (
    MAX_EXACT_PLAYERS,
    ShapleyEstimate,
    estimate_replicates,
    estimate_walks,
    plan_walks,
)
from car.gates import step_index
from car.replay import Plan, Replay, Rollout, gather_all
from car.report import Budget, Estimate, ShapleyPlayer, ShapleyReport, many, short
from car.rng import EventKey
from car.trace import Action, Trace

__all__ = [
    "DEFAULT_BUDGET",
    "EXACT_MIN_REPLICATES",
    "Player",
    "PlayersKind",
    "ShapleyMethod",
    "ShapleyResult",
    "budget_room",
    "calls_estimate",
    "choose_method",
    "credited_players",
    "exact_cost",
    "parse_players",
    "run_shapley",
    "shared_sentence",
    "to_report",
]

PlayersKind = Literal["steps", "agents", "groups"]
ShapleyMethod = Literal["exact", "permutation", "auto"]

# Replicate ranges. Contrastive arms use 0..K-1 and match draws their own kind, so Shapley rollouts
# live far above: replicate r of the exact method is EXACT_BASE + r, pair p of the walks WALK_BASE + p
# (shared seeds); with fresh seeds a unit owns 2^24 replicates from base + unit * 2^24, one per
# coalition mask (exact) or per walk and position (walks), so no key depends on the order rollouts ran.
EXACT_BASE = 1 << 60
WALK_BASE = 2 << 60
_SLOT = 1 << 24

DEFAULT_BUDGET = 1000  # rollouts per trace when Shapley runs and --budget is not given
EXACT_MIN_REPLICATES = 8  # the exact method needs this many worst-case replicates at least
_MIN_PAIRS = 4
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Player:
    """A player of the game: an id for the report and the decision steps it holds."""

    id: str
    steps: tuple[int, ...]


def parse_players(trace: Trace, spec: str) -> tuple[PlayersKind, list[Player]]:
    """Players from `--players`: `steps`, `agents`, or groups of step indices like `0,1;2,3`."""
    decisions = trace.decision_steps
    text = spec.strip()
    if text == "steps":
        return "steps", [Player(f"step {d}", (d,)) for d in decisions]
    if text == "agents":
        by_actor: dict[str, list[int]] = {}
        for d in decisions:
            by_actor.setdefault(trace.steps[d].actor, []).append(d)
        return "agents", [Player(a, tuple(s)) for a, s in by_actor.items()]
    groups: list[Player] = []
    seen: set[int] = set()
    given = option_name("players", repr(spec))  # --players '0;9' on the command line, players='0;9'
    for g, part in enumerate(text.split(";")):
        steps: list[int] = []
        for item in part.split(","):
            item = item.strip()
            step = step_index(item)
            if step is None:
                raise InputError(
                    f"{given}: group {g + 1} ({part.strip()!r}): {item!r} is not a step index; "
                    "use 'steps', 'agents' or groups like '0,1;2,3'"
                )
            if step not in decisions:
                raise InputError(
                    f"{given}: step {step} is not a decision step of trace {trace.id!r}; "
                    f"decision steps are {', '.join(map(str, decisions))}"
                )
            if step in steps:
                raise InputError(f"{given}: group {g + 1} ({part.strip()!r}) names step {step} twice")
            if step in seen:
                raise InputError(f"{given}: step {step} is in more than one group")
            seen.add(step)
            steps.append(step)
        groups.append(Player("steps " + ",".join(map(str, sorted(steps))), tuple(sorted(steps))))
    return "groups", groups


@dataclass
class ShapleyResult:
    """What a Shapley run found and what it cost."""

    method: Literal["exact", "permutation"]
    players_kind: PlayersKind
    players: list[Player]
    estimate: ShapleyEstimate
    v_all_exact: bool
    rollouts: int
    policy_calls: int
    env_calls: int
    reused: int
    errored: int
    budget_reached: bool
    target_width: float | None
    units: int  # replicates (exact) or pairs of walks (permutation)
    dropped: int = 0  # units dropped for an errored or unscorable rollout
    notes: list[str] = field(default_factory=list)


class _Spend:
    """Tracks rollouts and policy calls against the budget from a counters snapshot."""

    def __init__(self, replay: Replay, rollouts: int, calls: int | None) -> None:
        self.replay = replay
        self.rollouts = rollouts
        self.calls = calls
        c = replay.counters
        self._start = (c.rollouts, c.policy_calls, c.env_calls, c.reused, c.errors)

    def used(self) -> tuple[int, int, int, int, int]:
        c = self.replay.counters
        now = (c.rollouts, c.policy_calls, c.env_calls, c.reused, c.errors)
        return tuple(a - b for a, b in zip(now, self._start, strict=True))  # type: ignore[return-value]

    def room(self) -> int:
        """How many more rollouts fit, in the worst case for policy calls too."""
        rollouts, calls, *_ = self.used()
        left_calls = None if self.calls is None else self.calls - calls
        return max(budget_room(self.rollouts - rollouts, left_calls, self.replay.step_cap), 0)


@dataclass
class _Game:
    replay: Replay
    players: list[Player]
    background: frozenset[int]
    concurrency: int
    progress: Progress | None
    total: int

    @property
    def n(self) -> int:
        return len(self.players)

    def held(self, mask: int) -> frozenset[int]:
        steps = set(self.background)
        for i, p in enumerate(self.players):
            if mask >> i & 1:
                steps.update(p.steps)
        return frozenset(steps)

    def __post_init__(self) -> None:
        self._limit: asyncio.Semaphore | None = None
        self._start = self.replay.counters.rollouts

    async def run(self, plan: Plan, replicate: int) -> Rollout:
        """One rollout, at most `concurrency` in flight (a pair of walks may run two at once)."""
        async with self.limit():
            rollout = await self.replay.run(plan, replicate)
        self.tick()
        return rollout

    async def fork(self, rollout: Rollout, step: int, action: Action) -> Rollout:
        async with self.limit():
            forked = await self.replay.fork(rollout, step, action)
        self.tick()
        return forked

    def limit(self) -> asyncio.Semaphore:
        # Created on first use, inside the running event loop.
        if self._limit is None:
            self._limit = asyncio.Semaphore(self.concurrency)
        return self._limit

    def tick(self) -> None:
        if self.progress is not None:
            self.progress("shapley", self.replay.counters.rollouts - self._start, self.total)


def calls_estimate(budget: int, decisions: int) -> int:
    """Policy calls a Shapley run of `budget` rollouts may take at the recorded length: a rollout
    re-decides at most every decision step."""
    return budget * max(decisions, 1)


def exact_cost(n: int, v_all_known: bool, replicates: int = EXACT_MIN_REPLICATES) -> int:
    """Rollouts `replicates` replicates of the exact method may need at worst (plus one scoring of
    the record): every coalition a distinct run."""
    return replicates * ((1 << n) - (1 if v_all_known else 0)) + (1 if v_all_known else 0)


async def run_shapley(
    replay: Replay,
    players: list[Player],
    *,
    players_kind: PlayersKind = "steps",
    method: ShapleyMethod = "auto",
    budget: int = DEFAULT_BUDGET,
    budget_calls: int | None = None,
    target_width: float | None = None,
    level: float = 0.95,
    shared_seeds: bool = True,
    concurrency: int = 8,
    progress: Progress | None = None,
) -> ShapleyResult:
    """Estimate Shapley credit for `players` within the budget (raises BudgetError if it cannot)."""
    n = len(players)
    if n == 0:
        raise InputError("Shapley needs at least one player (no decision steps)")
    check_arguments(budget=budget, target_width=target_width)
    trace = replay.trace
    in_players = {s for p in players for s in p.steps}
    background = frozenset(set(trace.decision_steps) - in_players)
    game = _Game(replay, players, background, concurrency, progress, budget)
    spend = _Spend(replay, budget, budget_calls)
    v_known = replay.scorer.deterministic
    chosen = choose_method(
        n,
        method,
        v_known=v_known,
        room=spend.room(),
        budget=budget,
        budget_calls=budget_calls,
        step_cap=replay.step_cap,
    )
    game.tick()  # the phase starts: 0 of its budget
    return await _play(chosen, game, spend, players_kind, v_known, target_width, level, shared_seeds)


def choose_method(
    n: int,
    method: ShapleyMethod,
    *,
    v_known: bool,
    room: int,
    budget: int,
    budget_calls: int | None,
    step_cap: int,
) -> Literal["exact", "permutation"]:
    """Exact when asked for; else (`auto` too) the fork-walks. Raises `BudgetError` with the budget
    needed when `room` (rollouts) cannot pay the method's minimum.

    `auto` runs the walks: on the planted suite they reach a given error with fewer rollouts than
    exact enumeration on 6 of 8 models without shared seeds and 7 of 8 with them (docs/shapley.md),
    and a pair of walks costs at most 2n rollouts where a replicate of the exact
    method may cost 2^n (it does when replayed actions rarely repeat the record, as free-text turns).
    """
    if method == "exact":
        needed = exact_cost(n, v_known)
        if n > MAX_EXACT_PLAYERS or room < needed:
            raise BudgetError(_budget_message("exact", n, needed, budget, budget_calls, step_cap))
        return "exact"
    needed = _MIN_PAIRS * (2 * n - (1 if v_known else 0)) + (1 if v_known else 0)
    if room < needed:
        raise BudgetError(_budget_message("permutation", n, needed, budget, budget_calls, step_cap))
    return "permutation"


def budget_room(budget: int, budget_calls: int | None, step_cap: int) -> int:
    """Rollouts a budget pays for in the worst case (every rollout making `step_cap` policy calls)."""
    room = budget
    if budget_calls is not None:
        room = min(room, budget_calls // max(step_cap, 1))
    return room


def _budget_message(
    method: str, n: int, needed: int, budget: int, calls: int | None, step_cap: int
) -> str:
    if method == "exact" and n > MAX_EXACT_PLAYERS:
        return f"exact Shapley enumerates 2^{n} coalitions: at most {MAX_EXACT_PLAYERS} players"
    what = f"{needed} rollouts"
    if calls is not None:
        what += f" and up to {needed * step_cap} policy calls"
    limit = option_name("budget", str(budget)) + (
        f" {option_name('budget_calls', str(calls))}" if calls is not None else ""
    )
    extra = (
        f" ({EXACT_MIN_REPLICATES} replicates of the 2^{n} coalitions, at worst)"
        if method == "exact"
        else ""
    )
    return (
        f"{method} Shapley over {many(n, 'player')} needs at least {what}{extra}; {limit} is too small"
    )


async def _known_record(game: _Game, v_known: bool) -> tuple[float | None, list[str]]:
    """v(N) from one scoring of the record when the scorer is deterministic (None otherwise)."""
    if not v_known:
        return None, []
    full = Plan.hold(game.held((1 << game.n) - 1))
    value = (await game.run(full, EXACT_BASE - 1)).outcome
    if math.isnan(value):
        return None, ["the record could not be scored; v(N) is estimated by rollouts instead"]
    return value, []


async def _rounds(
    spend: _Spend,
    worst: int,
    target: float | None,
    fit: Callable[[], ShapleyEstimate | None],
    start: Callable[[int, int], Awaitable[None]],
) -> int:
    """Start independent units (`start(first, count)`) in rounds, each unit only when the budget pays
    its worst case, until the target half-width is met or nothing more fits; returns units started."""
    started = 0
    estimate: ShapleyEstimate | None = None
    for _ in range(64):  # rounds; each spends a share of what is left
        affordable = spend.room() // worst
        if affordable < 1 or (started == 0 and affordable < 2):
            break
        size = affordable
        if target is not None:
            if estimate is None:
                size = min(affordable, 8)
            else:
                widest = float(estimate.half_width.max())
                if widest <= target:
                    break
                grow = (widest / target) ** 2 - 1
                # At most doubling: a few units' half-width is mostly the variance floor, which
                # shrinks like 1/units, not 1/sqrt(units), so a projection from it overshoots (from
                # 8 units on `cascade`, 210 more where about 100 in all met a target of 0.08).
                size = min(affordable, started, max(2, math.ceil(1.1 * estimate.units * grow)))
        await start(started, size)
        started += size
        estimate = fit()
    return started


def _result(
    method: Literal["exact", "permutation"],
    game: _Game,
    spend: _Spend,
    kind: PlayersKind,
    estimate: ShapleyEstimate,
    v_all: float | None,
    target: float | None,
    worst: int,
    started: int,
    notes: list[str],
) -> ShapleyResult:
    rollouts, calls, env_calls, reused, errored = spend.used()
    met = target is not None and float(estimate.half_width.max()) <= target
    dropped = started - estimate.units
    if dropped:
        unit = "replicates" if method == "exact" else "pairs of walks"
        why = (
            f"{errored} of its {rollouts} rollouts errored"
            if errored
            else "a rollout could not be scored"
        )
        notes.append(
            f"{dropped} of {started} {unit} dropped: a rollout on them errored or could not be "
            f"scored ({why})"
        )
    return ShapleyResult(
        method,
        kind,
        game.players,
        estimate,
        v_all is not None,
        rollouts,
        calls,
        env_calls,
        reused,
        errored,
        budget_reached=not met and spend.room() < worst,
        target_width=target,
        units=estimate.units,
        dropped=dropped,
        notes=notes,
    )


async def _play(
    method: Literal["exact", "permutation"],
    game: _Game,
    spend: _Spend,
    kind: PlayersKind,
    v_known: bool,
    target: float | None,
    level: float,
    shared_seeds: bool,
) -> ShapleyResult:
    """Run independent units (whole-game replicates, or antithetic pairs of walks) in rounds."""
    exact = method == "exact"
    v_all, notes = await _known_record(game, v_known)
    known = 1 if v_all is not None else 0
    worst = (1 << game.n) - known if exact else 2 * game.n - known
    units: list[Any] = []

    def fit() -> ShapleyEstimate | None:
        if not units:
            return None
        try:
            if exact:
                return estimate_replicates(np.array(units), level=level)
            orders, values = zip(*units, strict=True)
            return estimate_walks(np.concatenate(orders), np.concatenate(values), level=level)
        except ValueError:
            return None

    async def start(first: int, count: int) -> None:
        unit = _replicate if exact else _pair
        jobs = (unit(game, u, v_all, shared_seeds) for u in range(first, first + count))
        # `concurrency` units at a time keep as many rollouts in flight (a replicate runs one at a
        # time, a pair of walks one or two) while holding the partial rollouts of no more units.
        units.extend(await gather_all(jobs, game.concurrency))

    started = await _rounds(spend, worst, target, fit, start)
    estimate = fit()
    if estimate is None:
        what = "replicates" if exact else "pairs of walks"
        raise BudgetError(
            f"{method} Shapley: fewer than two {what} completed (rollouts errored or the budget is "
            f"too small); check the backend, or raise {option_name('budget')}"
        )
    return _result(method, game, spend, kind, estimate, v_all, target, worst, started, notes)


async def _replicate(game: _Game, r: int, v_all: float | None, shared_seeds: bool) -> np.ndarray:
    """Replicate r: the outcome of every coalition (indexed by player bitmask; NaN if unscored).

    Coalitions are built one at a time in order of their players' first steps. With shared seeds a
    coalition takes an earlier rollout of this replicate when that rollout is its run draw for draw
    (`_stands_for`); otherwise it is built from S minus its latest player (`_add_player`: that
    rollout itself, a fork, or a fresh run). With shared seeds a replicate so costs one rollout per
    distinct run, as in a tree of forks.
    """
    n = game.n
    full = (1 << n) - 1
    order = sorted(range(n), key=lambda i: min(game.players[i].steps))
    base = EXACT_BASE + (r if shared_seeds else r * _SLOT)
    built: list[Rollout | None] = [None] * (1 << n)
    out = np.full(1 << n, np.nan)
    # Only with shared seeds is an earlier rollout a coalition's own run on the replicate. With fresh
    # seeds its draws past a fork are its own, and picking it because of them would bias.
    runs: list[tuple[Rollout, frozenset[int], int]] | None = [] if shared_seeds else None

    def remember(run: Rollout, held: frozenset[int]) -> None:
        if runs is not None and run.status == "ok":
            runs.append((run, held, game.replay.agrees(run)))

    held = game.held(0)
    built[0] = empty = await game.run(Plan.hold(held), base)
    out[0] = empty.outcome
    remember(empty, held)
    for bits in range(1, full + 1):
        top = bits.bit_length() - 1
        mask = sum(1 << order[j] for j in range(n) if bits >> j & 1)
        if mask == full and v_all is not None:
            out[mask] = v_all
            continue
        parent = built[bits & ~(1 << top)]
        if parent is None or parent.status == "error":
            continue  # the replicate is dropped
        held = game.held(mask)
        run = _own_run(game.replay, runs, held) if runs is not None else None
        if run is None:
            rep = base if shared_seeds else base + bits  # fresh seeds: one replicate per coalition
            run = await _add_player(game, parent, game.players[order[top]], held, rep)
            remember(run, held)
        built[bits], out[mask] = run, run.outcome
    return out


def _own_run(
    replay: Replay, runs: list[tuple[Rollout, frozenset[int], int]], held: frozenset[int]
) -> Rollout | None:
    """The first of `runs` (rollout, its held steps, agreement) that is `held`'s run draw for draw,
    under the new plan and counted as reused; None if none is."""
    first = Plan.hold(held).first_change(replay.trace)
    for run, run_held, agreed in runs:
        if _stands_for(replay, run, run_held, agreed, held, first):
            replay.counters.reused += 1
            return replace(run, plan=Plan.hold(held), reused=True)
    return None


def _stands_for(
    replay: Replay,
    run: Rollout,
    held_run: frozenset[int],
    agreed: int,
    held: frozenset[int],
    first: int,
) -> bool:
    """Whether `run` (played holding `held_run`) is the run of `Plan.hold(held)` draw for draw.

    It must have reproduced the record up to the plan's first changed step (the plan copies that
    part), and from there the two plans may differ only where `run` resampled and drew the recorded
    action (or where holding had no effect: past its end, or another actor acting).
    """
    if agreed < first:
        return False
    trace = replay.trace
    for d in trace.decision_steps:
        if d < first or (d in held) == (d in held_run) or _hold_idle(trace, run, d):
            continue
        if d in held_run or not _took_recorded(trace, run, d):
            return False  # the run held d where the plan draws, or drew another action
    return True


def _hold_idle(trace: Trace, rollout: Rollout, step: int) -> bool:
    """Holding by position has no effect at `step`: the rollout ended or another actor acts there."""
    return step >= len(rollout.turns) or rollout.turns[step].actor != trace.steps[step].actor


def _took_recorded(trace: Trace, rollout: Rollout, step: int) -> bool:
    """The rollout took the very recorded action at `step` (`Action.identity`)."""
    return rollout.turns[step].action.same(trace.steps[step].action)


async def _pair(
    game: _Game, p: int, v_all: float | None, shared_seeds: bool
) -> tuple[np.ndarray, np.ndarray]:
    """One antithetic pair of walks: orders (2, n) and values (2, n + 1)."""
    n = game.n
    full = (1 << n) - 1
    order_rng = EventKey(game.replay.seed, WALK_BASE + p, 0, "shapley-order").generator()
    orders = plan_walks(n, 1, order_rng)
    base = WALK_BASE + (p if shared_seeds else p * _SLOT)
    background = game.held(0)
    empty = await game.run(Plan.hold(background), base)
    end = (await game.run(Plan.hold(game.held(full)), base)).outcome if v_all is None else v_all

    async def walk(w: int, order: np.ndarray) -> np.ndarray:
        vals = np.full(n + 1, np.nan)
        vals[0], vals[n] = empty.outcome, end
        current, held = empty, background
        for k in range(n - 1):
            if current.status == "error":
                break
            player = game.players[int(order[k])]
            # The coalition grows by one player: its held steps are the last ones and the player's
            # (`game.held` of the mask goes through every player, for each of the n steps of a walk).
            held = held.union(player.steps)
            # Fresh seeds: a replicate per (walk, position), so neither walk's keys depend on which
            # of the two ran first.
            rep = base if shared_seeds else base + 1 + w * n + k
            current = await _add_player(game, current, player, held, rep)
            vals[k + 1] = current.outcome
        return vals

    a, b = await gather_all([walk(0, orders[0]), walk(1, orders[1])])
    return orders, np.stack([a, b])


async def _add_player(
    game: _Game, rollout: Rollout, player: Player, held: frozenset[int], replicate: int
) -> Rollout:
    """The rollout for S + {player} from the rollout for S (a fork, or S's rollout itself).

    S + {player} copies the record up to its first changed step. When the player's steps lie inside
    that copied stretch, S's rollout stands for it only if it reproduced the record there turn for turn
    (observations included: with a stochastic environment a live observation need not match the
    recorded one); otherwise S + {player} is run afresh. Past the copied stretch both plans run live,
    so S's rollout is S + {player}'s up to the first of the player's steps where it took another action,
    and a fork there (the player's action forced, its later steps held) continues it exactly.
    """
    replay = game.replay
    trace = replay.trace
    plan = Plan.hold(held)
    first = plan.first_change(trace)
    if any(step < first for step in player.steps) and replay.agrees(rollout) < first:
        return await game.run(plan, replicate)
    for step in player.steps:
        recorded = trace.steps[step]
        if step < first:
            continue  # reproduced above, observation included
        if _hold_idle(trace, rollout, step) or _took_recorded(trace, rollout, step):
            continue
        # Fork with the coalition's plan (the player's later steps held) and, without shared seeds,
        # a fresh replicate for everything drawn after the fork.
        base = replace(rollout, plan=Plan.hold(held - {step}), replicate=replicate)
        forked = await game.fork(base, step, recorded.action)
        return replace(forked, plan=plan)
    replay.counters.reused += 1
    return replace(rollout, plan=plan, reused=True)


def credited_players(players: Sequence[ShapleyPlayer]) -> list[ShapleyPlayer]:
    """Players whose credit is significantly above zero (and a positive share), largest first."""
    ranked = sorted(players, key=lambda p: -p.value)
    return [p for p in ranked if p.low > 0 and p.share is not None and p.share > 0]


def shared_sentence(players: Sequence[ShapleyPlayer], kind: PlayersKind) -> str:
    """One sentence on who carries the Shapley credit ("steps 1 and 3 share the blame: 46% and 45%")."""
    credited = credited_players(players)
    if not credited:
        return "no player's Shapley credit is significantly above zero at this budget"
    names = [_name(p, kind) for p in credited[:4]]
    shares = [f"{p.share:.0%}" for p in credited[:4]]
    if len(credited) == 1:
        return f"the Shapley credit goes to {names[0]} ({shares[0]} of the total)"
    noun = {"steps": "steps", "agents": "agents", "groups": "groups"}[kind]
    plain = [n.removeprefix("step ") if kind == "steps" else n for n in names]
    return f"{noun} {_join(plain)} share the blame: {_join(shares)}"


def _name(p: ShapleyPlayer, kind: PlayersKind) -> str:
    return short(p.id) if kind != "groups" else f"[{p.id}]"


def _join(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def to_report(result: ShapleyResult, budget: int, budget_calls: int | None) -> ShapleyReport:
    """The `shapley` section of the report."""
    est = result.estimate
    total = est.total
    players = [
        ShapleyPlayer(
            id=p.id,
            steps=list(p.steps),
            value=float(est.values[i]),
            low=float(est.low[i]),
            high=float(est.high[i]),
            share=(float(est.values[i]) / total) if abs(total) > 1e-12 else None,
        )
        for i, p in enumerate(result.players)
    ]
    v_all = (
        Estimate(estimate=est.v_all, low=est.v_all, high=est.v_all, n=1)
        if result.v_all_exact
        else Estimate(estimate=est.v_all, low=None, high=None, n=est.units)
    )
    return ShapleyReport(
        method=result.method,
        players_kind=result.players_kind,
        players=players,
        total=total,
        v_all=v_all,
        # mid-p where v(empty)'s outcomes are binary: a normal interval on 0/1 outcomes was a point
        # whenever every unit agreed, and covered v(empty) = 0.09 66% of the time at 12 replicates
        v_none=Estimate(estimate=est.v_none, low=est.v_none_low, high=est.v_none_high, n=est.v_none_n),
        budget=Budget(
            rollouts=result.rollouts,
            policy_calls=result.policy_calls,
            env_calls=result.env_calls,
            reused=result.reused,
            errored=result.errored,
        ),
        budget_reached=result.budget_reached,
        target_width=result.target_width,
        budget_limit=budget,
        budget_calls_limit=budget_calls,
        level=est.level,
        units=result.units,
        summary=shared_sentence(players, result.players_kind),
        notes=list(result.notes),
    )
