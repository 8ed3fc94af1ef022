"""The trace model (`car.trace/v1`): a recorded agent run, loaded and validated.

A trace is an ordered list of steps; a step is one turn of one actor: the context it decided from, the
action it took (text and tool calls) and the observations that followed. Decision steps are the turns of
stochastic actors (agents by default); they are what replay can hold, resample or force.

Files go through `migrate` (the one place that upgrades older versions) and then pydantic validation.
Every problem becomes an `InputError` with one line naming the file, the JSON path and what was expected.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from car.errors import InputError
from car.jsonfile import (
    PathError,
    describe_validation_error,
    json_path,
    json_text,
    kind_of,
    read_json,
)

__all__ = [
    "FIDELITY_CLASSES",
    "TRACE_VERSION",
    "Action",
    "Actor",
    "Fidelity",
    "FidelityWarning",
    "Message",
    "Observation",
    "Outcome",
    "ReplaySpecs",
    "Sampling",
    "Source",
    "Step",
    "ToolCall",
    "Trace",
    "canonical_json",
    "expected_of",
    "load_trace",
    "migrate",
    "no_decisions",
    "parse_trace",
    "task_of",
]

TRACE_VERSION = "car.trace/v1"
KNOWN_VERSIONS = (TRACE_VERSION,)


def canonical_json(value: Any) -> str:
    """A stable text form of a JSON value: sorted keys, no whitespace, floats as repr."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolCall(_Model):
    """One tool call of an action. `raw_arguments` keeps the argument string exactly as recorded."""

    id: str
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None

    def signature(self) -> str:
        return f"{self.name}({canonical_json(self.arguments)})"


# The identities of the actions met last (rollouts compare each turn against the record more than
# once): by object, as a frozen model's fields cannot change. A cached attribute on the model would
# be copied by `model_copy(update=...)` and go stale.
_IDENTITIES: dict[int, tuple[Action, str]] = {}
_IDENTITIES_KEPT = 4096


class Action(_Model):
    """What an actor did at a step: free text and zero or more tool calls.

    `reasoning` keeps the model's reasoning blocks exactly as its API returned them (Anthropic
    `thinking` and `redacted_thinking` blocks, OpenAI Responses `reasoning` items, ...): signed or
    encrypted, they are valid only unchanged. They are never part of the signature (two draws that
    call the same tool with the same arguments are the same action however they reasoned); a backend
    that can sends them back in later inputs, as the recording agent did.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: tuple[dict[str, Any], ...] = ()

    def signature(self) -> str:
        """Tool names plus canonical arguments when there are calls, else the normalised text: what
        counts as the same decision (the action-match rate). Coarser than `identity`."""
        if self.tool_calls:
            return "calls:" + ";".join(c.signature() for c in self.tool_calls)
        return "text:" + " ".join(self.text.split()).casefold()

    def identity(self) -> str:
        """Everything of the action that later steps and the scorer can see: its exact text, each
        call's name and arguments as sent (the raw text where there is one), and its reasoning, which
        a backend may send back. Two actions with one identity are interchangeable in a rollout, so a
        rollout that drew the recorded action stands for one that forced it only when their
        identities agree: the same signature with other wording is another action downstream. Call
        ids are labels and left out."""
        known = _IDENTITIES.get(id(self))
        if known is not None and known[0] is self:
            return known[1]
        calls = [
            [c.name, c.raw_arguments if c.raw_arguments is not None else canonical_json(c.arguments)]
            for c in self.tool_calls
        ]
        value = canonical_json({"text": self.text, "calls": calls, "reasoning": list(self.reasoning)})
        _IDENTITIES[id(self)] = (self, value)  # the action is held, so its id is not reused
        if len(_IDENTITIES) > _IDENTITIES_KEPT:
            del _IDENTITIES[next(iter(_IDENTITIES))]  # the oldest
        return value

    def same(self, other: Action) -> bool:
        """Whether `other` is this action downstream: the very object (not encoded) or one with its
        identity."""
        return other is self or other.identity() == self.identity()

    def summary(self, width: int = 60) -> str:
        if self.tool_calls:
            parts = [f"{c.name}({_short_args(c.arguments)})" for c in self.tool_calls]
            s = ", ".join(parts)
            if self.text.strip():
                s = f"{' '.join(self.text.split())} -> {s}"
        else:
            s = " ".join(self.text.split())
        return s if len(s) <= width else s[: width - 1] + "…"


def _short_args(args: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())


class Observation(_Model):
    """What followed an action: a tool result keyed by call id, or an environment message."""

    call_id: str | None = None
    content: str = ""
    is_error: StrictBool = False


class Message(_Model):
    """A chat message, for contexts recorded explicitly (fidelity class A)."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    reasoning: tuple[dict[str, Any], ...] = ()  # an assistant message's reasoning blocks (Action's)


