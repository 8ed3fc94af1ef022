"""`llm-judge:[openai:|anthropic:]MODEL[?OPTIONS]`: a scorer that asks a model.

Options (URL-query style after `?`, values percent-encoded if needed):

    mode=rubric        (default) the model reads the transcript and the rubric and answers FAIL or
                       PASS; FAIL scores 1 (the failure being debugged). Neither word: cannot score.
    rubric=TEXT        the rubric; `rubric=@path.txt` reads a file. Default: the trace's
                       `outcome.detail` ("the failure is: ...").
    mode=extract       the model only extracts the final answer; code compares it with `expected`
                       after normalisation (case, spacing, punctuation, thousands separators);
                       a mismatch scores 1. NONE (no answer) scores 1 too; a refusal (the
                       judge declining) scores nothing, in either mode.
    expected=TEXT      the expected answer. Default: `metadata.expected` of the trace, or the task's
                       `expected` / `answer` field when the task is an object.
    repeats=N          judge each trajectory N times (distinct keys) and score the mean. The spread
                       between repeats estimates judge noise; the report states it separately from
                       the policy noise the intervals describe.
    base_url=URL, api_key_env=NAME, temperature=T, max_tokens=N
                       the judge's own server and settings (default: the run's --base-url,
                       --api-key-env, --temperature and --max-tokens), e.g. a hosted judge beside a
                       local policy.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from urllib.parse import parse_qsl

from car.backends.complete import (
    SERVER_OPTIONS,
    BackendKind,
    Completer,
    parse_backend_model,
    server_options,
)
from car.backends.http import hide_credentials
from car.backends.options import BackendOptions, current
from car.errors import SpecError
from car.protocols import Trajectory
from car.rng import EventKey
from car.trace import Trace, expected_of, task_of

__all__ = ["LLMJudge", "normalise_answer", "parse_judge"]

_RUBRIC_SYSTEM = (
    "You grade a recorded run of an AI agent against a rubric. Read the transcript, then answer with "
    "one word on the last line: FAIL if the run shows the failure the rubric describes, PASS if not."
)
_EXTRACT_SYSTEM = (
    "Read the transcript of an AI agent's run and reply with the final answer the agent gave to the "
    "task, copied exactly and nothing else. If it gave no answer, reply NONE."
)
_VERDICT = re.compile(r"\b(FAIL|PASS)\b")
_OPTIONS = ("mode", "rubric", "expected", "repeats")


def normalise_answer(text: str) -> str:
    """Case-folded, accents and punctuation removed, thousands separators dropped, spaces collapsed."""
    t = unicodedata.normalize("NFKC", text).casefold().strip()
    t = re.sub(r"(?<=\d)[,_ ](?=\d{3}\b)", "", t)
    t = re.sub(r"[^\w.%-]+", " ", t)
    t = re.sub(r"(?<!\d)\.|\.(?!\d)", " ", t)
    return " ".join(t.split())


def transcript(traj: Trajectory, clip: int = 2000) -> str:
    lines = []
    for t in traj.turns:
        text = " ".join(t.action.text.split())
        lines.append(f"[{t.index}] {t.actor}: {text[:clip]}")
        lines += [f"    call {c.name}({json.dumps(c.arguments)[:clip]})" for c in t.action.tool_calls]
        lines += [f"    result: {o.content[:clip]}" for o in t.observations]
    return "\n".join(lines)


def parse_judge(
    spec: str, arg: str, base: BackendOptions
) -> tuple[BackendKind, str, dict[str, str], BackendOptions]:
    """The judge's backend, model, own options and server settings from its spec's argument
    (`[openai:|anthropic:]MODEL[?OPTIONS]`), checked without connecting: a trace naming the judge
    is checked with it when it loads."""
    target, _, query = arg.partition("?")
    kind, model = parse_backend_model(spec, target)
    opts = dict(parse_qsl(query, keep_blank_values=True))
    unknown = sorted(set(opts) - set(_OPTIONS) - set(SERVER_OPTIONS))
    if unknown:
        raise SpecError(
            f"scorer {spec!r}: unknown option {unknown[0]!r}; options: "
            f"{', '.join(_OPTIONS + SERVER_OPTIONS)}"
        )
    server = server_options(f"scorer {spec!r}", opts, base)
    if opts.get("mode", "rubric") not in ("rubric", "extract"):
        raise SpecError(f"scorer {spec!r}: mode must be 'rubric' or 'extract'")
    try:
        repeats = int(opts.get("repeats", "1"))
    except ValueError:
        repeats = 0
    if repeats < 1:
        raise SpecError(f"scorer {spec!r}: repeats must be a whole number >= 1")
    return kind, model, opts, server


class LLMJudge:
    """See the module docstring."""

    deterministic = False  # a sampled judge: the factual arm is estimated by replay too

    def __init__(
        self, trace: Trace, arg: str, *, spec: str | None = None, options: BackendOptions | None = None
    ) -> None:
        self.spec = hide_credentials(spec or f"llm-judge:{arg}")  # shown in the report and notes
        kind, model, opts, server = parse_judge(self.spec, arg, options or current())
        self.mode = opts.get("mode", "rubric")
        self.repeats = int(opts.get("repeats", "1"))
        self.trace = trace
        self.task = task_of(trace)
        self.rubric = self._rubric(opts.get("rubric"))
        self.expected = self._expected(opts.get("expected"))
        self.complete = Completer(kind, model, server, name=self.spec)
        self.judged = 0
        self.disagreed = 0
        self.variance_sum = 0.0
        self.unparsed = 0

    @property
    def cache_config(self) -> dict[str, object]:
        """What decides the verdicts beyond the spec: the server and its settings, and the rubric (a
        `rubric=@FILE` is the file's text): stored rollouts are keyed by it."""
        return {**self.complete.cache_config, "rubric": self.rubric}

    def _rubric(self, given: str | None) -> str:
        if given and given.startswith("@"):
            path = Path(given[1:])
            try:
                return path.read_text(encoding="utf-8")
            except OSError as exc:
                raise SpecError(
                    f"scorer {self.spec!r}: cannot read rubric {path}: {exc.strerror}"
                ) from None
        if given:
            return given
        detail = self.trace.outcome.detail or self.trace.outcome.label
        return f"The failure is: {detail}." if detail else "The agent failed its task."

    def _expected(self, given: str | None) -> str | None:
        if given is not None:
            return given
        found = expected_of(self.trace)
        if found is None and self.mode == "extract":
            raise SpecError(
                f"scorer {self.spec!r}: extract mode needs the expected answer: add "
                "'?mode=extract&expected=...' or metadata.expected to the trace"
            )
        return found

    async def _once(self, traj: Trajectory, key: EventKey) -> float | None:
        text = transcript(traj)
        if self.mode == "rubric":
            user = f"Rubric: {self.rubric}\n\nTranscript:\n{text}\n\nVerdict (FAIL or PASS):"
            drawn = await self.complete.draw(_RUBRIC_SYSTEM, user, key, max_tokens=256)
            if drawn.refused:
                return None
            answer = drawn.action.text
            found = _VERDICT.findall(answer.upper())
            if not found:
                self.unparsed += 1
                return None
            return 1.0 if found[-1] == "FAIL" else 0.0
        user = f"Task: {json.dumps(self.task, ensure_ascii=False)}\n\nTranscript:\n{text}"
        drawn = await self.complete.draw(_EXTRACT_SYSTEM, user, key, max_tokens=128)
        if drawn.refused:  # the judge declined: that says nothing about the agent's answer
            return None
        answer = drawn.action.text.strip()
        if not answer or answer.upper() == "NONE":
            return 1.0
        assert self.expected is not None
        return 0.0 if normalise_answer(answer) == normalise_answer(self.expected) else 1.0

    async def score(self, trajectory: Trajectory, key: EventKey) -> float | None:
        values = []
        for i in range(self.repeats):
            v = await self._once(trajectory, key.at(kind=f"judge{i}"))
            if v is not None:
                values.append(v)
        if not values:
            return None
        mean = sum(values) / len(values)
        if len(values) > 1:
            self.judged += 1
            self.disagreed += len(set(values)) > 1
            self.variance_sum += sum((v - mean) ** 2 for v in values) / (len(values) - 1)
        return mean

    def notes(self) -> list[str]:
        out = []
        if self.judged:
            out.append(
                f"judge noise ({self.spec}, {self.repeats} judgements per trajectory): repeats "
                f"disagreed on {self.disagreed} of {self.judged} trajectories, mean within-trajectory "
                f"variance {self.variance_sum / self.judged:.3f}; this is separate from the policy "
                "noise the intervals describe"
            )
        if self.unparsed:
            out.append(f"{self.spec}: {self.unparsed} judgements named neither FAIL nor PASS")
        out += self.complete.endings("read as the judgement", refused="not scored")
        summary = self.complete.http.summary()
        if summary:
            out.append(summary)
        return out

    @property
    def usage(self) -> dict[str, int]:
        return self.complete.usage

    async def aclose(self) -> None:
        await self.complete.aclose()
