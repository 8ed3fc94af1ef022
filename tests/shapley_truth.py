"""Closed-form games of the simulated scenarios and a brute-force Shapley value (all n! orders).

Independent of `car.estimators.shapley` on purpose: tests compare the estimators against these.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

Game = Callable[[frozenset[int]], float]


def brute_shapley(n: int, v: Game) -> list[float]:
    """Average marginal contribution of each player over all n! orders."""
    phi = [0.0] * n
    for order in itertools.permutations(range(n)):
        held: set[int] = set()
        for i in order:
            before = v(frozenset(held))
            held.add(i)
            phi[i] += v(frozenset(held)) - before
    return [x / math.factorial(n) for x in phi]


def and_game(q: float = 0.3) -> Game:
    """Players: steps 0, 1, 2 of `and`."""
    return lambda s: (1.0 if 0 in s else q) * (1.0 if 1 in s else q)


def or_game(q: float = 0.3) -> Game:
    return lambda s: 1.0 - (0.0 if 0 in s else 1 - q) * (0.0 if 1 in s else 1 - q)


def pivot_game(p: float = 0.3) -> Game:
    return lambda s: 1.0 if 1 in s else p


def research_team_game(u: float = 0.35, s: float = 0.4, *, agents: bool) -> Game:
    """`research-team` as the replay engine plays it (holding is by position).

    Holding the orchestrator's final step forces its recorded wrong answer, and holding the
    extractor forces the recorded wrong figure, so neither is a bystander: the failure is
    `answer held OR (verification skipped AND (wrong page OR wrong extraction))`.
    Agent players: 0 orchestrator (steps 0, 4), 1 searcher, 2 extractor, 3 verifier.
    Step players: steps 0..4.
    """

    def v(held: frozenset[int]) -> float:
        answer, searcher, extractor, verifier = (0, 1, 2, 3) if agents else (4, 1, 2, 3)
        if answer in held:
            return 1.0
        skip = 1.0 if verifier in held else s
        wrong = 1.0 if (searcher in held or extractor in held) else u
        return skip * wrong

    return v


def long_and_truth(steps: int = 12, a: int = 3, b: int = 8, q: float = 0.3) -> list[float]:
    phi = [0.0] * steps
    phi[a] = phi[b] = (1 - q * q) / 2
    return phi


def seq(xs: Sequence[float]) -> list[float]:
    return [float(x) for x in xs]
