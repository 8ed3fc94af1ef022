"""CI outputs (every format validated), gates and exit codes, batch behaviour."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from car.batch import BatchOptions, TraceResult, blame_many, blame_many_async, expand_paths
from car.cli import main
from car.errors import SpecError
from car.gates import Gates, final_exit_code
from car.outputs import (
    GITHUB_SUMMARY_LIMIT,
    escape_data,
    escape_property,
    fit_bytes,
    github_annotations,
    render_output,
    summary_rows,
    write_github_summary,
    write_step_summary,
)
from car.report import Report
from tests.conftest import METERED, TRACES

PIVOT = str(TRACES / "pivot.json")

DOWN_POLICY = (
    "class Down:\n"
    "    spec = 'down'\n"
    "    async def act(self, decision, key):\n"
    "        raise ConnectionError('connection refused')\n"
    "def policy(trace):\n"
    "    return Down()\n"
)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    (tmp_path / "down.py").write_text(DOWN_POLICY)
    (tmp_path / "broken.json").write_text('{"version": "car.trace/v1", "id": ')
    return tmp_path


FAST = ["--samples", "4", "--match-samples", "4", "--no-store"]


# -- exit codes ----------------------------------------------------------------------------------
def test_exit_0_when_done(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["blame", PIVOT, *FAST, "--format", "json"], capsys)
    assert code == 0
    Report.model_validate_json(out)  # stdout carries the report and nothing else


@pytest.mark.parametrize(
    ("gate", "expected"),
    [
        (["--min-match-rate", "1.0"], 1),
        (["--min-match-rate", "0.0"], 0),
        (["--fail-on-blame", "agent"], 1),
        (["--fail-on-blame", "1"], 1),
        (["--fail-on-blame", "any"], 1),
        (["--fail-on-blame", "2"], 0),
        (["--fail-on-blame", "0"], 0),
        (["--fail-on-abstain"], 0),
    ],
)
def test_gates(work: Path, capsys: pytest.CaptureFixture[str], gate: list[str], expected: int) -> None:
    code, out, err = run(["blame", PIVOT, *FAST, "--format", "json", *gate], capsys)
    assert code == expected, err
    Report.model_validate_json(out)  # the report is written whether or not a gate trips
    if expected:
        assert "car: gate:" in err
        code, _, _ = run(["blame", PIVOT, *FAST, "--format", "json", *gate, "--exit-zero"], capsys)
        assert code == 0


def test_fail_on_abstain_trips_when_car_cannot_name_a_step(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # two samples per step cannot make any effect significant: car abstains
    args = ["blame", PIVOT, "--samples", "2", "--match-samples", "2", "--no-store", "--format", "json"]
    code, out, _ = run(args, capsys)
    assert code == 0 and Report.model_validate_json(out).locus is None
    assert run([*args, "--fail-on-abstain"], capsys)[0] == 1
    assert run([*args, "--fail-on-abstain", "--exit-zero"], capsys)[0] == 0


def test_exit_2_for_input_errors_even_with_exit_zero(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for extra in ([], ["--exit-zero"]):
        code, out, err = run(["blame", "broken.json", *FAST, *extra], capsys)
        assert code == 2 and out == ""
        assert err.startswith("car: error: broken.json: line 1") and "Traceback" not in err
    for bad in (
        ["--shard", "3/2"],
        ["--report", "pdf=x.pdf"],
        ["--price", "tokens"],
        ["--samples", "0"],
    ):
        code, _, err = run(["blame", PIVOT, *FAST, *bad, "--exit-zero"], capsys)
        assert code == 2, bad
        assert err.count("\n") == 1
    code, _, err = run(["blame", "nothing-here/*.json", *FAST], capsys)
    assert code == 2 and "matches no file" in err


def test_exit_3_for_backend_failure_and_report_kept(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["blame", PIVOT, *FAST, "--policy", "down.py@policy", "--format", "json"]
    code, out, err = run(args, capsys)
    assert code == 3
    rep = Report.model_validate_json(out)
    assert rep.status == "backend-errors" and "connection refused" in (rep.first_error or "")
    assert "too many rollouts errored" in err
    assert run([*args, "--exit-zero"], capsys)[0] == 0


def test_counts_line_counts_reports_of_a_trace_analysed_several_ways() -> None:
    from car.outputs import counts_line

    once = [TraceResult(f"t{i}.json", f"t{i}", "ok") for i in range(3)]
    assert counts_line(once) == "3 traces: 3 ok"
    thrice = [TraceResult("t.json", "t", "ok", analysis=f"{i}000000a: seed {i}") for i in range(3)]
    assert counts_line(thrice) == "3 reports of 1 trace: 3 ok"  # was "3 traces: 3 ok"
    assert counts_line([*thrice, replace(once[0], status="gate")]) == (
        "4 reports of 2 traces: 1 gate, 3 ok"
    )


def test_a_stored_backend_failure_rerenders_with_its_reason(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`car report` showed a stored backend-error report as 'error' with credit '-' and no reason
    (and a GitHub annotation ending in 'None')."""
    store = ["--samples", "4", "--match-samples", "4", "--store", "s.db"]
    code, _, err = run(["blame", PIVOT, *store, "--policy", "down.py@policy"], capsys)
    assert code == 3
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"car: error: {PIVOT}: ")  # the trace it hit is named
    reason = line.removeprefix(f"car: error: {PIVOT}: ")
    assert reason.startswith("too many rollouts errored (") and "connection refused" in reason
    assert run(["blame", str(TRACES / "or.json"), *store], capsys)[0] == 0
    code, out, _ = run(["report", "s.db", "--format", "markdown"], capsys)
    assert code == 3  # as car blame exited for it
    assert f"| {PIVOT} | error | {reason} | - | - | backend-error |" in out.replace("\\", ""), out
    code, out, _ = run(["report", "s.db", "--format", "github"], capsys)
    assert code == 3 and f"{PIVOT}: {reason}" in out and "None" not in out


def test_worst_code_wins_in_a_batch() -> None:
    assert final_exit_code([0, 1, 3]) == 3
    assert final_exit_code([0, 3, 2, 1]) == 2
    assert final_exit_code([0, 1]) == 1
    assert final_exit_code([0, 1, 3], exit_zero=True) == 0
    assert final_exit_code([1, 2], exit_zero=True) == 2
    assert final_exit_code([]) == 0


