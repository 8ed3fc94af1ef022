"""Trace text that tries to restyle a terminal or disguise itself is shown as `\\xNN` escapes in
every output car prints (JSON as `\\uXXXX` escapes, which read back as the text): the progress
and gate lines on stderr, GitHub annotations and JUnit XML included, as the table, Markdown and
HTML already did."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TRACES, Result

RunCli = Callable[..., Result]

# Escape sequences (colour, clear screen, a window title, an OSC 8 link), a bell, a carriage
# return, a C1 control, a right-to-left override and the right-to-left and Arabic letter marks.
# Last, a GitHub Actions runner command, which the runner acts on anywhere in a line.
HOSTILE = (
    "\x1b[31mred\x1b[2J\x1b]0;title\x07\x1b]8;;http://x\x1b\\link\rback\x9b\u202erlo\u200f\u061c"
    "##[stop-commands]hush"
)
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]|##\\[")

# Copies the record, except that step 2 (the refund) is re-decided half the time: the locus.
POLICY = (
    "from car import Action\n"
    "class Copy:\n"
    "    spec = 'copy'\n"
    "    def __init__(self, trace):\n"
    "        self.trace = trace\n"
    "    async def act(self, decision, key):\n"
    "        if decision.step == 2 and key.uniform() < 0.5:\n"
    "            return Action(text='I will escalate this.')\n"
    "        return self.trace.steps[decision.step].action\n"
    "def policy(trace):\n"
    "    return Copy(trace)\n"
)


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, list[str]]:
    """A folder holding support-refund with an actor whose id is `HOSTILE`, and the options that
    attribute it (the locus, step 2, is that actor's)."""
    doc = json.loads((TRACES / "support-refund.json").read_text(encoding="utf-8"))
    actor = "support " + HOSTILE
    doc["actors"][0]["id"] = actor
    for step in doc["steps"]:
        step["actor"] = actor
    doc.pop("replay")
    doc.pop("metadata")
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "hostile.json").write_text(json.dumps(doc), encoding="utf-8")
    (tmp_path / "copy.py").write_text(POLICY, encoding="utf-8")
    options = [
        "--policy", f"{tmp_path / 'copy.py'}@policy", "--env", "recorded",
        "--scorer", "tool-called:issue_refund", "--samples", "16", "--no-store",
    ]  # fmt: skip
    return runs, options


def _raw(text: str) -> set[str]:
    return {c if c == "##[" else f"U+{ord(c):04X}" for c in RAW.findall(text)}


def test_progress_and_gate_lines_show_escapes(run_cli: RunCli, hostile: tuple[Path, list[str]]) -> None:
    """The gate line of one trace and the per-trace line of a batch printed the actor id raw on
    stderr: its escape sequences cleared the screen and retitled the window (a terminal), or
    coloured a CI log."""
    runs, options = hostile
    one = run_cli("blame", runs / "hostile.json", *options, "--fail-on-blame", "any")
    assert one.code == 1, one.err
    assert "car: gate: step 2 (support \\x1b[31mred" in one.err
    batch = run_cli("blame", runs, *options, "--fail-on-blame", "any", "--format", "jsonl")
    assert batch.code == 1, batch.err
    assert "hostile.json: gate: step 2 (support \\x1b[31mred" in batch.err
    for res in (one, batch):
        assert _raw(res.err) == set(), res.err


def test_annotations_and_junit_show_escapes(run_cli: RunCli, hostile: tuple[Path, list[str]]) -> None:
    """`--format github` and `--format junit` carried the actor's escape sequences, carriage return
    and right-to-left override raw into the annotations and the XML."""
    runs, options = hostile
    github = run_cli("blame", runs, *options, "--format", "github")
    assert github.code == 0, github.err
    [warning] = [line for line in github.out.splitlines() if line.startswith("::warning ")]
    assert "title=car blames step 2 (support \\x1b[31mred" in warning
    assert "\\x0dback\\x9b\\x202erlo\\x200f\\x61c" in warning
    junit = run_cli("blame", runs, *options, "--format", "junit")
    assert junit.code == 0, junit.err
    out = ET.fromstring(junit.out).findtext("testsuite/testcase/system-out") or ""
    assert "Step 2 (support \\x1b[31mred" in out and "\\x202erlo" in out
    for text in (github.out, junit.out):
        assert _raw(text) == set(), text


