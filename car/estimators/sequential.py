"""Sequential locus certification: the point-of-commitment rule on anytime-valid intervals.

Given the outcomes gathered so far (NaN = not observed), `locus_state` says, for each decision
position k, whether its effect `e_k = v - p_k` is certainly above `min_effect` ("above"), certainly
at or below it ("below"), or still open, using confidence sequences at level 1 - delta/m (Bonferroni
over the m positions; the CS makes every look valid, so the caller may stop whenever it likes).

The locus is the latest position that is above. It is *certified* when every later position is below:
then with probability at least 1 - delta the named step is the point of commitment for this
`min_effect`. Positions before the latest "above" one cannot change the answer, so they are not open.
Decisions are sticky (pass the previous state): the guarantee is uniform over time, so a position once
decided stays decided.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from car.estimators.confseq import difference_cs, mean_cs
from car.estimators.contrastive import ContrastiveResult, Interval, PositionEstimate, verdict_of
from car.report import percent

__all__ = ["LocusState", "locus_state"]


@dataclass(frozen=True)
class LocusState:
    above: frozenset[int]
    below: frozenset[int]
    open: tuple[int, ...]
    locus: int | None
    certified: bool
    result: ContrastiveResult  # anytime-valid intervals at `confidence`, verdicts at delta/m
    # the effects' upper bounds at delta/m, which decide "below": what an open step may still be
    decision_highs: tuple[float, ...] = ()


def _effect(
    k_arm: np.ndarray, factual: np.ndarray, v: float | None, alpha: float
) -> tuple[Interval, Interval]:
    """(fail interval, effect interval) for one arm at error rate alpha."""
    x = k_arm[~np.isnan(k_arm)]
    n = len(x)
    if n == 0:
        return Interval(math.nan, 0.0, 1.0, 0), Interval(math.nan, -1.0, 1.0, 0)
    lo, hi = mean_cs(x, alpha)
    fail = Interval(float(x.mean()), lo, hi, n)
    if v is not None:
        return fail, Interval(v - fail.estimate, v - hi, v - lo, n)
    ok = ~(np.isnan(k_arm) | np.isnan(factual))
    d = factual[ok] - k_arm[ok]
    if len(d) == 0:
        return fail, Interval(math.nan, -1.0, 1.0, 0)
    dlo, dhi = difference_cs(d, alpha)
    return fail, Interval(float(d.mean()), dlo, dhi, len(d))


def _holding(iv: Interval) -> Interval:
    """`iv` widened to hold its own estimate, for display: a betting CS is intersected over time, so
    the sample mean can end outside it (at a low confidence, after an early run of one outcome); the
    wider interval is still valid."""
    if math.isnan(iv.estimate):
        return iv
    return replace(iv, low=min(iv.low, iv.estimate), high=max(iv.high, iv.estimate))


def _drop(a: np.ndarray, b: np.ndarray, alpha: float) -> Interval:
    ok = ~(np.isnan(a) | np.isnan(b))
    d = a[ok] - b[ok]
    if len(d) == 0:
        return Interval(math.nan, -1.0, 1.0, 0)
    lo, hi = difference_cs(d, alpha)
    return Interval(float(d.mean()), lo, hi, len(d))


def locus_state(
    arms: np.ndarray,
    factual: np.ndarray,
    *,
    factual_exact: bool,
    confidence: float = 0.95,
    min_effect: float = 0.1,
    previous: LocusState | None = None,
    drops: bool = True,
    steps: Sequence[int] | None = None,
) -> LocusState:
    """Decide what can be decided from `arms[k, r]` and `factual[r]` (see the module docstring).
    `steps`: the trace's step index of each position, to name open steps (default: the positions)."""
    arms = np.asarray(arms, dtype=float)
    factual = np.asarray(factual, dtype=float)
    m = arms.shape[0]
    delta = 1 - confidence
    alpha = delta / max(m, 1)
    fact_ok = factual[~np.isnan(factual)]
    v: float | None = None
    if factual_exact:
        v = float(fact_ok[0])
        fact_iv = Interval(v, v, v, 1)
    elif len(fact_ok):
        lo, hi = mean_cs(fact_ok, delta)
        fact_iv = _holding(Interval(float(fact_ok.mean()), lo, hi, len(fact_ok)))
    else:
        fact_iv = Interval(math.nan, 0.0, 1.0, 0)

    above = set(previous.above) if previous else set()
    below = set(previous.below) if previous else set()
    draft: list[PositionEstimate] = []
    highs: list[float] = []
    for k in range(m):
        fail, effect = map(_holding, _effect(arms[k], factual, v, delta))
        _, strict = _effect(arms[k], factual, v, alpha)
        highs.append(strict.high)
        if strict.n and k not in below and strict.low > min_effect:
            above.add(k)
        if strict.n and k not in above and strict.high <= min_effect:
            below.add(k)
        if not drops:  # the loop's looks skip them: they do not decide the locus
            drop, drop_low = Interval(math.nan, -1.0, 1.0, 0), -math.inf
        elif k + 1 < m:
            drop = _holding(_drop(arms[k + 1], arms[k], delta))
            drop_low = _drop(arms[k + 1], arms[k], alpha).low
        else:
            drop, drop_low = effect, strict.low
        rescue = Interval(1 - fail.estimate, 1 - fail.high, 1 - fail.low, fail.n)
        draft.append(
            PositionEstimate(
                k,
                fail,
                rescue,
                effect,
                drop,
                effect_significant=k in above,
                drop_significant=bool(drop_low > 0 and drop.estimate >= min_effect),
                verdict="",
            )
        )
    latest = max(above) if above else -1
    still_open = tuple(k for k in range(m) if k > latest and k not in below)
    locus = latest if latest >= 0 else None
    certified = not still_open
    positions = tuple(replace(p, verdict=verdict_of(p, locus)) for p in draft)
    ranked = [(p.drop.estimate, p.position) for p in positions if not math.isnan(p.drop.estimate)]
    largest = max(ranked)[1] if ranked and max(ranked)[0] > 0 else None
    reason = None
    if locus is None:
        reason = (
            f"certified at {percent(confidence)}: no decision step's re-decision removes more than "
            f"{percent(min_effect)} of the failure"
            if certified
            else f"no step's effect is certainly above {percent(min_effect)} yet "
            f"(step{'s' if len(still_open) > 1 else ''} "
            f"{', '.join(str(steps[k] if steps is not None else k) for k in still_open)} still open)"
        )
    result = ContrastiveResult(
        positions,
        fact_iv,
        factual_exact,
        locus,
        largest,
        tuple(p.position for p in positions if p.drop_significant),
        reason,
        None,
        confidence,
        min_effect,
        alpha,
    )
    return LocusState(
        frozenset(above), frozenset(below), still_open, locus, certified, result, tuple(highs)
    )
