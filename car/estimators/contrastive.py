"""The contrastive (single-step) estimator with the point-of-commitment rule.

Arms are decision positions k = 0..m-1: hold every decision before k, resample k and everything after
it. `p_k` is the failure rate of arm k and `v` that of the factual arm (everything held). The estimator
reports, per position:

- rescue `r_k = 1 - p_k` with a mid-p exact interval (near-nominal coverage; Clopper-Pearson's
  guarantee over-covers, about 0.97 for a nominal 0.95 at these sample sizes);
- effect `e_k = v - p_k`, the failure probability that re-deciding from k removes; from `p_k`'s
  interval when `v` is known (deterministic replay of the record), else a paired interval on shared
  replicates (Tango score where binary: near nominal, not guaranteed);
- adjacent drop `D_k = p_{k+1} - p_k` (with `p_m = v`), paired on shared replicates.

Locus: the latest position whose effect is significantly above `min_effect`, one-sided, Bonferroni-
adjusted across the m positions, with exact (Clopper-Pearson) bounds on `p_k` when `v` is known and
outcomes are binary, and betting bounds (`car.estimators.confseq`) where they are graded: both valid
whatever the outcomes' distribution. When `v` is estimated by replay (a noisy scorer) the effect is
paired, and its bound approximate (`_paired_low`: Tango's score bound where binary, its tail error
up to about twice the adjusted alpha; Student-t with guards where graded). Drops count as
significant when their adjusted lower bound is above zero and their estimate reaches `min_effect`;
two or more mark shared credit. Displayed intervals are per-step at `level` (Student-t with guards
for graded outcomes: near nominal, not guaranteed); verdicts use the adjusted level.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from car.estimators.confseq import betting_cs
from car.report import percent
from car.stats import (
    cp_upper,
    is_binary,
    mid_p,
    paired_difference,
    skew_shift,
    t_upper,
    tango,
    z_upper,
)

__all__ = [
    "ContrastiveResult",
    "Interval",
    "PositionEstimate",
    "estimate_contrastive",
    "factual_interval",
    "verdict_of",
]


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class PositionEstimate:
    position: int
    fail: Interval
    rescue: Interval
    effect: Interval
    drop: Interval
    effect_significant: bool
    drop_significant: bool
    verdict: str  # "locus" | "contributing" | "not significant" | "no data"


@dataclass(frozen=True)
class ContrastiveResult:
    positions: tuple[PositionEstimate, ...]
    factual: Interval
    factual_exact: bool
    locus: int | None
    largest_drop: int | None
    shared: tuple[int, ...]
    abstained_reason: str | None
    needed_per_step: int | None
    level: float
    min_effect: float
    alpha_adjusted: float


def _mean_interval(x: np.ndarray, level: float, scale: float) -> Interval:
    n = len(x)
    if n == 0:
        return Interval(math.nan, 0.0, 1.0, 0)
    mean = float(x.mean())
    if is_binary(x):
        lo, hi = mid_p(round(float(x.sum())), n, level)
        return Interval(mean, lo, hi, n)
    lo, hi = _t_ends(x, level, scale)
    return Interval(mean, max(0.0, lo), min(1.0, hi), n)


def _t_ends(
    x: np.ndarray, level: float, scale: float, span: tuple[float, float] = (0.0, 1.0)
) -> tuple[float, float]:
    """Interval for the mean of graded outcomes in `span`: Student-t, with three guards.

    Outcomes that all agree (two judge scores of 0.5, or 128 of 0.9) say only that any other value
    is rare: a value seen in none of n draws has a rate below `r = 1 - (tail)^(1/n)` at this level,
    and can move the mean at most to the end of `span`, so the ends are `v - r (v - low)` and
    `v + r (high - v)`, exact whatever the distribution (before, a floor one unit wide covered a
    judge at 0.9 that scores 0.05 one time in fifty 0.925 of the time at n = 128, missing whenever
    no 0.05 came up). Otherwise a variance floor of `scale^2 / (n + 1)`, one unseen outcome a full
    scale away; and where the spread seen is above the floor, the ends widen towards a skewed tail
    (`car.stats.skew_shift`): that judge, one time in twenty, covered 0.84 at n = 64 without it
    (0.96 with it). As for Shapley, the shift only ever widens.
    """
    n = len(x)
    if n < 2:
        return -math.inf, math.inf
    if x.max() == x.min():  # equal values (their float mean may be an ulp off)
        v, (low, high) = float(x[0]), span
        r = 1 - ((1 - level) / 2) ** (1 / n)
        return v - r * (v - low), v + r * (high - v)
    mean = float(x.mean())
    s2 = float(x.var(ddof=1))
    floor = scale * scale / (n + 1)
    t = t_upper((1 - level) / 2, n - 1)
    se = math.sqrt(max(s2, floor) / n)
    shift = float(skew_shift(x, t)) * se if s2 > floor else 0.0
    return mean - t * se + min(shift, 0.0), mean + t * se + max(shift, 0.0)


def _noise_scale(*rows: np.ndarray) -> float:
    """The largest distance of any outcome from its arm's mean: the floor's scale for graded
    outcomes. If no arm varies at all, the outcome range itself (1): nothing says the spread is 0.
    (Equal values are told by max == min: their float mean can differ from them by an ulp.)"""
    largest = 0.0
    for row in rows:
        x = row[~np.isnan(row)]
        if len(x) > 1 and x.max() > x.min():
            mean = float(x.mean())
            largest = max(largest, float(x.max()) - mean, mean - float(x.min()))
    return largest if largest > 0 else 1.0


def factual_interval(factual: np.ndarray, level: float = 0.95) -> Interval:
    """The factual arm's failure rate from its replays (NaN: not scored), on its own."""
    x = factual[~np.isnan(factual)]
    return _mean_interval(x, level, _noise_scale(factual))


