"""A one-trace report served from the store says so, as the batch summary does ("(N stored)")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import TRACES, Result

RunCli = Callable[..., Result]
TRACE = TRACES / "support-refund.json"


def _budget_line(text: str) -> str:
    return " ".join(text.split("budget: ", 1)[1].split())  # one line, however it wrapped


def test_a_rerun_from_the_store_says_how_many_rollouts_it_served(
    tmp_path: Path, run_cli: RunCli
) -> None:
    store = tmp_path / "s.sqlite"
    first = run_cli("blame", TRACE, "--store", store)
    assert first.code == 0, first.err
    assert _budget_line(first.out).startswith("50 rollouts, 194 policy calls;")  # all fresh
    again = run_cli("blame", TRACE, "--store", store)
    assert again.code == 0, again.err
    assert _budget_line(again.out).startswith("50 rollouts (50 stored), 194 policy calls;")
    batch = run_cli("blame", TRACE, TRACES / "or.json", "--store", store)
    assert "50 (50 stored)" in batch.out  # what the batch summary says of the same trace


def test_a_rerun_on_a_terminal_says_so_too(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "s.sqlite"
    assert run_cli("blame", TRACE, "--store", store).code == 0
    monkeypatch.setenv("FORCE_COLOR", "1")  # stdout counts as a terminal: the styled table
    monkeypatch.setenv("NO_COLOR", "1")
    again = run_cli("blame", TRACE, "--store", store)
    assert again.code == 0, again.err
    assert _budget_line(again.out).startswith("50 rollouts (50 stored), 194 policy calls;")


def test_markdown_and_html_say_how_many_were_stored(tmp_path: Path, run_cli: RunCli) -> None:
    store = tmp_path / "s.sqlite"
    assert run_cli("blame", TRACE, "--store", store).code == 0
    md = run_cli("blame", TRACE, "--store", store, "--format", "markdown")
    assert "50 rollouts (50 stored), 194 policy calls" in md.out, md.out
    page = tmp_path / "r.html"
    html = run_cli("blame", TRACE, "--store", store, "--format", "html", "-o", page)
    assert html.code == 0, html.err
    assert "50 rollouts (50 stored), 194 policy calls" in page.read_text()


def test_a_report_read_back_on_its_own_claims_no_stored_count(tmp_path: Path, run_cli: RunCli) -> None:
    """`car report STORE` said "(0 stored)" of every trace: a saved report does not keep the count."""
    store = tmp_path / "s.sqlite"
    assert run_cli("blame", TRACE, TRACES / "or.json", "--store", store).code == 0
    shown = run_cli("report", store)
    assert shown.code == 0, shown.err
    assert "stored)" not in shown.out and " 50 " in " ".join(shown.out.split()) + " "
    records = run_cli("report", store, "--format", "jsonl")
    assert '"stored": null' in records.out  # not known, rather than 0
    again = tmp_path / "again.jsonl"
    again.write_text(records.out)
    assert "stored)" not in run_cli("report", again).out  # and read back the same
