"""The blame report (`car.report/v1`): what `car blame` found, with its provenance.

Every number that is an estimate carries its interval; every report carries the method, the budget it
used, the seed, the interval level and the component specs, so a result can be reproduced and audited.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from car.errors import InputError
from car.jsonfile import PathError, describe_validation_error, read_json

__all__ = [
    "NEVER_REPRODUCES",
    "REPORT_VERSION",
    "Adaptive",
    "Budget",
    "Estimate",
    "Labelled",
    "Report",
    "ShapleyPlayer",
    "ShapleyReport",
    "Specs",
    "StepReport",
    "label_agreement",
    "label_line",
    "listed",
    "load_report",
    "many",
    "percent",
    "samples_per_step",
    "short",
    "spent_text",
]

REPORT_VERSION = "car.report/v1"
# The abstention that is a refusal: the policy never reproduced the record, so it is probably not the
# agent that recorded it (`car.attribution`); more samples would not settle it.
NEVER_REPRODUCES = "cannot attribute: the replay never reproduces the recorded run"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Estimate(_Model):
    """A point estimate with a two-sided interval at the report's `level`; null when no data."""

    estimate: float | None = Field(description="the point estimate; null when nothing was observed")
    low: float | None = Field(description="the interval's lower end")
    high: float | None = Field(description="the interval's upper end")
    n: int = Field(default=0, description="the observations it rests on (rollouts or draws)")

    @classmethod
    def of(cls, estimate: float, low: float, high: float, n: int) -> Estimate:
        if math.isnan(estimate) or n == 0:
            return cls(estimate=None, low=None, high=None, n=n)
        return cls(estimate=estimate, low=low, high=high, n=n)


class StepReport(_Model):
    """One step of the trace, with its estimates when it is a decision step."""

    index: int = Field(description="the step's place in the trace, from 0")
    actor: str = Field(description="the id of the actor that took the step")
    decision: bool = Field(description="whether replay can hold, resample or force this step")
    action: str = Field(description="a one-line summary of the recorded action")
    rescue: Estimate | None = Field(
        default=None, description="share of runs re-decided from here that avoid the failure"
    )
    effect: Estimate | None = Field(
        default=None, description="failure probability removed by re-deciding from here"
    )
    drop: Estimate | None = Field(
        default=None, description="adjacent drop p(k+1) - p(k): the marginal effect of this step"
    )
    match_rate: Estimate | None = Field(
        default=None, description="share of draws at the recorded context that took the recorded action"
    )
    verdict: Literal["locus", "contributing", "not significant", "no data"] | None = Field(
        default=None,
        description="locus: the point of commitment; contributing: a significant adjacent drop; "
        "null for a step that is not a decision, or when no step was estimated",
    )
    never_reproduced: bool = Field(
        default=False,
        description="draws at the recorded context were made and none took the recorded action",
    )


class Budget(_Model):
    """What a run used (a resumed run counts its stored rollouts as the first run did)."""

    rollouts: int = Field(description="rollouts run, Shapley's included")
    policy_calls: int = Field(description="actions drawn from the policy, match draws included")
    env_calls: int = Field(default=0, description="environment steps executed")
    reused: int = Field(default=0, description="forks that were an existing rollout, run no second time")
    errored: int = Field(default=0, description="rollouts ended by an error (excluded)")
    unscorable: int = Field(default=0, description="rollouts the scorer could not score (excluded)")
    match_errors: int = Field(
        default=0, description="match draws that failed (left out of the match rate)"
    )


class ShapleyPlayer(_Model):
    """One player of the Shapley game: a step, an agent (all its decision steps) or a group."""

    id: str = Field(description="the step index, the agent's id, or the group's steps")
    steps: list[int] = Field(description="the steps the player holds or re-decides")
    value: float = Field(description="its Shapley value (the values add up to v_all - v_none)")
    low: float = Field(description="the value's lower bound at `level`")
    high: float = Field(description="the value's upper bound at `level`")
    share: float | None = Field(default=None, description="value / total, when the total is not 0")


