"""What car says about each trace of a batch: every GitHub annotation names its trace, a progress line
says each thing once and the whole error, and counts agree with their nouns."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from car.batch import BatchOptions, TraceResult, blame_many
from car.outputs import github_annotations, render_output
from car.progress import HeartbeatProgress, RichBatchProgress, finished_line
from car.render import render_table
from car.report import many
from tests.conftest import TRACES

OPTS = BatchOptions(samples=4, match_samples=4, method="contrastive")
# An error as long as the importers' ("... car knows: car, who-and-when, ..."), with the path in front.
ERROR = "line 2 column 1: invalid JSON: Expecting value; not a trace format car recognises; " + (
    "car knows: " + ", ".join(f"format-{i}" for i in range(30)) + " (name one with --from)"
)


@pytest.fixture(scope="module")
def two_alike(tmp_path_factory: pytest.TempPathFactory) -> list[TraceResult]:
    """Two copies of one trace (the same headline) and a file that is not a trace."""
    d = tmp_path_factory.mktemp("alike")
    for name in ("a.json", "b.json"):
        (d / name).write_text((TRACES / "pivot.json").read_text())
    (d / "bad.json").write_text("{")
    return blame_many([str(d / "a.json"), str(d / "b.json"), str(d / "bad.json")], options=OPTS)


def test_every_github_annotation_names_its_trace_once(two_alike: list[TraceResult]) -> None:
    """Two traces gave identical `::warning title=car blames step 1 (agent)::Step 1 ...` lines, and
    an error read `::error ...::PATH: PATH: ...`."""
    a, b, bad = two_alike
    assert bad.status == "input-error" and bad.error is not None and bad.error.startswith(bad.path)
    commands = github_annotations(two_alike)
    (error,) = [c for c in commands if c.startswith("::error ")]
    warnings = [c for c in commands if c.startswith("::warning ")]
    assert len(warnings) == 2 and warnings[0] != warnings[1]
    for res, cmd in zip((a, b), warnings, strict=True):
        assert cmd.startswith(
            f"::warning file={res.path},title=car blames step 1 (agent)::{res.path}: Step 1 "
        )
    assert error.startswith(f"::error file={bad.path},title=car%3A input-error::{bad.path}: line 1 ")
    assert error.count(bad.path) == 2  # the file property and the message, not the message twice
    gate = TraceResult("g.json", "g", "gate", gates=["no decisive step (--fail-on-abstain)"])
    (cmd,) = github_annotations([gate])
    assert (
        cmd
        == "::error file=g.json,title=car%3A gate tripped::g.json: no decisive step (--fail-on-abstain)"
    )


def test_a_failed_trace_is_named_once_in_the_summaries(two_alike: list[TraceResult]) -> None:
    bad = two_alike[2]
    markdown = render_output("markdown", two_alike, batch=True)
    row = next(line for line in markdown.splitlines() if line.startswith("| ") and "bad.json" in line)
    assert row.count("bad.json") == 1, row
    junit = render_output("junit", [bad], batch=True)
    assert 'message="line 1 column 2: invalid JSON' in junit and junit.count(bad.path) == 2  # name, text


def test_progress_says_each_thing_once_and_the_whole_error(two_alike: list[TraceResult]) -> None:
    """`car: [1/7] PATH: input-error: failed: PATH: …` repeated the path and the status and cut the
    error at 160 characters."""
    res = TraceResult("runs/x.json", None, "input-error", error=f"runs/x.json: {ERROR}")
    assert finished_line(res) == f"runs/x.json: input-error: {ERROR}"
    out = io.StringIO()
    progress = HeartbeatProgress(out, total_traces=7)
    progress.trace_finished(res)
    assert out.getvalue() == f"car: [1/7] runs/x.json: input-error: {ERROR}\n"

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80, color_system=None)
    with RichBatchProgress(console, total_traces=1) as live:
        live.trace_finished(res)
    text = out.getvalue()
    assert "…" not in text and "failed:" not in text and text.count("runs/x.json") == 1
    assert f"input-error runs/x.json: {ERROR}" in " ".join(text.split())  # wrapped at 80, whole

    gate = "step 1 (agent) is the locus (--fail-on-blame agent)"
    gated = TraceResult("g.json", None, "gate", two_alike[0].report, gates=[gate])
    assert finished_line(gated) == f"g.json: gate: step 1 (agent); {gate}; 9 rollouts (0 stored)"


def test_counts_agree_with_their_nouns() -> None:
    """ "over 1 draws", "1 rollouts, 1 policy calls", "1 samples per step", "1 more decision steps"."""
    assert [many(1, "trace"), many(2, "trace"), many(0, "trace")] == ["1 trace", "2 traces", "0 traces"]
    assert many(1, "pair of walks", "pairs of walks") == "1 pair of walks"
    report = blame_many([str(TRACES / "pivot.json")], options=OPTS)[0].report
    assert report is not None
    one = report.model_copy(
        update={
            "samples": 1,
            "budget": report.budget.model_copy(update={"rollouts": 1, "policy_calls": 1}),
            "match_rate": report.match_rate.model_copy(update={"n": 1}),
        }
    )
    res = TraceResult("p.json", report.trace_id, "ok", one)
    markdown = render_output("markdown", [res], batch=False)
    assert "over 1 draw; 1 rollout, 1 policy call; seed 0." in markdown
    assert "1 rollout" in render_output("junit", [res], batch=False)
    console = Console(file=io.StringIO(), record=True, width=200)
    render_table(one, console)
    table = console.export_text()
    assert "over 1 draw;" in table and "budget: 1 rollout, 1 policy call;" in table
    assert "1 sample per step" in table


def test_the_estimate_and_notes_count_in_the_singular_too() -> None:
    from car.batch import WorkEstimate

    line = WorkEstimate(traces=1, rollouts=1, match_draws=1, policy_calls=1).line()
    assert line.startswith("estimate: 1 trace, up to 1 rollout, 1 match draw, ~1 policy call (")