def test_table_and_markdown_show_bidi_marks_as_escapes(
    run_cli: RunCli, hostile: tuple[Path, list[str]]
) -> None:
    """The right-to-left and Arabic letter marks (U+200F, U+061C) reached the table and Markdown
    raw, where the HTML page shows them as escapes."""
    runs, options = hostile
    for fmt in ("table", "markdown"):
        res = run_cli("blame", runs / "hostile.json", *options, "--format", fmt)
        assert res.code == 0, res.err
        assert "\\x200f" in res.out and "\\x61c" in res.out
        assert _raw(res.out) == set(), res.out


# Workflow commands that a table or a sentence wrapping the actor's id puts at a line's start.
COMMANDS = " " * 130 + "::error::pwned" + " " * 130 + "::stop-commands::hush"


def _two_runs(tmp_path: Path, doc: dict[str, Any]) -> tuple[Path, list[str]]:
    """A folder `runs` of two copies of `doc`, and the options that attribute them with the `Copy`
    policy (step 2 is the locus)."""
    runs = tmp_path / "runs"
    runs.mkdir()
    for name in ("a.json", "b.json"):
        (runs / name).write_text(json.dumps(doc), encoding="utf-8")
    (tmp_path / "copy.py").write_text(POLICY, encoding="utf-8")
    return runs, [
        "--policy", f"{tmp_path / 'copy.py'}@policy", "--env", "recorded",
        "--scorer", "tool-called:issue_refund", "--samples", "8", "--no-store",
    ]  # fmt: skip


@pytest.mark.parametrize("fmt", ["table", "github", "markdown", "junit", "html"])
def test_no_line_starts_with_a_workflow_command_from_trace_text(
    run_cli: RunCli, tmp_path: Path, fmt: str
) -> None:
    """A GitHub Actions runner takes a line that starts with `::`, after any spaces, for a workflow
    command: where the ranked table's headline or the batch summary wrapped an actor's id, or the
    HTML page kept the task's line breaks, trace text raised `::error::` annotations in a CI log."""
    doc = json.loads((TRACES / "support-refund.json").read_text(encoding="utf-8"))
    actor = "support" + COMMANDS
    doc["actors"][0]["id"] = actor
    for step in doc["steps"]:
        step["actor"] = actor
    doc["task"] = "Help the customer.\n::error::pwned\n  ::stop-commands::hush"
    doc.pop("replay")
    doc.pop("metadata")
    runs, options = _two_runs(tmp_path, doc)
    options += ["--format", fmt]
    ours = re.compile(r"::(warning|error|notice) ")  # car's own annotations, under --format github
    shapes = [runs / "a.json"] if fmt == "html" else [runs / "a.json", runs]
    for given in shapes:
        res = run_cli("blame", given, *options)
        assert res.code == 0, res.err
        lines = (res.out + res.err).splitlines()
        assert [line for line in lines if re.match(r"\s*::", line) and not ours.match(line)] == []
        assert "pwned" in res.out or "pwned" in res.err  # the text is shown, not dropped