class Sampling(_Model):
    """Sampling parameters recorded for a decision (only what was recorded is ever sent)."""

    model: str | None = None
    # Sent as recorded: a JSON body cannot hold inf (1e400 parses as inf).
    temperature: StrictFloat | None = Field(default=None, ge=0, allow_inf_nan=False)
    top_p: StrictFloat | None = Field(default=None, gt=0, le=1)
    seed: StrictInt | None = None
    max_tokens: StrictInt | None = Field(default=None, gt=0)
    # The request's thinking settings as recorded (Anthropic `thinking`: {"type": "enabled",
    # "budget_tokens": N} or {"type": "adaptive"}); only a backend that understands them sends them.
    thinking: dict[str, Any] | None = None


class Actor(_Model):
    """A participant: an agent, a simulated user, or a tool/environment actor."""

    id: str = Field(min_length=1)
    kind: Literal["agent", "user", "tool", "other"] = "agent"
    system_prompt: str | None = None
    tools: tuple[dict[str, Any], ...] = ()
    view: Literal["all", "own"] = "all"
    stochastic: StrictBool | None = None

    @property
    def decides(self) -> bool:
        """Whether this actor's turns are decision steps (agents by default, users if marked)."""
        return self.stochastic if self.stochastic is not None else self.kind == "agent"


class Step(_Model):
    """One turn of one actor."""

    index: StrictInt = Field(ge=0)
    actor: str
    context: Literal["prefix"] | tuple[Message, ...] = "prefix"
    action: Action
    observations: tuple[Observation, ...] = ()
    sampling: Sampling | None = None
    env_state: dict[str, Any] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Outcome(_Model):
    """How the recorded run ended. `score` follows car's convention: 1 is the failure being debugged."""

    failed: StrictBool | None = None
    score: StrictFloat | None = Field(default=None, ge=0, le=1)
    label: str | None = None
    detail: str | None = None

    @property
    def value(self) -> float | None:
        if self.score is not None:
            return self.score
        if self.failed is not None:
            return 1.0 if self.failed else 0.0
        return None


class ReplaySpecs(_Model):
    """Default component specs a trace may carry. Built-in names only: loading a trace runs no code."""

    policy: str | None = None
    env: str | None = None
    scorer: str | None = None


class Source(_Model):
    """Where an imported trace came from: the format, the file, the place inside it, its content."""

    format: str = Field(min_length=1)
    path: str | None = None
    locator: str | None = Field(
        default=None, description="where in the file this run sits (a JSON path, trace id, sample)"
    )
    content_hash: str | None = Field(default=None, description="sha256 of the file's bytes")


FIDELITY_CLASSES: dict[str, str] = {
    "A": "exact per-call inputs recorded",
    "B": "conversation only: each input is rebuilt from the message prefix",
    "C": "speaker and text only: no tools, sampling parameters or per-agent view",
}


class FidelityWarning(_Model):
    """One concrete gap in what was recorded (`code` is stable, `message` says what and the fix)."""

    code: str = Field(min_length=1)
    message: str


