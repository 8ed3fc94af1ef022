"""The pure Shapley estimators against brute force and the axioms (no replay involved)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from car.estimators.shapley import (
    coefficient_matrix,
    estimate_replicates,
    estimate_walks,
    plan_walks,
    popcounts,
    shapley_weights,
    walk_marginals,
)
from tests.shapley_truth import and_game, brute_shapley, or_game, pivot_game


def table(n: int, v) -> np.ndarray:  # type: ignore[no-untyped-def]
    return np.array([v(frozenset(i for i in range(n) if m >> i & 1)) for m in range(1 << n)])


def random_table(n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.random(1 << n)


@pytest.mark.parametrize(
    ("game", "truth"),
    [(and_game(), [0.455, 0.455, 0.0]), (or_game(), [0.245, 0.245, 0.0]), (pivot_game(), [0, 0.7, 0])],
)
def test_exact_on_closed_forms(game, truth) -> None:  # type: ignore[no-untyped-def]
    # Every replicate the same game: the estimate is its Shapley value, the interval only the floor.
    est = estimate_replicates(np.tile(table(3, game), (10, 1)))
    assert est.values == pytest.approx(truth, abs=1e-12)
    assert est.units == 10 and (est.low <= est.values).all() and (est.values <= est.high).all()


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_exact_matches_brute_force_on_random_games(n: int) -> None:
    rng = np.random.default_rng(n)
    for _ in range(5):
        v = random_table(n, rng)
        brute = brute_shapley(n, lambda s, v=v: float(v[sum(1 << i for i in s)]))
        assert coefficient_matrix(n) @ v == pytest.approx(brute, abs=1e-12)


@pytest.mark.parametrize("n", [1, 2, 5, 9, 14])
def test_exact_efficiency_to_float_precision(n: int) -> None:
    rng = np.random.default_rng(100 + n)
    v = rng.random((4, 1 << n))
    est = estimate_replicates(v)
    assert abs(est.values.sum() - (est.v_all - est.v_none)) < 1e-12
    assert (v @ coefficient_matrix(n).T).sum(axis=1) == pytest.approx(v[:, -1] - v[:, 0], abs=1e-12)
    assert est.total == pytest.approx(est.values.sum())


def test_symmetry_and_null_player() -> None:
    # Players 0 and 2 are interchangeable; player 1 never changes anything.
    def v(s: frozenset[int]) -> float:
        return {0: 0.1, 1: 0.4, 2: 1.0}[len(s - {1})]

    phi = coefficient_matrix(3) @ table(3, v)
    assert phi[0] == pytest.approx(phi[2], abs=1e-15)
    assert phi[1] == pytest.approx(0.0, abs=1e-15)
    walks = estimate_walks(*all_orders_values(3, v))
    assert walks.values[0] == pytest.approx(walks.values[2], abs=1e-12)
    assert walks.values[1] == 0.0


def all_orders_values(n: int, v) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[no-untyped-def]
    orders = []
    for order in itertools.permutations(range(n)):
        if order[0] < order[-1]:  # each order once, followed by its reverse
            orders += [order, order[::-1]]
    values = [[v(frozenset(o[:k])) for k in range(n + 1)] for o in orders]
    return np.array(orders), np.array(values, dtype=float)


@pytest.mark.parametrize("n", [3, 4, 5])
def test_walks_over_all_orders_are_exact(n: int) -> None:
    rng = np.random.default_rng(n)
    v = random_table(n, rng)

    def game(s: frozenset[int]) -> float:
        return float(v[sum(1 << i for i in s)])

    est = estimate_walks(*all_orders_values(n, game))
    assert est.values == pytest.approx(brute_shapley(n, game), abs=1e-12)
    assert est.total == pytest.approx(v[-1] - v[0], abs=1e-12)


def test_walk_marginals_telescope() -> None:
    rng = np.random.default_rng(0)
    orders = plan_walks(6, 10, rng)
    values = rng.random((20, 7))
    marg = walk_marginals(orders, values)
    assert marg.sum(axis=1) == pytest.approx(values[:, -1] - values[:, 0])


def test_plan_walks_are_antithetic_permutations() -> None:
    orders = plan_walks(7, 25, np.random.default_rng(3))
    assert orders.shape == (50, 7)
    for a, b in zip(orders[0::2], orders[1::2], strict=True):
        assert sorted(a) == list(range(7))
        assert list(b) == list(a[::-1])


def test_walk_floor_keeps_an_all_zero_player_honest() -> None:
    orders = plan_walks(3, 20, np.random.default_rng(0))
    # Player 2 never matters on these walks; players 0 and 1 do.
    values = np.array(
        [[0.0] + [1.0 if {0, 1} <= set(o[:k]) else 0.0 for k in range(1, 4)] for o in orders]
    )
    est = estimate_walks(orders, values)
    assert est.values[2] == 0.0
    assert est.half_width[2] > 0  # not a zero-width certainty
    bare = estimate_walks(orders, values, floor=False)
    assert bare.half_width[2] == 0.0


def test_walks_drop_pairs_with_errors() -> None:
    orders = plan_walks(2, 4, np.random.default_rng(0))
    values = np.tile([0.0, 0.5, 1.0], (8, 1))
    values[3, 1] = np.nan
    est = estimate_walks(orders, values)
    assert est.units == 3


def test_weights_and_norms() -> None:
    from math import comb

    for n in range(1, 12):
        w = shapley_weights(n)
        assert sum(comb(n - 1, s) * w[s] for s in range(n)) == pytest.approx(1.0)
    sizes = popcounts(4)
    assert list(sizes[:8]) == [0, 1, 1, 2, 1, 2, 2, 3]
    c = coefficient_matrix(3)
    assert c[0, 0] == pytest.approx(-1 / 3) and c[0, 1] == pytest.approx(1 / 3)
    assert c[0, 3] == pytest.approx(1 / 6) and c[0, 6] == pytest.approx(-1 / 3)


def test_replicate_interval_is_student_t_across_replicates_with_the_floor() -> None:
    rng = np.random.default_rng(5)
    v = (rng.random((30, 8)) < 0.5).astype(float)
    v[3, 2] = np.nan  # an unscored rollout drops its replicate
    est = estimate_replicates(v)
    units = v[~np.isnan(v).any(axis=1)] @ coefficient_matrix(3).T
    assert est.units == 29
    assert est.values == pytest.approx(units.mean(axis=0))
    assert est.se == pytest.approx(units.std(axis=0, ddof=1) / np.sqrt(29))
    # A player whose every unit is 0 still gets an interval (the floor), not a point.
    zero = estimate_replicates(np.tile([0.0, 0, 1, 1, 0, 0, 1, 1], (12, 1)))
    assert zero.values[0] == 0.0 and zero.high[0] > 0.05
    with pytest.raises(ValueError, match="two complete"):
        estimate_replicates(v[:1])


def test_intervals_widen_towards_the_tail_of_skewed_units() -> None:
    # One player whose units look like a long trace's uncertain step over 36 pairs of walks: mostly
    # 0, sometimes 0.5, rarely 1 (skewness about 1.1). The plain t-interval misses on the tail's side
    # more often than 2.5%; the widened one does not, and it always contains the plain one.
    from scipy import stats

    rng = np.random.default_rng(7)
    support, probs = np.array([0.0, 0.5, 1.0]), np.array([0.645, 0.284, 0.071])
    truth = float(support @ probs)
    count, seeds = 36, 4000
    t = stats.t.ppf(0.975, count - 1)
    ours = plain_tail = tail = 0
    for _ in range(seeds):
        units = rng.choice(support, size=count, p=probs)
        est = estimate_replicates(np.column_stack([np.zeros(count), units]))
        half = t * units.std(ddof=1) / np.sqrt(count)
        lo, hi = units.mean() - half, units.mean() + half
        assert est.low[0] <= lo + 1e-12 and hi <= est.high[0] + 1e-12
        plain_tail += hi < truth
        tail += est.high[0] < truth
        ours += est.low[0] <= truth <= est.high[0]
    # Misses on the tail's side (nominal 2.5%): plain 4.3%, widened 2.3% on these seeds.
    assert plain_tail / seeds > 0.035
    assert tail / seeds <= 0.03
    assert 0.95 <= ours / seeds <= 0.975


@pytest.mark.parametrize("n", [3, 4, 5])
def test_the_exact_design_floors_players_no_replicate_saw_matter(n: int) -> None:
    """Every coalition failing on every replicate left units of 1e-16 (rounding), which made the
    floor's scale 1e-16: each player was reported 0 with a zero-width interval."""
    est = estimate_replicates(np.ones((8, 1 << n)))
    assert list(est.values) == [0.0] * n
    assert min(est.half_width) > 0.2  # as for units that are exactly 0