def _upper_one_sided(x: np.ndarray, alpha: float) -> float:
    """Upper confidence bound at error `alpha` for the mean of outcomes in [0, 1], valid whatever
    their distribution: exact (Clopper-Pearson) for binary outcomes, else a betting bound. Verdicts
    rest on it; the t-based bound the displayed intervals use is not valid when a rare large value
    goes unseen (a judge scoring 0.37-0.39 with a rare 1.0: 27% false loci where 1.25% was
    promised), and a verdict is a promise."""
    if len(x) == 0:
        return 1.0
    if is_binary(x):
        return cp_upper(round(float(x.sum())), len(x), alpha)
    return betting_cs(x, alpha)[1]


def _paired_low(a: np.ndarray, b: np.ndarray, alpha: float, scale: float) -> float:
    """Lower confidence bound at error `alpha` for mean(a - b) on replicates where both are
    defined (a noisy scorer's effects, and drops): the Tango score bound for binary pairs, else the
    Student-t bound with the displayed intervals' guards. Both are approximate. Tango's one-sided
    error stays within alpha at a difference of 0 (drops: at most 0.0126 for 0.0125, n = 16-128,
    discordance rates 0.05-0.45 each way, exact trinomial sums; 0.0164 at n = 64 when every pair is
    discordant) but reaches about twice alpha further out (0.025 for 0.0125 at n = 64,
    two steps). The valid alternative, a betting bound, cost too much power at the sample sizes
    used: the pivot under a 5%-noisy judge was found in 13 of 20 seeds at 32 samples (Tango: 20),
    and the bench's `graded` case (a noisy graded judge) in 0 of 200 at 384 rollouts (t: 173)."""
    ok = ~(np.isnan(a) | np.isnan(b))
    a, b = a[ok], b[ok]
    if len(a) == 0:
        return -math.inf
    if is_binary(a) and is_binary(b):
        return paired_difference(a, b, 1 - 2 * alpha)[1]
    return _paired(a, b, 1 - 2 * alpha, scale).low


def _paired(a: np.ndarray, b: np.ndarray, level: float, scale: float) -> Interval:
    """mean(a - b) on replicates where both are defined."""
    ok = ~(np.isnan(a) | np.isnan(b))
    a, b = a[ok], b[ok]
    n = len(a)
    if n == 0:
        return Interval(math.nan, -1.0, 1.0, 0)
    if is_binary(a) and is_binary(b):
        d, lo, hi = paired_difference(a, b, level)
        return Interval(d, lo, hi, n)
    diff = a - b
    lo, hi = _t_ends(diff, level, scale, (-1.0, 1.0))
    return Interval(float(diff.mean()), max(-1.0, lo), min(1.0, hi), n)