class Fidelity(_Model):
    """How faithfully a trace records what each actor saw (see `FIDELITY_CLASSES`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    class_: Literal["A", "B", "C"] = Field(alias="class")
    warnings: tuple[FidelityWarning, ...] = ()


class Trace(_Model):
    """A recorded agent run."""

    version: Literal["car.trace/v1"] = "car.trace/v1"
    id: str = Field(min_length=1)
    task: str | dict[str, Any] = ""
    actors: tuple[Actor, ...] = Field(min_length=1)
    steps: tuple[Step, ...] = Field(min_length=1)
    outcome: Outcome = Outcome()
    replay: ReplaySpecs | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: Source | None = None
    fidelity: Fidelity | None = None

    @field_validator("steps")
    @classmethod
    def _dense_indices(cls, steps: tuple[Step, ...]) -> tuple[Step, ...]:
        for i, step in enumerate(steps):
            if step.index != i:
                raise PathError(
                    ("steps", i, "index"),
                    f"expected {i} (step indices are dense from 0 and in order), got {step.index}",
                )
        return steps

    @model_validator(mode="after")
    def _references(self) -> Trace:
        ids = [a.id for a in self.actors]
        seen: set[str] = set()
        for i, a in enumerate(ids):
            if a in seen:
                raise PathError(("actors", i, "id"), f"duplicate actor id {a!r}")
            seen.add(a)
        for step in self.steps:
            if step.actor not in seen:
                raise PathError(
                    ("steps", step.index, "actor"),
                    f"unknown actor {step.actor!r}; actors are {', '.join(map(repr, ids))}",
                )
            call_ids = {c.id for c in step.action.tool_calls}
            for j, obs in enumerate(step.observations):
                if obs.call_id is not None and obs.call_id not in call_ids:
                    raise PathError(
                        ("steps", step.index, "observations", j, "call_id"),
                        f"{obs.call_id!r} matches no tool call of this step",
                    )
        if "sim" in self.metadata:
            from car.sim import params_problem  # local: the scenarios import trace types

            bad = params_problem(self.metadata["sim"])
            if bad is not None:
                raise PathError(("metadata", *bad[0]), bad[1])
        if self.replay is not None:
            from car.specs import check_builtin  # local: specs imports trace types

            for kind in ("policy", "env", "scorer"):
                spec = getattr(self.replay, kind)
                if spec is not None:
                    problem = check_builtin(kind, spec)
                    if problem:
                        raise PathError(("replay", kind), problem)
        return self

    # -- derived views -------------------------------------------------------------------------
    def actor(self, actor_id: str) -> Actor:
        for a in self.actors:
            if a.id == actor_id:
                return a
        raise KeyError(actor_id)

    @cached_property
    def decision_steps(self) -> tuple[int, ...]:
        """Indices of the steps that replay may hold, resample or force."""
        deciders = {a.id for a in self.actors if a.decides}
        return tuple(s.index for s in self.steps if s.actor in deciders)

    def to_json(self) -> str:
        """The trace as a JSON document (defaults omitted, version first)."""
        body = self.model_dump(mode="json", exclude_defaults=True, by_alias=True)
        body.pop("version", None)
        return json_text({"version": self.version, **body}, indent=2)  # safe to print

    def content_hash(self) -> str:
        import hashlib

        return hashlib.sha256(canonical_json(self.model_dump(mode="json")).encode()).hexdigest()


def no_decisions(trace: Trace, path: str | None = None) -> str | None:
    """Why `trace` leaves nothing to attribute (no decision step), naming `path` (else the trace's
    id), or None. One rule for `car blame`, which refuses such a trace, and `car validate`, which
    fails it. An imported file recorded no model turn: its actors' kinds are the importer's, not
    the user's to set."""
    if trace.decision_steps:
        return None
    where = path or trace.id
    src = trace.source
    if src is not None and src.locator not in (None, "$"):
        where += f" ({src.locator})"
    if src is not None and src.format != "car":
        return (
            f"{where}: no decision steps: the {src.format} file records no assistant turn, "
            "so there is nothing to attribute"
        )
    return (
        f"{where}: no decision steps: no actor is an agent "
        "(set $.actors[].kind to 'agent', or stochastic: true)"
    )


