"""An interrupted `car blame` (Ctrl-C, or SIGTERM at a CI job's timeout) writes what finished to
every output it was asked for, marks the other traces as interrupted, and says in one line where
the reports went and whether a rerun resumes."""

from __future__ import annotations

import json
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from car.store import RolloutStore
from tests.conftest import Result, interrupt_after
from tests.test_batch_inputs import PIVOT, TRACES

# The policy of one trace never answers: that trace cannot finish before the signal, whenever it
# comes; the other trace runs as usual.
STUCK_POLICY = """
import asyncio
from car.sim import make

class Stuck:
    spec = "stuck-sim"
    async def act(self, decision, key):
        await asyncio.Event().wait()

def policy(trace):
    if trace.id == "support-refund-0":
        return Stuck()
    return make("policy", trace.replay.policy.split(":", 1)[1], trace, trace.replay.policy)
"""


def _batch(tmp_path: Path) -> Path:
    (tmp_path / "stuck.py").write_text(STUCK_POLICY)
    traces = tmp_path / "traces"
    traces.mkdir()
    shutil.copy(PIVOT, traces / "a-pivot.json")
    shutil.copy(TRACES / "support-refund.json", traces / "b-refund.json")
    return traces


BATCH = ["--policy", "stuck.py@policy", "--samples", "4", "--match-samples", "2"]


@pytest.mark.parametrize(
    ("how", "code", "word"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")]
)
def test_an_interrupted_batch_writes_the_finished_reports_to_every_output(
    tmp_path: Path,
    run_cli: Callable[..., Result],
    how: signal.Signals,
    code: int,
    word: str,
) -> None:
    _batch(tmp_path)
    outputs = ["--format", "json", "-o", "out.json", "--report", "junit=car.xml"]
    outputs += ["--report", "jsonl=car.jsonl", "--report", "markdown=car.md"]
    argv = ["blame", "traces", *BATCH, "--store", "s.sqlite", *outputs]
    rc, err = interrupt_after(argv, tmp_path, "car: [1/2]", how)
    assert rc == code
    assert err[1].startswith("car: [1/2] traces/a-pivot.json: ok: step ")
    with RolloutStore(tmp_path / "s.sqlite") as store:
        stored = store.count()
    assert err[2:] == [
        f"car: {word}; the 1 finished trace's report is in out.json, car.xml, car.jsonl and car.md; "
        f"rerun the same command to resume from s.sqlite ({stored:,} rollouts and draws stored)"
    ]

    # The batch JSON a whole run writes: the finished trace's report, the other marked.
    batch = json.loads((tmp_path / "out.json").read_text())
    assert batch["version"] == "car.batch/v1"
    assert batch["counts"] == {"ok": 1, "interrupted": 1}
    done, stopped = batch["records"]
    assert (done["trace"], done["status"]) == ("traces/a-pivot.json", "ok")
    assert (stopped["trace"], stopped["status"], stopped["report"]) == (
        "traces/b-refund.json",
        "interrupted",
        None,
    )
    assert stopped["error"] == "not attributed: the run was interrupted before this trace finished"
    assert stopped["rollouts"] == {"fresh": None, "stored": None}  # they are in the store: not counted
    # ...the report the store keeps, the same...
    got = run_cli("report", tmp_path / "s.sqlite", "--format", "json")
    assert got.code == 0 and json.loads(got.out) == done["report"]
    # ...a record for each trace in the stream, as a whole run streams...
    streamed = [json.loads(line) for line in (tmp_path / "car.jsonl").read_text().splitlines()]
    assert [(r["trace"], r["status"]) for r in streamed] == [
        ("traces/a-pivot.json", "ok"),
        ("traces/b-refund.json", "interrupted"),
    ]
    # ...the unfinished trace skipped in JUnit...
    junit = (tmp_path / "car.xml").read_text()
    assert 'skipped="1"' in junit and "<skipped message=" in junit
    assert "interrupted" in (tmp_path / "car.md").read_text()
    # ...and `car report` reads each back: the trace not attributed exits 1, as a skipped one does.
    for name in ("out.json", "car.jsonl"):
        got = run_cli("report", tmp_path / name)
        assert (got.code, got.err) == (1, "car: 2 traces: 1 interrupted, 1 ok\n")


def test_without_a_store_the_line_says_a_rerun_starts_over(tmp_path: Path) -> None:
    _batch(tmp_path)
    argv = ["blame", "traces", *BATCH, "--no-store", "-o", "out.md"]
    rc, err = interrupt_after(argv, tmp_path, "car: [1/2]", signal.SIGINT)
    assert rc == 130
    assert err[2:] == [
        "car: interrupted; the 1 finished trace's report is in out.md; "
        "nothing was stored (--no-store): a rerun starts over"
    ]
    assert "| traces/b-refund.json | - |" in (tmp_path / "out.md").read_text()


@pytest.mark.parametrize("store", ["--store", "--no-store"])
def test_an_interrupted_trace_says_whether_a_rerun_resumes(tmp_path: Path, store: str) -> None:
    """`car: interrupted` said neither that --no-store had lost the rollouts nor that a rerun
    resumes from the store."""
    (tmp_path / "stuck.py").write_text(STUCK_POLICY)
    shutil.copy(TRACES / "support-refund.json", tmp_path / "refund.json")
    kept = ["--store", "s.sqlite"] if store == "--store" else ["--no-store"]
    argv = ["blame", "refund.json", "--policy", "stuck.py@policy", *kept, "-o", "out.json"]
    rc, err = interrupt_after(argv, tmp_path, "car: refund.json: contrastive arms: ", signal.SIGINT)
    assert rc == 130
    if store == "--store":
        with RolloutStore(tmp_path / "s.sqlite") as s:
            stored = s.count()  # the record's scoring, if it was done before the signal
        what = "rollout or draw" if stored == 1 else "rollouts and draws"
        resume = f"rerun the same command to resume from s.sqlite ({stored} {what} stored)"
    else:
        resume = "nothing was stored (--no-store): a rerun starts over"
    assert err[1:] == [f"car: interrupted; {resume}"]
    assert not (tmp_path / "out.json").exists()  # one trace, no report: nothing to write
