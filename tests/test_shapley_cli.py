"""`car blame` with Shapley: the fallback rules, the report section, the table and the errors."""

from __future__ import annotations

import json

import pytest

import car
from car.cli import main
from car.errors import BudgetError, InputError
from car.fallback import fallback_reason
from tests.conftest import TRACES


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_shared_drops_fire_the_fallback() -> None:
    report = car.blame(str(TRACES / "and.json"), seed=0)
    assert len(report.shared) >= 2
    assert report.method == "shapley"
    assert report.method_reason is not None and "shared" in report.method_reason
    sh = report.shapley
    assert sh is not None and sh.method == "permutation" and sh.players_kind == "steps"
    assert [p.steps for p in sh.players] == [[0], [1], [2]]
    assert sh.total == pytest.approx(sh.v_all.estimate - sh.v_none.estimate, abs=1e-12)
    assert sh.budget.rollouts <= 1000 and sh.budget_limit == 1000
    assert "share the blame" in report.headline
    # The overall budget counts the contrastive and the Shapley rollouts.
    # the contrastive rows come first: at least one rollout per replicate
    assert report.budget.rollouts >= sh.budget.rollouts + 32


@pytest.mark.parametrize("shapley", ["permutation", "exact"])
def test_the_divergence_rate_counts_the_shapley_rollouts(shapley: str) -> None:
    """The contrastive arms hold only the copied prefix and never diverge; Shapley holds players
    after re-decided steps (by the plan, or by a fork that forces the recorded action). The report's
    rate is the whole run's: it said 0% whatever Shapley's rollouts did."""
    report = car.blame(str(TRACES / "and.json"), method="shapley", shapley_method=shapley, budget=300)
    assert report.shapley is not None and report.shapley.method == shapley
    assert 0.1 < report.divergence_rate < 0.9
    contrastive = car.blame(str(TRACES / "and.json"), method="contrastive")
    assert contrastive.divergence_rate == 0.0


def test_abstention_fires_the_fallback() -> None:
    report = car.blame(str(TRACES / "pivot.json"), samples=2, min_effect=0.5)
    assert report.locus is None
    assert report.method == "shapley"
    assert report.method_reason == "the contrastive estimator abstained"


def test_single_locus_keeps_contrastive() -> None:
    report = car.blame(str(TRACES / "pivot.json"))
    assert report.locus == 1 and report.method == "contrastive" and report.shapley is None
    assert fallback_reason(report, "contrastive") is None
    assert fallback_reason(report, "shapley") == "requested (--method shapley)"


def test_method_contrastive_never_runs_shapley() -> None:
    report = car.blame(str(TRACES / "and.json"), method="contrastive")
    assert report.shapley is None and report.method == "contrastive"


def test_method_contrastive_refuses_shapley_options_from_python() -> None:
    """The command line and `BatchOptions` refuse them; `car.blame` ignored them in silence."""
    with pytest.raises(InputError) as err:
        car.blame(str(TRACES / "and.json"), method="contrastive", players="agents", budget=50)
    assert str(err.value) == (
        "method=contrastive runs no Shapley, so players=agents and budget=50 would be ignored; "
        "drop them, or use method=auto or shapley"
    )


def test_agents_players_on_the_research_team() -> None:
    report = car.blame(
        str(TRACES / "research-team-world.json"), method="shapley", players="agents", budget=800
    )
    sh = report.shapley
    assert sh is not None and sh.players_kind == "agents"
    by_id = {p.id: p for p in sh.players}
    assert by_id["orchestrator"].steps == [0, 4]
    assert by_id["searcher"].low > 0.3 and by_id["verifier"].low > 0.25
    assert by_id["orchestrator"].low < 0 < by_id["orchestrator"].high
    assert "agents searcher and verifier share the blame" in (sh.summary or "")