def task_of(trace: Trace) -> str | dict[str, Any]:
    """What the run was asked: its task, else its first user turn's text (the judge, the `llm-sim:`
    environment and the HTML page show the same).

    A chat log (OpenAI, Anthropic, Responses, tau-bench, ATIF) records no task apart: its first user
    message is a step, replayed as recorded (tau-bench's simulated user even decides it), and moving
    it into `task` would renumber the steps or repeat it in every rebuilt context.
    """
    if trace.task:
        return trace.task
    users = {a.id for a in trace.actors if a.kind == "user"}
    return next((s.action.text for s in trace.steps if s.actor in users and s.action.text), "")


def expected_of(trace: Trace) -> str | None:
    """The answer the run should have given, for answer-checking scorers (`llm-judge:...?mode=extract`):
    `metadata.expected` (Who&When's ground truth), else the task's `expected` or `answer` field when
    the task is an object; None when the trace holds none."""
    meta = trace.metadata.get("expected")
    if isinstance(meta, str | int | float):
        return str(meta)
    if isinstance(trace.task, dict):
        for k in ("expected", "answer"):
            if isinstance(trace.task.get(k), str | int | float):
                return str(trace.task[k])
    return None


def migrate(data: Any, *, source: str = "<trace>") -> dict[str, Any]:
    """Upgrade a parsed trace document to the current version (the one migration entry point).

    Only `car.trace/v1` exists today; the function is where a v2 would map v1 documents forward.
    """
    if not isinstance(data, dict):
        raise InputError(f"{source}: $: expected a JSON object (a car trace), got {kind_of(data)}")
    version = data.get("version")
    if version is None:
        raise InputError(
            f"{source}: $.version: missing; expected {TRACE_VERSION!r} "
            "(foreign formats go through `car import`)"
        )
    if version not in KNOWN_VERSIONS:
        # (as `car report` asks of a trace "is this a trace?")
        hint = "; is this a report? (`car report` reads reports)" if version == "car.report/v1" else ""
        raise InputError(
            f"{source}: $.version: unknown version {version!r}; this car reads "
            f"{', '.join(map(repr, KNOWN_VERSIONS))}{hint}"
        )
    return data


def parse_trace(data: Any, *, source: str = "<trace>") -> Trace:
    """Validate a parsed JSON document as a trace; errors name `source` and the JSON path."""
    doc = migrate(data, source=source)
    try:
        trace = Trace.model_validate(doc)
    except ValidationError as exc:
        raise InputError(describe_validation_error(exc, source)) from None
    except PathError as exc:
        raise InputError(f"{source}: {json_path(exc.loc)}: {exc.msg}") from None
    _check_writable(trace, source)
    return trace


def _check_writable(trace: Trace, source: str) -> None:
    """Refuse a free-form value (arguments, metadata, a reasoning block) nested deeper than pydantic
    can serialize, or text holding a lone UTF-16 surrogate (a valid JSON escape that UTF-8 cannot
    encode): it validates, but car could not hash, store or write the trace (`car blame` stopped
    as if its backend had failed, `car import` refuses it), so `car validate` must not call it ok."""
    try:
        trace.model_dump_json()  # in Rust: a small cost beside validation
    except ValueError:
        # importers share the walks; imported here, as only this rare failure needs them
        from car.importers.base import MAX_NESTING, lone_surrogate_at, nested_too_deep

        deep = nested_too_deep(trace)
        if deep is None:
            place = lone_surrogate_at(trace)
            if place is None:
                return
            raise InputError(
                f"{source}: {place}: holds a lone UTF-16 surrogate (half of a character, such as "
                "an emoji cut in two), which UTF-8 cannot encode; replace it (with U+FFFD, say)"
            ) from None
        raise InputError(
            f"{source}: {deep[0]}: expected a value nested at most {MAX_NESTING} levels deep, got "
            f"one nested {deep[1]} levels deep, which car cannot write; flatten it"
        ) from None


def load_trace(path: str | Path) -> Trace:
    """Read and validate a `car.trace/v1` JSON file."""
    return parse_trace(read_json(path, what="a JSON trace"), source=str(path))