class ShapleyReport(_Model):
    """Shapley credit over players; `total` (sum of values) sits beside `v_all - v_none`."""

    method: Literal["exact", "permutation"] = Field(
        description="exact: every coalition per replicate; permutation: fork-walks"
    )
    players_kind: Literal["steps", "agents", "groups"] = Field(
        default="steps", description="what a player is (--players)"
    )
    players: list[ShapleyPlayer] = Field(description="the players with their values")
    total: float = Field(description="the sum of the players' values")
    v_all: Estimate = Field(description="failure rate with every player held (the record)")
    v_none: Estimate = Field(description="failure rate with every player re-decided")
    budget: Budget = Field(description="what the Shapley run used")
    budget_reached: bool = Field(default=False, description="it stopped at its budget")
    target_width: float | None = Field(
        default=None, description="the interval half-width at which it would stop early"
    )
    budget_limit: int | None = Field(default=None, description="the rollout budget (--budget)")
    budget_calls_limit: int | None = Field(default=None, description="the policy-call budget")
    level: float | None = Field(default=None, description="two-sided level of the intervals")
    units: int | None = Field(
        default=None,
        description="independent units: replicates of the whole game (exact) or pairs of walks",
    )
    summary: str | None = Field(default=None, description="one sentence on who carries the credit")
    notes: list[str] = Field(default_factory=list, description="lines about the Shapley run")


class Adaptive(_Model):
    """How an adaptive (`--adaptive`) run stopped, and whether its answer is certified."""

    certified: bool = Field(
        description="true: the locus holds at `confidence` (anytime-valid); false: a best guess"
    )
    confidence: float = Field(description="the level at which the locus is certified")
    target_width: float | None = Field(
        default=None, description="the half-width at which open intervals stop sampling"
    )
    budget: int = Field(description="the rollout budget requested")
    rollouts: int = Field(description="rollouts run by the adaptive loop (match draws not included)")
    rows: int = Field(description="replicates observed")
    stopped: Literal["certified", "target-width", "budget", "nothing-to-attribute"] = Field(
        description="why sampling stopped; `certified` and `statement` give the outcome, which a "
        "check after sampling (the policy is not the recording agent) can turn into a refusal"
    )
    open_steps: list[int] = Field(
        default_factory=list, description="steps whose verdict could still change the locus"
    )
    open_upper: float | None = Field(
        default=None,
        description="the largest effect the open steps may still have: their upper bounds at the "
        "level that decides (Bonferroni over the steps), not the displayed per-step intervals'",
    )
    statement: str = Field(description="one sentence on what the run certified, or its guess")


class Labelled(_Model):
    """The mistake a dataset labelled for this run (Who&When's mistake step and agent): shown beside
    car's answer, never used to compute it."""

    source: str = Field(description="the dataset format the label came from, e.g. who-and-when")
    step: int | None = Field(default=None, description="the labelled decisive step")
    agent: str | None = Field(default=None, description="the labelled responsible agent")


class Specs(_Model):
    """The components the run used, as spec strings."""

    policy: str = Field(description="the policy that re-decided steps")
    env: str = Field(description="the environment that answered tool calls")
    scorer: str = Field(description="the scorer: 1 is the failure, 0 none")


