"""`car blame` refuses what it would not do: an adaptive budget too small for a first batch, and
options the chosen mode ignores; the adaptive report says no more than its intervals show."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from car.batch import BatchOptions
from car.errors import InputError
from car.report import Report
from tests.conftest import ROOT, TRACES, Result

AND = TRACES / "and.json"  # 3 decision steps, a deterministic scorer
RunCli = Callable[..., Result]


def _one_line_usage_error(r: Result) -> str:
    assert r.code == 2, r.err
    assert "Traceback" not in r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    return lines[0]


# -- the adaptive budget ----------------------------------------------------------------------------
@pytest.mark.parametrize("budget", [3, 24])
def test_adaptive_refuses_a_budget_that_cannot_pay_for_the_first_batch(
    run_cli: RunCli, budget: int
) -> None:
    """The loop starts with the record's scoring and 8 rows of the 3 arms: 25 rollouts at most. A
    smaller budget ran no row (every step 'no data') or rows short of the first look, exit 0."""
    line = _one_line_usage_error(run_cli("blame", AND, "--adaptive", "--budget", budget, "--no-store"))
    assert "needs at least 25 rollouts" in line
    assert f"--budget {budget} is too small" in line


def test_adaptive_at_its_minimum_budget_gives_every_step_its_first_batch(run_cli: RunCli) -> None:
    r = run_cli("blame", AND, "--adaptive", "--budget", "25", "--no-store", "--format", "json")
    assert r.code == 0, r.err
    report = Report.model_validate(json.loads(r.out))
    decisions = [s for s in report.steps if s.decision]
    assert all(s.rescue is not None and s.rescue.n >= 8 for s in decisions)


# -- options the chosen mode ignores ------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "named", "why"),
    [
        (["--confidence", "0.99"], ["--confidence 0.99"], "without --adaptive"),
        (["--adaptive", "--level", "0.9"], ["--level 0.9"], "--adaptive"),
        (["--adaptive", "--samples", "64"], ["--samples 64"], "--adaptive"),
        (["--adaptive", "--method", "auto"], ["--method auto"], "--adaptive runs no Shapley"),
        (["--adaptive", "--players", "agents"], ["--players agents"], "--adaptive runs no Shapley"),
        (
            [
                *("--method", "contrastive", "--shapley", "exact", "--players", "agents"),
                *("--budget", "50", "--target-width", "0.01", "--budget-calls", "5"),
            ],
            [
                "--shapley exact",
                "--players agents",
                "--budget 50",
                "--target-width 0.01",
                "--budget-calls 5",
            ],
            "--method contrastive runs no Shapley",
        ),
        # Set explicitly, even at its default value: the user asked for something not done.
        (["--adaptive", "--samples", "32"], ["--samples 32"], "--adaptive"),
    ],
)
def test_an_option_the_mode_ignores_is_a_usage_error(
    run_cli: RunCli, args: list[str], named: list[str], why: str
) -> None:
    line = _one_line_usage_error(run_cli("blame", AND, *args, "--no-store"))
    assert "would be ignored" in line
    assert why in line
    for option in named:
        assert option in line


@pytest.mark.parametrize(
    "args",
    [
        ["--method", "auto", "--budget", "50", "--target-width", "0.2"],  # auto may run Shapley
        ["--method", "shapley", "--budget", "50", "--budget-calls", "500", "--players", "agents"],
        ["--adaptive", "--budget", "50", "--target-width", "0.2", "--confidence", "0.9"],
        ["--adaptive", "--method", "contrastive"],  # what --adaptive does
        ["--samples", "8", "--level", "0.9", "--method", "contrastive"],
    ],
)
def test_options_the_mode_uses_are_accepted(run_cli: RunCli, args: list[str]) -> None:
    r = run_cli("blame", AND, *args, "--no-store", "--dry-run")
    assert r.code == 0, r.err


def test_project_defaults_in_the_configuration_are_not_refused_by_a_mode_that_ignores_them(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`samples = 64` in car.toml, or CAR_LEVEL in a CI job, sets defaults for every mode: an
    adaptive run must not make the user delete them; the same on the command line is refused."""
    (tmp_path / "car.toml").write_text("samples = 64\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAR_LEVEL", "0.9")
    assert run_cli("blame", AND, "--adaptive", "--no-store", "--dry-run").code == 0
    assert run_cli("blame", AND, "--no-store", "--dry-run").code == 0
    line = _one_line_usage_error(run_cli("blame", AND, "--adaptive", "--samples", "64", "--no-store"))
    assert "--samples 64" in line and "would be ignored" in line


