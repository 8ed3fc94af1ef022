"""Contrastive attribution against exact answers, across many seeds (figures in the test names' docs)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

import car
from car.adaptive import blame_adaptive_async
from car.estimators.contrastive import estimate_contrastive
from car.sim import record
from tests.conftest import TRACES

FAST: dict[str, Any] = {"match_samples": 0}


def _locus_rate(trace: car.Trace | str, truth: int, seeds: range, **kw: Any) -> float:
    hits = sum(car.blame(trace, seed=s, **FAST, **kw).locus == truth for s in seeds)
    return hits / len(seeds)


def test_pivot_locus_found_at_default_settings_in_95pct_of_50_seeds() -> None:
    # Measured: 50/50.
    assert _locus_rate(str(TRACES / "pivot.json"), 1, range(50)) >= 0.95


def test_support_refund_blames_the_decision_not_the_execution() -> None:
    # Measured: 50/50 seeds name step 1; step 2 (the refund call, slip 2%) is never the locus.
    reports = [car.blame(str(TRACES / "support-refund.json"), seed=s, **FAST) for s in range(50)]
    assert sum(r.locus == 1 for r in reports) / 50 >= 0.95
    assert all(r.locus != 2 for r in reports)


def test_or_model_locus_is_the_first_step() -> None:
    assert _locus_rate(str(TRACES / "or.json"), 0, range(30)) >= 0.95


def test_and_model_locus_and_shared_credit() -> None:
    # D_0 = q - q^2 = 0.21 and D_1 = 1 - q = 0.7: both drops are real. Measured over 40 seeds: both
    # flagged in 65% of runs at 32 samples per step, 95% at 64; the locus is step 1 in 100%.
    reports = [car.blame(str(TRACES / "and.json"), seed=s, samples=64, **FAST) for s in range(30)]
    assert sum(r.locus == 1 for r in reports) / 30 >= 0.95
    assert sum(r.shared == [0, 1] for r in reports) / 30 >= 0.85


def test_research_team_names_the_verifier_and_flags_shared_credit() -> None:
    # Both drops (steps 1 and 3) flagged: measured in 74% of seeds 0-199 at the default 32 samples
    # per step; at that rate 15 of 30 fails with probability 0.13% (binomial).
    reports = [car.blame(str(TRACES / "research-team.json"), seed=s, **FAST) for s in range(30)]
    assert sum(r.locus == 3 for r in reports) / 30 >= 0.95
    assert sum(1 in r.shared and 3 in r.shared for r in reports) >= 15


def _exact_rescue(name: str) -> list[float]:
    if name == "pivot":
        return [0.7, 0.7, 0.0]
    a, s = 0.45, 0.02
    p1 = a * (1 - s) + (1 - a) * s
    return [1 - p1, 1 - p1, s, 0.0]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pivot", "support-refund"])
def test_rescue_interval_coverage_is_near_nominal(name: str) -> None:
    """Coverage of the 95% (mid-p) rescue intervals over 200 seeds: measured 0.940 on pivot (exact
    coverage of one step there: 0.948) and 0.988 on support-refund. Steps with a rescue of exactly 0
    always cover and are left out."""
    truth = _exact_rescue(name)
    covered = total = 0
    for seed in range(200):
        report = car.blame(str(TRACES / f"{name}.json"), seed=seed, **FAST)
        for step, r in zip(report.steps, truth, strict=True):
            assert (
                step.rescue is not None and step.rescue.low is not None and step.rescue.high is not None
            )
            if r in (0.0, 1.0):
                continue  # degenerate: covered whatever happens, not informative
            total += 1
            covered += step.rescue.low <= r <= step.rescue.high
    coverage = covered / total
    assert 0.92 <= coverage <= 0.99, coverage


def test_small_effect_is_never_the_locus_however_many_samples() -> None:
    # A 2% execution slip is significant at n=400 (about 8 rescues) but below min-effect: not the locus.
    report = car.blame(str(TRACES / "support-refund.json"), seed=4, samples=400, **FAST)
    step2 = report.steps[2]
    assert step2.rescue is not None and step2.rescue.estimate is not None
    assert 0 < step2.rescue.estimate < 0.06
    assert report.locus == 1


def test_abstains_with_a_reason_and_an_estimate_of_what_would_decide() -> None:
    trace = record("pivot", seed=0, p=0.7)  # rescue 0.3: real, but 4 rollouts cannot show it
    reports = [car.blame(trace, seed=s, samples=4, **FAST) for s in range(20)]
    abstained = [r for r in reports if r.locus is None]
    assert len(abstained) >= 14  # 3 or 4 rescues of 4 (P = 0.08) is already exact evidence
    assert all(r.headline.startswith("car cannot name a decisive step") for r in abstained)
    assert all(r.locus in (None, 1) for r in reports)
    undecided = [r for r in abstained if r.rollouts_needed_per_step is not None]
    assert len(undecided) >= 10  # the others saw no rescue at all in 4 draws (0.7^4 = 24%)
    for r in undecided:
        assert "samples per step would decide (--samples " in (r.abstained_reason or "")
        assert r.rollouts_needed_per_step is not None and r.rollouts_needed_per_step > 4
    # and with the typical suggested number of rollouts it does decide, in most seeds
    needed = sorted(r.rollouts_needed_per_step or 0 for r in undecided)[len(undecided) // 2]
    assert _locus_rate(trace, 1, range(20), samples=needed) >= 0.6


def test_abstains_when_no_step_matters() -> None:
    trace = record("pivot", seed=0, p=0.95)  # rescue 0.05 < min-effect 0.1
    report = car.blame(trace, seed=0, samples=64, **FAST)
    assert report.locus is None
    assert "removes more than 10%" in (report.abstained_reason or "")


def test_scorer_that_says_no_failure_abstains() -> None:
    """The report keeps the record's value (0) and every path names the same reason."""
    report = car.blame(str(TRACES / "pivot.json"), scorer="regex:^never$", **FAST)
    assert report.locus is None and "did not fail" in (report.abstained_reason or "")
    assert report.factual.estimate == 0 and report.factual_exact
    shapley = car.blame(str(TRACES / "pivot.json"), scorer="regex:^never$", method="shapley", **FAST)
    assert shapley.factual.estimate == 0
    assert "Shapley not run: the recorded run did not fail" in shapley.notes
    adaptive = asyncio.run(
        blame_adaptive_async(str(TRACES / "pivot.json"), scorer="regex:^never$", budget=50)
    )
    assert adaptive.adaptive is not None and adaptive.adaptive.stopped == "nothing-to-attribute"
    assert adaptive.adaptive.statement.startswith("nothing to attribute: the scorer")