def test_junit_starts_no_line_with_a_workflow_command_from_an_actor_id(
    run_cli: RunCli, tmp_path: Path
) -> None:
    """JUnit's `<system-out>` holds the headline, which keeps the line breaks of an actor id: an id
    `support\\n::error::pwned` put `::error::pwned` at the start of a line of `--format junit`,
    an annotation when a CI log shows it. The XML still reads back as the id."""
    doc = json.loads((TRACES / "support-refund.json").read_text(encoding="utf-8"))
    actor = "support\n::error::pwned\n  ::stop-commands::hush"
    doc["actors"][0]["id"] = actor
    for step in doc["steps"]:
        step["actor"] = actor
    doc.pop("replay")
    doc.pop("metadata")
    (tmp_path / "t.json").write_text(json.dumps(doc), encoding="utf-8")
    (tmp_path / "copy.py").write_text(POLICY, encoding="utf-8")
    res = run_cli(
        "blame", tmp_path / "t.json", "--policy", f"{tmp_path / 'copy.py'}@policy",
        "--env", "recorded", "--scorer", "tool-called:issue_refund", "--samples", "8",
        "--no-store", "--format", "junit",
    )  # fmt: skip
    assert res.code == 0, res.err
    assert [line for line in res.out.splitlines() if re.match(r"\s*::", line)] == []
    out = ET.fromstring(res.out).findtext("testsuite/testcase/system-out") or ""
    assert f"Step 2 ({actor}: issue_refund(" in out


def test_validate_and_import_lines_show_escapes(run_cli: RunCli, tmp_path: Path) -> None:
    """`car validate FILE` printed the actors, and `car import` the trace id, raw: their escape
    sequences restyled the terminal, and a line break put `::error::` at a line's start."""
    doc = json.loads((TRACES / "support-refund.json").read_text(encoding="utf-8"))
    actor = "support " + HOSTILE + "\n::error::pwned"
    doc["id"] = "t " + HOSTILE + "\n::error::pwned"
    doc["actors"][0]["id"] = actor
    for step in doc["steps"]:
        step["actor"] = actor
    doc["source"] = {"format": "car", "locator": "run " + HOSTILE}
    doc["fidelity"] = {"class": "B", "warnings": [{"code": "c", "message": "m " + HOSTILE}]}
    (tmp_path / "t.json").write_text(json.dumps(doc), encoding="utf-8")
    valid = run_cli("validate", tmp_path / "t.json")
    assert valid.code == 0, valid.err
    assert "t.json (run \\x1b[31mred" in valid.out and "actors support \\x1b[31mred" in valid.out
    assert "warning c: m \\x1b[31mred" in valid.out
    imported = run_cli("import", tmp_path / "t.json", "-o", tmp_path / "out.json")
    assert imported.code == 0, imported.err
    assert "imported t \\x1b[31mred" in imported.err
    assert json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))["id"] == doc["id"]
    for text in (valid.out, imported.err):
        assert _raw(text) == set(), text
        assert [line for line in text.splitlines() if re.match(r"\s*::", line)] == []


