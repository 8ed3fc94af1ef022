"""On a terminal, `car report` and a batch's summary fit the table to its width, as `car blame`'s
ranked table does; files and pipes keep the fixed width the documentation quotes."""

from __future__ import annotations

import io
import re
import shutil
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.cells import cell_len

from car.outputs import read_results, summary_rows
from tests.conftest import TRACES, Result

RunCli = Callable[..., Result]
FAST = ["--samples", "4", "--match-samples", "1", "--method", "contrastive", "--no-store"]
HEADS = ["locus", "or", "shared", "credit", "effect", "[CI]", "match", "rate", "status", "rollouts"]
ESCAPES = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")


class Terminal(io.StringIO):
    """A stream that says it is a terminal, as a shell's stdout or stderr is."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def saved(run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Batch records of three traces and a file that is not one, named by relative paths (no digits
    that a folded path would split)."""
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    runs.mkdir()
    for name in ("pivot", "or", "support-refund"):
        shutil.copy(TRACES / f"{name}.json", runs / f"{name}.json")
    (runs / "broken.json").write_text('{"version": "car.trace/v1", "id": ', encoding="utf-8")
    res = run_cli("blame", "runs", *FAST, "--format", "jsonl", "-o", "records.jsonl")
    assert res.code == 2, res.err
    return tmp_path / "records.jsonl"


def _on_terminal(monkeypatch: pytest.MonkeyPatch, width: int, stream: str = "stdout") -> Terminal:
    monkeypatch.setenv("COLUMNS", str(width))
    monkeypatch.setenv("NO_COLOR", "1")
    term = Terminal()
    monkeypatch.setattr(sys, stream, term)
    return term


def _figures(text: str) -> Counter[str]:
    return Counter(re.findall(r"[-+]?\d+%?", text))


def _fits(text: str, width: int) -> str:
    plain = ESCAPES.sub("", text)
    assert plain.strip()
    assert max(cell_len(line) for line in plain.splitlines()) <= width, plain
    return plain


@pytest.mark.parametrize("width", [120, 80, 60, 40])
def test_car_report_fits_a_batch_summary_to_the_terminal(
    run_cli: RunCli, saved: Path, monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    """`car report` wrote the summary a file gets (160 columns) to a terminal of any width: each row
    wrapped onto the next line; and on a terminal's stderr, `car blame DIR` cropped the columns that
    did not fit (match rate, status and rollouts were gone at 80 columns, figures cut to '43% [3…')."""
    expected = Counter[str]()
    for row in summary_rows(read_results(saved)):
        expected += _figures(" ".join((row["confidence"], row["match"], row["rollouts"])))
    term = _on_terminal(monkeypatch, width)
    res = run_cli("report", saved)
    assert res.code == 2  # as car blame exited: one file was not a trace
    text = _fits(term.getvalue(), width)
    assert _figures(text) >= expected, text
    for path in ("runs/pivot.json", "runs/or.json", "runs/support-refund.json"):
        assert path in "".join(text.split()), text  # whole, folded or not
    if width == 120:  # room for a table, one row a trace; narrower, the rows wrap or become blocks
        assert text.splitlines()[1].split() == ["trace", "outcome", *HEADS]

    monkeypatch.setattr(sys, "stdout", io.StringIO())
    err = _on_terminal(monkeypatch, width, "stderr")
    res = run_cli("blame", "runs", *FAST, "--format", "jsonl", "-o", "again.jsonl")
    assert res.code == 2
    said = ESCAPES.sub("", err.getvalue())  # the estimate line and live bars come first
    summary = _fits(said[said.index("car blame: summary") : said.index("4 traces: ")], width)
    assert _figures(summary) >= expected, summary


@pytest.mark.parametrize("width", [80, 40])
def test_car_report_fits_a_ranked_table_to_the_terminal(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    """`car report result.json` printed the 120-column table to a terminal of any width."""
    saved = tmp_path / "result.json"
    res = run_cli("blame", TRACES / "support-refund.json", *FAST, "--format", "json", "-o", saved)
    assert res.code == 0, res.err
    term = _on_terminal(monkeypatch, width)
    assert run_cli("report", saved).code == 0
    text = _fits(term.getvalue(), width)
    assert "is where the run was decided" in " ".join(text.split())
    piped = io.StringIO()  # a pipe: the fixed width, as before
    monkeypatch.setattr(sys, "stdout", piped)
    assert run_cli("report", saved).code == 0
    assert max(len(line) for line in piped.getvalue().splitlines()) > width
