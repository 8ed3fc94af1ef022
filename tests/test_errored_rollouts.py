"""Rollouts that errored: every rendering says why (the first error), and when they are many, that
the result rests on the rest."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

import car
from car import Action, Decision, EventKey
from car.protocols import Policy
from car.specs import make_policy
from car.trace import load_trace
from tests.conftest import TRACES, Result


def _choosy(tmp_path: Path) -> str:
    """A scorer that cannot read one replicate in four: a quarter of the rollouts error, under the
    threshold at which the run is a backend failure."""
    path = tmp_path / "choosy.py"
    path.write_text(
        "from car import EventKey, Trajectory\n\n\n"
        "async def choosy(trajectory: Trajectory, key: EventKey) -> float:\n"
        "    if key.replicate % 4 == 3:\n"
        "        raise ValueError('no verdict to read')\n"
        "    return float(trajectory.turns[-1].action.text.endswith('FAIL'))\n"
    )
    return f"{path}@choosy"


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
    trace, scorer = TRACES / "pivot.json", _choosy(tmp_path)
    why = f"first error: scorer '{scorer}': ValueError: no verdict to read"
    r = run_cli("blame", trace, "--scorer", scorer, "--no-store")
    assert r.code == 0, r.err
    assert "rollouts errored and are excluded" in r.out
    assert why in " ".join(r.out.split()), r.out  # the table wraps long notes
    r = run_cli("blame", trace, "--scorer", scorer, "--no-store", "--format", "markdown")
    assert r.code == 0 and why.replace("_", "\\_") in r.out, r.out  # Markdown escapes the path
    page = tmp_path / "report.html"
    r = run_cli("blame", trace, "--scorer", scorer, "--no-store", "--format", "html", "-o", page)
    assert r.code == 0 and why.replace("'", "&#x27;") in page.read_text(), r.err


@dataclass
class WrongTypePolicy:
    """Returns a dict instead of an Action where `wrong(key)` says so."""

    inner: Policy
    wrong: Callable[[EventKey], bool]
    spec: str = "wrong-type"

    async def act(self, decision: Decision, key: EventKey) -> Action:
        action = await self.inner.act(decision, key)
        return {"text": action.text} if self.wrong(key) else action  # type: ignore[return-value]


def test_a_policy_that_returns_no_action_errs_those_rollouts_and_names_itself() -> None:
    """It crashed the whole run ("AttributeError: 'dict' object has no attribute 'signature'"),
    losing every rollout, without naming the policy."""
    trace = load_trace(TRACES / "support-refund.json")
    inner = make_policy("sim:support-refund", trace)
    policy = WrongTypePolicy(inner, lambda key: key.uniform() < 0.05)
    report = car.blame(trace, policy=policy, samples=16)
    assert 0 < report.budget.errored < report.budget.rollouts and report.status == "ok"
    assert report.first_error is not None and report.first_error.endswith(
        "policy 'wrong-type' returned a dict: act() must return a car.Action"
    )


def test_one_failed_match_draw_costs_that_draw_only() -> None:
    """One draw that raised lost the whole action-match rate ("not measured"), and a
    --min-match-rate gate then blamed missing match samples."""
    trace = load_trace(TRACES / "support-refund.json")
    inner = make_policy("sim:support-refund", trace)

    @dataclass
    class OneBadDraw:
        spec: str = "one-bad-draw"

        async def act(self, decision: Decision, key: EventKey) -> Action:
            if key.kind == "match" and key.replicate == 3 and key.step == trace.decision_steps[0]:
                raise Hiccup("transient 503")
            return await inner.act(decision, key)

    report = car.blame(trace, policy=OneBadDraw(), samples=4, match_samples=8)
    draws = 8 * len(trace.decision_steps)
    assert report.match_rate.n == draws - 1 and report.budget.match_errors == 1
    assert report.steps[trace.decision_steps[0]].match_rate.n == 7  # type: ignore[union-attr]
    assert f"1 of {draws} match draws failed and was left out of the action-match rate" in " ".join(
        report.notes
    )
    assert report.first_error == f"match draw at step {trace.decision_steps[0]}: Hiccup: transient 503"
    # No rollout errored, so no other note names the first error: this one does (it said "the
    # first error is in the report", which the table and markdown did not show).
    assert any(n.endswith(f"rate (first: {report.first_error})") for n in report.notes)

    # A Shapley run's report counted its rollouts anew and dropped the failed draw from the budget.
    shapley = car.blame(
        trace, policy=OneBadDraw(), samples=4, match_samples=8, method="shapley", budget=64
    )
    assert shapley.method == "shapley" and shapley.budget.match_errors == 1

    @dataclass
    class EveryDrawFails:
        spec: str = "no-draws"

        async def act(self, decision: Decision, key: EventKey) -> Action:
            if key.kind == "match":
                raise Hiccup("transient 503")
            return await inner.act(decision, key)

    from car.gates import Gates

    none = car.blame(trace, policy=EveryDrawFails(), samples=4, match_samples=2)
    assert none.match_rate.estimate is None and none.budget.match_errors == 2 * len(trace.decision_steps)
    (tripped,) = Gates(min_match_rate=0.5).check(none)
    assert tripped.startswith("action-match rate not measured (every match draw failed; first: ")


def test_an_environment_that_returns_no_envstep_is_named() -> None:
    from car.specs import make_env

    trace = load_trace(TRACES / "support-refund.json")
    inner = make_env("sim:support-refund", trace)

    @dataclass
    class WrongEnv:
        spec: str = "wrong-env"

        async def restore(self, turns: tuple[object, ...]) -> object:
            return await inner.restore(turns)  # type: ignore[arg-type]

        async def step(self, *args: object) -> object:
            return "observation"

    report = car.blame(trace, env=WrongEnv(), samples=4, max_error_rate=1.0)
    assert report.first_error is not None and report.first_error.endswith(
        "environment 'wrong-env' returned a str: step() must return a car.EnvStep"
    )


def _scorer_file(tmp_path: Path, body: str) -> str:
    path = tmp_path / "my_scorer.py"
    path.write_text(body)
    return f"{path}@check"


def test_a_scorer_that_answers_no_score_is_an_input_error(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    """It was a backend failure (exit 3) whose report said the scorer "cannot score the recorded
    run": the scorer answered, with what is no score."""
    scorer = _scorer_file(tmp_path, "async def check(trajectory):\n    return 'yes'\n")
    r = run_cli("blame", TRACES / "pivot.json", "--scorer", scorer, "--no-store", "--samples", "4")
    assert r.code == 2, (r.out, r.err)
    assert "returned 'yes': a score is a number in [0, 1]" in r.err
    assert "Traceback" not in r.err


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (
            "class S:\n    def score(self, trajectory, key):\n        return 1.0\ncheck = S()\n",
            "S.score() must be async (async def score(...)): car awaits it",
        ),
        (  # it failed every rollout with "S.score() takes 2 positional arguments but 3 were given"
            "class S:\n    async def score(self, trajectory):\n        return 1.0\ncheck = S()\n",
            "S.score() takes (trajectory), and car calls score(trajectory, key)",
        ),
        (
            "def check(trajectory):\n    return 1.0\n",
            "built a float, which has no score(): it looks like a scorer function, which must be "
            "async (async def check(trajectory) -> float | None)",
        ),
    ],
)
def test_a_scorer_that_is_not_async_is_refused_before_any_work(
    tmp_path: Path, run_cli: Callable[..., Result], body: str, says: str
) -> None:
    r = run_cli("blame", TRACES / "pivot.json", "--scorer", _scorer_file(tmp_path, body), "--no-store")
    assert r.code == 2, (r.out, r.err)
    assert says in r.err and len(r.err.strip().splitlines()) == 1, r.err


