"""How attribution stops short: a scorer that says the record did not fail (before any policy call),
an `on_result` callback that raises (the batch ends cleanly), a blocking call inside a running event
loop (the error says what to await)."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import car
from car.batch import BatchOptions, TraceResult, blame_many
from tests.conftest import Result
from tests.test_batch_inputs import PIVOT, TRACES, _run, _traces


# -- a scorer that says the record did not fail -----------------------------------------------
def test_a_scorer_that_says_the_record_did_not_fail_stops_before_any_policy_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    monkeypatch.chdir(tmp_path)
    refund = str(TRACES / "support-refund.json")
    argv = ["blame", refund, "--scorer", "regex:ZZZNOMATCH", "--no-store", "--format", "jsonl"]
    code, out, err = _run(run_cli, argv)
    assert code == 2
    assert err.splitlines() == [
        f"car: error: {refund}: the scorer 'regex:ZZZNOMATCH' says the recorded run did not fail "
        "(value 0): there is no failure to attribute; check the scorer"
    ]
    (record,) = map(json.loads, out.splitlines())
    assert record["status"] == "input-error"
    assert record["report"]["budget"]["rollouts"] == 1  # the record, scored
    assert record["report"]["budget"]["policy_calls"] == 0
    # the library returns the report that says so, at the same cost
    report = car.blame(refund, scorer="regex:ZZZNOMATCH")
    assert "did not fail" in (report.abstained_reason or "")
    assert (report.budget.rollouts, report.budget.policy_calls) == (1, 0)
    assert report.match_rate.n == 0


def test_in_a_batch_the_trace_whose_scorer_says_no_failure_is_an_input_error(
    tmp_path: Path,
) -> None:
    doc = json.loads(PIVOT.read_text())
    doc["replay"]["scorer"] = "regex:ZZZNOMATCH"
    (tmp_path / "wrong.json").write_text(json.dumps(doc))
    shutil.copy(PIVOT, tmp_path / "right.json")
    results = blame_many([tmp_path], options=BatchOptions(samples=2, match_samples=2))
    assert [(Path(r.path).name, r.status) for r in results] == [
        ("right.json", "ok"),
        ("wrong.json", "input-error"),
    ]
    wrong = results[1]
    assert wrong.error is not None and "the scorer 'regex:ZZZNOMATCH' says" in wrong.error
    assert wrong.report is not None and wrong.report.budget.policy_calls == 0  # kept, not lost


# -- a callback that raises ------------------------------------------------------------------
class CallbackFailed(Exception):
    pass


def test_an_on_result_that_raises_stops_the_batch_cleanly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _traces(tmp_path, "a.json", "b.json", "c.json", "d.json")
    seen: list[str] = []

    def on_result(result: TraceResult) -> None:
        seen.append(result.path)
        raise CallbackFailed(result.path)

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        with pytest.raises(CallbackFailed):
            blame_many([tmp_path], options=BatchOptions(samples=2, match_samples=0), on_result=on_result)
        gc.collect()
    assert len(seen) == 1  # the other traces were cancelled, not left running
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


# -- inside a running event loop -----------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "hint"),
    [
        (lambda: car.blame(str(PIVOT)), "await car.blame_async("),
        (lambda: car.blame_many([str(PIVOT)]), "await car.blame_many_async("),
    ],
)
def test_a_blocking_call_inside_an_event_loop_says_to_await(call: Any, hint: str) -> None:
    async def notebook_cell() -> None:
        call()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match=r"running event loop") as info:
            asyncio.run(notebook_cell())
        gc.collect()
    assert hint in str(info.value)
    assert not [w for w in caught if "never awaited" in str(w.message)]


def test_adaptive_sampling_also_stops_before_any_policy_call_when_the_record_did_not_fail() -> None:
    from car.adaptive import blame_adaptive_async

    report = asyncio.run(blame_adaptive_async(str(PIVOT), scorer="regex:ZZZNOMATCH", budget=50))
    assert report.adaptive is not None and report.adaptive.stopped == "nothing-to-attribute"
    assert (report.budget.rollouts, report.budget.policy_calls) == (1, 0)
