"""`car blame` refuses what it would not do: an adaptive budget too small for a first batch, and
options the chosen mode ignores; the adaptive report says no more than its intervals show."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from car.report import Report
from tests.conftest import TRACES, Result

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
