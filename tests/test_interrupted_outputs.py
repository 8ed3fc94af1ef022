"""An interrupted `car blame` (Ctrl-C, or SIGTERM at a CI job's timeout) writes what finished to
every output it was asked for, marks the other traces as interrupted, and says in one line where
the reports went and whether a rerun resumes."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from car.batch import (
    INTERRUPTED_RUNNING,
    INTERRUPTED_WAITING,
    BatchOptions,
    TraceResult,
    blame_many_async,
)
from car.store import RolloutStore
from car.trace import load_trace
from tests.conftest import ROOT, Result, interrupt_after
from tests.fixtures.halting import Halting
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


# The stuck trace's first phase (its 8 match draws) must leave the other trace room to run.
BATCH = ["--policy", "stuck.py@policy", "--samples", "4", "--match-samples", "2", "--concurrency", "12"]


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
    # What it ran: the record scored, if that was done before the signal (its policy never answers).
    with RolloutStore(tmp_path / "s.sqlite") as store:
        ran = len(store.rows_for(load_trace(TRACES / "support-refund.json").content_hash()))
    assert stopped["rollouts"] == {"fresh": ran, "stored": 0}
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


# As STUCK_POLICY, but the signal comes again as the stuck trace is cancelled: a second Ctrl-C (or
# SIGTERM) while the run stops.
AGAIN_POLICY = STUCK_POLICY.replace(
    "        await asyncio.Event().wait()\n",
    "        try:\n"
    "            await asyncio.Event().wait()\n"
    "        except asyncio.CancelledError:\n"
    "            import os\n"
    "            os.kill(os.getpid(), SIGNAL)\n"
    "            raise\n",
)


@pytest.mark.parametrize(
    ("how", "code", "word"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")]
)
def test_a_signal_that_comes_again_while_the_run_stops_stops_it_as_one_does(
    tmp_path: Path, how: signal.Signals, code: int, word: str
) -> None:
    """asyncio's handler raised the second Ctrl-C wherever the loop stood: tasks cut off half-way
    were reported on stderr ("Task was destroyed but it is pending!"), the trace that was running
    was said never to have started, and a task whose wake-up it lost could make the run wait
    forever as it shut down."""
    _batch(tmp_path)
    (tmp_path / "stuck.py").write_text(AGAIN_POLICY.replace("SIGNAL", str(int(how))))
    argv = ["blame", "traces", *BATCH, "--store", "s.sqlite", "--format", "json", "-o", "out.json"]
    rc, err = interrupt_after(argv, tmp_path, "car: [1/2]", how)
    assert rc == code
    assert len(err) == 3 and err[2].startswith(
        f"car: {word}; the 1 finished trace's report is in out.json; rerun the same command"
    ), err
    stopped = json.loads((tmp_path / "out.json").read_text())["records"][1]
    assert (stopped["status"], stopped["error"]) == ("interrupted", INTERRUPTED_RUNNING)


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
    resumes from the store, nor that the requested out.json got nothing."""
    (tmp_path / "stuck.py").write_text(STUCK_POLICY)
    shutil.copy(TRACES / "support-refund.json", tmp_path / "refund.json")
    kept = ["--store", "s.sqlite"] if store == "--store" else ["--no-store"]
    argv = ["blame", "refund.json", "--policy", "stuck.py@policy", *kept, "-o", "out.json"]
    rc, err = interrupt_after(argv, tmp_path, "car: refund.json: match draws: ", signal.SIGINT)
    assert rc == 130
    if store == "--store":
        with RolloutStore(tmp_path / "s.sqlite") as s:
            stored = s.count()  # the record's scoring, if it was done before the signal
        what = "rollout or draw" if stored == 1 else "rollouts and draws"
        resume = f"rerun the same command to resume from s.sqlite ({stored} {what} stored)"
    else:
        resume = "nothing was stored (--no-store): a rerun starts over"
    # One trace, no report: nothing to write, and the line says so (it named no output at all).
    assert err[1:] == [
        f"car: interrupted; the trace did not finish, so nothing was written to out.json; {resume}"
    ]
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT])
def test_a_simulated_agent_s_run_stops_at_the_signal_not_at_the_end_of_its_phase(
    tmp_path: Path, how: signal.Signals
) -> None:
    """A rollout of a simulated agent never waits, so its jobs never handed the event loop back:
    SIGTERM (a CI job's timeout) or Ctrl-C, which cancel the run through the loop, waited for the
    rest of the phase (hours, for a long trace and many samples)."""
    from car.sim import record

    (tmp_path / "long.json").write_text(record("long", n=200).model_dump_json(), encoding="utf-8")
    argv = ["blame", "long.json", "--samples", "500", "--no-store"]
    rc, err = interrupt_after(argv, tmp_path, "car: long.json: contrastive arms: 25% of", how)
    assert rc == (143 if how == signal.SIGTERM else 130)
    assert not any("arms: 75% of" in line or "Shapley" in line for line in err), err
    assert err[-1].startswith("car: terminated;" if how == signal.SIGTERM else "car: interrupted;")


# -- what an interrupted trace ran ----------------------------------------------------------------
HALTING = f"{ROOT / 'tests' / 'fixtures' / 'halting.py'}@policy"  # answers the calls in ./answers
HALTED = ["--concurrency", "1", "--samples", "4", "--match-samples", "2", "--store", "s.sqlite"]