def test_batch_options_refuse_what_the_mode_ignores() -> None:
    """From Python, a value other than the default is what the user set, named by its keyword, as
    `car.blame` names it (`BatchOptions` named the command line's `--adaptive` and `--samples 64`)."""
    messages: dict[str, dict[str, Any]] = {
        "adaptive=True samples until certified (within budget=), so samples=64 would be ignored; "
        "drop it, or drop adaptive=True": {"adaptive": True, "samples": 64},
        "without adaptive=True the intervals are at level=, so confidence=0.99 would be ignored; "
        "drop it, or add adaptive=True": {"confidence": 0.99},
        "method=contrastive runs no Shapley, so budget=50 would be ignored; drop it, or use "
        "method=auto or shapley": {"method": "contrastive", "budget": 50},
    }
    for message, options in messages.items():
        with pytest.raises(InputError) as info:
            BatchOptions(**options)
        assert str(info.value) == message
    BatchOptions(method="shapley", budget=50, target_width=0.1)
    BatchOptions(adaptive=True, budget=50, target_width=0.1, confidence=0.9)


# -- adaptive wording ---------------------------------------------------------------------------
def _adaptive_and(run_cli: RunCli, fmt: str) -> str:
    args = ("--adaptive", "--target-width", "0.1", "--min-effect", "0.05", "--no-store")
    r = run_cli("blame", AND, *args, "--format", fmt)
    assert r.code == 0, r.err
    return r.out


def test_adaptive_headline_says_which_later_steps_are_undecided(run_cli: RunCli) -> None:
    """Step 2 stopped open with an effect interval up to 18%: 'no step is shown to remove more
    than 5%' read as if that were settled."""
    report = Report.model_validate(json.loads(_adaptive_and(run_cli, "json")))
    assert report.adaptive is not None and report.locus == 1
    assert report.adaptive.open_steps == [2]
    high = report.steps[2].effect
    assert high is not None and high.high is not None and high.high > report.min_effect
    assert "no step is shown" not in report.headline
    assert "step 2 is still undecided" in report.headline
    # the bound that keeps it open (adjusted over the steps), never below the displayed one
    upper = report.adaptive.open_upper
    assert upper is not None and upper >= high.high
    assert f"up to {upper:.0%} at the level that decides" in report.headline


def test_adaptive_budget_line_gives_the_samples_each_step_got(run_cli: RunCli) -> None:
    """It said '8 samples per step', the fewest, as if every step had had 8."""
    from car.html import render_html

    report = Report.model_validate(json.loads(_adaptive_and(run_cli, "json")))
    ns = [s.rescue.n for s in report.steps if s.decision and s.rescue is not None]
    assert min(ns) < max(ns)  # steps closed early got fewer
    said = f"{min(ns)} to {max(ns)} samples per step"
    assert said in " ".join(_adaptive_and(run_cli, "table").split())
    assert said in render_html(report)


def test_target_width_is_a_half_width_everywhere(run_cli: RunCli) -> None:
    """The code stops on (high - low) / 2 <= W; the guide said 'at most W wide'."""
    report = Report.model_validate(json.loads(_adaptive_and(run_cli, "json")))
    assert report.adaptive is not None and report.adaptive.stopped == "target-width"
    open_effects = [report.steps[i].effect for i in report.adaptive.open_steps]
    widths = [e.high - e.low for e in open_effects if e and e.high is not None and e.low is not None]
    assert widths and all(w / 2 <= 0.1 for w in widths) and max(widths) > 0.1
    guide = (ROOT / "docs" / "validation.md").read_text(encoding="utf-8")
    (line,) = [x for x in guide.splitlines() if x.startswith("- `--target-width W`")]
    assert "half-width" in line and "wide" not in line
    help_text = " ".join(run_cli("blame", "--help").out.split())
    assert "at most this half-width" in help_text
