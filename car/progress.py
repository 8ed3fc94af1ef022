"""Progress on stderr: a live display on a terminal; plain lines otherwise, a heartbeat for a batch
and a line per phase for one trace.

stdout is never touched: it carries the report only.
"""

from __future__ import annotations

import time
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from car.batch import TraceResult
from car.outputs import credit_text, error_text, stored_part
from car.render import literal
from car.report import Report, many, percent

__all__ = [
    "HeartbeatProgress",
    "PhaseProgress",
    "RichBatchProgress",
    "finished_line",
    "finished_what",
]


def finished_what(result: TraceResult) -> str:
    """What became of a trace, after its name and status: each thing said once (the path is not
    repeated from the error, the status not as "failed"), and the error whole, on one line."""
    r = result.report
    parts = []
    if result.status in ("input-error", "backend-error") or r is None:
        # (a partial report may come with it: it names no step because the trace failed)
        if result.error:
            parts.append(" ".join(error_text(result).split()))
    else:
        credit = credit_text(r)
        parts.append(credit if credit != "-" else "no decisive step")
    if result.gates:  # the status says "gate" when they are why it is not ok
        parts.append(("" if result.status == "gate" else "gate: ") + "; ".join(result.gates))
    if r is not None:
        parts.append(many(r.budget.rollouts, "rollout") + stored_part(result))
    return "; ".join(parts) or result.status


def finished_line(result: TraceResult) -> str:
    return str(literal(f"{result.label}: {result.status}: {finished_what(result)}"))