def test_noisy_scorer_estimates_the_factual_arm_by_replay() -> None:
    from dataclasses import dataclass

    from car import EventKey, Trajectory
    from car.sim import scenario_for

    scenario = scenario_for("pivot")

    @dataclass
    class NoisyJudge:
        spec: str = "noisy"
        deterministic: bool = False

        async def score(self, trajectory: Trajectory, key: EventKey) -> float | None:
            truth = scenario.failed(trajectory.turns)
            flip = key.uniform() < 0.05
            return float(truth != flip)

    hits = 0
    for seed in range(20):
        report = car.blame(str(TRACES / "pivot.json"), scorer=NoisyJudge(), seed=seed, **FAST)
        assert not report.factual_exact and report.factual.n == 32
        hits += report.locus == 1
    assert hits >= 18


def test_estimator_is_pure_and_handles_missing_outcomes() -> None:
    arms = np.array([[1, 0, np.nan, 0], [1, 1, 1, np.nan]], dtype=float)
    result = estimate_contrastive(arms, np.array([1.0]), factual_exact=True, min_effect=0.1)
    assert result.positions[0].fail.n == 3 and result.positions[1].fail.n == 3
    empty = estimate_contrastive(np.full((2, 3), np.nan), np.array([1.0]), factual_exact=True)
    assert empty.locus is None and "no rollout could be scored" in (empty.abstained_reason or "")
    assert [p.verdict for p in empty.positions] == ["no data", "no data"]


