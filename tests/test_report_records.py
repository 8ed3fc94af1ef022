"""`car report` re-renders every saved result, failed traces included, and exits as `car blame` did."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import TRACES, Result

FAST = ["--samples", "4", "--match-samples", "4", "--no-store"]
BROKEN = '{"version": "car.trace/v1", "id": '


@pytest.fixture
def tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # paths in records and messages are as given: relative
    return tmp_path


@pytest.fixture
def batch(tmp_path: Path, run_cli: Callable[..., Result]) -> Path:
    """A batch of two traces, one unreadable and one that trips a gate: exit 2 (written as JSONL
    and as batch JSON)."""
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "broken.json").write_text(BROKEN)
    (tmp_path / "runs" / "pivot.json").write_text((TRACES / "pivot.json").read_text())
    gate = ["--min-match-rate", "0.99"]
    for fmt in ("jsonl", "json"):
        r = run_cli("blame", "runs", *FAST, *gate, "--format", fmt, "-o", f"out.{fmt}", "-q")
        assert r.code == 2, r.err
    return tmp_path


@pytest.mark.parametrize("source", ["out.jsonl", "out.json"])
def test_report_keeps_failed_records_in_every_format_and_exits_as_blame_did(
    batch: Path, run_cli: Callable[..., Result], source: str
) -> None:
    """`car report results.jsonl` showed "1 trace: 1 ok" and exited 0: a failed batch passed CI
    (and it could not read the batch JSON at all: "unknown version 'car.batch/v1'")."""
    error = "runs/broken.json: line 1 column 35: invalid JSON"
    r = run_cli("report", source, "--format", "markdown")
    assert r.code == 2, r.err
    assert "2 traces: 1 gate, 1 input-error" in r.out
    assert "| runs/broken.json | error |" in r.out and "input-error" in r.out
    assert "gate tripped:** action-match rate" in r.out
    assert r.err == "car: 2 traces: 1 gate, 1 input-error\n"  # why it exits 2, on stderr

    r = run_cli("report", source, "--format", "jsonl")
    assert r.code == 2
    records = {rec["trace"]: rec for rec in map(json.loads, r.out.splitlines())}
    assert records["runs/broken.json"]["status"] == "input-error"
    assert records["runs/broken.json"]["error"].startswith(error)
    assert records["runs/broken.json"]["report"] is None
    assert records["runs/pivot.json"]["status"] == "gate" and records["runs/pivot.json"]["gates"]
    assert records == {
        rec["trace"]: rec for rec in map(json.loads, Path("out.jsonl").read_text().splitlines())
    }

    r = run_cli("report", source, "--format", "json")
    assert r.code == 2 and json.loads(r.out)["counts"] == {"gate": 1, "input-error": 1}
    r = run_cli("report", source, "--format", "junit")
    suite = ET.fromstring(r.out).find("testsuite")
    assert r.code == 2 and suite is not None
    assert (suite.get("errors"), suite.get("failures")) == ("1", "1")
    r = run_cli("report", source, "--format", "github")
    assert r.code == 2 and r.out.startswith("::error ") and "input-error" in r.out
    r = run_cli("report", source)
    assert r.code == 2 and "runs/broken.json" in r.out and "input-error" in r.out

    # One trace picked: its own exit code (the gate, 1); a failed trace has no page to render.
    r = run_cli("report", source, "--pick", "runs/pivot.json", "--format", "json")
    assert r.code == 1 and json.loads(r.out)["locus"] == 1
    r = run_cli("report", source, "--pick", "runs/broken.json", "--format", "html", "-o", "p.html")
    assert r.code == 2 and "holds 0 reports" not in r.err and "matches 0 reports" in r.err


def test_a_file_that_is_no_car_result_says_so_in_one_line(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    """A file that is neither a store nor JSON said "line 1: invalid JSON: Expecting value: ..."."""
    (tmp_path / "bad.sqlite").write_text("hello world\nsecond line\n")
    (tmp_path / "bin.db").write_bytes(b"\x89PNG\r\n\x1a\n\xff\x00")
    for name, why in (("bad.sqlite", "line 1 is not JSON"), ("bin.db", "byte 0 is not UTF-8 text")):
        r = run_cli("report", name)
        assert r.code == 2 and r.out == ""
        (line,) = r.err.splitlines()
        assert line.startswith(f"car: error: {name}: not a car store, report or results file ({why})")


def test_records_that_are_not_car_records_are_named_not_skipped(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    first = json.dumps({"version": "car.record/v1", "trace": "a.json", "status": "input-error"})
    (tmp_path / "r.jsonl").write_text(first + '\n{"version": "car.trace/v1"}\n')
    r = run_cli("report", "r.jsonl")
    assert r.code == 2
    assert r.err == (
        "car: error: r.jsonl: line 2: $.version: unknown version 'car.trace/v1'; expected "
        "'car.report/v1' or 'car.record/v1'; is this a trace? (`car blame` reads traces)\n"
    )
    (tmp_path / "r.jsonl").write_text(first + "\n" + first.replace('"input-error"', '"lost"') + "\n")
    r = run_cli("report", "r.jsonl")
    assert r.code == 2 and r.err == (
        "car: error: r.jsonl: line 2: $.status: expected 'ok', 'gate', 'input-error', "
        """'backend-error', 'budget' or 'interrupted'; got "lost"\n"""
    )


def test_exit_zero_lets_gates_pass_but_never_input_errors(
    batch: Path, run_cli: Callable[..., Result]
) -> None:
    """As with `car blame --exit-zero`: a tripped gate (1) re-renders with exit 0, an input error (2)
    does not."""
    r = run_cli("report", "out.jsonl", "--pick", "runs/pivot.json", "--format", "json", "--exit-zero")
    assert r.code == 0 and json.loads(r.out)["locus"] == 1 and r.err == ""
    r = run_cli("report", "out.jsonl", "--format", "markdown", "--exit-zero")
    assert r.code == 2 and r.err == "car: 2 traces: 1 gate, 1 input-error\n"


def test_a_report_whose_scorer_found_no_failure_rerenders_as_blame_gave_it(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    """`car blame` makes a trace whose scorer says the record did not fail an input error (exit 2);
    `car report` of its stored report or its `car.report/v1` JSON labelled the same report ok and
    exited 0. Both now ask `nothing_to_attribute`."""
    refund = str(TRACES / "support-refund.json")
    argv = ["blame", refund, "--scorer", "regex:ZZZNOMATCH", "--store", "s.sqlite", "--no-progress"]
    r = run_cli(*argv, "--format", "jsonl", "-o", "blame.jsonl", "--report", "json=report.json")
    assert r.code == 2, r.err
    (blamed,) = map(json.loads, Path("blame.jsonl").read_text().splitlines())
    assert blamed["status"] == "input-error" and "did not fail" in blamed["error"]
    for source in ("s.sqlite", "report.json", "blame.jsonl"):
        r = run_cli("report", source, "--format", "jsonl")
        assert r.code == 2, (source, r.err)
        assert r.err == "car: 1 trace: 1 input-error\n"
        (again,) = map(json.loads, r.out.splitlines())
        assert (again["status"], again["error"]) == (blamed["status"], blamed["error"])
        r = run_cli("report", source, "--exit-zero")  # never hides an input error
        assert r.code == 2


def test_a_record_without_counts_reads_back_as_not_saying(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    """A record written without `rollouts` and `usage` read back as 0 rollouts and no tokens used."""
    line = json.dumps({"version": "car.record/v1", "trace": "a.json", "status": "input-error"})
    (tmp_path / "r.jsonl").write_text(line + "\n")
    r = run_cli("report", tmp_path / "r.jsonl", "--format", "jsonl")
    assert r.code == 2
    (back,) = [json.loads(x) for x in r.out.splitlines()]
    assert back["rollouts"] == {"fresh": None, "stored": None} and back["usage"] is None
