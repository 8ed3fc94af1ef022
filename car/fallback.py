"""When `car blame` runs Shapley after the contrastive estimator, and how the result joins the report.

Rules (`--method auto`, the default): run Shapley when (a) the contrastive estimator abstained, or
(b) two or more steps carry significant adjacent drops (credit looks shared). `--method shapley`
always runs it (c); `--method contrastive` never does. The report says which rule fired. Shapley is
never run when there is nothing to attribute (the record did not fail, cannot be scored, or the
replay never reproduces it), nor when the contrastive rollouts erred beyond `max_error_rate`. Under
`auto` it is not run either when the players hold every decision step and re-deciding from the
first of them removes significantly less than `min_effect` of the failure: that arm measured
v(N) - v(empty), the sum of the values (a value can exceed it only where credits cancel, which
`--method shapley` measures).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from car.errors import BudgetError, option_name
from car.replay import Replay
from car.report import NEVER_REPRODUCES, Budget, Report, listed, percent
from car.runner import Grant
from car.shapley import (
    Player,
    PlayersKind,
    Progress,
    ShapleyMethod,
    budget_room,
    calls_estimate,
    choose_method,
    parse_players,
    run_shapley,
    to_report,
)
from car.trace import Trace

__all__ = ["NEVER_REPRODUCES", "Method", "fallback_reason", "precheck", "shapley_into_report"]

Method = Literal["contrastive", "shapley", "auto"]


# Below this action-match rate, shown at the report's level, the policy is not the recording agent.
NEVER_RATE = 0.05


def _nothing_to_attribute(report: Report) -> str | None:
    fact = report.factual.estimate
    if fact is None:
        return "the recorded run cannot be scored"
    if fact == 0:
        return "the recorded run did not fail"
    if report.abstained_reason == NEVER_REPRODUCES:
        return "the replay never reproduces the recorded run"
    if report.status == "backend-errors":
        return "too many rollouts errored: Shapley would fail the same way"
    return None


def fallback_reason(report: Report, method: Method) -> str | None:
    """Why Shapley should run on top of this contrastive report (None: it should not)."""
    if method == "contrastive" or _nothing_to_attribute(report) is not None:
        return None
    if method == "shapley":
        return "requested (--method shapley)"
    if report.locus is None:
        return "the contrastive estimator abstained"
    if len(report.shared) >= 2:
        steps = ", ".join(map(str, report.shared[:-1])) + f" and {report.shared[-1]}"
        return f"credit looks shared: steps {steps} each carry a significant adjacent drop"
    return None


def precheck(
    trace: Trace,
    *,
    method: Method,
    players: str,
    shapley_method: ShapleyMethod,
    budget: int,
    budget_calls: int | None,
    v_known: bool,
    step_cap: int,
) -> tuple[PlayersKind, list[Player]]:
    """Parse the players and, when Shapley is requested, check the budget before any rollout runs.

    A method the user asked for that the budget cannot pay raises `BudgetError` here, before the
    contrastive rollouts are spent.
    """
    kind, parsed = parse_players(trace, players)
    if method == "shapley":
        choose_method(
            len(parsed),
            shapley_method,
            v_known=v_known,
            room=budget_room(budget, budget_calls, step_cap),
            budget=budget,
            budget_calls=budget_calls,
            step_cap=step_cap,
        )
    return kind, parsed


def _no_credit_to_share(report: Report, players: Sequence[Player]) -> str | None:
    """Why the credit Shapley would share adds up to too little to run it (None: it may not).

    With players that hold every decision step, the Shapley values add up to v(N) - v(empty), the
    effect of re-deciding from the first decision step, which the contrastive arm already measured.
    """
    decisions = [s.index for s in report.steps if s.decision]
    held = {k for p in players for k in p.steps}
    if not decisions or held != set(decisions):
        return None
    effect = report.steps[decisions[0]].effect
    if effect is None or effect.high is None or effect.high >= report.min_effect:
        return None
    digits = 1  # enough that the bound does not print as the minimum it is below
    while digits < 4 and round(effect.high * 100, digits) >= report.min_effect * 100:
        digits += 1
    return (
        f"re-deciding from step {decisions[0]}, which re-decides every player, removes at most "
        f"{effect.high:.{digits}%} of the failure, below the {percent(report.min_effect)} minimum "
        "effect"
    )


async def shapley_into_report(
    report: Report,
    replay: Replay,
    *,
    method: Method,
    players_kind: PlayersKind,
    players: list[Player],
    shapley_method: ShapleyMethod,
    budget: int,
    budget_calls: int | None,
    target_width: float | None,
    level: float,
    concurrency: int,
    progress: Progress | None,
    max_error_rate: float,
    grant: Grant | None = None,
    options_set: Sequence[str] = (),
) -> Report:
    """Run Shapley when a rule fires and fold its section, budget and notes into `report`.

    `grant` is the run-wide budget of a batch (`--max-rollouts`, `--max-policy-calls`): a run the
    rules started (`auto`) gets what it leaves, and the report says when that cut the budget.
    `options_set` names the Shapley options the caller set (`--players agents`): when no rule fires
    they did nothing, and a note says so.
    """
    reason = fallback_reason(report, method)
    if reason is None:
        why = _nothing_to_attribute(report)
        if method == "shapley" and why is not None:
            report.notes.append(f"Shapley not run: {why}")
        elif method == "auto" and why is None and options_set:
            report.notes.append(
                f"Shapley not run: step {report.locus} carries the blame alone (no rule of "
                f"{option_name('method', 'auto')} fired), so {listed(options_set)} "
                f"{'was' if len(options_set) == 1 else 'were'} not used; "
                f"{option_name('method', 'shapley')} runs it anyway"
            )
        return report
    if method == "auto":
        why_not = _no_credit_to_share(report, players)
        if why_not is not None:
            report.notes.append(f"Shapley ({reason}) not run: {why_not}")
            return report
    if grant is not None and method == "auto":
        wanted_calls = budget_calls or calls_estimate(budget, len(replay.trace.decision_steps))
        got, got_calls = await grant(
            budget,
            wanted_calls,
            spent_rollouts=report.budget.rollouts,  # the contrastive part's, as the budget counts it
            spent_calls=report.budget.policy_calls,
        )
        cuts = []
        if got < budget:
            cuts.append(f"--max-rollouts left {got} of its {budget} rollouts")
        if got_calls < wanted_calls:
            cuts.append(f"--max-policy-calls left {got_calls} of about {wanted_calls} policy calls")
            budget_calls = got_calls
        if got == 0 or got_calls == 0:
            report.notes.append(f"Shapley ({reason}) not run: {'; '.join(cuts)}")
            return report
        if cuts:
            budget = got
            report.notes.append(f"Shapley budget cut: {'; '.join(cuts)}")
    try:
        result = await run_shapley(
            replay,
            players,
            players_kind=players_kind,
            method=shapley_method,
            budget=budget,
            budget_calls=budget_calls,
            target_width=target_width,
            level=level,
            concurrency=concurrency,
            progress=progress,
        )
    except BudgetError as exc:
        if method == "shapley":
            raise
        # An automatic fallback that cannot be paid for is reported, not fatal: the contrastive
        # result is still worth having.
        report.notes.append(f"Shapley ({reason}) not run: {exc}")
        return report
    section = to_report(result, budget, budget_calls)
    report.shapley = section
    report.method = "shapley"
    report.method_reason = reason
    c = replay.counters
    report.budget = Budget(
        rollouts=c.rollouts,
        policy_calls=c.policy_calls,
        env_calls=c.env_calls,
        reused=c.reused,
        errored=c.errors,
        unscorable=c.unscorable,
        match_errors=c.match_errors,
    )
    # Shapley holds steps after changed ones, where the contrastive arms never do: the rate is the
    # whole run's, as the budget is.
    report.divergence_rate = c.divergence_rate
    # The rule the contrastive part applied to its own rollouts holds for the whole run: a Shapley
    # game that mostly errored rests on the few units that did not, whatever the arms did.
    if c.erred_beyond(max_error_rate):
        report.status = "backend-errors"
    report.notes.extend(f"Shapley: {n}" for n in section.notes)
    if section.summary:
        report.headline = f"{report.headline} Shapley: {section.summary}."
    return report