class Report(_Model):
    """What `car.blame` returns and `car blame --format json` writes (`car.report/v1`)."""

    version: Literal["car.report/v1"] = Field(default="car.report/v1", description="the format")
    car_version: str = Field(description="the car that made the report")
    trace_id: str = Field(description="the trace's id")
    trace_path: str | None = Field(default=None, description="the trace file, when read from one")
    trace_hash: str = Field(description="sha256 of the trace's canonical JSON")
    method: Literal["contrastive", "shapley"] = Field(
        default="contrastive", description="shapley when Shapley credit was computed (`shapley`)"
    )
    method_reason: str | None = Field(
        default=None, description="why Shapley ran (the fallback rule that fired), if it did"
    )
    fidelity: Literal["A", "B", "C"] | None = Field(
        default=None,
        description="trace fidelity class when imported (A exact inputs, B conversation, C text)",
    )
    labelled: Labelled | None = Field(
        default=None, description="the mistake the run's dataset labelled, when the trace carries one"
    )
    status: Literal["ok", "backend-errors"] = Field(
        default="ok", description="backend-errors: more rollouts errored than max_error_rate allows"
    )
    headline: str = Field(description="one sentence: the step that decided the run, or why none")
    locus: int | None = Field(
        description="the point of commitment: the latest step whose re-decision removes "
        "significantly more than min_effect of the failure; null when car abstains"
    )
    locus_actor: str | None = Field(default=None, description="the actor of the locus step")
    abstained_reason: str | None = Field(
        default=None, description="why no step is named (null when one is)"
    )
    rollouts_needed_per_step: int | None = Field(
        default=None, description="after an abstention, about the samples per step that would decide"
    )
    largest_drop: int | None = Field(
        default=None, description="the step with the largest positive adjacent drop"
    )
    shared: list[int] = Field(
        default_factory=list,
        description="the steps whose adjacent drop is significant; two or more: shared credit",
    )
    factual: Estimate = Field(
        description="failure rate of the record replayed with every step held, v(N)"
    )
    factual_exact: bool = Field(
        description="the factual arm is one scoring of the record (a deterministic scorer)"
    )
    steps: list[StepReport] = Field(description="every step of the trace, in order")
    match_rate: Estimate = Field(description="the action-match rate over every decision step")
    never_reproduced: list[int] = Field(
        default_factory=list,
        description="decision steps drawn at their recorded context where no draw took the record's",
    )
    divergence_rate: float = Field(
        description="share of rollouts in which a held step's context differed from the record's"
    )
    first_error: str | None = Field(default=None, description="the first error a rollout or draw met")
    notes: list[str] = Field(default_factory=list, description="what else the reader should know")
    shapley: ShapleyReport | None = Field(
        default=None, description="Shapley credit, when it ran (see docs/shapley.md)"
    )
    adaptive: Adaptive | None = Field(
        default=None, description="present when sampling was adaptive: certified or best guess"
    )
    budget: Budget = Field(description="what the whole run used")
    seed: int = Field(description="the seed every random draw is keyed by")
    level: float = Field(description="two-sided level of the displayed intervals")
    min_effect: float = Field(description="the smallest effect a locus must clear")
    samples: int = Field(description="rollouts per decision step (adaptive: the fewest any step got)")
    match_samples: int = Field(description="match draws per decision step")
    specs: Specs = Field(description="the policy, environment and scorer, as spec strings")

    def step(self, index: int) -> StepReport:
        return self.steps[index]

    @model_validator(mode="after")
    def _steps_agree(self) -> Report:
        """Every step a report names is one of its steps (a hand-edited file may say otherwise)."""
        n = len(self.steps)
        if n == 0:
            raise PathError(("steps",), "a report has at least one step")
        for i, s in enumerate(self.steps):
            if s.index != i:
                raise PathError(("steps", i, "index"), f"expected {i} (steps are in order)")
        named: list[tuple[tuple[str | int, ...], int | None]] = [
            (("locus",), self.locus),
            (("largest_drop",), self.largest_drop),
            *((("shared", i), k) for i, k in enumerate(self.shared)),
            *((("never_reproduced", i), k) for i, k in enumerate(self.never_reproduced)),
        ]
        if self.shapley is not None:
            for i, p in enumerate(self.shapley.players):
                named += [(("shapley", "players", i, "steps", j), k) for j, k in enumerate(p.steps)]
        for loc, k in named:
            if k is not None and not 0 <= k < n:
                raise PathError(
                    loc, f"step {k} is not one of the report's {many(n, 'step')} (0-{n - 1})"
                )
        return self


def shared_credit(report: Report) -> list[int]:
    """The steps that share the credit: two or more significant drops (`shared`); one alone is not
    shared credit, whether or not a locus was named."""
    return list(report.shared) if len(report.shared) >= 2 else []


def named(report: Report) -> tuple[int | None, str | None]:
    """The step car names and its actor: the locus, else the one player Shapley alone credits (what
    the batch summary calls `blamed`): its step when it is one step, its actor when it has one.
    (None, None): car names nothing."""
    if report.locus is not None:
        return report.locus, report.locus_actor
    if report.shapley is None or shared_credit(report):
        return None, None
    from car.shapley import credited_players  # (car.shapley imports this module)

    credited = credited_players(report.shapley.players)
    if len(credited) != 1:
        return None, None
    steps = credited[0].steps
    actors = {report.steps[i].actor for i in steps}
    return (steps[0] if len(steps) == 1 else None), (actors.pop() if len(actors) == 1 else None)


def label_agreement(report: Report) -> tuple[bool | None, bool | None]:
    """Whether the step car names (`named`) is the labelled step, and its actor the labelled agent
    (None: no such label). An abstention agrees with nothing."""
    lab = report.labelled
    if lab is None:
        return None, None
    step, actor = named(report)
    return (
        None if lab.step is None else step is not None and step == lab.step,
        None if lab.agent is None else actor is not None and actor == lab.agent,
    )