def test_json_report_has_the_shapley_section(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys,
        "blame",
        str(TRACES / "and.json"),
        "--method",
        "shapley",
        "--format",
        "json",
        "--budget",
        "300",
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["method"] == "shapley" and doc["method_reason"] == "requested (--method shapley)"
    sh = doc["shapley"]
    assert {"method", "players", "total", "v_all", "v_none", "budget", "budget_reached"} <= set(sh)
    assert {"id", "steps", "value", "low", "high", "share"} <= set(sh["players"][0])
    assert sh["budget"]["rollouts"] <= 300


def test_table_shows_phi_and_the_shared_sentence(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "blame", str(TRACES / "and.json"), "--budget", "300")
    assert code == 0
    assert "phi [95% CI]" in out and "share" in out
    assert "steps 0 and 1 share the blame" in out or "steps 1 and 0 share the blame" in out
    assert "sum phi" in out and "v(N) - v(empty)" in out


def test_agent_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys,
        "blame",
        str(TRACES / "research-team.json"),
        *("--method", "shapley", "--players", "agents", "--budget", "400"),
    )
    assert code == 0
    assert "Shapley credit by agent" in out and "orchestrator" in out


def test_exact_over_budget_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(
        capsys,
        "blame",
        str(TRACES / "long-and.json"),
        "--method",
        "shapley",
        "--shapley",
        "exact",
        "--budget",
        "500",
    )
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert "needs at least 32761 rollouts" in err and "--budget 500" in err


def test_exact_over_budget_raises_before_any_rollout() -> None:
    with pytest.raises(BudgetError):
        car.blame(str(TRACES / "long-and.json"), method="shapley", shapley_method="exact", budget=500)


def test_auto_fallback_that_cannot_be_paid_is_a_note() -> None:
    # Seed 1 at 64 samples per step sees both drops (3 and 8; 4 of seeds 0-5 do), so rule b fires.
    report = car.blame(str(TRACES / "long-and.json"), budget=30, samples=64, seed=1)
    assert report.shared == [3, 8]
    assert report.shapley is None and report.method == "contrastive"
    assert any(n.startswith("Shapley (credit looks shared") for n in report.notes)
    # An abstention (no step can clear a 99% minimum effect at 32 samples) fires rule a, on any seed.
    report = car.blame(str(TRACES / "long-and.json"), budget=30, min_effect=0.99)
    assert report.locus is None and report.shapley is None
    assert any(
        n.startswith("Shapley (the contrastive estimator abstained) not run") for n in report.notes
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--players", "0,99"], "not a decision step"),
        # it said "step 0 is in more than one group" of a step repeated in one group
        (["--players", "0,0;1"], "--players '0,0;1': group 1 ('0,0') names step 0 twice"),
        (["--players", "0;1,0"], "--players '0;1,0': step 0 is in more than one group"),
        (["--budget", "0"], "--budget must be at least 1"),
        (["--target-width", "2"], "--target-width must be in (0, 1)"),
        (["--method", "nope"], "nope"),
    ],
)
def test_bad_options_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code, _, err = run_cli(capsys, "blame", str(TRACES / "and.json"), *args)
    assert code == 2 and message in err and err.count("\n") == 1


def test_markdown_report_has_the_shapley_credit(capsys: pytest.CaptureFixture[str]) -> None:
    """`--format markdown` (and the GitHub job summary made from it) showed the rescue table and the
    headline's shares only: no phi, no interval, neither why Shapley ran nor what it used."""
    args = ("blame", str(TRACES / "research-team.json"), "--method", "shapley", "--budget", "300")
    code, out, _ = run_cli(capsys, *args, "--players", "agents", "--format", "json")
    assert code == 0
    sh = json.loads(out)["shapley"]
    code, out, _ = run_cli(capsys, *args, "--players", "agents", "--format", "markdown")
    assert code == 0
    assert "Shapley (permutation, players: agents) because requested (--method shapley):" in out
    assert "| # | player | steps | phi [95% CI] | share |" in out
    for p in sh["players"]:
        phi = f"{p['value']:+.0%} [{p['low']:+.0%}, {p['high']:+.0%}]"
        steps = ", ".join(map(str, p["steps"]))
        assert f"| {p['id']} | {steps} | {phi} | {p['share']:.0%} |" in out
    assert f"{sh['budget']['rollouts']} of 300 rollouts" in out and "budget reached" in out