def test_error_lines_show_a_file_names_escapes(
    run_cli: RunCli, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An error names its file: a trace file whose name holds an escape sequence (a window title)
    and a right-to-left override had them printed raw on stderr, by `car validate`, by `car blame`
    and its `--dry-run`, and in the lines of a trace with no decision step or over the budget, or
    of a run that cannot be imported."""
    name = "\x1b]0;title\x07\u202e"
    shown = "\\x1b]0;title\\x07\\x202e"
    doc = json.loads((TRACES / "support-refund.json").read_text(encoding="utf-8"))
    good, bad, idle = (tmp_path / f"{kind}{name}.json" for kind in ("good", "bad", "idle"))
    good.write_text(json.dumps(doc), encoding="utf-8")
    bad.write_text(json.dumps({**doc, "version": "car.trace/v0"}), encoding="utf-8")
    doc["actors"][0]["kind"] = "tool"
    idle.write_text(json.dumps(doc), encoding="utf-8")
    tau = [{"task_id": i, "reward": 0, "info": {}, "traj": traj} for i, traj in enumerate([[], []])]
    tau[0]["traj"] = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
    runs_file = tmp_path / f"tau{name}.json"
    runs_file.write_text(json.dumps(tau), encoding="utf-8")
    runs = [
        (["validate", runs_file], f"car: error: {tmp_path}/tau{shown}.json: run 1 cannot be"),
        (["validate", bad], f"bad{shown}.json: $.version: unknown version"),
        (["blame", bad], f"bad{shown}.json: $.version: unknown version"),
        (["blame", "--dry-run", bad], f"bad{shown}.json: $.version: unknown version"),
        (["validate", idle], f"idle{shown}.json: no decision steps"),
        (["blame", good, "--max-rollouts", "1"], f"car: budget: {tmp_path}/good{shown}.json: "),
    ]
    for args, said in runs:
        res = run_cli(*args)
        assert res.code in (1, 2), res.err
        assert said in res.err
        assert _raw(res.err) == set(), res.err
    # `car import` warns of the run it leaves out through logging (pytest captures it)
    assert run_cli("import", runs_file, "-o", tmp_path / "out").code == 0
    [warning] = [r.getMessage() for r in caplog.records if r.name == "car.importers"]
    assert warning.startswith(f"car: warning: {tmp_path}/tau{shown}.json: run 1 skipped")
    assert _raw(warning) == set(), warning


def test_missing_trace_note_shows_escapes(run_cli: RunCli, tmp_path: Path) -> None:
    """`car report --format html` says when the report's trace is gone, naming the path the report
    records: a name holding escape sequences went raw to stderr."""
    doc = json.loads((TRACES / "support-refund.json").read_text(encoding="utf-8"))
    trace = tmp_path / "a\x1b[2J\x9b.json"
    trace.write_text(json.dumps(doc), encoding="utf-8")
    saved = tmp_path / "r.json"
    res = run_cli("blame", trace, "--samples", "4", "--no-store", "--format", "json", "-o", saved)
    assert res.code == 0, res.err
    trace.unlink()
    page = run_cli("report", saved, "--format", "html", "-o", tmp_path / "r.html")
    assert page.code == 0, page.err
    assert "a\\x1b[2J\\x9b.json was not found" in page.err
    assert _raw(page.err) == set(), page.err


def test_phase_lines_show_a_file_names_escapes(run_cli: RunCli, tmp_path: Path) -> None:
    """The phase lines of one trace (`car: FILE: match draws: 32 draws planned`) printed the file's
    name raw: its escape sequences reached the terminal, and a line break in it put `::error::` at
    the start of a CI log line."""
    trace = tmp_path / "a\x1b[2J\x07\n::error::pwned.json"
    trace.write_text((TRACES / "support-refund.json").read_text(encoding="utf-8"), encoding="utf-8")
    res = run_cli("blame", trace, "--samples", "4", "--no-store", "--format", "json")
    assert res.code == 0, res.err
    assert "a\\x1b[2J\\x07 ::error::pwned.json: match draws: " in res.err
    assert _raw(res.err) == set(), res.err
    assert [line for line in res.err.splitlines() if re.match(r"\s*::", line)] == []


def test_a_very_long_actor_id_is_cut_where_a_sentence_or_cell_shows_it(
    run_cli: RunCli, tmp_path: Path
) -> None:
    """An actor id of 96 KB was repeated whole wherever a sentence names the step's actor: the
    headline, the batch summary's credit, the annotation's title, the gate line, the Markdown
    cells. The table ran to 815 lines, the batch summary to 2,673, `--format github` to 1.3 MB.
    Names are cut at 200 characters with "…" there, as is the trace id in the table's title (and
    in the lines of `car validate` and `car import`); the JSON keeps them whole."""
    doc = json.loads((TRACES / "support-refund.json").read_text(encoding="utf-8"))
    actor = "support " + "lorem ipsum " * 8000
    doc["id"] = "run " + "dolor sit " * 10_000
    doc["actors"][0]["id"] = actor
    for step in doc["steps"]:
        step["actor"] = actor
    doc.pop("replay")
    doc["metadata"] = {"who_and_when": {"mistake_step": 2, "mistake_agent": actor}}
    runs, options = _two_runs(tmp_path, doc)
    cut = actor[:199] + "…"
    shapley = ["--method", "shapley", "--players", "agents", "--budget", "20"]
    table = run_cli("blame", runs / "a.json", *options, *shapley, "--fail-on-blame", "any")
    assert table.code == 1, table.err
    said = " ".join(table.out.split())
    for sentence in (
        f"car blame: {doc['id'][:199]}…",  # the title names the trace
        f"Step 2 ({cut}: issue_refund(",  # the headline
        f"Shapley: the Shapley credit goes to {cut} (100% of the total)",
        f"labelled mistake (who-and-when): step 2 by {cut}; car names step 2 ({cut})",
    ):
        assert " ".join(sentence.split()) in said
    assert len(table.out.splitlines()) < 40
    assert f"car: gate: step 2 ({cut}) is the locus" in table.err
    for fmt, most in (("table", 20_000), ("markdown", 20_000), ("github", 20_000)):
        res = run_cli("blame", runs, *options, "--format", fmt)
        assert res.code == 0, res.err
        assert len(res.out.encode()) < most, fmt
    valid = run_cli("validate", runs / "a.json")
    assert valid.out.endswith(f"actors {cut}\n")
    imported = run_cli("import", runs / "a.json", "-o", tmp_path / "t.json")
    assert imported.err.startswith(f"imported {doc['id'][:199]}…: car, native, 4 steps")
    saved = run_cli("blame", runs / "a.json", *options, "--format", "json")
    assert json.loads(saved.out)["locus_actor"] == actor
    assert json.loads(saved.out)["trace_id"] == doc["id"]


def test_json_outputs_escape_c1_and_bidi_controls(
    run_cli: RunCli, hostile: tuple[Path, list[str]]
) -> None:
    """`--format json` and `jsonl` wrote the actor id's C1 control (U+009B, a CSI), right-to-left
    override and marks, and its `##[`, raw (JSON escapes only C0 controls): printed to a terminal
    or a CI log they acted there. They are `\\uXXXX` escapes now, and the JSON reads back the same."""
    runs, options = hostile
    actor = "support " + HOSTILE
    for given, fmt in ((runs / "hostile.json", "json"), (runs, "json"), (runs, "jsonl")):
        res = run_cli("blame", given, *options, "--format", fmt)
        assert res.code == 0, res.err
        assert _raw(res.out) == set(), res.out
        doc = json.loads(res.out.splitlines()[0] if fmt == "jsonl" else res.out)
        report = doc if given.is_file() else doc.get("report") or doc["records"][0]["report"]
        assert report["locus_actor"] == actor


def test_car_import_writes_c1_and_bidi_controls_as_escapes(run_cli: RunCli, tmp_path: Path) -> None:
    """`car import` (to stdout, or to a file someone may `cat`) wrote a trace's C1 controls and
    right-to-left override raw, as the reports did; the trace reads back the same."""
    doc = json.loads((TRACES / "support-refund.json").read_text(encoding="utf-8"))
    doc["task"] = "refund " + HOSTILE
    (tmp_path / "t.json").write_text(json.dumps(doc), encoding="utf-8")
    res = run_cli("import", tmp_path / "t.json")
    assert res.code == 0, res.err
    assert _raw(res.out) == set(), res.out
    assert json.loads(res.out)["task"] == doc["task"]


def test_an_error_quoting_a_huge_value_keeps_its_place_and_advice(
    run_cli: RunCli, tmp_path: Path
) -> None:
    """An error quotes the value it refuses: a 100 KB field made a 100 KB line on stderr (and a
    cell of `car validate DIR` as tall). The middle is left out, where the value is; the file, the
    place and what car reads stay."""
    doc = json.loads((TRACES / "pivot.json").read_text(encoding="utf-8"))
    (tmp_path / "big.json").write_text(json.dumps({**doc, "version": "v " * 50_000}))
    for args in (["validate", tmp_path / "big.json"], ["blame", tmp_path / "big.json"]):
        res = run_cli(*args)
        assert res.code == 2
        (line,) = res.err.splitlines()
        assert len(line) < 2100
        assert line.startswith(f"car: error: {tmp_path}/big.json: $.version: unknown version 'v v")
        assert " … [" in line and " characters left out] … " in line
        assert line.endswith("v '; this car reads 'car.trace/v1'")
    res = run_cli("validate", tmp_path)
    assert res.code == 2 and len(res.out.splitlines()) < 20
    assert "characters left out" in res.out
