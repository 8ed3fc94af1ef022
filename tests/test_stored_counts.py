"""A one-trace report served from the store says so, as the batch summary does ("(N stored)")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import METERED, TRACES, Result

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


def test_a_record_rerendered_from_a_report_does_not_claim_the_run_was_free(
    tmp_path: Path, run_cli: RunCli
) -> None:
    """`car report r.json --format jsonl` wrote `"rollouts": {"fresh": 0, ...}` for a run of 50
    rollouts, which a reader takes for the run's cost. A report does not keep how its rollouts
    split between computed and served, so both are null (the report's budget has the total), while
    records read back keep blame's own figures."""
    import json

    store = tmp_path / "s.sqlite"
    saved, streamed = tmp_path / "r.json", tmp_path / "r.jsonl"
    assert run_cli("blame", TRACE, "--store", store, "--format", "json", "-o", saved).code == 0
    assert run_cli("blame", TRACE, "--store", store, "--format", "jsonl", "-o", streamed).code == 0
    (own,) = [json.loads(line) for line in streamed.read_text().splitlines()]
    assert own["rollouts"] == {"fresh": 0, "stored": 50}  # this second run: all from the store
    from_report = run_cli("report", saved, "--format", "jsonl")
    assert from_report.code == 0, from_report.err
    (record,) = [json.loads(line) for line in from_report.out.splitlines()]
    assert record["rollouts"] == {"fresh": None, "stored": None}
    assert record["report"]["budget"] == own["report"]["budget"]
    assert record["report"]["budget"]["rollouts"] == sum(own["rollouts"].values())
    from_records = run_cli("report", streamed, "--format", "jsonl")
    assert [json.loads(line)["rollouts"] for line in from_records.out.splitlines()] == [own["rollouts"]]
    # A null read back stays null.
    again = tmp_path / "again.jsonl"
    again.write_text(from_report.out)
    reread = run_cli("report", again, "--format", "jsonl")
    assert json.loads(reread.out)["rollouts"] == {"fresh": None, "stored": None}


def test_a_record_rerendered_from_a_report_does_not_claim_no_tokens_were_used(
    tmp_path: Path, run_cli: RunCli
) -> None:
    """`car report r.json --format jsonl` wrote `"usage": {}` for a run whose policy used tokens: a
    report does not keep them, so its record says null (unknown), in JSONL and in the batch JSON,
    while blame's own record keeps what the components reported."""
    import json

    run = ("--policy", METERED, "--samples", "4", "--no-store")
    store = tmp_path / "s.sqlite"
    saved, streamed = tmp_path / "r.json", tmp_path / "r.jsonl"
    pivot = TRACES / "pivot.json"
    assert run_cli("blame", pivot, *run, "--price", "input_tokens=2", "-o", saved).code == 0
    assert run_cli("blame", pivot, *run, "--price", "input_tokens=2", "-o", streamed).code == 0
    (own,) = [json.loads(line) for line in streamed.read_text().splitlines()]
    assert own["usage"]["input_tokens"] > 0 and own["cost_usd"] > 0
    from_report = run_cli("report", saved, "--format", "jsonl")
    assert from_report.code == 0, from_report.err
    (record,) = [json.loads(line) for line in from_report.out.splitlines()]
    assert (record["usage"], record["cost_usd"]) == (None, None)
    # Read back, a null stays null and blame's own figures stay.
    again = tmp_path / "again.jsonl"
    again.write_text(from_report.out)
    assert json.loads(run_cli("report", again, "--format", "jsonl").out)["usage"] is None
    assert json.loads(run_cli("report", streamed, "--format", "jsonl").out)["usage"] == own["usage"]
    # The store keeps reports only: its batch JSON says the same of each.
    for trace in (pivot, TRACES / "or.json"):
        assert run_cli("blame", trace, "--store", store, "-q").code == 0
    batch = run_cli("report", store, "--format", "json")
    assert batch.code == 0, batch.err
    records = json.loads(batch.out)["records"]
    assert len(records) == 2 and all(r["usage"] is None for r in records)