def test_the_policy_call_budget_is_shown_beside_what_was_used(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With --budget-calls the report said '274 of 1000 rollouts, 365 policy calls; budget
    reached': the limit that stopped the run was nowhere, and the HTML page gave neither limit."""
    args = ("blame", str(TRACES / "and.json"), "--method", "shapley", "--budget-calls", "400")
    code, out, _ = run_cli(capsys, *args, "--format", "json")
    assert code == 0
    sh = json.loads(out)["shapley"]
    assert sh["budget_reached"] and sh["budget"]["policy_calls"] <= 400
    b = sh["budget"]
    used = f"{b['rollouts']} of 1000 rollouts, {b['policy_calls']} of 400 policy calls"
    for fmt in ("table", "markdown", "html"):
        code, out, _ = run_cli(capsys, *args, "--format", fmt)
        assert code == 0 and used in " ".join(out.split()), fmt


def test_shapley_options_unused_under_auto_are_said_so(capsys: pytest.CaptureFixture[str]) -> None:
    """Under --method auto a single locus runs no Shapley: --players and --budget given then did
    nothing, and the report said nothing of it."""
    code, out, _ = run_cli(
        capsys,
        *("blame", str(TRACES / "pivot.json"), "--players", "agents", "--budget", "500"),
        "--format",
        "json",
    )
    assert code == 0
    report = json.loads(out)
    assert report["method"] == "contrastive" and report["locus"] == 1
    assert (
        "Shapley not run: step 1 carries the blame alone (no rule of --method auto fired), so "
        "--players agents and --budget 500 were not used; --method shapley runs it anyway"
    ) in report["notes"]
    # from Python, in its own words; and no note when no Shapley option was set
    notes = car.blame(str(TRACES / "pivot.json"), target_width=0.1).notes
    assert any("so target_width=0.1 was not used; method=shapley runs" in n for n in notes)
    assert not any(n.startswith("Shapley") for n in car.blame(str(TRACES / "pivot.json")).notes)


class _AlwaysFails:
    """A scorer no re-decision can satisfy: every rollout fails."""

    spec = "always-fails"
    deterministic = True

    async def score(self, trajectory: object, key: object) -> float:
        return 1.0


def test_auto_skips_shapley_when_no_re_decision_avoids_the_failure() -> None:
    # Re-deciding from step 0 re-decides every player: that arm measured v(N) - v(empty), all the
    # credit Shapley could share, and its upper end is below the minimum effect.
    report = car.blame(str(TRACES / "pivot.json"), scorer=_AlwaysFails())
    assert report.locus is None and report.shapley is None and report.method == "contrastive"
    assert report.notes[-1] == (
        "Shapley (the contrastive estimator abstained) not run: re-deciding from step 0, which "
        "re-decides every player, removes at most 8.9% of the failure, below the 10% minimum effect"
    )
    assert report.budget.rollouts < 100
    # Agents that hold every decision step are the same game.
    assert car.blame(str(TRACES / "pivot.json"), scorer=_AlwaysFails(), players="agents").shapley is None


@pytest.mark.parametrize(("method", "players"), [("shapley", "steps"), ("auto", "0;1")])
def test_shapley_still_runs_when_asked_or_when_players_leave_steps_out(
    method: str, players: str
) -> None:
    # Explicitly asked for, Shapley runs; players that leave step 2 out play another game, whose
    # v(N) the contrastive arms did not measure.
    report = car.blame(
        str(TRACES / "pivot.json"),
        scorer=_AlwaysFails(),
        method=method,
        players=players,  # type: ignore[arg-type]
    )
    assert report.shapley is not None and report.method == "shapley"


def test_a_noisy_scorer_skips_shapley_only_when_the_interval_rules_credit_out() -> None:
    class NoisyAlwaysFails(_AlwaysFails):
        deterministic = False  # the factual arm is sampled too: the effect's interval is wider

    trace = str(TRACES / "pivot.json")
    wide = car.blame(trace, scorer=NoisyAlwaysFails())
    assert wide.steps[0].effect is not None and wide.steps[0].effect.high is not None
    assert wide.steps[0].effect.high >= 0.1 and wide.shapley is not None
    assert car.blame(trace, scorer=NoisyAlwaysFails(), min_effect=0.2).shapley is None


def test_the_skip_note_never_prints_the_bound_as_the_minimum_it_is_below() -> None:
    # At 36 samples re-deciding from step 0 removes at most 7.98%: to one decimal that read "8.0% of
    # the failure, below the 8% minimum effect".
    report = car.blame(str(TRACES / "pivot.json"), scorer=_AlwaysFails(), samples=36, min_effect=0.08)
    assert report.notes[-1].endswith("removes at most 7.98% of the failure, below the 8% minimum effect")