def _rollouts_stored(path: Path) -> int:
    with RolloutStore(path) as store:
        return store.count(kind="run") + store.count(kind="fork")


def test_a_cancelled_batch_hands_on_each_running_trace_with_what_it_ran(tmp_path: Path) -> None:
    """An interrupted trace had no counts, though it had run rollouts (stored: a rerun resumes from
    them) and used tokens. One rollout at a time: when the policy halts, every other has finished."""
    cut: list[TraceResult] = []

    async def interrupted() -> None:
        halted = asyncio.Event()
        policy = Halting(load_trace(PIVOT), 7, halted.set)
        options = BatchOptions(policy=policy, samples=4, match_samples=2)
        with RolloutStore(tmp_path / "s.sqlite") as store:
            batch = asyncio.ensure_future(
                blame_many_async(
                    PIVOT, options=options, store=store, concurrency=1, on_interrupted=cut.append
                )
            )
            await halted.wait()
            batch.cancel()
            with pytest.raises(asyncio.CancelledError):
                await batch

    asyncio.run(interrupted())
    (res,) = cut
    assert (res.status, res.report, res.error) == ("interrupted", None, INTERRUPTED_RUNNING)
    assert res.usage == {"input_tokens": 7000}  # the 7 calls answered
    assert res.fresh_rollouts == _rollouts_stored(tmp_path / "s.sqlite") > 0
    assert res.stored_rollouts == 0
    assert 0 < res.fresh_policy_calls <= 7  # those of the rollouts that finished


class CallbackFailed(Exception):
    pass


def test_a_batch_that_stops_itself_hands_on_no_interrupted_trace(tmp_path: Path) -> None:
    """A callback that raises stops the batch and cancels the trace still running: that is not an
    interrupt, and the exception says why; the trace is not handed on as interrupted."""
    traces = _batch(tmp_path)  # b-refund never finishes; a-pivot does, and its callback raises
    options = BatchOptions(policy=f"{tmp_path / 'stuck.py'}@policy", samples=2, match_samples=0)
    handed: list[TraceResult] = []

    def on_result(result: TraceResult) -> None:
        raise CallbackFailed(result.path)

    with pytest.raises(CallbackFailed):
        asyncio.run(
            blame_many_async(traces, options=options, on_result=on_result, on_interrupted=handed.append)
        )
    assert handed == []


def test_an_interrupted_trace_s_record_says_what_it_ran_and_a_rerun_resumes_from_it(
    tmp_path: Path, run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(PIVOT, tmp_path / "pivot.json")
    (tmp_path / "answers").write_text("13")  # the 6 match draws', then the rollouts' calls
    reports = ["--report", "markdown=car.md", "--report", "junit=car.xml"]
    argv = ["blame", "pivot.json", "--policy", HALTING, *HALTED, "-o", "out.jsonl", *reports]
    rc, _ = interrupt_after(argv, tmp_path, "policy: halted", signal.SIGINT)
    assert rc == 130
    (record,) = map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())
    assert (record["status"], record["error"]) == ("interrupted", INTERRUPTED_RUNNING)
    ran = _rollouts_stored(tmp_path / "s.sqlite")
    assert ran > 0
    assert record["rollouts"] == {"fresh": ran, "stored": 0}
    assert record["usage"] == {"input_tokens": 13000}
    said = f"{ran} rollouts ran"
    assert f"**interrupted**: {INTERRUPTED_RUNNING}; {said} first" in (tmp_path / "car.md").read_text()
    assert f"<system-out>{said} before the interrupt</system-out>" in (tmp_path / "car.xml").read_text()

    (tmp_path / "answers").unlink()
    monkeypatch.chdir(tmp_path)
    got = run_cli("blame", "pivot.json", "--policy", HALTING, *HALTED, "-o", "again.jsonl")
    assert got.code == 0, got.err
    (again,) = map(json.loads, (tmp_path / "again.jsonl").read_text().splitlines())
    assert again["rollouts"]["stored"] == ran  # the rollouts the record counted, and no other


def test_a_trace_an_interrupt_stopped_before_it_started_ran_nothing(tmp_path: Path) -> None:
    """Four traces run at once and none finishes: the fifth never starts. Its record said
    "before this trace finished" with no counts, as if it might have run rollouts."""
    traces = tmp_path / "traces"
    traces.mkdir()
    for name in "abcde":
        shutil.copy(PIVOT, traces / f"{name}.json")
    (tmp_path / "answers").write_text("0")
    argv = ["blame", "traces", "--policy", HALTING, "--no-store", "-o", "out.json"]
    argv += ["--report", "markdown=car.md"]
    rc, _ = interrupt_after(argv, tmp_path, "policy: halted", signal.SIGINT)
    assert rc == 130
    last = json.loads((tmp_path / "out.json").read_text())["records"][-1]
    assert (last["trace"], last["status"]) == ("traces/e.json", "interrupted")
    assert last["error"] == INTERRUPTED_WAITING
    assert (last["rollouts"], last["usage"]) == ({"fresh": 0, "stored": 0}, {})
    row = f"| traces/e.json | - | {INTERRUPTED_WAITING} | - | - | interrupted | 0 (0 stored) |"
    assert row in (tmp_path / "car.md").read_text().splitlines()