@pytest.mark.slow
def test_drop_interval_coverage_on_support_refund() -> None:
    """Paired drops on shared replicates: measured coverage over 200 seeds 1.0, 0.965, 1.0, 1.0."""
    p1 = 0.45 * 0.98 + 0.55 * 0.02
    exact = [0.0, 0.98 - p1, 0.02, 0.0]
    covered = [0, 0, 0, 0]
    for seed in range(200):
        report = car.blame(str(TRACES / "support-refund.json"), seed=seed, **FAST)
        for i, (step, d) in enumerate(zip(report.steps, exact, strict=True)):
            assert step.drop is not None and step.drop.low is not None and step.drop.high is not None
            covered[i] += step.drop.low <= d <= step.drop.high
    assert min(covered) / 200 >= 0.93, covered


def test_no_paired_replicate_abstains_with_a_reason() -> None:
    """A scorer that cannot score the factual replay where it scored the arm, and vice versa."""
    result = estimate_contrastive(
        np.array([[np.nan, 1.0]]), np.array([1.0, np.nan]), factual_exact=False
    )
    assert result.locus is None and result.needed_per_step is None
    assert "no replicate scored both" in (result.abstained_reason or "")


def test_agreeing_graded_outcomes_do_not_give_a_zero_width_interval() -> None:
    """Two judge scores of 0.5 say little; forty say a lot (the floor shrinks like 1/n)."""
    two = estimate_contrastive(np.array([[0.5, 0.5]]), np.array([1.0]), factual_exact=True)
    assert two.locus is None and two.positions[0].effect.high - two.positions[0].effect.low > 0.5
    paired = estimate_contrastive(np.array([[0.5, 0.5]]), np.array([0.9, 0.9]), factual_exact=False)
    assert paired.locus is None
    forty = estimate_contrastive(np.full((1, 40), 0.5), np.array([1.0]), factual_exact=True)
    assert forty.locus == 0


def test_agreeing_graded_outcomes_never_give_a_zero_width_interval_at_any_n() -> None:
    """Seven scores of 0.9 have a float mean one ulp off 0.9: their spread is still 0, not 1e-16
    (which gave a zero-width interval and made 0.9 against a known 1.0 a 'significant' effect at
    any minimum). Agreeing scores bound the mean exactly: a score seen in none of n draws has a rate
    below r = 1 - 0.025^(1/n), and moves the mean at most to 0 or 1."""
    for n in range(2, 81):
        fail = estimate_contrastive(np.full((1, n), 0.9), np.array([1.0]), factual_exact=True)
        r = 1 - 0.025 ** (1 / n)
        assert fail.positions[0].fail.low == pytest.approx(0.9 - r * 0.9), n
        assert fail.positions[0].fail.high == pytest.approx(0.9 + r * 0.1), n
    for n in (7, 9):
        # The effect is at least 0.1 - r 0.1 (0.059 at n = 7, 0.066 at n = 9): not above 0.08.
        few = estimate_contrastive(
            np.full((1, n), 0.9), np.array([1.0]), factual_exact=True, min_effect=0.08
        )
        assert few.locus is None, n


@pytest.mark.parametrize(("n", "rare"), [(16, 0.05), (64, 0.05), (128, 0.05), (128, 0.02)])
def test_graded_interval_coverage_with_a_rare_large_deviation(n: int, rare: float) -> None:
    """A judge scoring 0.9, and 0.05 one time in twenty (or fifty): a skewed mean whose t-interval
    misses on the tail's side (0.84 at n = 64 before the skewness correction), and, one time in
    fifty at n = 128, often no 0.05 at all (0.925 with a floor one unit wide). Over 2,000 samples
    per case the interval covers >= 0.93 (measured 0.95-1.00)."""
    rng = np.random.default_rng(n + int(100 * rare))
    mean = 0.9 * (1 - rare) + 0.05 * rare
    hits = 0
    for _ in range(2000):
        scores = np.where(rng.random((1, n)) < rare, 0.05, 0.9)
        fail = estimate_contrastive(scores, np.array([1.0]), factual_exact=True).positions[0].fail
        hits += fail.low <= mean <= fail.high
    assert hits / 2000 >= 0.93