def test_exact_design_covers_a_rare_rescue_at_few_replicates() -> None:
    """The pivot at p = 0.9: no replicate of 8 shows the rescue 43% of the time. Coverage of the
    decisive step's phi = 0.1 was 0.58 at 8 replicates; nominal is 0.95 (1,000 seeds, exact phi)."""
    from car.sim import scenario_for
    from car.sim.planted import shapley_values

    model = scenario_for("planted-pivot", p=0.9)
    n = model.size()
    phi = np.array(shapley_values(model, [[k] for k in range(n)]))
    recorded = model.recorded()
    rng = np.random.default_rng(2026)

    def value(mask: int, u: np.ndarray, u_score: float) -> float:
        bad: list[bool] = []
        for i in range(n):
            bad.append(recorded[i] if mask >> i & 1 else bool(u[i] < model.bad_prob(i, tuple(bad))))
        return float(u_score < model.fail_prob(tuple(bad)))

    covered = np.zeros(n)
    seeds = 1000
    for _ in range(seeds):
        rows = []
        for _r in range(8):
            u, u_score = rng.random(n), rng.random()
            rows.append([value(mask, u, u_score) for mask in range(1 << n)])
        est = estimate_replicates(np.array(rows))
        covered += (est.low <= phi + 1e-12) & (phi - 1e-12 <= est.high)
    assert min(covered / seeds) >= 0.93, covered / seeds
