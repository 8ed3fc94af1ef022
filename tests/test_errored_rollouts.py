"""Rollouts that errored: every rendering says why (the first error), and when they are many, that
the result rests on the rest."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import car
from car import Action, Decision, EventKey
from car.protocols import Policy
from car.specs import make_policy
from car.trace import load_trace
from tests.conftest import TRACES, Result


def _renamed(tmp_path: Path, name: str, actor: str) -> Path:
    """The trace with one actor renamed: its simulated environment still names the old actor, so
    every rollout that reaches that actor's live turn errors ("environment named an unknown actor")."""
    doc = json.loads((TRACES / f"{name}.json").read_text())
    for a in doc["actors"]:
        if a["id"] == actor:
            a["id"] = f"{actor}-renamed"
    for s in doc["steps"]:
        if s["actor"] == actor:
            s["actor"] = f"{actor}-renamed"
    path = tmp_path / f"{name}-renamed.json"
    path.write_text(json.dumps(doc))
    return path


class Hiccup(Exception):
    pass


@dataclass
class FlakyPolicy:
    inner: Policy
    rate: float
    spec: str = "flaky"

    async def act(self, decision: Decision, key: EventKey) -> Action:
        if key.uniform() < self.rate:
            raise Hiccup("backend hiccup")
        return await self.inner.act(decision, key)


def _errored_note(report: car.Report) -> str:
    (note,) = [n for n in report.notes if "errored and" in n]
    return note


def test_a_few_errored_rollouts_name_their_first_error() -> None:
    trace = load_trace(TRACES / "support-refund.json")
    policy = FlakyPolicy(make_policy("sim:support-refund", trace), rate=0.05)
    report = car.blame(trace, policy=policy, samples=16)
    b = report.budget
    assert 0 < b.errored < b.rollouts / 3 and report.status == "ok"
    assert re.fullmatch(
        f"{b.errored} of {b.rollouts} rollouts errored and are excluded \\(first error: "
        "step [0-3]: Hiccup: backend hiccup\\); when errors depend on what the agent did, the "
        "remaining estimates are biased",
        _errored_note(report),
    )


def test_many_errored_rollouts_say_the_result_rests_on_the_rest() -> None:
    trace = load_trace(TRACES / "support-refund.json")
    policy = FlakyPolicy(make_policy("sim:support-refund", trace), rate=0.2)
    report = car.blame(trace, policy=policy, samples=16, max_error_rate=0.9)
    b = report.budget
    assert b.rollouts / 3 <= b.errored and report.status == "ok"
    rest = b.rollouts - b.errored
    what = "the locus rests" if report.locus is not None else "the result rests"
    assert re.fullmatch(
        f"{b.errored} of {b.rollouts} rollouts errored and are excluded \\(first error: "
        f"step [0-3]: Hiccup: backend hiccup\\); {what} on the other {rest} alone, biased if "
        "errors depend on what the agent did",
        _errored_note(report),
    )


def test_every_rendering_shows_why_rollouts_errored(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    """Under the backend-error threshold, the cause was only in the JSON's first_error."""
    trace = _renamed(tmp_path, "research-team", "searcher")
    why = "first error: step 1: environment named an unknown actor 'searcher'"
    r = run_cli("blame", trace, "--no-store")
    assert r.code == 0, r.err
    assert "rollouts errored and are excluded" in r.out
    assert why in " ".join(r.out.split()), r.out  # the table wraps long notes
    r = run_cli("blame", trace, "--no-store", "--format", "markdown")
    assert r.code == 0 and why in r.out, r.out
    page = tmp_path / "report.html"
    r = run_cli("blame", trace, "--no-store", "--format", "html", "-o", page)
    assert r.code == 0 and why.replace("'", "&#x27;") in page.read_text(), r.err
