"""`car blame --format html` and `car report`: re-rendering a saved report without model calls."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from car.cli import main
from car.report import load_report

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "traces" / "support-refund.json"
FAST = ["--samples", "8", "--match-samples", "2"]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def saved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "result.json"
    code, _, _ = run(capsys, "blame", str(TRACE), *FAST, "--format", "json", "-o", str(path))
    assert code == 0
    return path


def test_blame_writes_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "r.html"
    code, out, err = run(capsys, "blame", str(TRACE), *FAST, "--format", "html", "-o", str(page))
    assert code == 0 and out == "" and "report written" in err
    doc = page.read_text(encoding="utf-8")
    assert doc.startswith("<!DOCTYPE html>") and 'id="step-3"' in doc and "SYSTEM NOTICE" in doc


def test_blame_html_to_a_pipe_goes_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "blame", str(TRACE), *FAST, "--format", "html")
    assert code == 0 and out.startswith("<!DOCTYPE html>")


def test_html_refuses_a_terminal_before_doing_any_work(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    code, out, err = run(capsys, "blame", "does-not-exist.json", "--format", "html")
    assert code == 2 and out == ""
    assert err.strip() == "car: error: --format html needs -o FILE (or redirect stdout to a file)"


def test_report_rerenders_all_formats(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "report", str(saved), "--format", "json")
    assert code == 0 and json.loads(out) == json.loads(saved.read_text())
    code, out, _ = run(capsys, "report", str(saved))
    assert code == 0 and "PLAN: refund the order" in out and "locus" in out and "█" in out
    page = saved.parent / "r.html"
    code, out, err = run(capsys, "report", str(saved), "--format", "html", "-o", str(page))
    assert code == 0 and "report written" in err
    doc = page.read_text(encoding="utf-8")
    assert 'class="step locus decision"' in doc and "SYSTEM NOTICE" in doc


def test_report_finds_the_trace_beside_the_report(
    saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = json.loads(saved.read_text())
    data["trace_path"] = "copy.json"
    saved.write_text(json.dumps(data))
    shutil.copy(TRACE, tmp_path / "copy.json")
    monkeypatch.chdir(ROOT)  # the recorded relative path does not resolve from here
    code, out, err = run(capsys, "report", str(saved), "--format", "html")
    assert code == 0 and err == "" and 'id="step-0"' in out


def test_report_without_a_readable_trace_renders_without_timeline(
    saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    data = json.loads(saved.read_text())
    data["trace_path"] = "gone.json"
    saved.write_text(json.dumps(data))
    code, out, err = run(capsys, "report", str(saved), "--format", "html")
    assert code == 0
    assert "the recorded trace gone.json was not found" in err and "without the timeline" in err
    assert 'id="step-0"' not in out and "The timeline is not shown" in out


def test_report_with_a_changed_trace_renders_without_timeline(
    saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    changed = json.loads(TRACE.read_text())
    changed["steps"][3]["action"]["text"] = "something else"
    (tmp_path / "t.json").write_text(json.dumps(changed))
    data = json.loads(saved.read_text())
    data["trace_path"] = str(tmp_path / "t.json")
    saved.write_text(json.dumps(data))
    code, out, err = run(capsys, "report", str(saved), "--format", "html")
    assert code == 0 and "has changed since the report was computed" in err
    assert 'id="step-0"' not in out


def test_report_trace_option(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "report", str(saved), "--format", "html", "--trace", str(TRACE))
    assert code == 0 and 'id="step-3"' in out
    other = ROOT / "traces" / "and.json"
    code, out, err = run(capsys, "report", str(saved), "--format", "html", "--trace", str(other))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "not the one the report was computed from" in err


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{", "line 1 column 2: invalid JSON"),
        ("[]", "$: expected a JSON object"),
        ('{"version": "car.report/v9"}', "$.version: unknown version 'car.report/v9'"),
        ("{}", "$.version: missing"),
        ('{"version": "car.trace/v1"}', "is this a trace?"),
        ('{"version": "car.report/v1", "seed": 0}', "$.car_version: required field is missing (and "),
    ],
)
def test_bad_report_files_get_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, out, err = run(capsys, "report", str(bad))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and str(bad) in err and expected in err, err


def test_missing_report_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "report", str(tmp_path / "nope.json"))
    assert code == 2 and err.strip().endswith("nope.json: no such file")


def test_load_report_round_trips(saved: Path) -> None:
    report = load_report(saved)
    assert report.locus == 1 and report.trace_path == str(TRACE)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        ({"locus": 99}, "$.locus: step 99 is not one of the report's 4 steps (0-3)"),
        ({"steps": []}, "$.steps: a report has at least one step"),
        ({"shared": [1, -2]}, "$.shared[1]: step -2 is not one of"),
    ],
)
@pytest.mark.parametrize("fmt", ["table", "html", "json"])
def test_a_report_naming_steps_it_does_not_have_is_refused(
    saved: Path, capsys: pytest.CaptureFixture[str], edit: dict[str, object], expected: str, fmt: str
) -> None:
    """A hand-edited report that names a step it lacks: one line, exit 2 (was a traceback)."""
    doc = json.loads(saved.read_text())
    doc.update(edit)
    saved.write_text(json.dumps(doc))
    code, out, err = run(capsys, "report", str(saved), "--format", fmt, "-o", str(saved) + ".out")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and expected in err, err


def test_report_output_makes_missing_directories_and_refuses_a_directory(
    saved: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = saved.parent / "new" / "dir" / "r.md"
    code, out, err = run(capsys, "report", str(saved), "--format", "markdown", "-o", str(target))
    assert (code, out) == (0, "") and target.read_text().startswith("#")
    assert err.strip() == f"report written to {target}"
    code, out, err = run(capsys, "report", str(saved), "-o", str(saved.parent))
    assert (code, out) == (2, "") and "it is a directory; name a file" in err