def label_line(report: Report) -> str | None:
    """One line comparing car's answer with the dataset's label, or None without a label."""
    lab = report.labelled
    if lab is None:
        return None
    said = [f"step {lab.step}"] if lab.step is not None else []
    if lab.agent:
        said.append(f"by {short(lab.agent)}")
    head = f"labelled mistake ({lab.source}): {' '.join(said)}"
    step, actor = named(report)
    if step is None and actor is None:  # an abstention, not a wrong answer ("step differs, ...")
        return f"{head}; car abstains (names no step), so there is nothing to compare"
    agrees = label_agreement(report)
    verdicts = [  # of what car named: credit to an agent's steps names no one step
        f"{what} {'agrees' if ok else 'differs'}"
        for what, ok, ours in zip(("step", "agent"), agrees, (step, actor), strict=True)
        if ok is not None and ours is not None
    ]
    actor = short(actor) if actor is not None else None
    if report.locus is not None:
        ours = f"car names step {step} ({actor})"
    else:
        whom = f"step {step}" + (f" ({actor})" if actor else "") if step is not None else actor
        ours = f"car's Shapley credit goes to {whom}"
    return f"{head}; {ours}: {', '.join(verdicts)}"


def percent(fraction: float) -> str:
    """A level or a minimum effect the user set, as a percentage with the digits it has: "95%",
    "97.5%", "99.9%", "0.4%". Rounded to whole percents, 0.995 and 0.999 read "100%" (a certainty
    no interval gives) and a minimum effect of 0.004 "0%"."""
    return f"{fraction * 100:.12g}%"


def short(name: str, width: int = 200) -> str:
    """A name from a trace (an actor, a Shapley player) as a sentence or a cell shows it: cut to
    `width` characters with "…", as an action's summary is (at 60), so that a name of any length
    leaves the sentence around it readable. The report's fields keep the name whole."""
    return name if len(name) <= width else name[: width - 1] + "…"


def many(n: int, noun: str, plural: str | None = None) -> str:
    """A count and its noun, singular for one: "1 trace", "3 traces", "1 policy call"."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def spent_text(sh: ShapleyReport) -> str:
    """What the Shapley run used against what it was allowed, and why it stopped: '999 of 1000
    rollouts, 365 of 400 policy calls, 297 reused forks, 259 pairs of walks; budget reached'."""
    b = sh.budget
    stop = (
        "budget reached"
        if sh.budget_reached
        else (f"target half-width {sh.target_width:g} met" if sh.target_width else "budget not reached")
    )
    unit = ("replicate", "replicates") if sh.method == "exact" else ("pair of walks", "pairs of walks")

    def used(n: int, limit: int | None, what: str) -> str:
        return f"{n} of {many(limit, what)}" if limit is not None else many(n, what)

    return (
        f"{used(b.rollouts, sh.budget_limit, 'rollout')}, "
        f"{used(b.policy_calls, sh.budget_calls_limit, 'policy call')}, "
        f"{many(b.reused, 'reused fork')}"
        + (f", {many(sh.units, *unit)}" if sh.units is not None else "")
        + f"; {stop}"
    )


def samples_per_step(report: Report) -> str:
    """What each decision step was sampled: the `--samples` setting ("32 samples per step"), or in
    an adaptive run, which stops sampling each step when it is decided, the steps' own counts ("8 to
    32 samples per step")."""
    if report.adaptive is None:
        return f"{many(report.samples, 'sample')} per step"
    ns = [s.rescue.n for s in report.steps if s.decision and s.rescue is not None] or [0]
    low, high = min(ns), max(ns)
    return f"{many(low, 'sample')} per step" if low == high else f"{low} to {high} samples per step"


def listed(items: Sequence[str]) -> str:
    """Items as a sentence lists them: "a", "a and b", "a, b and c"."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def load_report(path: str | Path) -> Report:
    """Read a saved `car.report/v1` JSON file; problems become one `InputError` line naming the place."""
    source = str(path)
    data = read_json(path, what="a JSON report")
    if not isinstance(data, dict):
        raise InputError(f"{source}: $: expected a JSON object (a car report)")
    version = data.get("version")
    if version != REPORT_VERSION:
        what = "missing" if version is None else f"unknown version {version!r}"
        hint = "; is this a trace? (`car blame` reads traces)" if version == "car.trace/v1" else ""
        raise InputError(f"{source}: $.version: {what}; expected {REPORT_VERSION!r}{hint}")
    try:
        return Report.model_validate(data)
    except ValidationError as exc:
        raise InputError(describe_validation_error(exc, source)) from None
