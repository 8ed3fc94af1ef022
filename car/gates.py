"""CI gates and exit codes.

Exit codes follow ruff and pytest:

    0  done
    1  a gate the user asked for tripped (--min-match-rate, --fail-on-abstain, --fail-on-blame,
       or --max-rollouts left traces unattributed; `car report` of an interrupted run's output, a
       trace it did not finish)
    2  usage or input error (bad option, bad trace file)
    3  backend or infrastructure failure (partial results are stored)

In a batch the worst code wins, with 2 worse than 3 worse than 1: an input error is something only the
user can fix, so it must never be masked. `--exit-zero` turns 1 and 3 into 0 and never hides 2.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from dataclasses import dataclass

from car.errors import InputError, option_name
from car.report import Report, shared_credit, short

__all__ = [
    "EXIT_BACKEND",
    "EXIT_GATE",
    "EXIT_OK",
    "EXIT_USAGE",
    "Gates",
    "final_exit_code",
    "step_index",
    "worst",
]

EXIT_OK, EXIT_GATE, EXIT_USAGE, EXIT_BACKEND = 0, 1, 2, 3
_SEVERITY = {EXIT_OK: 0, EXIT_GATE: 1, EXIT_BACKEND: 2, EXIT_USAGE: 3}


def worst(codes: Iterable[int]) -> int:
    return max(codes, key=lambda c: _SEVERITY.get(c, 2), default=EXIT_OK)


def final_exit_code(codes: Iterable[int], *, exit_zero: bool = False) -> int:
    code = worst(codes)
    if exit_zero and code in (EXIT_GATE, EXIT_BACKEND):
        return EXIT_OK
    return code


@dataclass(frozen=True)
class Gates:
    """Conditions under which a finished report fails the CI job (exit code 1).

    - `min_match_rate`: the replay reproduces fewer recorded actions than this share: too
      unfaithful to trust (also trips when the match rate was not measured).
    - `fail_on_abstain`: car could not name a decisive step.
    - `fail_on_blame`: the locus, or a step sharing the credit (with neither, a step Shapley
      credits), is one of these: an actor id, a step index, or `any` (any step at all was blamed).
    """

    min_match_rate: float | None = None
    fail_on_abstain: bool = False
    fail_on_blame: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        rate = self.min_match_rate
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, numbers.Real)):
            raise InputError(
                f"{option_name('min_match_rate')} must be a number in [0, 1], got {rate!r} "
                f"({type(rate).__name__})"
            )
        if rate is not None and not 0 <= rate <= 1:
            raise InputError(f"{option_name('min_match_rate')} must be in [0, 1], got {rate}")
        blame = self.fail_on_blame
        # A string is a sequence of its characters: `fail_on_blame="any"` tripped on no step.
        if not isinstance(blame, tuple | list) or not all(isinstance(w, str) for w in blame):
            one = f"; for one, ({blame!r},)" if isinstance(blame, str) else ""
            raise InputError(
                f"{option_name('fail_on_blame')} must be a tuple of actor ids, step indices or "
                f"'any', got {blame!r} ({type(blame).__name__}){one}"
            )
        for who in blame:
            if not who.strip():
                raise InputError(
                    f"{option_name('fail_on_blame')} needs an actor id, a step index or 'any'"
                )

    def check(self, report: Report) -> list[str]:
        """Messages for the gates this report trips (empty: it passes)."""
        tripped: list[str] = []
        if self.min_match_rate is not None:
            m = report.match_rate.estimate
            if m is None:
                why = (
                    f"every match draw failed; first: {report.first_error}"
                    if report.budget.match_errors
                    else "--min-match-rate needs match samples"
                )
                tripped.append(f"action-match rate not measured ({why})")
            elif m < self.min_match_rate:
                tripped.append(
                    f"action-match rate {m:.0%} is below --min-match-rate {self.min_match_rate:.0%}: "
                    "the replay is too unfaithful to trust"
                )
        if self.fail_on_abstain and report.locus is None:
            tripped.append(f"no decisive step (--fail-on-abstain): {report.abstained_reason}")
        if self.fail_on_blame:
            blamed = ([report.locus] if report.locus is not None else []) + [
                s for s in shared_credit(report) if s != report.locus
            ]
            role = "shares the credit"
            if not blamed and report.shapley is not None:
                # No locus and no shared drops: the steps of the players Shapley alone credits,
                # whom the summary shows (`blamed` or `shared`) and the GitHub warning names.
                from car.shapley import credited_players

                players = credited_players(report.shapley.players)
                blamed = sorted({s for p in players for s in p.steps})
                role = "carries Shapley credit"
            for step in blamed:
                actor = report.steps[step].actor
                hit = next(
                    (w for w in self.fail_on_blame if w in ("any", actor) or step_index(w) == step),
                    None,
                )
                if hit is not None:
                    said = "is the locus" if step == report.locus else role
                    tripped.append(f"step {step} ({short(actor)}) {said} (--fail-on-blame {short(hit)})")
        return tripped


def step_index(who: str) -> int | None:
    """`--fail-on-blame 3` (or `03`) names step 3; an actor id is not a step index. ASCII digits
    only: `int` would read `+3`, `3_0` and other scripts' digits as well."""
    return int(who) if who.isascii() and who.isdigit() else None
