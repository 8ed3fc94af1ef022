"""Adaptive sampling: row reuse is exact, the budget holds, certified answers are wrong <= delta."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import numpy as np
import pytest

import car
from bench.methods import replay_for
from car.adaptive import blame_adaptive_async, run_adaptive
from car.cli import main
from car.estimators.sequential import locus_state
from car.replay import Replay, RowRunner
from car.report import Report
from car.sim import record, scenario_for
from car.sim.planted import BinaryModel, truth


def _replay(name: str, seed: int, **params: float) -> Replay:
    return replay_for(record(name, **params), seed)


@pytest.mark.parametrize(
    "name",
    ["planted-pivot", "long", "noisy-judge", "team", "corridor", "support-refund", "research-team"],
)
def test_a_row_equals_every_arm_run_on_its_own(name: str) -> None:
    replay = _replay(name, 3)
    runner = RowRunner(replay)
    arms = list(range(runner.m + 1))

    async def go() -> None:
        saved = 0
        for r in range(40):
            row, cost = await runner.row(arms, r)
            assert set(row) == set(arms)
            saved += len(arms) - cost
            for arm in arms:
                alone = await replay.run(runner.plan(arm), r)
                assert alone.value == row[arm] or (alone.value is None and math.isnan(row[arm]))
        assert saved > 0  # reuse happened

    asyncio.run(go())


def test_budget_is_never_exceeded() -> None:
    for budget in (5, 17, 60):
        replay = _replay("cascade", 1)
        run = asyncio.run(run_adaptive(replay, budget=budget, min_effect=0.1, batch=4))
        assert run.rollouts <= budget
        assert replay.counters.rollouts == run.rollouts


@pytest.mark.parametrize(
    ("name", "params", "min_effect"),
    [("planted-and", {}, 0.1), ("mediated", {}, 0.3), ("planted-pivot", {"p": 0.7}, 0.2)],
)
def test_certified_locus_is_wrong_at_most_delta_of_the_time(
    name: str, params: dict[str, float], min_effect: float
) -> None:
    model = scenario_for(name, None, **params)
    assert isinstance(model, BinaryModel)
    want = truth(model).locus(min_effect)
    delta, seeds = 0.1, 60
    wrong = certified = 0
    for s in range(seeds):
        replay = _replay(name, s, **params)
        run = asyncio.run(run_adaptive(replay, confidence=1 - delta, min_effect=min_effect, budget=3000))
        if run.state.certified:
            certified += 1
            wrong += run.state.locus != want
    assert certified >= seeds * 0.9
    assert wrong / seeds <= delta


def test_report_says_certified_or_best_guess() -> None:
    trace = record("planted-and")
    rep = asyncio.run(blame_adaptive_async(trace, budget=2000, seed=2))
    assert rep.adaptive is not None and rep.adaptive.certified
    assert rep.headline.startswith("Certified (95%)") and rep.locus == 1
    # The least budget it takes (the record and 8 rows of 3 arms; less is refused): not enough.
    tight = asyncio.run(blame_adaptive_async(trace, budget=25, seed=2))
    assert tight.adaptive is not None and not tight.adaptive.certified
    assert tight.adaptive.stopped == "budget" and tight.headline.startswith("Best guess")
    assert tight.adaptive.rollouts <= 25


def test_a_confidence_that_rounds_to_100_percent_is_not_reported_as_certainty() -> None:
    """At --confidence 0.999 the report said "Certified (100%)" and "certified at 100%": the level
    was rounded to whole percents, a certainty no finite sample gives."""
    rep = asyncio.run(
        blame_adaptive_async(record("planted-pivot", p=0.7), confidence=0.999, budget=2000, seed=0)
    )
    assert rep.adaptive is not None and rep.adaptive.certified
    assert rep.headline.startswith("Certified (99.9%): Step 1")
    assert rep.adaptive.statement.startswith("certified at 99.9%: step 1")
    # With no step to blame, the estimator's own reason says it too.
    none = locus_state(np.ones((2, 4000)), np.array([1.0]), factual_exact=True, confidence=0.995)
    assert none.certified and none.locus is None
    assert (none.result.abstained_reason or "").startswith("certified at 99.5%: no decision step")


def test_a_best_guess_quotes_the_bound_that_keeps_its_later_steps_open() -> None:
    """The headline said later steps "may remove up to 8%" (their displayed per-step intervals) with
    --min-effect 10%, so a reader took them for decided: the bound that decides is adjusted over the
    steps, and it is above 10% for an open step."""
    from car.trace import load_trace
    from tests.conftest import TRACES

    trace = load_trace(TRACES / "long-and.json")
    rep = asyncio.run(blame_adaptive_async(trace, budget=200, seed=0))
    ad = rep.adaptive
    assert ad is not None and not ad.certified and ad.open_steps and ad.open_upper is not None
    assert ad.open_upper > rep.min_effect
    assert f"may remove up to {ad.open_upper:.0%} at the level that decides" in rep.headline
    shown = max(h for i in ad.open_steps if (h := rep.steps[i].effect.high) is not None)  # type: ignore[union-attr]
    assert shown <= ad.open_upper


def test_target_width_stops_early() -> None:
    trace = record("planted-pivot", p=0.9)
    rep = asyncio.run(blame_adaptive_async(trace, budget=5000, target_width=0.1, min_effect=0.0, seed=1))
    assert rep.adaptive is not None and rep.adaptive.stopped == "target-width"
    assert rep.adaptive.rollouts < 5000


def test_cli_adaptive_json(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "t.json"
    path.write_text(record("planted-and").model_dump_json(), encoding="utf-8")
    main(["blame", str(path), "--adaptive", "--budget", "400", "--format", "json"])
    report = Report.model_validate(json.loads(capsys.readouterr().out))
    assert report.adaptive is not None and report.adaptive.budget == 400


@pytest.mark.parametrize("fmt", ["table", "markdown", "html"])
def test_a_certified_report_says_what_it_used_of_the_budget(fmt, capsys) -> None:  # type: ignore[no-untyped-def]
    """A certified adaptive report gave the rollouts it ran but not the budget it was given, so a
    reader could not tell an early certificate from one that took the whole budget."""
    trace = str(Path(__file__).resolve().parent.parent / "traces" / "support-refund.json")
    main(["blame", trace, "--adaptive", "--budget", "2000", "--no-store", "--format", fmt])
    out = " ".join(capsys.readouterr().out.split())
    assert "every later step's effect is at most 10%; 99 of 2,000 rollouts used" in out


def test_cli_rejects_bad_confidence(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "t.json"
    path.write_text(record("planted-and").model_dump_json(), encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["blame", str(path), "--adaptive", "--confidence", "1.2"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--confidence" in err[0]


def test_rows_share_samples_across_arms() -> None:
    replay = _replay("planted-pivot", 0, p=0.9)
    run = asyncio.run(run_adaptive(replay, budget=96, min_effect=0.0))
    observed = (~np.isnan(run.arms)).sum(axis=1)
    assert observed.sum() > run.rollouts  # more cells than rollouts: reuse


def test_adaptive_rows_respect_the_concurrency() -> None:
    """Looks grow geometrically; the rows in flight stay within --concurrency."""
    from car.specs import make_policy

    trace = record("planted-pivot", p=0.7)

    class Probe:
        def __init__(self) -> None:
            self.inner = make_policy("sim:planted-pivot", trace)
            self.spec = self.inner.spec
            self.now = self.peak = 0

        async def act(self, decision, key):  # type: ignore[no-untyped-def]
            self.now += 1
            self.peak = max(self.peak, self.now)
            await asyncio.sleep(0)
            self.now -= 1
            return await self.inner.act(decision, key)

    policy = Probe()
    report = asyncio.run(
        blame_adaptive_async(
            trace, policy=policy, concurrency=3, budget=600, confidence=0.999, match_samples=0
        )
    )
    assert report.adaptive is not None and report.adaptive.rows > 100
    assert 1 < policy.peak <= 3


def test_adaptive_report_is_the_same_at_any_concurrency() -> None:
    """Looks come every 8 rows whatever --concurrency is (at 50 it stopped on the budget before)."""
    trace = record("and")
    reports = [
        asyncio.run(blame_adaptive_async(trace, concurrency=c, match_samples=0)) for c in (1, 5, 50)
    ]
    first = reports[0].model_dump(exclude={"notes"})
    assert all(r.model_dump(exclude={"notes"}) == first for r in reports[1:])
    assert reports[0].adaptive is not None and reports[0].adaptive.stopped == "certified"


def test_adaptive_with_shapley_options_is_a_usage_error(capsys) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import TRACES

    with pytest.raises(SystemExit) as exc:
        main(["blame", str(TRACES / "and.json"), "--adaptive", "--players", "agents", "--no-store"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--adaptive runs no Shapley, so --players agents would be ignored" in err


def test_adaptive_refuses_min_effect_0(capsys) -> None:  # type: ignore[no-untyped-def]
    """It could never certify (a committed step's effect is exactly 0): it spent every budget."""
    from tests.conftest import TRACES

    with pytest.raises(SystemExit) as exc:
        main(["blame", str(TRACES / "pivot.json"), "--adaptive", "--min-effect", "0", "--no-store"])
    assert exc.value.code == 2
    assert "--adaptive with --min-effect 0 can never certify" in capsys.readouterr().err


def test_adaptive_refuses_min_effect_0_in_python_words() -> None:
    """From Python each trace's error named the command line's `--adaptive` and `--min-effect 0`."""
    from tests.conftest import TRACES

    options = car.BatchOptions(adaptive=True, min_effect=0)
    (result,) = car.blame_many(str(TRACES / "pivot.json"), options=options)
    assert result.status == "input-error"
    assert result.error == (
        "adaptive=True with min_effect=0 can never certify (a step with no effect is never certified "
        "at or below 0) and would spend its whole budget: give min_effect= above 0, or "
        "target_width= to stop on precision"
    )


class _NeverFails:
    """A noisy scorer (an LLM judge, say) that finds no failure in any run, the record's included."""

    spec = "never-fails"
    deterministic = False

    async def score(self, trajectory: object, key: object) -> float:
        return 0.0


@pytest.mark.parametrize("budget", [None, 5000])
def test_a_noisy_scorer_that_never_fails_the_record_is_nothing_to_attribute(
    budget: int | None,
) -> None:
    """The report has nothing to attribute; the statement said "best guess, not certified: the
    budget ran out; steps 0, 1, 2 still undecided" or, given the budget to decide, "certified at
    95%: no step's effect exceeds 10%", with `certified: true`."""
    from tests.conftest import TRACES

    report = asyncio.run(
        blame_adaptive_async(TRACES / "pivot.json", scorer=_NeverFails(), budget=budget)
    )
    assert report.locus is None and report.adaptive is not None
    assert "did not fail" in (report.abstained_reason or "")
    assert not report.adaptive.certified
    assert report.adaptive.statement.startswith(f"nothing to attribute: {report.abstained_reason}")


@pytest.mark.parametrize("scorer", ["sim:pivot", _NeverFails()])
def test_a_record_that_did_not_fail_is_no_best_guess(scorer: object) -> None:
    """Nothing to attribute names no step: the headline started "Best guess (95%):" all the same."""
    from tests.conftest import TRACES

    doc = json.loads((TRACES / "pivot.json").read_text())
    doc["steps"][1]["action"]["text"] = "step 1: choose GOOD"
    doc["steps"][2]["action"]["text"] = "step 2: report OK"
    trace = car.Trace.model_validate(doc)
    report = asyncio.run(blame_adaptive_async(trace, scorer=scorer))  # type: ignore[arg-type]
    assert report.locus is None and "did not fail" in (report.abstained_reason or "")
    assert report.headline.startswith("car cannot name a decisive step: the scorer")


def test_the_open_steps_are_named_by_step_not_by_position() -> None:
    """The orchestrator replayed as recorded (not stochastic): the decisions are steps 1, 2 and 3. The
    headline said "(steps 0, 1, 2 still open)", positions among the decisions, and named step 0,
    which is no decision; the statement said "steps 1, 2, 3 still undecided"."""
    from tests.conftest import TRACES

    doc = json.loads((TRACES / "research-team.json").read_text())
    doc["actors"][0]["stochastic"] = False
    trace = car.Trace.model_validate(doc)
    report = asyncio.run(blame_adaptive_async(trace, budget=25))
    assert report.adaptive is not None and report.adaptive.open_steps == [1, 2, 3]
    assert report.locus is None and "(steps 1, 2, 3 still open)" in report.headline


def test_one_open_step_is_one_step() -> None:
    """It said "(steps 0 still open)"."""
    state = locus_state(np.ones((1, 8)), np.array([1.0]), factual_exact=True)
    assert state.open == (0,)
    assert state.result.abstained_reason == (
        "no step's effect is certainly above 10% yet (step 0 still open)"
    )


def test_every_reported_interval_holds_its_estimate() -> None:
    """A betting CS is intersected over time, so the mean of the differences can end outside it: at
    60.82% confidence step 0's drop on `and` read 28.1% [12.3%, 21.9%]."""
    from tests.conftest import TRACES

    report = asyncio.run(
        blame_adaptive_async(
            TRACES / "and.json", seed=748598540, confidence=0.6082, min_effect=0.9, budget=872
        )
    )
    shown = [report.factual] + [
        e for s in report.steps for e in (s.rescue, s.effect, s.drop) if e is not None
    ]
    assert report.steps[0].drop is not None and report.steps[0].drop.estimate == 0.28125
    for e in shown:
        assert e.estimate is not None and e.low is not None and e.high is not None
        assert e.low <= e.estimate <= e.high, e
    # the pure estimator: drop differences 0, 0, -1, -1, -1, -1, -1 at 56%
    state = locus_state(
        np.array([[0, 0, 1, 1, 1, 1, 1], [0.0] * 7]),
        np.array([1.0]),
        factual_exact=True,
        confidence=0.56,
    )
    drop = state.result.positions[0].drop
    assert drop.low <= drop.estimate <= drop.high, drop