def _minus_known(v: float, x: np.ndarray, level: float, scale: float) -> Interval:
    """v - mean(x) when v is known exactly."""
    iv = _mean_interval(x, level, scale)
    return Interval(v - iv.estimate, v - iv.high, v - iv.low, iv.n)


def estimate_contrastive(
    arms: np.ndarray,
    factual: np.ndarray,
    *,
    factual_exact: bool,
    level: float = 0.95,
    min_effect: float = 0.1,
) -> ContrastiveResult:
    """Estimate rescue rates, effects and drops from outcomes.

    `arms[k, r]` is the outcome (1 = failure, NaN = errored or unscorable) of arm k on replicate r;
    `factual[r]` that of the factual arm on the same replicate (a single value when `factual_exact`).
    """
    arms = np.asarray(arms, dtype=float)
    factual = np.asarray(factual, dtype=float)
    m = arms.shape[0]
    alpha = (1 - level) / 2 / max(m, 1)
    fact_ok = factual[~np.isnan(factual)]
    scale = _noise_scale(*arms, factual)
    if factual_exact:
        if len(fact_ok) == 0:
            raise ValueError("an exact factual arm needs its value")
        v = float(fact_ok[0])
        fact_iv = Interval(v, v, v, 1)
    else:
        fact_iv = _mean_interval(fact_ok, level, scale)
        v = fact_iv.estimate

    draft: list[PositionEstimate] = []
    for k in range(m):
        x = arms[k][~np.isnan(arms[k])]
        fail = _mean_interval(x, level, scale)
        rescue = Interval(1 - fail.estimate, 1 - fail.high, 1 - fail.low, fail.n)
        if factual_exact:
            effect = _minus_known(v, x, level, scale)
            eff_low = v - _upper_one_sided(x, alpha) if len(x) else -math.inf
        else:
            effect = _paired(factual, arms[k], level, scale)
            eff_low = _paired_low(factual, arms[k], alpha, scale)
        if k + 1 < m:
            drop = _paired(arms[k + 1], arms[k], level, scale)
            drop_low = _paired_low(arms[k + 1], arms[k], alpha, scale)
        else:  # the last arm's drop is against the factual arm: its effect
            drop, drop_low = effect, eff_low
        draft.append(
            PositionEstimate(
                k,
                fail,
                rescue,
                effect,
                drop,
                effect_significant=bool(eff_low > min_effect),
                drop_significant=bool(drop_low > 0 and drop.estimate >= min_effect),
                verdict="",
            )
        )

    significant = [p.position for p in draft if p.effect_significant]
    locus = max(significant) if significant else None
    shared = tuple(p.position for p in draft if p.drop_significant)
    drops = [(p.drop.estimate, p.position) for p in draft if not math.isnan(p.drop.estimate)]
    largest = max(drops)[1] if drops and max(drops)[0] > 0 else None
    positions = [replace(p, verdict=verdict_of(p, locus)) for p in draft]

    def projected_low(k: int) -> Callable[[int], float] | None:
        """Arm k's verdict bound at n samples, were its outcomes' shares to hold (binary only)."""
        if factual_exact:
            x = arms[k][~np.isnan(arms[k])]
            if not is_binary(x):
                return None
            fails = round(float(x.sum()))
            return _projection((fails, len(x) - fails), lambda c, n: v - cp_upper(c[0], n, alpha))
        ok = ~(np.isnan(factual) | np.isnan(arms[k]))
        f, a = factual[ok], arms[k][ok]
        if not (is_binary(f) and is_binary(a)):
            return None
        up, down = int(np.sum((f > 0.5) & (a < 0.5))), int(np.sum((f < 0.5) & (a > 0.5)))
        # Discordant pairs against the effect first, so a tie rounds towards deciding later.
        return _projection(
            (down, len(f) - up - down, up),
            lambda c, n: tango(c[2], c[0], n, 1 - 2 * alpha)[1],
        )

    reason, needed = (
        (None, None)
        if locus is not None
        else _abstain(positions, alpha, min_effect, projected_low, arms.shape[1])
    )
    return ContrastiveResult(
        tuple(positions),
        fact_iv,
        factual_exact,
        locus,
        largest,
        shared,
        reason,
        needed,
        level,
        min_effect,
        alpha,
    )