def test_a_locus_ahead_of_a_step_never_scored_says_it_is_conditional() -> None:
    """Every rollout of the last step's arm errored: the rule named step 1, as if step 2 had been
    shown not to matter."""
    trace = load_trace(TRACES / "pivot.json")
    inner = make_policy("sim:pivot", trace)
    last = trace.decision_steps[-1]

    @dataclass
    class BlindAtTheEnd:
        spec: str = "blind"

        async def act(self, decision: Decision, key: EventKey) -> Action:
            on_record = all(
                t.action.identity() == trace.steps[t.index].action.identity() for t in decision.history
            )
            if decision.step == last and on_record:  # every rollout of the last step's arm
                raise Hiccup("down")
            return await inner.act(decision, key)

    report = car.blame(trace, policy=BlindAtTheEnd(), samples=32, match_samples=0, max_error_rate=1.0)
    assert report.locus == 1
    assert report.steps[last].effect is not None and report.steps[last].effect.n == 0
    assert (
        f"step {last} after the locus had no scored rollout (every one errored or was unscorable): "
        "the locus holds only if it is not where the run was decided"
    ) in report.notes


def test_a_plugin_policy_that_raises_is_named_with_its_trace(run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A single trace's backend failure (exit 3) said "too many rollouts errored ... ValueError: act
    exploded" without the trace, where a scorer's failure named it."""
    from tests.conftest import TRACES

    (tmp_path / "boom.py").write_text(
        "class P:\n"
        "    spec = 'boom.py@policy'\n"
        "    async def act(self, context, key):\n"
        "        raise ValueError('act exploded')\n"
        "policy = P()\n"
    )
    trace = TRACES / "and.json"
    r = run_cli(
        "blame", trace, "--policy", f"{tmp_path / 'boom.py'}@policy", "--no-store", "--no-progress",
        "--samples", "2", "--match-samples", "1", "-o", tmp_path / "r.txt",
    )  # fmt: skip
    assert r.code == 3
    last = r.err.strip().splitlines()[-1]
    assert last.startswith(f"car: error: {trace}: too many rollouts errored (")
    assert last.endswith("ValueError: act exploded")
    assert (tmp_path / "r.txt").is_file()  # the report is still written


def test_a_shapley_game_that_mostly_errored_makes_the_report_a_backend_error() -> None:
    """The error-rate rule looked at the contrastive rollouts alone: a Shapley part whose rollouts
    mostly errored left the report `ok` (exit 0), resting on the few units that survived."""
    from car.shapley import WALK_BASE

    trace = load_trace(TRACES / "and.json")
    inner = make_policy("sim:and", trace)

    @dataclass
    class FailsInWalks:
        rate: float
        spec: str = "fails-in-walks"

        async def act(self, decision: Decision, key: EventKey) -> Action:
            if key.replicate >= WALK_BASE and key.uniform() < self.rate:
                raise Hiccup("overloaded")
            return await inner.act(decision, key)

    def run(rate: float) -> car.Report:
        return car.blame(trace, policy=FailsInWalks(rate), method="shapley", budget=400, seed=3)

    bad = run(0.6)
    assert bad.method == "shapley" and bad.shapley is not None
    b = bad.budget
    assert b.errored > b.rollouts / 2 and bad.status == "backend-errors"
    (dropped,) = [n for n in bad.notes if "pairs of walks dropped" in n]
    assert re.fullmatch(
        r"Shapley: (\d+) of (\d+) pairs of walks dropped: a rollout on them errored or could not be "
        r"scored \((\d+) of its (\d+) rollouts errored\)",
        dropped,
    )
    # Under the threshold the report stays ok, its drops noted.
    mild = run(0.05)
    assert 0 < mild.budget.errored < mild.budget.rollouts / 2 and mild.status == "ok"


def test_a_huge_plugin_error_is_kept_as_one_cut_line(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    """A scorer whose error quoted a megabyte of text put all of it in the JSON report's
    first_error and in the terminal's note, lines and all. Its start (where) and end stay."""
    path = tmp_path / "wordy.py"
    path.write_text(
        "from car import EventKey, Trajectory\n\n\n"
        "async def wordy(trajectory: Trajectory, key: EventKey) -> float:\n"
        "    if key.replicate % 4 == 3:\n"
        "        raise ValueError('could not parse:\\n' + 'x' * 1_000_000 + '\\nend of input')\n"
        "    return float(trajectory.turns[-1].action.text.endswith('FAIL'))\n"
    )
    scorer = f"{path}@wordy"
    report = car.blame(TRACES / "pivot.json", scorer=scorer)
    first = report.first_error
    assert first is not None and len(first) < 2_200, len(first or "")
    assert first.startswith(f"scorer '{scorer}': ValueError: could not parse: xxx")
    assert first.endswith("xxx end of input") and "characters left out" in first
    r = run_cli("blame", TRACES / "pivot.json", "--scorer", scorer, "--no-store")
    assert r.code == 0 and len(r.out) < 10_000, len(r.out)