def test_batch_keeps_going_and_prints_counts(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["blame", PIVOT, "broken.json", str(TRACES / "or.json"), *FAST, "--format", "jsonl"]
    code, out, err = run(args, capsys)
    assert code == 2
    records = [json.loads(line) for line in out.splitlines()]
    assert {Path(r["trace"]).name: r["status"] for r in records} == {
        "broken.json": "input-error",
        "pivot.json": "ok",
        "or.json": "ok",
    }
    assert "3 traces: 1 input-error, 2 ok" in err

    fast = ["blame", "broken.json", PIVOT, str(TRACES / "or.json"), *FAST, "--format", "jsonl"]
    code, out, err = run([*fast, "--fail-fast", "--exit-zero"], capsys)
    assert code == 2
    assert [json.loads(line)["status"] for line in out.splitlines()] == ["input-error"]
    assert "stopped early (--fail-fast): 2 traces not attributed" in err


def test_batch_backend_down_is_an_error_record(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "blame",
        PIVOT,
        str(TRACES / "or.json"),
        *FAST,
        "--format",
        "json",
        "--policy",
        "down.py@policy",
    ]
    code, out, _ = run(args, capsys)
    assert code == 3
    body = json.loads(out)
    assert body["version"] == "car.batch/v1" and body["counts"] == {"backend-error": 2}
    assert all(r["report"] is not None for r in body["records"])  # partial results kept


def test_max_rollouts_and_dry_run(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["blame", str(TRACES), *FAST, "--dry-run"], capsys)
    assert code == 0
    assert (
        out.startswith(f"estimate: {len(list(TRACES.glob('*.json')))} traces, ") and out.count("\n") == 1
    )
    n = len(list(TRACES.glob("*.json")))
    assert f"(+ up to {1000 * n} if Shapley runs: shared credit or an abstention)" in out
    # pivot needs 1 + 3 * 4 = 13 rollouts: 20 allows one trace of the two
    args = ["blame", PIVOT, str(TRACES / "and.json"), *FAST, "--max-rollouts", "20", "--format", "jsonl"]
    code, out, _ = run(args, capsys)
    statuses = sorted(json.loads(line)["status"] for line in out.splitlines())
    assert statuses == ["budget", "ok"] and code == 1
    # pivot's estimate: 4 * (3 + 2 + 1) resampling calls + 3 * 4 match draws = 36 policy calls
    args = [
        "blame",
        PIVOT,
        str(TRACES / "and.json"),
        *FAST,
        "--max-policy-calls",
        "40",
        "--format",
        "jsonl",
    ]
    code, out, _ = run(args, capsys)
    records = [json.loads(line) for line in out.splitlines()]
    assert sorted(r["status"] for r in records) == ["budget", "ok"] and code == 1
    assert any("--max-policy-calls 40" in (r["error"] or "") for r in records)


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_dry_run_in_a_json_format_prints_the_estimate_as_json(
    work: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    """`--dry-run --format json` printed the text line, which a script reading JSON cannot parse.
    A trace the run would refuse is named, one line, and the exit code is 2, as the run's would be:
    a pre-check passed (exit 0, nothing said) on input the run then refused."""
    args = ["blame", str(TRACES), "broken.json", *FAST, "--dry-run", "--format", fmt]
    code, out, err = run(args, capsys)
    assert code == 2 and err.startswith("car: error: broken.json: ") and err.count("\n") == 1
    assert out.endswith("}\n") and (fmt == "json" or out.count("\n") == 1)
    from car.batch import plan_batch, total_estimate

    est = total_estimate(plan_batch([TRACES, "broken.json"], BatchOptions(samples=4, match_samples=4)))
    assert est.unreadable == 1 and est.shapley_rollouts > 0
    assert json.loads(out) == {
        "version": "car.estimate/v1",
        "traces": est.traces,
        "unreadable": 1,
        "rollouts": est.rollouts,
        "shapley_rollouts": est.shapley_rollouts,
        "match_draws": est.match_draws,
        "policy_calls": est.policy_calls,
    }
    code, text, _ = run(["blame", str(TRACES), "broken.json", *FAST, "--dry-run"], capsys)
    assert (code, text) == (2, est.line() + "\n")  # the other formats keep the line


def test_one_trace_over_the_cap_says_why_and_a_negative_cap_is_bad_input(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["blame", PIVOT, *FAST, "--max-rollouts", "10"], capsys)
    assert code == 1 and out == ""
    assert "car: budget: " in err and "skipped: needs 13 rollouts, 10 left of --max-rollouts 10" in err
    for flag in ("--max-rollouts", "--max-policy-calls"):
        code, out, err = run(["blame", PIVOT, *FAST, flag, "-1"], capsys)
        assert code == 2 and out == ""
        assert err.strip() == f"car: error: {flag} must be 0 or more, got -1"


def test_estimates_follow_the_method() -> None:
    from car.batch import estimate_trace
    from car.trace import load_trace

    trace = load_trace(PIVOT)  # three decision steps
    base = BatchOptions(samples=4, match_samples=2)
    contrastive = estimate_trace(trace, replace(base, method="contrastive"), True)
    assert (contrastive.rollouts, contrastive.shapley_rollouts) == (13, 0)
    assert contrastive.policy_calls == 4 * (3 + 2 + 1) + 3 * 2
    auto = estimate_trace(trace, replace(base, budget=300), True)
    assert (auto.rollouts, auto.shapley_rollouts) == (13, 300)  # possible, shown, not reserved
    shapley = estimate_trace(trace, replace(base, method="shapley", budget=300), True)
    assert (shapley.rollouts, shapley.shapley_rollouts) == (313, 0)  # certain: reserved
    adaptive_base = BatchOptions(match_samples=2, adaptive=True)  # --adaptive takes no --samples
    adaptive = estimate_trace(trace, adaptive_base, True)
    assert adaptive.rollouts == 32 * 3 and adaptive.shapley_rollouts == 0
    assert estimate_trace(trace, replace(adaptive_base, budget=50), True).rollouts == 50


def test_a_shapley_run_s_policy_calls_are_estimated_within_its_budget_calls(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--budget-calls caps what Shapley may call, but the estimate counted every rollout re-deciding
    every step: with --budget-calls 500 --max-policy-calls 800 the trace (which uses under 600) was
    skipped as needing about 1116 policy calls."""
    from car.batch import estimate_trace
    from car.trace import load_trace

    options = BatchOptions(method="shapley", budget=300, budget_calls=500)
    capped = estimate_trace(load_trace(TRACES / "and.json"), options, True)
    uncapped = estimate_trace(load_trace(TRACES / "and.json"), replace(options, budget_calls=None), True)
    assert uncapped.policy_calls - capped.policy_calls == 300 * 3 - 500
    args = ["blame", str(TRACES / "and.json"), "--method", "shapley", "--budget", "300"]
    code, out, err = run([*args, "--budget-calls", "500", "--max-policy-calls", "800"], capsys)
    assert code == 0 and "skipped" not in err, err
    assert "of 500 policy calls" in out


def test_cost_from_usage_and_prices(work: Path) -> None:
    opts = BatchOptions(
        policy=METERED,
        samples=4,
        match_samples=4,
        prices={"input_tokens": 2.0, "output_tokens": 10.0},
    )
    [res] = blame_many([PIVOT], options=opts)
    assert res.report is not None
    calls = res.report.budget.policy_calls
    assert res.usage == {"input_tokens": 1000 * calls, "output_tokens": 10 * calls}
    assert res.cost == pytest.approx(calls * (1000 * 2.0 + 10 * 10.0) / 1e6)


# -- formats -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mixed_results(tmp_path_factory: pytest.TempPathFactory) -> list[TraceResult]:
    d = tmp_path_factory.mktemp("mixed")
    (d / "broken.json").write_text("[]")
    opts = BatchOptions(samples=8, match_samples=4, gates=Gates(fail_on_blame=("support",)))
    return blame_many([PIVOT, str(TRACES / "support-refund.json"), str(d / "broken.json")], options=opts)


def test_json_single_validates_against_the_report_schema(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["blame", PIVOT, *FAST, "--format", "json"], capsys)
    code2, schema_text, _ = run(["schema", "report"], capsys)
    assert code == code2 == 0
    doc, schema = json.loads(out), json.loads(schema_text)
    Report.model_validate(doc)
    assert set(schema["required"]) <= set(doc) <= set(schema["properties"])
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(doc, schema)


def test_json_and_jsonl_batch_shapes(mixed_results: list[TraceResult]) -> None:
    body = json.loads(render_output("json", mixed_results, batch=True))
    assert body["version"] == "car.batch/v1"
    assert body["exit_code"] == 2
    assert body["counts"] == {"ok": 1, "gate": 1, "input-error": 1}
    lines = render_output("jsonl", mixed_results, batch=True).splitlines()
    assert len(lines) == 3
    for line in lines:
        rec = json.loads(line)
        assert rec["version"] == "car.record/v1"
        if rec["report"] is not None:
            Report.model_validate(rec["report"])


def test_junit_structure(mixed_results: list[TraceResult]) -> None:
    root = ET.fromstring(render_output("junit", mixed_results, batch=True))
    assert root.tag == "testsuites"
    [suite] = root.findall("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "1" and suite.get("errors") == "1"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [r.label for r in mixed_results]
    by_name = {c.get("name"): c for c in cases}
    ok = by_name[PIVOT]
    assert ok.find("failure") is None and ok.find("error") is None
    assert "Step 1" in (ok.findtext("system-out") or "")
    gate = by_name[str(TRACES / "support-refund.json")]
    failure = gate.find("failure")
    assert (
        failure is not None
        and failure.get("type") == "gate"
        and "support" in (failure.get("message") or "")
    )
    bad = next(c for name, c in by_name.items() if name and name.endswith("broken.json"))
    error = bad.find("error")
    assert error is not None and error.get("type") == "input-error"


def test_junit_survives_control_characters() -> None:
    res = TraceResult("evil\x1b[31m\x00.json", None, "input-error", error="bad \x07 byte & <tag>")
    root = ET.fromstring(render_output("junit", [res], batch=True))
    case = root.find("testsuite/testcase")
    assert case is not None and "\\x1b" in (case.get("name") or "")
    err = case.find("error")
    assert err is not None and err.get("message") == "bad \\x07 byte & <tag>"


def test_github_command_escaping() -> None:
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    res = TraceResult("x.json", "x", "input-error", error="line1\nline2: 100%, really")
    [cmd] = github_annotations([res])
    assert cmd == "::error file=x.json,title=car%3A input-error::x.json: line1%0Aline2: 100%25, really"
    # a single line, whatever the trace text holds
    assert "\n" not in cmd


def test_a_trace_credited_by_shapley_alone_gets_its_warning() -> None:
    """A trace whose contrastive estimate abstained while Shapley credited a step is `blamed` in
    the summary, but got no `::warning` (only a locus did), though docs/ci.md promises one for each
    trace's blamed step."""
    (res,) = blame_many([PIVOT], options=BatchOptions(samples=2, match_samples=2))
    assert res.report is not None and res.report.locus is None and res.report.shapley is not None
    [warning] = github_annotations([res])
    assert warning.startswith(f"::warning file={PIVOT},title=car%3A Shapley%3A step 1 100%25::")
    assert "car cannot name a decisive step" in warning and "Shapley: the Shapley credit goes" in warning
    # A trace that abstained with no credit anywhere gets none.
    nothing = replace(res, report=res.report.model_copy(update={"shapley": None}))
    assert github_annotations([nothing]) == []


def test_a_summary_line_shares_the_credit_as_the_report_does_over_agents() -> None:
    """With --players agents the report shares the credit among agents ("agents searcher and
    verifier share the blame"), but the batch summary said "step 3 (verifier); shared with step 1",
    and "shared" for a run whose credit all went to one agent."""
    world, and_ = str(TRACES / "research-team-world.json"), str(TRACES / "and.json")
    results = blame_many([world, and_], options=BatchOptions(players="agents"))
    report = results[0].report
    assert report is not None and "agents searcher and verifier share the blame" in report.headline
    rows = summary_rows(results)
    assert (rows[0]["outcome"], rows[0]["credit"]) == (
        "shared",
        "step 3 (verifier); Shapley: searcher 54%, verifier 46%",
    )
    assert (rows[1]["outcome"], rows[1]["credit"]) == ("blamed", "step 1 (agent); Shapley: agent 100%")
    # Over steps, the summary keeps the steps that share the credit.
    (steps,) = summary_rows(blame_many([and_], options=BatchOptions()))
    assert (steps["outcome"], steps["credit"]) == ("shared", "step 1 (agent); shared with step 0")


def test_a_step_credited_by_shapley_alone_trips_fail_on_blame() -> None:
    """The summary calls such a trace `blamed` and its warning names the step, yet `--fail-on-blame
    any` (or the step, or its actor) passed it: the gate looked at the locus and shared drops only."""
    from car.gates import Gates

    (res,) = blame_many([PIVOT], options=BatchOptions(samples=2, match_samples=2))
    assert res.report is not None and res.report.locus is None and res.report.shapley is not None
    assert Gates(fail_on_blame=("any", "1")).check(res.report) == [
        "step 1 (agent) carries Shapley credit (--fail-on-blame any)"
    ]
    assert Gates(fail_on_blame=("0", "2")).check(res.report) == []


def test_github_annotations_are_capped() -> None:
    many = [TraceResult(f"t{i}.json", None, "input-error", error="bad") for i in range(25)]
    cmds = github_annotations(many)
    assert len([c for c in cmds if c.startswith("::error")]) == 10
    assert cmds[-1] == "::notice::15 more car errors in the job summary"


def test_github_summary_is_appended_and_capped(
    mixed_results: list[TraceResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step output\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    text = render_output("github", mixed_results, batch=True)
    assert all(line.startswith("::") for line in text.splitlines())  # stdout: commands only
    assert any(
        line.startswith(f"::warning file={PIVOT},title=car blames step 1 (agent)::{PIVOT}: ")
        for line in text.splitlines()
    )
    assert summary.read_text() == "# earlier step output\n"  # rendering writes nothing
    assert write_step_summary(mixed_results, batch=True) is None
    body = summary.read_text()
    assert body.startswith("# earlier step output\n## car blame")
    assert "| trace | outcome |" in body

    summary.write_text("x" * (GITHUB_SUMMARY_LIMIT - 200))
    write_github_summary("## car blame\n" + "| a | b |\n" * 1000, summary)
    data = summary.read_bytes()
    assert len(data) <= GITHUB_SUMMARY_LIMIT
    assert data.rstrip().endswith(b"the full report is in the JSON or JSONL output.")


def test_github_summary_is_written_once_a_run(
    work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = work / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    argv = ["blame", PIVOT, *FAST, "--format", "github", "--report", "github=gh.txt"]
    code, out, _ = run(argv, capsys)
    assert code == 0
    assert out.startswith("::warning ")
    assert summary.read_text().count("## car blame") == 1  # two github outputs, one summary
    assert "## car blame" not in (work / "gh.txt").read_text()


def test_car_report_writes_the_github_summary(
    work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run(["blame", PIVOT, *FAST, "--format", "json", "-o", "r.json"], capsys)[0] == 0
    summary = work / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, _ = run(["report", "r.json", "--format", "github"], capsys)
    assert code == 0 and out.startswith("::warning ") and "## car blame" not in out
    assert summary.read_text().count("## car blame") == 1
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(work / "missing" / "summary.md"))
    monkeypatch.setattr(tempfile, "tempdir", str(work))
    code, out, err = run(["report", "r.json", "--format", "github"], capsys)
    assert code == 2 and out.startswith("::warning ")
    assert "cannot write the job summary" in err and "Traceback" not in err


def test_model_server_options_that_reach_no_model_are_named(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["blame", PIVOT, *FAST, "--temperature", "0.3", "--base-url", "http://127.0.0.1:9/v1"]
    code, _, err = run(args, capsys)
    assert code == 0
    assert err.splitlines()[-1] == (
        "car: note: --base-url http://127.0.0.1:9/v1 and --temperature 0.3 were not used: no "
        "component of this run talks to a model server (sim:pivot)"
    )
    # A plugin's code may read them: no note.
    scorer = str(Path(__file__).parents[1] / "scorers" / "refund.py") + "@refund_outside_window"
    support = str(TRACES / "support-refund.json")
    code, _, err = run(["blame", support, *FAST, "--temperature", "0.3", "--scorer", scorer], capsys)
    assert code == 0 and "not used" not in err


def test_an_unwritable_github_summary_is_one_line_and_kept(
    work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(work / "missing" / "summary.md"))
    monkeypatch.setattr(tempfile, "tempdir", str(work))
    code, out, err = run(["blame", PIVOT, *FAST, "--format", "github", "-q"], capsys)
    assert code == 2
    assert out.startswith("::warning ")  # the annotations still reach the log
    (line,) = err.splitlines()
    assert line.startswith(f"car: error: {work / 'missing' / 'summary.md'} ($GITHUB_STEP_SUMMARY): ")
    assert "cannot write the job summary" in line
    kept = Path(line.split("saved it to ")[1].split(" instead")[0])
    assert kept.read_text().startswith("## car blame")


def test_github_summary_never_pushes_a_nearly_full_file_over_the_limit(tmp_path: Path) -> None:
    # GitHub drops a step summary above 1 MiB whole, the earlier steps' part included: where not
    # even the truncation notice fits, nothing is appended.
    summary = tmp_path / "summary.md"
    for used in (GITHUB_SUMMARY_LIMIT - 50, GITHUB_SUMMARY_LIMIT):
        summary.write_text("x" * used)
        write_github_summary("## car blame\n" + "| a | b |\n" * 1000, summary)
        assert summary.stat().st_size == used
    assert fit_bytes("| a | b |\n" * 1000, 10) == ""


def test_fit_bytes_cuts_at_a_line_and_keeps_utf8() -> None:
    text = "".join(f"| step {i} | é€ |\n" for i in range(10_000))
    cut = fit_bytes(text, 5000)
    assert len(cut.encode()) <= 5000
    assert "Truncated" in cut
    kept = cut.split("\n\n> **Truncated")[0]
    assert all(line.endswith("|") for line in kept.splitlines())
    assert fit_bytes("short\n", 100) == "short\n"


def test_markdown_escapes_trace_text() -> None:
    res = TraceResult("a|b<script>.json", None, "input-error", error="x | y <b>")
    text = render_output("markdown", [res, res], batch=True)
    assert "<script>" not in text and "<b>" not in text
    row = next(line for line in text.splitlines() if line.startswith("| a"))
    assert row.count(" | ") == 6  # seven cells, the pipe in the name escaped
    assert "a\\|b&lt;script&gt;.json" in row


def test_markdown_and_table_content(mixed_results: list[TraceResult]) -> None:
    md_text = render_output("markdown", mixed_results, batch=True)
    assert "3 traces: 1 gate, 1 input-error, 1 ok" in md_text
    assert "**gate tripped:**" in md_text and "is where the run was decided" in md_text
    table = render_output("table", mixed_results, batch=True)
    for head in (
        "trace",
        "outcome",
        "locus or shared credit",
        "effect [CI]",
        "match rate",
        "status",
        "rollouts",
    ):
        assert head in table
    single = render_output("table", mixed_results[:1], batch=False)
    assert "rescue [95% CI]" in single


def test_a_level_is_printed_with_its_digits_not_rounded_to_100_percent() -> None:
    """At --level 0.995 the tables said "rescue [100% CI]" and the page "100% intervals": the level
    was rounded to whole percents, and read as certainty."""
    from car.html import render_html

    (res,) = blame_many([PIVOT], options=BatchOptions(samples=8, match_samples=2, level=0.995))
    assert res.report is not None
    assert "rescue [99.5% CI]" in render_output("table", [res], batch=False)
    assert "rescue [99.5% CI]" in render_output("markdown", [res], batch=False)
    page = render_html(res.report)
    assert "with 99.5% intervals" in page and "rescued [99.5% CI]" in page
    assert not any(f"100% {word}" in page for word in ("intervals", "interval", "CI", "level"))


def test_a_minimum_effect_is_printed_with_its_digits() -> None:
    """`--min-effect 0.004` printed "min effect 0%" and "no step is shown to remove more than 0%",
    and 0.025 "2%": a threshold the run did not use."""
    from car.html import render_html

    (res,) = blame_many([PIVOT], options=BatchOptions(samples=8, match_samples=2, min_effect=0.025))
    assert res.report is not None
    table = render_output("table", [res], batch=False)
    assert "min effect 2.5%" in table and "no step is shown to remove more than 2.5%" in table
    assert "minimum effect 2.5%" in render_html(res.report)
    (tiny,) = blame_many([PIVOT], options=BatchOptions(samples=2, match_samples=0, min_effect=0.004))
    assert tiny.report is not None and "min effect 0.4%" in render_output("table", [tiny], batch=False)


def test_several_reports_at_once_and_stdout_only_the_report(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "blame",
        PIVOT,
        str(TRACES / "or.json"),
        *FAST,
        "--format",
        "json",
        "--report",
        "junit=out/car.xml",
        "--report",
        "markdown=out/car.md",
        "--report",
        "jsonl=out/car.jsonl",
    ]
    code, out, err = run(args, capsys)
    assert code == 0
    assert json.loads(out)["version"] == "car.batch/v1"  # stdout: exactly the JSON document
    ET.parse(work / "out" / "car.xml")
    assert (work / "out" / "car.md").read_text().startswith("## car blame")
    assert len((work / "out" / "car.jsonl").read_text().splitlines()) == 2
    assert "junit report written to out/car.xml" in err
    assert "jsonl report written to out/car.jsonl" in err  # streamed, and said once whole


def test_quiet_and_heartbeat(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["blame", PIVOT, str(TRACES / "or.json"), *FAST, "--format", "jsonl"]
    _, _, err = run(args, capsys)
    assert "car: [1/2]" in err and "car: [2/2]" in err  # plain lines when stderr is not a terminal
    _, _, err = run([*args, "-q"], capsys)
    assert err == ""
    _, _, err = run([*args, "--no-progress"], capsys)
    assert "car: [1/2]" not in err and "2 traces: 2 ok" in err


def test_report_command_rerenders_without_model_calls(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, first, _ = run(
        ["blame", PIVOT, "--samples", "4", "--match-samples", "4", "--format", "json", "-q"], capsys
    )
    assert code == 0
    # from the store, from the JSON report, and from a JSONL of records: the same report
    (work / "r.json").write_text(first)
    run(
        [
            "blame",
            PIVOT,
            "--samples",
            "4",
            "--match-samples",
            "4",
            "--format",
            "jsonl",
            "-o",
            "r.jsonl",
            "-q",
        ],
        capsys,
    )
    for source in (".car/store.sqlite", "r.json", "r.jsonl"):
        code, out, err = run(["report", source, "--format", "json"], capsys)
        assert code == 0, err
        assert json.loads(out) == json.loads(first)
    code, out, _ = run(["report", "r.json", "--format", "junit"], capsys)
    assert code == 0 and ET.fromstring(out).tag == "testsuites"
    (work / "empty.jsonl").write_text("")
    code, _, err = run(["report", "empty.jsonl"], capsys)
    assert code == 2 and err == (
        "car: error: empty.jsonl: an empty file, with no reports in it; car report reads what car "
        "blame writes: its store, --format json, or --format jsonl\n"
    )


def test_expand_paths(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.json").write_text("{}")
    (tmp_path / "a" / ".car").mkdir()
    (tmp_path / "a" / ".car" / "y.json").write_text("{}")
    (tmp_path / "a" / "notes.txt").write_text("")
    assert expand_paths([tmp_path / "a"]) == [str(tmp_path / "a" / "x.json")]
    assert expand_paths([f"{tmp_path}/a/*.json", str(tmp_path / "a" / "x.json")]) == [
        str(tmp_path / "a" / "x.json")
    ]


def test_one_global_concurrency_limit_across_traces(work: Path) -> None:
    (work / "gauge.py").write_text(
        "import asyncio\n"
        "from car.sim import make\n"
        "STATE = {'now': 0, 'peak': 0}  # the file runs once per process: one gauge for all traces\n"
        "class Gauge:\n"
        "    spec = 'gauge'\n"
        "    def __init__(self, inner):\n"
        "        self.inner = inner\n"
        "    async def act(self, decision, key):\n"
        "        STATE['now'] += 1\n"
        "        STATE['peak'] = max(STATE['peak'], STATE['now'])\n"
        "        await asyncio.sleep(0.001)\n"
        "        STATE['now'] -= 1\n"
        "        return await self.inner.act(decision, key)\n"
        "def policy(trace):\n"
        "    name = trace.replay.policy.split(':', 1)[1]\n"
        "    return Gauge(make('policy', name, trace, trace.replay.policy))\n"
    )
    import sys

    opts = BatchOptions(policy="gauge.py@policy", samples=6, match_samples=2)
    results = blame_many([TRACES], options=opts, concurrency=3, traces_at_once=5)
    assert all(r.status == "ok" for r in results)
    gauge = next(
        m for name, m in sys.modules.items() if name.startswith("car_plugin_") and hasattr(m, "STATE")
    )
    # five traces at once, yet never more than 3 policy calls in flight: the limit is global
    assert gauge.STATE["peak"] == 3


def test_a_plugin_file_runs_once_for_a_whole_batch(work: Path) -> None:
    (work / "once.py").write_text(
        "from pathlib import Path\n"
        "from car.sim import make\n"
        "with Path('imports.log').open('a') as fh:\n"
        "    fh.write('imported\\n')\n"
        "def policy(trace):\n"
        "    return make('policy', trace.replay.policy.split(':', 1)[1], trace, trace.replay.policy)\n"
    )
    opts = BatchOptions(policy="once.py@policy", samples=4, match_samples=2)
    results = blame_many([TRACES], options=opts, concurrency=2)
    assert len(results) > 3 and all(r.status == "ok" for r in results)
    assert (work / "imports.log").read_text().splitlines() == ["imported"]
    # An edited file is a new plugin: it runs again.
    (work / "once.py").write_text((work / "once.py").read_text() + "# edited\n")
    blame_many([TRACES / "pivot.json"], options=opts)
    assert (work / "imports.log").read_text().splitlines() == ["imported"] * 2


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_an_output_that_cannot_be_a_file_is_refused_before_any_work(
    work: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    (work / "blocker").write_text("a file, not a directory")
    out_file = f"blocker/r.{fmt}"
    code, out, err = run(["blame", PIVOT, *FAST, "--format", fmt, "-o", out_file], capsys)
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"car: error: {out_file}: cannot write the report (blocker is not a directory)"
    ]
    code, out, err = run(["blame", PIVOT, *FAST, "--format", fmt, "-o", "."], capsys)
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "car: error: .: cannot write the report (it is a directory; name a file)"
    ]


def test_summary_shows_shapley_credit_when_the_contrastive_estimator_abstained() -> None:
    from car.outputs import summary_rows

    # At 16 samples no step of OR clears a 50% minimum effect significantly, so the contrastive
    # estimator abstains, while re-deciding from step 0 may still remove that much: Shapley splits
    # the credit (either step alone suffices). (At 99%, even re-deciding every step removes less,
    # so there is no credit worth sharing and Shapley does not run.)
    opts = BatchOptions(samples=16, match_samples=2, budget=400, min_effect=0.5)
    (result,) = blame_many([TRACES / "or.json"], options=opts)
    assert result.report is not None and result.report.locus is None
    assert result.report.method == "shapley"
    (row,) = summary_rows([result])
    assert row["outcome"] == "shared"
    assert row["credit"].startswith("Shapley: step ") and "step 0" in row["credit"]


def _contrastive_spend(opts: BatchOptions) -> tuple[int, int]:
    """Rollouts and policy calls and.json's contrastive part uses (the same with or without Shapley)."""
    (alone,) = blame_many([TRACES / "and.json"], options=replace(opts, method="contrastive"))
    assert alone.report is not None
    return alone.report.budget.rollouts, alone.report.budget.policy_calls


@pytest.mark.parametrize("extra", [0, 150])
def test_max_rollouts_caps_an_automatic_shapley_run(extra: int) -> None:
    """Under `auto` the estimate leaves the possible Shapley run out; when credit turns out shared,
    the run gets what `--max-rollouts` leaves after the rollouts the trace used (not its estimate:
    rollouts that reproduce the record serve later steps too), and the report says so."""
    from car.batch import plan_batch

    opts = BatchOptions(samples=32, match_samples=0)  # and.json at seed 0: credit shared, Shapley runs
    (item,) = plan_batch([TRACES / "and.json"], opts)
    assert item.estimate is not None
    spent, _ = _contrastive_spend(opts)
    assert spent < item.estimate.rollouts
    cap = item.estimate.rollouts + extra
    (result,) = blame_many([TRACES / "and.json"], options=opts, max_rollouts=cap)
    report = result.report
    assert result.status == "ok" and report is not None
    assert report.budget.rollouts <= cap
    left = cap - spent  # was cap - the estimate: 0 and 150
    assert f"Shapley budget cut: --max-rollouts left {left} of its 1000 rollouts" in report.notes
    if extra == 0:  # too few to play the game: reported, and the contrastive result stands
        assert report.shapley is None
        assert any(n.startswith("Shapley (credit looks shared") and "not run" in n for n in report.notes)
    else:
        assert report.shapley is not None and report.shapley.budget_limit == left
        assert report.budget.rollouts > item.estimate.rollouts
    uncapped = blame_many([TRACES / "and.json"], options=opts)[0].report
    assert uncapped is not None and uncapped.shapley is not None
    assert uncapped.budget.rollouts > cap


def test_a_grant_counts_what_the_trace_spent_and_what_others_hold() -> None:
    from car.batch import BudgetGuard, WorkEstimate

    guard = BudgetGuard(max_rollouts=100, max_policy_calls=1000)
    assert guard.reserve(0, WorkEstimate(1, 60, 0, 500)) is None
    assert guard.reserve(1, WorkEstimate(1, 30, 0, 300)) is None  # another trace, still running
    # Trace 0 used 40 of its 60 rollouts and 450 of its 500 calls: 100 - 40 - 30 rollouts are left.
    assert guard.grant(0, 1000, 3000, spent_rollouts=40, spent_calls=450) == (30, 250)
    assert guard.held[0] == (70, 700) and (guard.rollouts, guard.policy_calls) == (100, 1000)
    # A trace that used more than its estimate (longer rollouts make more calls) gets nothing more.
    guard = BudgetGuard(max_rollouts=100, max_policy_calls=1000)
    assert guard.reserve(0, WorkEstimate(1, 60, 0, 900)) is None
    assert guard.grant(0, 1000, 3000, spent_rollouts=60, spent_calls=1100) == (40, 0)


def test_a_trace_that_does_not_fit_waits_while_others_hold_room_and_is_skipped_when_none_do() -> None:
    """What both executors decide for a trace (the local one waits on it, Ray's driver asks again
    after each settled trace): start it, let it wait, or skip it with the reason."""
    from car.batch import BudgetGuard, WorkEstimate

    wait = BudgetGuard.WAIT
    guard = BudgetGuard(max_rollouts=100)
    big, small = WorkEstimate(1, 60, 0, 0), WorkEstimate(1, 40, 0, 0)
    assert guard.admit_each([(0, big), (1, big), (2, small)]) == [None, wait, None]
    guard.release(0, 30, 0)  # 30 used + 40 held by trace 2: trace 1's 60 do not fit yet
    assert guard.admit(1, big) == wait
    guard.release(2, 10, 0)
    assert guard.admit_each([(1, big), (3, big)]) == [None, wait]  # 40 used + 60 held
    guard.release(1, 60, 0)  # nothing runs any more: trace 3 never fits
    assert guard.admit(3, big) == "skipped: needs 60 rollouts, 0 left of --max-rollouts 100"
    assert guard.held == {} and guard.rollouts == 100


def test_max_policy_calls_caps_an_automatic_shapley_run() -> None:
    from car.batch import plan_batch

    opts = BatchOptions(samples=32, match_samples=0)
    (item,) = plan_batch([TRACES / "and.json"], opts)
    assert item.estimate is not None
    _, spent_calls = _contrastive_spend(opts)
    assert spent_calls < item.estimate.policy_calls
    cap = item.estimate.policy_calls + 300
    left = cap - spent_calls  # was cap - the estimate: 300
    (result,) = blame_many([TRACES / "and.json"], options=opts, max_policy_calls=cap)
    report = result.report
    assert result.status == "ok" and report is not None and report.shapley is not None
    assert (
        f"Shapley budget cut: --max-policy-calls left {left} of about 3000 policy calls" in report.notes
    )
    assert report.shapley.budget_calls_limit == left
    assert 0 < report.shapley.budget.policy_calls <= left
    assert report.budget.policy_calls <= cap


def test_a_file_whose_name_looks_like_a_glob_is_that_one_trace(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / "br").mkdir()
    for name in ("run[bold].json", "runb.json"):  # the pattern run[bold].json would match runb.json
        (work / "br" / name).write_text(Path(PIVOT).read_text())
    code, out, _ = run(["blame", "br/run[bold].json", *FAST, "--format", "json"], capsys)
    assert code == 0
    assert json.loads(out)["version"] == "car.report/v1"
    code, out, _ = run(["blame", "br/run[bold].json", *FAST, "--format", "html", "-o", "x.html"], capsys)
    assert code == 0
    assert (work / "x.html").read_text().startswith("<!DOCTYPE html>")
    # A pattern that names no existing file is still a glob.
    code, out, _ = run(["blame", "br/run*.json", *FAST, "--format", "json"], capsys)
    assert code == 0
    assert [r["trace"] for r in json.loads(out)["records"]] == ["br/run[bold].json", "br/runb.json"]


def test_an_empty_trace_path_is_a_usage_error(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`car blame ''` attributed every trace under the current directory."""
    from car.ci import BlameRequest, run_blame
    from car.errors import InputError

    (work / "t.json").write_text(Path(PIVOT).read_text())
    with pytest.raises(InputError, match=r"^TRACES: an empty path \(''\); name a trace file"):
        run_blame(BlameRequest(paths=[""], options=BatchOptions(samples=4, match_samples=0)))
    code, out, err = run(["blame", "", *FAST], capsys)
    assert (code, out) == (2, "") and "an empty argument ('')" in err


def test_html_for_a_batch_is_refused_before_any_work(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["blame", str(TRACES), *FAST, "--format", "html", "-o", "x.html"], capsys)
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "car: error: --format html renders one trace's report; for a batch use markdown, junit or github"
    ]
    assert not (work / "x.html").exists()


@pytest.mark.parametrize(
    "outputs",
    [["--report", "html=page.html"], ["-o", "out.jsonl", "--report", "html=page.html"]],
)
def test_html_asked_by_report_for_a_batch_is_named_as_asked(
    work: Path, capsys: pytest.CaptureFixture[str], outputs: list[str]
) -> None:
    """The refusal named `--format html`, or blamed `-o out.jsonl` for a suffix naming html."""
    code, out, err = run(["blame", str(TRACES), *FAST, *outputs], capsys)
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "car: error: --report html=page.html: html renders one trace's report; for a batch use "
        "markdown, junit or github"
    ]
    assert not (work / "page.html").exists() and not (work / "out.jsonl").exists()


@pytest.mark.parametrize(
    ("outputs", "named"),
    [
        (["-o", "r.txt", "--report", "json=r.txt"], "-o r.txt and --report json=r.txt"),
        (
            ["--report", "json=a.json", "--report", "markdown=./a.json"],
            "--report json=a.json and --report markdown=a.json",
        ),
        (
            ["--format", "jsonl", "-o", "out/r.jsonl", "--report", "jsonl=out/../out/r.jsonl"],
            "-o out/r.jsonl and --report jsonl=out/../out/r.jsonl",
        ),
        (["-o", "pivot.json"], "-o pivot.json would overwrite the trace pivot.json"),
    ],
)
def test_two_outputs_naming_one_file_are_refused_before_any_work(
    work: Path, capsys: pytest.CaptureFixture[str], outputs: list[str], named: str
) -> None:
    """Each report overwrote the one before in the same file, silently; or the trace itself."""
    (work / "pivot.json").write_text(Path(PIVOT).read_text())
    (work / "out").mkdir()
    before = sorted(p.name for p in work.iterdir())
    args = ["blame", "pivot.json", "--samples", "4", "--match-samples", "4", *outputs]
    for extra in ([], ["--dry-run"]):
        code, out, err = run([*args, *extra], capsys)
        assert (code, out) == (2, "")
        (line,) = err.splitlines()
        assert line.startswith(f"car: error: {named}") and "Traceback" not in line
        assert sorted(p.name for p in work.iterdir()) == before  # no report, no store
    assert (work / "pivot.json").read_text() == Path(PIVOT).read_text()


def test_outputs_that_name_the_rollout_store_are_refused_before_any_work(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """-o or --report on the store replaced it with the report (a jsonl report truncated the open
    database under the run), and the command exited 0."""
    code, _, err = run(
        ["blame", PIVOT, "--samples", "4", "--match-samples", "4", "--store", "st.db"], capsys
    )
    assert code == 0, err
    (work / ".car").mkdir()
    (work / ".car" / "store.sqlite").write_bytes((work / "st.db").read_bytes())
    stores = {p: p.read_bytes() for p in (work / "st.db", work / ".car" / "store.sqlite")}
    default = work / ".car" / "store.sqlite"
    for outputs, named in (
        (["--store", "st.db", "-o", "st.db"], "-o st.db would overwrite the rollout store st.db"),
        (
            ["--store", "st.db", "--report", "jsonl=./st.db"],
            "--report jsonl=st.db would overwrite the rollout store st.db",
        ),
        (
            ["-o", ".car/store.sqlite"],
            f"-o .car/store.sqlite would overwrite the rollout store {default}",
        ),
    ):
        for extra in ([], ["--dry-run"]):
            args = ["blame", str(TRACES / "or.json"), "--samples", "4", *outputs, *extra]
            code, out, err = run(args, capsys)
            assert (code, out) == (2, "")
            (line,) = err.splitlines()
            assert line.startswith(f"car: error: {named}"), line
    assert {p: p.read_bytes() for p in stores} == stores
    # Without a store, the file is just a file the user chose to write.
    args = ["blame", PIVOT, "--no-store", "-o", "st.db", "--dry-run"]
    assert run(args, capsys)[0] == 0


def test_outputs_to_devices_are_not_one_file(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Device files were compared as regular files: -o /dev/null --report junit=/dev/null was refused,
    and so was -o /dev/stdout --report markdown=/dev/stderr with stderr joined to stdout."""
    args = ["blame", PIVOT, *FAST, "-o", "/dev/null", "--report", "junit=/dev/null"]
    code, out, err = run(args, capsys)
    assert (code, out) == (0, ""), err
    args = ["blame", PIVOT, *FAST, "-q", "-o", "/dev/stdout", "--report", "markdown=/dev/stderr"]
    done = subprocess.run(
        [sys.executable, "-m", "car", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout
    assert "## car blame" in done.stdout and "car blame: pivot-0" in done.stdout


def test_output_parent_directories_are_made(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run(["blame", PIVOT, *FAST, "--format", "json", "-o", "new/dir/r.json"], capsys)
    assert code == 0
    Report.model_validate_json((work / "new" / "dir" / "r.json").read_text())


def test_an_empty_shard_writes_every_output_asked_for(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shard that holds no trace printed `-o`'s format on stdout and wrote neither `-o` nor any
    `--report` file: the CI job's next step found no car-K.jsonl to read."""
    empty = []
    for k in (1, 2):  # one trace: one of the two shards holds it, the other none
        outs = ["-o", f"{k}.xml", "--report", f"jsonl={k}.jsonl", "--report", f"markdown={k}.md"]
        code, out, err = run(["blame", PIVOT, *FAST, "--shard", f"{k}/2", *outs], capsys)
        assert code == 0, err
        assert out == ""  # the reports went to their files
        if "no trace in this shard" in err:
            empty.append(k)
    assert len(empty) == 1
    k = empty[0]
    assert ET.parse(work / f"{k}.xml").getroot().get("tests") == "0"
    assert (work / f"{k}.jsonl").read_text() == ""
    assert (work / f"{k}.md").read_text().startswith("## car blame\n\n0 traces")


def test_a_report_that_cannot_be_written_after_the_work_is_kept_in_a_file_of_its_own(
    work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    (work / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(work / "tmp"))
    write_text = Path.write_text

    def full_disk(self: Path, *args: Any, **kwargs: Any) -> int:
        if self.name.startswith("r.html"):  # the file, or the one written beside it
            raise OSError(28, "No space left on device")
        return write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_disk)
    argv = ["blame", PIVOT, *FAST, "--format", "html", "-o", "out/r.html", "--no-progress"]
    code, out, err = run(argv, capsys)
    assert code == 2
    assert out == ""  # never an HTML page on stdout (it may be a terminal)
    (saved,) = (work / "tmp").glob("car-report-*.html")
    assert err.splitlines() == [
        f"car: error: out/r.html: cannot write the report (No space left on device); "
        f"saved it to {saved} instead"
    ]
    assert saved.read_text().startswith("<!DOCTYPE html>")


def test_a_streamed_report_that_fails_mid_run_loses_no_result(
    work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A --report jsonl file whose disk fills during the batch: the batch goes on, the other reports
    are written and the whole JSONL is kept in a file of its own (the OSError was a traceback that
    stopped the batch, and no report was written)."""
    import io
    import tempfile

    (work / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(work / "tmp"))

    class FullDisk(io.StringIO):
        def flush(self) -> None:
            raise OSError(28, "No space left on device")

        def close(self) -> None:
            io.StringIO.close(self)

    path_open = Path.open

    def open_(self: Path, *args: Any, **kwargs: Any) -> Any:
        return FullDisk() if self.name == "r.jsonl" else path_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", open_)
    traces = [PIVOT, str(TRACES / "or.json")]
    argv = ["blame", *traces, *FAST, "--method", "contrastive", "--no-progress", "-q"]
    code, _, err = run([*argv, "--report", "jsonl=r.jsonl", "--report", "markdown=r.md"], capsys)
    assert code == 2
    (saved,) = (work / "tmp").glob("car-report-*.jsonl")
    assert err.splitlines() == [
        f"car: error: r.jsonl: cannot write the report (No space left on device); "
        f"saved it to {saved} instead"
    ]
    kept = [json.loads(line) for line in saved.read_text().splitlines()]
    assert sorted(r["trace_id"] for r in kept) == ["or-0", "pivot-0"]
    assert all(r["status"] == "ok" for r in kept)
    assert "pivot.json" in (work / "r.md").read_text()


@pytest.mark.parametrize(("fmt", "suffix"), [("jsonl", "jsonl"), ("json", "json"), ("markdown", "md")])
def test_reports_that_stdout_refuses_are_kept_in_a_file(
    work: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fmt: str,
    suffix: str,
) -> None:
    """stdout on a full disk: one error line and the report saved elsewhere, exit 2 (it was a
    traceback, and a streamed batch stopped at its first record)."""
    import io
    import sys
    import tempfile

    (work / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(work / "tmp"))

    class FullDisk(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(28, "No space left on device")

    traces = [PIVOT, str(TRACES / "or.json")]
    argv = ["blame", *traces, *FAST, "--method", "contrastive", "--no-progress", "-q", "--format", fmt]
    monkeypatch.setattr(sys, "stdout", FullDisk())
    code, _, err = run(argv, capsys)
    assert code == 2
    (saved,) = (work / "tmp").glob(f"car-report-*.{suffix}")
    assert err.splitlines() == [
        f"car: error: stdout: cannot write the report (No space left on device); "
        f"saved it to {saved} instead"
    ]
    assert "or.json" in saved.read_text() and "pivot.json" in saved.read_text()


def test_a_trace_that_fails_returns_its_reservation(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three traces of 13 estimated rollouts each under a cap of 30: the one that fails at once (no
    policy to replay with) frees its share, so the other two both run (one was skipped before)."""
    doc = json.loads(Path(PIVOT).read_text())
    del doc["replay"]
    doc["id"] = "no-policy"
    (work / "no-policy.json").write_text(json.dumps(doc))
    args = ["blame", "no-policy.json", PIVOT, str(TRACES / "and.json"), *FAST, "--format", "jsonl"]
    code, out, _ = run([*args, "--max-rollouts", "30"], capsys)
    assert code == 2  # the input error is the worst outcome
    statuses = {r["trace_id"]: r["status"] for r in map(json.loads, out.splitlines())}
    assert statuses == {"no-policy": "input-error", "pivot-0": "ok", "and-0": "ok"}, statuses


BOOM_POLICY = (
    "from car.specs import make_policy\n"
    "def policy(trace):\n"
    "    if trace.id.startswith('and'):\n"
    "        raise RuntimeError('boom for ' + trace.id)\n"
    "    return make_policy('sim:pivot', trace)\n"
)


def _debug_batch(options: BatchOptions, max_rollouts: int) -> list[TraceResult]:
    """Attribute and.json then pivot.json (97 estimated rollouts each, so under a cap of 97 pivot
    waits for and's reservation); the results delivered before --debug re-raises and.json's error."""
    delivered: list[TraceResult] = []
    batch = blame_many_async(
        [TRACES / "and.json", PIVOT],
        options=options,
        store=None,
        max_rollouts=max_rollouts,
        on_result=delivered.append,
    )

    async def outcome() -> str:
        try:
            await asyncio.wait_for(batch, timeout=30)  # a hang guard, not a timing assertion
        except SpecError as exc:
            return str(exc)
        except TimeoutError:
            return "hung: a trace waits for a reservation that is never returned"
        return "finished without raising"

    said = asyncio.run(outcome())
    assert "boom for and-0" in said, said
    return delivered


def test_a_trace_that_raises_under_debug_returns_its_reservation(work: Path) -> None:
    """--debug re-raises a trace's failure: its reservation was never settled, and a trace waiting for
    room waited forever (the batch hung instead of printing the traceback)."""
    (work / "boom.py").write_text(BOOM_POLICY)
    options = BatchOptions(samples=32, policy=f"{work / 'boom.py'}@policy", debug=True)
    delivered = _debug_batch(options, max_rollouts=97)
    assert [(r.trace_id, r.status) for r in delivered] == [("pivot-0", "ok")]


def test_a_trace_that_raises_is_charged_what_it_ran(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reservation of a trace that raises is settled at the rollouts and policy calls its runner
    counted, and nothing stays held."""
    import car.batch

    guards: list[car.batch.BudgetGuard] = []

    class Recorded(car.batch.BudgetGuard):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            guards.append(self)

    real = car.batch.attribute_one

    async def ran_then_raised(path: str, trace: Any, options: Any, runner: Any, *rest: Any) -> Any:
        if trace.id.startswith("and"):
            mine = runner.child()  # as attribute_one counts: on a runner of its own for the trace
            mine.count("fresh", 5)
            mine.count("stored", 2)
            mine.count("fresh_policy_calls", 11)
            raise SpecError("boom for and-0")
        return await real(path, trace, options, runner, *rest)

    monkeypatch.setattr(car.batch, "BudgetGuard", Recorded)
    monkeypatch.setattr(car.batch, "attribute_one", ran_then_raised)
    # and.json is charged 7: pivot's 97 fit in a cap of 104 only once its reservation of 97 is returned
    delivered = _debug_batch(BatchOptions(samples=32, debug=True), max_rollouts=104)
    (pivot,) = [r.report for r in delivered]
    assert pivot is not None
    (guard,) = guards
    assert guard.held == {}
    assert (guard.rollouts, guard.policy_calls) == (
        7 + pivot.budget.rollouts,
        11 + pivot.budget.policy_calls,
    )


def test_html_for_a_trace_that_fails_says_why(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The trace's own error, not a complaint that HTML needs one report."""
    code, out, err = run(["blame", "broken.json", *FAST, "--format", "html", "-o", "r.html"], capsys)
    assert (code, out) == (2, "")
    assert "broken.json" in err and "invalid JSON" in err and "renders one trace" not in err
    assert not (work / "r.html").exists()


def test_one_file_at_two_paths_keeps_a_result_for_each(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("a", "b"):
        (work / name).mkdir()
        (work / name / "pivot.json").write_text(Path(PIVOT).read_text())
    store = str(work / "s.sqlite")
    args = ["blame", "a/pivot.json", "b/pivot.json", "--samples", "4", "--match-samples", "0"]
    assert run([*args, "--store", store, "-q"], capsys)[0] == 0
    from car.store import RolloutStore

    with RolloutStore(store) as s:
        assert sorted(r.trace_path or "" for r in s.results()) == ["a/pivot.json", "b/pivot.json"]


def test_one_significant_drop_is_not_shared_credit() -> None:
    """Shared credit takes two or more significant drops: an abstention with one is an abstention
    in the summary, and --fail-on-blame does not say that step shares the credit."""
    import car
    from car.gates import Gates
    from car.outputs import credit_text, summary_rows

    report = car.blame(PIVOT, samples=4, match_samples=0).model_copy(
        update={"locus": None, "locus_actor": None, "shared": [1]}
    )
    result = TraceResult(PIVOT, report.trace_id, "ok", report)
    assert credit_text(report) == "-"
    assert summary_rows([result])[0]["outcome"] == "abstained"
    assert Gates(fail_on_blame=("1", "agent")).check(report) == []
    both = report.model_copy(update={"shared": [0, 1]})
    assert credit_text(both) == "shared: steps 0, 1"
    assert Gates(fail_on_blame=("01",)).check(both) == [
        "step 1 (agent) shares the credit (--fail-on-blame 01)"
    ]


@pytest.mark.parametrize(
    ("who", "expected"),
    [("99", "no trace in this run has a step 99"), ("²", "no trace in this run has an actor")],
)
def test_fail_on_blame_steps_that_no_trace_has_are_refused(
    work: Path, capsys: pytest.CaptureFixture[str], who: str, expected: str
) -> None:
    code, out, err = run(["blame", PIVOT, *FAST, "--fail-on-blame", who], capsys)
    assert (code, out) == (2, "") and expected in err


def test_a_priced_counter_nobody_reports_is_noted(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--price input_token=...` (a typo) would silently cost 0."""
    args = ["blame", PIVOT, *FAST, "--policy", METERED]
    code, _, err = run([*args, "--price", "input_token=2.5"], capsys)
    assert code == 0
    assert (
        "car: note: --price input_token: no such counter in this run "
        "(reported: input_tokens, output_tokens)" in err
    )
    code, _, err = run([*args, "--price", "input_tokens=2.5"], capsys)
    assert code == 0 and "--price" not in err


def test_a_report_the_disk_refuses_leaves_the_last_good_one_in_place(work: Path) -> None:
    """A report file is replaced whole or not at all: on a disk that fills half-way through (a file
    size limit here), the last run's report stays as it was; it was cut to what fitted, a JSON file
    that no longer parses."""
    import resource

    argv = [sys.executable, "-m", "car", "blame", PIVOT, *FAST, "-q", "-o", "r.json"]
    assert subprocess.run(argv, capture_output=True).returncode == 0
    good = (work / "r.json").read_bytes()
    assert len(good) > 2048

    def small_disk() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.RLIM_INFINITY))

    done = subprocess.run([*argv, "--seed", "1"], capture_output=True, text=True, preexec_fn=small_disk)
    assert done.returncode == 2
    assert done.stderr.startswith("car: error: r.json: cannot write the report (File too large)")
    assert "Traceback" not in done.stderr
    assert (work / "r.json").read_bytes() == good
    assert sorted(p.name for p in work.iterdir()) == ["broken.json", "down.py", "r.json"]


def test_a_jsonl_stream_the_disk_refuses_keeps_whole_records(work: Path) -> None:
    """A `--report jsonl=F` stream is written as each trace finishes; a disk that fills in the middle
    of a record (a file size limit here) left that record cut, a last line that does not parse. The
    file is cut back to its last whole record."""
    import resource

    runs = work / "runs"
    runs.mkdir()
    for name in ("and", "or", "pivot"):
        shutil.copy(TRACES / f"{name}.json", runs / f"{name}.json")
    argv = [sys.executable, "-m", "car", "blame", "runs", *FAST, "--method", "contrastive", "-q"]

    def small_disk() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4000, resource.RLIM_INFINITY))

    done = subprocess.run(
        [*argv, "--report", "jsonl=s.jsonl"], capture_output=True, text=True, preexec_fn=small_disk
    )
    assert done.returncode == 2
    assert done.stderr.startswith("car: error: s.jsonl: cannot write the report (File too large)")
    text = (work / "s.jsonl").read_text()
    assert text.endswith("\n") and 0 < len(text) < 4000
    records = [json.loads(line) for line in text.splitlines()]
    assert [r["trace_id"] for r in records] == ["and-0"]
