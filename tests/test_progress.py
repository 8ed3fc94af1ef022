"""Batch progress on stderr: the live display on a terminal and the heartbeat lines for logs."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from car.batch import BatchOptions, blame_many
from car.progress import HeartbeatProgress, PhaseProgress, RichBatchProgress

TRACES = Path(__file__).resolve().parent.parent / "traces"
OPTS = BatchOptions(samples=4, match_samples=0, method="contrastive")
PATHS = [TRACES / "pivot.json", TRACES / "support-refund.json", TRACES / "missing.json"]


def test_live_display_prints_a_line_per_trace_and_clears_its_bars() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120, color_system=None)
    display = RichBatchProgress(console, total_traces=2)
    with display:
        results = blame_many(PATHS[:2], options=OPTS, progress=display)
    assert [r.status for r in results] == ["ok", "ok"]
    text = out.getvalue()
    assert "ok " + str(PATHS[0]) + ": step 1 (agent); 9 rollouts (0 stored)" in text
    assert "ok " + str(PATHS[1]) + ": " in text
    assert display.done == 2 and not display.tasks  # every per-trace bar was removed


def test_heartbeat_lines_count_traces_and_rollouts() -> None:
    out = io.StringIO()
    progress = HeartbeatProgress(out, total_traces=3, interval=0.0)  # a heartbeat at every advance
    results = blame_many(PATHS, options=OPTS, progress=progress)
    assert sorted(r.status for r in results) == ["input-error", "ok", "ok"]
    lines = out.getvalue().splitlines()
    finished = [line for line in lines if line.startswith("car: [") and "/3]" in line]
    assert len(finished) == 3
    assert any("missing.json: input-error" in line for line in finished)
    beats = [line for line in lines if "in flight" in line]
    assert beats and all("of their rollouts and draws done" in line for line in beats)


def test_a_heartbeat_never_counts_back_when_a_trace_starts_its_next_phase() -> None:
    """Each phase counts from 0: the line summed the current phase's counts alone, so a trace going
    from its contrastive arms to its match draws or Shapley took its figure back ("366/1072" then
    "295/982")."""
    out = io.StringIO()
    beat = HeartbeatProgress(out, total_traces=1, interval=0.0)
    beat.trace_started("a.json", 200)
    beat.trace_advanced("a.json", "contrastive", 0, 100)
    beat.trace_advanced("a.json", "contrastive", 75, 100)
    beat.trace_advanced("a.json", "match draws", 0, 20)  # the arms are done
    beat.trace_advanced("a.json", "match draws", 10, 20)
    assert [line.split(", ")[1] for line in out.getvalue().splitlines()] == [
        "0/100 of their rollouts and draws done",
        "75/100 of their rollouts and draws done",
        "100/120 of their rollouts and draws done",
        "110/120 of their rollouts and draws done",
    ]


def test_a_trace_whose_backend_failed_says_so_and_why(tmp_path: Path) -> None:
    """The line said "backend-error: no decisive step", as if car had looked and found none."""
    from car.outputs import summary_rows

    reason = "connection refused " + "x" * 400  # a server may send a whole page back
    (tmp_path / "down.py").write_text(
        "class Down:\n"
        "    spec = 'down'\n"
        "    async def act(self, decision, key):\n"
        f"        raise ConnectionError({reason!r})\n"
        "def policy(trace):\n"
        "    return Down()\n"
    )
    out = io.StringIO()
    opts = BatchOptions(samples=4, match_samples=0, policy=f"{tmp_path / 'down.py'}@policy")
    (result,) = blame_many(PATHS[:1], options=opts, progress=HeartbeatProgress(out, 1))
    assert result.status == "backend-error" and result.report is not None  # the partial report is kept
    (line,) = out.getvalue().splitlines()
    assert line.startswith(f"car: [1/1] {PATHS[0]}: backend-error: too many rollouts errored")
    assert "first: step 0: ConnectionError: connection refused xxx" in line  # where, then what
    assert "no decisive step" not in line
    assert line.endswith(f"{'x' * 400}; 13 rollouts (0 stored)")  # the error whole, never cut
    (row,) = summary_rows([result])
    assert row["outcome"] == "error" and row["credit"] == result.error  # not "abstained" and "-"


def test_records_streamed_to_the_terminal_are_not_drawn_over_by_the_live_bars(tmp_path: Path) -> None:
    """`car blame DIR --format jsonl` in a terminal: each record was written straight after a bar
    (`0:00:00{"version": ...`) and its end erased when the bars were redrawn over it."""
    folder = tmp_path / "runs"
    folder.mkdir()
    for name in ("pivot.json", "or.json"):
        (folder / name).write_bytes((TRACES / name).read_bytes())
    main, side = pty.openpty()
    argv = [sys.executable, "-m", "car", "blame", str(folder), "--samples", "4", "--no-store"]
    with subprocess.Popen(
        [*argv, "--format", "jsonl"], stdin=side, stdout=side, stderr=side, cwd=tmp_path
    ) as proc:
        os.close(side)
        seen = b""
        while chunk := _read(main):
            seen += chunk
        assert proc.wait() == 0
    os.close(main)
    lines = seen.decode().splitlines()
    records = [json.loads(line) for line in lines if "car.record/v1" in line]
    assert sorted(r["trace_id"] for r in records) == ["or-0", "pivot-0"]
    assert "\x1b[1A" not in seen.decode()  # no cursor drawn back up over what was written


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # the other side closed: Linux says EIO
        return b""


def test_one_trace_in_a_log_says_each_phase_as_it_starts_and_each_quarter_of_it(
    tmp_path: Path,
) -> None:
    """With stderr not a terminal a long single trace said nothing until its report: a CI log showed
    no sign of life. The lines depend on the run only, never on timing; -q leaves none."""
    trace = str(TRACES / "research-team.json")
    argv = [sys.executable, "-m", "car", "blame", trace, "--budget", "400", "--no-store"]
    run = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, check=True)
    phases = [
        ("match draws", "40 draws planned", "40 draws"),
        ("contrastive arms", "161 rollouts planned", "161 rollouts"),
        ("Shapley", "up to 400 rollouts", "400 rollouts"),
    ]
    assert run.stderr.splitlines() == [
        *(
            f"car: {trace}: {line}"
            for title, planned, of in phases
            for line in [f"{title}: {planned}", *(f"{title}: {q}% of {of} done" for q in (25, 50, 75))]
        ),
        f"car: {trace}: Shapley: done, 394 of 400 rollouts; budget reached",
    ]
    assert run.stdout.startswith("car blame: research-team-0")
    quiet = subprocess.run([*argv, "-q"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert quiet.stderr == "" and quiet.stdout == run.stdout


def test_a_log_says_how_a_budgeted_phase_ended_when_it_stops_early(tmp_path: Path) -> None:
    """An adaptive run that certified before a quarter of its budget logged its start line and
    nothing else, as did a Shapley run stopped by its target width: the log never said how it
    ended, nor after how many rollouts."""
    refund, and_ = str(TRACES / "support-refund.json"), str(TRACES / "and.json")
    base = [sys.executable, "-m", "car", "blame", "--no-store"]
    adaptive = [*base, refund, "--adaptive", "--budget", "2000"]
    run = subprocess.run(adaptive, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert run.stderr.splitlines() == [
        f"car: {refund}: adaptive sampling: up to 2,000 rollouts",
        f"car: {refund}: adaptive sampling: done, 99 of 2,000 rollouts; certified at 95%",
    ]
    spent = [*base, and_, "--adaptive", "--budget", "60"]
    run = subprocess.run(spent, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert run.stderr.splitlines()[-1] == (
        f"car: {and_}: adaptive sampling: done, 60 of 60 rollouts; not certified: budget reached"
    )
    shapley = [*base, and_, "--budget", "4000", "--target-width", "0.1"]
    run = subprocess.run(shapley, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert run.stderr.splitlines()[-2:] == [
        f"car: {and_}: Shapley: up to 4,000 rollouts",
        f"car: {and_}: Shapley: done, 230 of 4,000 rollouts; target half-width 0.1 met",
    ]


class _Actor:
    """A `_Ticks` actor's handle whose `put.remote` hands the report straight to a display."""

    def __init__(self, display: PhaseProgress) -> None:
        self.put = self
        self.display = display
        self.calls = 0

    def remote(self, label: str, phase: str, done: int, total: int) -> None:
        self.calls += 1
        self.display.trace_advanced(label, phase, done, total)