def verdict_of(p: PositionEstimate, locus: int | None) -> str:
    if p.fail.n == 0:
        return "no data"
    if p.position == locus:
        return "locus"
    return "contributing" if p.drop_significant else "not significant"


_MOST_PROJECTED = 1 << 40


def _projection(
    counts: tuple[int, ...], bound: Callable[[tuple[int, ...], int], float]
) -> Callable[[int], float] | None:
    """n -> `bound(scaled, n)`, the counts of each kind of replicate scaled to n replicates with the
    same shares, by largest remainders in integers (a tie to the kind listed first)."""
    total = sum(counts)
    if total == 0:
        return None

    def at(n: int) -> float:
        whole = [c * n // total for c in counts]
        left = sorted(range(len(counts)), key=lambda i: -(counts[i] * n % total))
        for i in left[: n - sum(whole)]:
            whole[i] += 1
        return bound(tuple(whole), n)

    return at


def _needed(low_at: Callable[[int], float], seen: int, min_effect: float, guess: int) -> int:
    """The fewest samples per step, more than `seen`, at which `low_at(n)` (the verdict's bound on
    the projected outcomes) clears `min_effect`: doubling from `guess`, then halving the gap (the
    bound is monotone in n but for the rounding of the projected counts)."""
    low, high = seen, max(guess, seen + 1)  # `seen` did not decide
    while not low_at(high) > min_effect:
        if high > _MOST_PROJECTED:  # an estimate a rounding error above min_effect: no n decides
            return max(guess, seen + 1)
        low, high = high, 2 * high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if low_at(mid) > min_effect else (mid, high)
    return high


def _abstain(
    positions: list[PositionEstimate],
    alpha: float,
    min_effect: float,
    projected_low: Callable[[int], Callable[[int], float] | None],
    planned: int,
) -> tuple[str, int | None]:
    """Why no locus, and about how many samples per step would decide were the estimates to hold:
    the verdict's own bound on the best step's outcomes projected to more samples where they are
    binary (`projected_low`), else the normal approximation. That is a count of scored samples; of
    the `planned` samples per step, rollouts that errored or could not be scored left fewer, and the
    advice asks for as many more as that loss takes, were it to hold."""
    if not any(p.fail.n > 0 for p in positions):
        return "no rollout could be scored: every arm errored or was unscorable", None
    with_data = [p for p in positions if p.effect.n > 0]
    if not with_data:
        return (
            "no replicate scored both the recorded run's replay and a re-decision, so no effect "
            "could be paired; the scorer could not score most rollouts",
            None,
        )
    best = max(with_data, key=lambda p: (p.effect.estimate, p.position))
    gap = best.effect.estimate - min_effect
    if gap <= 0:
        return (
            f"no decision step's re-decision removes more than {percent(min_effect)} of the failure "
            f"(largest estimated effect {best.effect.estimate:.0%}); the run may have been "
            "decided before the first decision step, or the scorer may not see what changed",
            None,
        )
    z = z_upper(alpha)
    p = min(max(best.fail.estimate, 0.05), 0.95)
    guess = math.ceil(z * z * p * (1 - p) / (gap * gap)) + 1
    scored = best.effect.n  # the effect's samples: paired, where a replayed factual arm is
    low_at = projected_low(best.position)
    # The normal approximation can fall at or below the n that just failed to decide (the bounds
    # are wider at small n): never advise fewer than twice the samples already taken.
    needed = max(guess, 2 * scored) if low_at is None else _needed(low_at, scored, min_effect, guess)
    lost = ""
    if 0 < scored < planned:
        needed = math.ceil(needed * planned / scored)
        lost = f", as {scored} of {planned} samples were scored"
    # A rerun with more samples looks at these replicates again, a second test of the same data
    # (its false-locus rate can exceed the level: 3.0% for 2.5% at one step, exactly at min_effect);
    # --adaptive's intervals hold however often they are looked at.
    return (
        f"no step's effect is significantly above {percent(min_effect)} at this sample size "
        f"(largest estimate {best.effect.estimate:.0%} with n={scored}); about {needed} "
        f"samples per step would decide{lost} (--samples {needed}, a second look at these samples; "
        "--adaptive samples until decided, with intervals valid however often it looks)",
        needed,
    )