class RichBatchProgress:
    """One bar for the batch and one per trace in flight; finished traces print a line above."""

    def __init__(self, console: Console, total_traces: int) -> None:
        self.console = console
        self.bar = Progress(
            TextColumn("{task.description}", markup=False),  # trace labels are never markup
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.overall = self.bar.add_task("traces", total=total_traces)
        self.tasks: dict[str, TaskID] = {}
        self.done = 0

    def __enter__(self) -> RichBatchProgress:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(None, None, None)

    def trace_started(self, label: str, total: int) -> None:
        name = str(literal(label))
        self.tasks[label] = self.bar.add_task(f"  {name[-40:]}", total=total)

    def trace_advanced(self, label: str, phase: str, done: int, total: int) -> None:
        task = self.tasks.get(label)
        if task is not None:
            self.bar.update(task, completed=done, total=total)

    def trace_finished(self, result: TraceResult) -> None:
        task = self.tasks.pop(result.label, None)
        if task is not None:
            self.bar.remove_task(task)
        self.done += 1
        self.bar.update(self.overall, completed=self.done)
        style = "green" if result.status == "ok" else "red"
        line = Text(f"{result.status:>13} ", style=style)
        line.append_text(literal(result.label))
        line.append_text(literal(": " + finished_what(result)))
        self.console.print(line, highlight=False)  # wrapped at the console's width, never cut


class HeartbeatProgress:
    """Plain lines for logs: one per finished trace and a heartbeat every `interval` seconds."""

    def __init__(self, stream: TextIO, total_traces: int, interval: float = 10.0) -> None:
        self.stream = stream
        self.total = total_traces
        self.interval = interval
        self.done = 0
        # label: (done, total) of each phase it has reported ("": its estimate, until the first)
        self.rollouts: dict[str, dict[str, tuple[int, int]]] = {}
        self._last = time.monotonic()

    def __enter__(self) -> HeartbeatProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def _say(self, text: str) -> None:
        self.stream.write(f"car: {text}\n")
        self.stream.flush()
        self._last = time.monotonic()

    def trace_started(self, label: str, total: int) -> None:
        self.rollouts[label] = {"": (0, total)}

    def trace_advanced(self, label: str, phase: str, done: int, total: int) -> None:
        # Phases run one after another, each counted from 0: a phase is done when the next starts,
        # and the counts add up, so the line's figure never goes back when a trace starts Shapley.
        phases = self.rollouts.setdefault(label, {})
        phases.pop("", None)
        for other, (_, planned) in phases.items():
            if other != phase:
                phases[other] = (planned, planned)
        phases[phase] = (done, total)
        if time.monotonic() - self._last >= self.interval:
            counts = [c for p in self.rollouts.values() for c in p.values()]
            done_r = sum(d for d, _ in counts)
            total_r = sum(t for _, t in counts)
            self._say(
                f"[{self.done}/{many(self.total, 'trace')}] {len(self.rollouts)} in flight, "
                f"{done_r}/{total_r} of their rollouts and draws done"
            )

    def trace_finished(self, result: TraceResult) -> None:
        self.rollouts.pop(result.label, None)
        self.done += 1
        self._say(f"[{self.done}/{self.total}] {finished_line(result)}")


# What each phase is called on a line, what it counts, and whether its total is a most (a budget).
_PHASES = {
    "contrastive": ("contrastive arms", "rollouts", False),
    "match draws": ("match draws", "draws", False),
    "record": ("the record, re-scored", "rollouts", False),
    "shapley": ("Shapley", "rollouts", True),
    "adaptive": ("adaptive sampling", "rollouts", True),
}


def phase_end(phase: str, report: Report | None) -> str | None:
    """How a trace's last phase ended, when it has a budget (Shapley, adaptive sampling) and so may
    stop before it: "adaptive sampling: done, 99 of 2,000 rollouts; certified at 95%". A phase with
    a fixed plan ends where the next one starts, or with the report."""
    if report is None:
        return None
    if phase == "adaptive" and report.adaptive is not None:
        ad = report.adaptive
        if ad.certified:
            how = f"certified at {percent(ad.confidence)}"
        elif ad.stopped == "nothing-to-attribute":
            how = "nothing to attribute"
        elif ad.stopped == "target-width" and ad.target_width is not None:
            how = f"not certified: target half-width {ad.target_width:g} met"
        else:
            how = "not certified: budget reached"
        return f"adaptive sampling: done, {ad.rollouts:,} of {ad.budget:,} rollouts; {how}"
    if phase == "shapley" and report.shapley is not None:
        sh = report.shapley
        used = f"{sh.budget.rollouts:,}" + (f" of {sh.budget_limit:,}" if sh.budget_limit else "")
        if sh.budget_reached:
            how = "budget reached"
        elif sh.target_width:
            how = f"target half-width {sh.target_width:g} met"
        else:
            how = "budget not reached"
        return f"Shapley: done, {used} rollouts; {how}"
    return None


class PhaseProgress:
    """Plain lines for one trace in a log: each phase as it starts, with what it plans, and each
    quarter of it done. Nothing in them depends on timing (no clock, no carriage return), so the same
    run logs the same lines."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.said: dict[str, tuple[str, int]] = {}  # label: its phase, the quarters of it said

    def __enter__(self) -> PhaseProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def trace_started(self, label: str, total: int) -> None:
        pass

    def trace_advanced(self, label: str, phase: str, done: int, total: int) -> None:
        if total <= 0:
            return
        title, unit, at_most = _PHASES.get(phase, (phase, "rollouts", False))
        current, quarters = self.said.get(label, ("", 0))
        if current != phase:
            planned = f"up to {total:,} {unit}" if at_most else f"{total:,} {unit} planned"
            self._say(f"{label}: {title}: {planned}")
            quarters = 0
        reached = min(3, 4 * done // total)  # the end shows as the next phase, or the report
        if reached > quarters:
            self._say(f"{label}: {title}: {25 * reached}% of {total:,} {unit} done")
            quarters = reached
        self.said[label] = (phase, quarters)

    def trace_finished(self, result: TraceResult) -> None:
        phase, _ = self.said.pop(result.label, ("", 0))
        end = phase_end(phase, result.report)
        if end is not None:  # a budget may stop early: the log says how, as the report does
            self._say(f"{result.label}: {end}")

    def _say(self, text: str) -> None:
        self.stream.write(f"car: {literal(text)}\n")  # the label is the trace's file name
        self.stream.flush()