def test_what_a_ray_task_relays_prints_the_lines_every_report_prints() -> None:
    """A Ray task sends each phase's start and the first report of each hundredth of it, not one
    per rollout: the lines are the same, for any number of rollouts."""
    from car.executors.ray import _Relay

    every, relayed = io.StringIO(), io.StringIO()
    local = PhaseProgress(every)
    for total in range(410):
        actor = _Actor(PhaseProgress(relayed))
        relay = _Relay(actor)
        for phase in ("contrastive", "match draws"):
            for done in range(total + 1):
                local.trace_advanced(f"{total}.json", phase, done, total)
                relay.trace_advanced(f"{total}.json", phase, done, total)
        assert actor.calls <= 2 * 101
    assert relayed.getvalue() == every.getvalue()
    assert "409.json: match draws: 75% of 409 draws done" in every.getvalue()


def test_match_draws_an_interrupt_cancels_are_not_counted_as_done() -> None:
    """A draw cancelled while its policy call waited ticked the phase's progress on its way out, so
    a log said `match draws: 25% of 32 draws done` after Ctrl-C, of draws that never answered."""
    import asyncio

    from car.attribution import match_draws, prepare

    class Stuck:
        spec = "stuck"
        waiting = 0

        async def act(self, decision: object, key: object) -> object:
            self.waiting += 1
            await asyncio.Event().wait()

    async def cancelled() -> int:
        ticks = 0
        policy = Stuck()

        def tick() -> None:
            nonlocal ticks
            ticks += 1

        trace = TRACES / "support-refund.json"
        *_, replay = prepare(trace, policy, "sim:support-refund", "sim:support-refund", seed=0)  # type: ignore[arg-type]
        drawing = asyncio.ensure_future(match_draws(replay, 8, 8, tick))
        while policy.waiting < 8:  # as many draws as may run at once, each waiting on its call
            await asyncio.sleep(0)
        drawing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await drawing
        return ticks

    assert asyncio.run(cancelled()) == 0