@pytest.mark.parametrize("n", [3, 4, 8, 16, 32])
def test_graded_interval_coverage_with_a_three_level_judge(n: int) -> None:
    """A judge scoring 0, 0.5 or 1 (mostly 0.5): over 2,000 samples per n the interval covers
    >= 0.93 (measured 0.95-1.00; without the floor 0.39 at n = 3 and 0.74 at n = 8)."""
    rng = np.random.default_rng(n)
    levels, probs = np.array([0.0, 0.5, 1.0]), np.array([0.05, 0.85, 0.10])
    mean = float(levels @ probs)
    hits = 0
    for _ in range(2000):
        fail = (
            estimate_contrastive(
                rng.choice(levels, size=(1, n), p=probs), np.array([1.0]), factual_exact=True
            )
            .positions[0]
            .fail
        )
        hits += fail.low <= mean <= fail.high
    assert hits / 2000 >= 0.93


def _apportion(counts: tuple[int, ...], n: int) -> list[int]:
    """Counts scaled to n with the same shares: largest remainders, a tie to the one listed first."""
    total = sum(counts)
    whole = [c * n // total for c in counts]
    by_left = sorted(range(len(counts)), key=lambda i: -(counts[i] * n % total))
    for i in by_left[: n - sum(whole)]:
        whole[i] += 1
    return whole


def _projected(counts: list[int], seen: int, n: int) -> np.ndarray:
    """Arms whose failure rates counts/seen hold at n samples (outcomes 1 = failure)."""
    rows = []
    for k in counts:
        fails, rescues = _apportion((k, seen - k), n)
        rows.append([1.0] * fails + [0.0] * rescues)
    return np.array(rows)


@pytest.mark.parametrize("m", [1, 3, 10])
def test_the_advice_after_an_abstention_is_the_fewest_samples_that_decide(m: int) -> None:
    """With binary outcomes the advice is exact: were the failure rates to hold, the advised n
    decides and one sample fewer does not. (The normal approximation advised 4 where 3 decide after
    two samples rescued at each of three steps, and 64 where 35 decide after 8 of 32.)"""
    rng = np.random.default_rng(m)
    advised = 0
    for _ in range(150):
        seen = int(rng.integers(1, 41))
        rescues = rng.binomial(seen, rng.uniform(0.0, 0.5), size=m)  # near the decision
        counts = sorted(seen - int(r) for r in rescues)
        fact = np.array([1.0])
        result = estimate_contrastive(_projected(counts, seen, seen), fact, factual_exact=True)
        needed = result.needed_per_step
        if result.locus is not None or needed is None:
            continue
        advised += 1
        assert needed > seen
        assert f"(--samples {needed}, a second look" in (result.abstained_reason or "")
        at = estimate_contrastive(_projected(counts, seen, needed), fact, factual_exact=True)
        assert at.locus is not None, (counts, seen, needed)
        if needed - 1 > seen:
            before = _projected(counts, seen, needed - 1)
            assert estimate_contrastive(before, fact, factual_exact=True).locus is None
    assert advised >= 40


@pytest.mark.parametrize("exact", [True, False])
def test_the_advice_counts_samples_lost_to_errors(exact: bool) -> None:
    """Half the samples errored (NaN): the advice is in samples to plan, so twice the scored
    samples that would decide. It was the scored count alone, which could advise fewer samples
    than the run had just used (`--samples 12` after 32, most of them errored)."""
    arm = np.array([[1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0]])
    fact = np.ones(1) if exact else np.ones(8)
    whole = estimate_contrastive(arm, fact, factual_exact=exact, min_effect=0.2)
    lossy_arm = np.concatenate([arm, np.full((1, 8), np.nan)], axis=1)
    lossy_fact = fact if exact else np.concatenate([fact, np.ones(8)])
    lossy = estimate_contrastive(lossy_arm, lossy_fact, factual_exact=exact, min_effect=0.2)
    assert whole.locus is None and lossy.locus is None
    assert whole.needed_per_step is not None and whole.needed_per_step > 8
    assert lossy.needed_per_step == 2 * whole.needed_per_step
    reason = lossy.abstained_reason or ""
    assert f"would decide, as 8 of 16 samples were scored (--samples {lossy.needed_per_step}," in reason
    assert "were scored" not in (whole.abstained_reason or "")


def _pairs(kinds: tuple[int, int, int], n: int) -> tuple[np.ndarray, np.ndarray]:
    """(factual, arm) outcomes on n replicates with the shares of (rescued while the arm failed,
    concordant, failed while the arm rescued) in `kinds`."""
    d, same, u = _apportion(kinds, n)
    return (
        np.array([0.0] * d + [1.0] * same + [1.0] * u),
        np.array([1.0] * d + [1.0] * same + [0.0] * u),
    )


def test_the_advice_is_exact_against_a_replayed_factual_arm_too() -> None:
    """A noisy scorer: effects are paired differences with Tango's bound, which depends on the
    discordant pairs alone. Were their shares to hold, the advised n decides, one fewer does not."""
    rng = np.random.default_rng(7)
    advised = 0
    for _ in range(200):
        seen = int(rng.integers(4, 61))
        factual = (rng.random(seen) < rng.uniform(0.7, 1.0)).astype(float)
        arm = (rng.random(seen) < rng.uniform(0.2, 0.9)).astype(float)
        result = estimate_contrastive(arm[None, :], factual, factual_exact=False)
        needed = result.needed_per_step
        if result.locus is not None or needed is None:
            continue
        advised += 1
        up = int(np.sum((factual == 1) & (arm == 0)))
        down = int(np.sum((factual == 0) & (arm == 1)))
        kinds = (down, seen - up - down, up)
        f_at, a_at = _pairs(kinds, needed)
        assert estimate_contrastive(a_at[None, :], f_at, factual_exact=False).locus == 0
        if needed - 1 > seen:
            f_b, a_b = _pairs(kinds, needed - 1)
            assert estimate_contrastive(a_b[None, :], f_b, factual_exact=False).locus is None
    assert advised >= 40


def test_the_advice_after_two_samples_that_rescued_is_the_third() -> None:
    two = estimate_contrastive(np.zeros((3, 2)), np.array([1.0]), factual_exact=True)
    assert two.needed_per_step == 3
    assert estimate_contrastive(np.zeros((3, 3)), np.array([1.0]), factual_exact=True).locus == 2


def test_the_advice_names_the_samples_its_estimate_rests_on() -> None:
    """A noisy scorer that could not score the record's replay on half the replicates: the effect
    is paired, on the 4 replicates where both arms were scored. The reason said `with n=8` (the arm's
    own count) beside `as 4 of 8 samples were scored`."""
    arm = np.array([[0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]])
    factual = np.array([1.0, np.nan] * 4)
    result = estimate_contrastive(arm, factual, factual_exact=False, min_effect=0.2)
    assert result.locus is None and result.positions[0].effect.n == 4
    reason = result.abstained_reason or ""
    assert "(largest estimate 100% with n=4)" in reason and "as 4 of 8 samples were scored" in reason
    # Graded, by the normal approximation: never below twice the 4 samples the effect rests on, 8,
    # scaled for the loss (4 of 8 scored) to 16. The floor was twice the arm's own count, 16, then
    # scaled again: 32.
    graded = np.array([[0.1, 0.3, 0.1, 0.3, 0.1, 0.3, 0.9, 0.3]])
    result = estimate_contrastive(graded, factual * 0.9, factual_exact=False, min_effect=0.2)
    assert result.locus is None and result.positions[0].effect.n == 4
    assert result.needed_per_step == 16
