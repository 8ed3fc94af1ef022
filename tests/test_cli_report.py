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


def test_a_trace_option_no_page_uses_is_refused(
    saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only the HTML page shows the trace: `car report r.json --trace nope.json` (a table, markdown)
    exited 0 and ignored the option, where docs/html-report.md says a `--trace` file that is missing
    is an input error, "you named it, so a typo should not pass silently"."""
    for fmt in (["--format", "table"], ["--format", "markdown"], ["-o", str(tmp_path / "r.md")]):
        code, out, err = run(capsys, "report", str(saved), "--trace", str(TRACE), *fmt)
        assert (code, out) == (2, ""), fmt
        kind = "table" if "table" in fmt else "markdown"
        assert err == (
            f"car: error: --trace {TRACE}: only --format html shows the trace (its timeline), and "
            f"this report is {kind}; drop --trace, or use --format html\n"
        )
    assert not (tmp_path / "r.md").exists()


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
    assert err.strip() == f"markdown report written to {target}"
    code, out, err = run(capsys, "report", str(saved), "-o", str(saved.parent))
    assert (code, out) == (2, "") and "it is a directory; name a file" in err


def test_without_format_the_output_suffix_chooses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-o page.html` without --format wrote the terminal table into the page (and `-o r.json` a
    table that `car report r.json` then refused): a suffix that names a format chooses it, and the
    line that says where the report went says so."""
    page, saved = tmp_path / "page.html", tmp_path / "r.json"
    code, out, err = run(capsys, "blame", str(TRACE), *FAST, "-o", str(page), "--no-progress")
    assert (code, out) == (0, "") and page.read_text().startswith("<!DOCTYPE html>")
    assert err.strip() == (
        f"html report written to {page} (the format its suffix .html names; --format chooses another)"
    )
    code, _, err = run(capsys, "blame", str(TRACE), *FAST, "-o", str(saved))
    assert code == 0 and f"json report written to {saved} (the format its suffix" in err
    assert load_report(saved).locus == 1
    again = tmp_path / "again.HTM"  # any case; .htm too
    code, out, err = run(capsys, "report", str(saved), "-o", str(again))
    assert (code, out) == (0, "") and again.read_text().startswith("<!DOCTYPE html>")
    assert err.strip() == (
        f"html report written to {again} (the format its suffix .HTM names; --format chooses another)"
    )
    for name, start in [
        ("r.md", "## car blame"),
        ("r.xml", "<?xml"),
        ("r.jsonl", '{"version": "car.record/v1"'),
    ]:
        code, _, err = run(capsys, "report", str(saved), "-o", str(tmp_path / name))
        assert code == 0 and (tmp_path / name).read_text().startswith(start), name
    # A suffix that names no format, and an explicit --format, keep what they said (no notice).
    code, _, err = run(capsys, "report", str(saved), "-o", str(tmp_path / "t.txt"))
    assert err.strip() == f"table report written to {tmp_path / 't.txt'}"
    code, _, err = run(capsys, "report", str(saved), "--format", "table", "-o", str(tmp_path / "t.json"))
    assert err.strip() == f"table report written to {tmp_path / 't.json'}"
    assert (tmp_path / "t.json").read_text().startswith("car blame: support-refund-0")
    # A batch cannot be one HTML page: refused before any work, naming the file, not --format.
    code, out, err = run(capsys, "blame", str(TRACE), str(TRACE.parent / "pivot.json"), "-o", str(page))
    assert (code, out) == (2, "")
    assert err.strip() == (
        f"car: error: -o {page}: its suffix names html, and html renders one trace's report; "
        "for a batch use markdown, junit or github"
    )


def test_a_report_option_names_its_format_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With `-o FILE` formatted by its suffix, every `--report FORMAT=PATH` line said so too:
    `markdown report written to z.txt (the format its suffix .txt names; --format chooses another)`,
    of a format its FORMAT= named and --format does not change."""
    xml, md, jsonl = tmp_path / "r.xml", tmp_path / "z.txt", tmp_path / "r.jsonl"
    for paths in ([str(TRACE)], [str(TRACE), str(TRACE.parent / "pivot.json")]):  # one, a batch
        code, _, err = run(
            capsys, "blame", *paths, *FAST, "--no-store", "--no-progress", "-o", str(xml),
            "--report", f"markdown={md}", "--report", f"jsonl={jsonl}",
        )  # fmt: skip
        written = [line for line in err.splitlines() if " report written to " in line]
        by_suffix = "(the format its suffix .xml names; --format chooses another)"
        assert code == 0 and written == [
            f"junit report written to {xml} {by_suffix}",
            f"markdown report written to {md}",
            f"jsonl report written to {jsonl}",
        ], err


def test_dash_output_is_stdout_not_a_file_named_dash(
    saved: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`-o -` is stdout, as for `car import`; `car blame` and `car report` wrote a file named '-'."""
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "blame", str(TRACE), *FAST, "--format", "json", "-o", "-")
    assert code == 0 and json.loads(out)["trace_id"] == "support-refund-0"
    code, out, _ = run(capsys, "report", str(saved), "--format", "markdown", "-o", "-")
    assert code == 0 and out.startswith("#")
    code, out, err = run(capsys, "blame", str(TRACE), *FAST, "--report", "json=-")
    assert (code, out) == (2, "")
    assert err.strip() == (
        "car: error: --report 'json=-': --report writes a file (for stdout: --format json)"
    )
    assert not (tmp_path / "-").exists()


def test_the_timeline_of_a_run_picked_from_a_file_of_several_is_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`car blame FILE --item 1`: the HTML page (from car blame or car report, with or without
    --trace) finds the run by the report's hash. It dropped the timeline, or refused --trace, saying
    'pick one with --item N', which car report does not take."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(ROOT / "tests" / "fixtures" / "importers" / "tau_bench.json", "runs.json")
    Path("fixed.py").write_text(
        "from car import Action\n\n"
        "class Fixed:\n"
        "    spec = 'fixed'\n\n"
        "    async def act(self, decision, key):\n"
        "        return Action(text='done')\n\n\n"
        "def fixed(trace):\n"
        "    return Fixed()\n"
    )
    args = ["runs.json", "--item", "1", "--policy", "fixed.py@fixed", "--env", "recorded"]
    args += ["--scorer", "regex:.", *FAST, "--method", "contrastive", "--no-store"]
    code, _, err = run(capsys, "blame", *args, "--format", "json", "-o", "r.json")
    assert code == 0, err
    pages = [
        ("blame", *args, "--format", "html", "-o", "b.html"),
        ("report", "r.json", "--format", "html", "-o", "r.html"),
        ("report", "r.json", "--trace", "runs.json", "--format", "html", "-o", "t.html"),
    ]
    for argv in pages:
        code, _, err = run(capsys, *argv)
        assert code == 0 and "note" not in err and "--item" not in err, err
        assert "timeline" in Path(argv[-1]).read_text()


def test_report_refuses_to_overwrite_its_source(
    analyses: Path, saved: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """-o naming the store (or the report) being re-rendered replaced it with the rendered text."""
    for source in (analyses, saved):
        before = source.read_bytes()
        same = source.parent / ".." / source.parent.name / source.name  # another spelling
        code, out, err = run(capsys, "report", str(source), "--format", "markdown", "-o", str(same))
        assert (code, out) == (2, "")
        assert err.splitlines() == [
            f"car: error: -o {same} would overwrite {source}, the source it re-renders; "
            "write the report elsewhere"
        ]
        assert source.read_bytes() == before


@pytest.fixture
def analyses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A store with two analyses of support-refund (8 and 4 samples per step) and one of pivot."""
    store = tmp_path / "s.sqlite"
    pivot = ROOT / "traces" / "pivot.json"
    for trace, samples in ((TRACE, "8"), (TRACE, "4"), (pivot, "4")):
        args = [str(trace), "--samples", samples, "--match-samples", "2", "--method", "contrastive"]
        code, _, err = run(capsys, "blame", *args, "--store", str(store), "--format", "json")
        assert code == 0, err
    return store


def _ids(listing: str) -> dict[str, str]:
    """Report id by samples per step, from the Markdown listing's `[ID: samples N]` labels."""
    import re

    return {m[1]: m[0] for m in re.findall(r"\\\[([0-9a-f]{8}): samples (\d+)\\\]", listing)}


def test_report_listing_tells_analyses_of_one_trace_apart(
    analyses: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Several analyses of one trace were listed under the same name, with nothing to tell them apart."""
    code, out, _ = run(capsys, "report", str(analyses), "--format", "markdown")
    assert code == 0
    ids = _ids(out)
    assert sorted(ids) == ["4", "8"] and ids["4"] != ids["8"]
    assert f"### {TRACE} \\[{ids['8']}: samples 8\\]" in out.replace("\\_", "_")
    assert "pivot.json \\[" not in out  # a trace analysed once needs no label
    assert "\n3 reports of 2 traces: 3 ok\n" in out  # was "3 traces", counting analyses as traces
    code, out, _ = run(capsys, "report", str(analyses), "--format", "json")
    assert [r["trace"] for r in json.loads(out)["records"]].count(str(TRACE)) == 2  # paths stay paths


def test_report_pick_chooses_one_analysis_for_html(
    analyses: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "report", str(analyses), "--format", "html")
    assert (code, out) == (2, "")
    (line,) = err.splitlines()
    assert f"{analyses}: holds 3 reports; --format html renders one: choose it with --pick" in line
    _, listing, _ = run(capsys, "report", str(analyses), "--format", "markdown")
    ids = _ids(listing)
    for which, samples in ((ids["4"], 4), (ids["8"][:5], 8)):
        code, out, err = run(capsys, "report", str(analyses), "--format", "html", "--pick", which)
        assert code == 0 and out.startswith("<!DOCTYPE html>"), err
        code, out, _ = run(capsys, "report", str(analyses), "--format", "json", "--pick", which)
        assert code == 0 and json.loads(out)["samples"] == samples
    # A trace analysed once is picked by its path or its id.
    for which in (str(ROOT / "traces" / "pivot.json"), "pivot-0"):
        code, out, err = run(capsys, "report", str(analyses), "--format", "html", "--pick", which)
        assert code == 0 and out.startswith("<!DOCTYPE html>"), err
    # A path that picks two analyses is fine for a listing, ambiguous for one page.
    code, out, _ = run(capsys, "report", str(analyses), "--format", "jsonl", "--pick", str(TRACE))
    assert code == 0 and len(out.splitlines()) == 2
    code, out, err = run(capsys, "report", str(analyses), "--format", "html", "--pick", str(TRACE))
    assert (code, out) == (2, "")
    (line,) = err.splitlines()
    assert f"--pick {TRACE} matches 2 reports" in line
    assert f"{ids['8']} (samples 8)" in line and f"{ids['4']} (samples 4)" in line


def test_report_labels_show_budgets_as_integers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Shapley budget of 1234567 rollouts was labelled 'budget 1.23457e+06'."""
    store = str(tmp_path / "s.sqlite")
    pivot = str(ROOT / "traces" / "pivot.json")
    shapley = ["--method", "shapley", "--budget", "1234567", "--budget-calls", "2345678"]
    for how in (["--method", "contrastive"], [*shapley, "--target-width", "0.5"]):
        code, _, err = run(capsys, "blame", pivot, *FAST, *how, "--store", store, "-q")
        assert code == 0, err
    code, out, _ = run(capsys, "report", store, "--format", "markdown")
    assert code == 0
    assert "budget 1234567, budget calls 2345678, target width 0.5\\]" in out, out


@pytest.mark.parametrize(
    ("which", "expected"),
    [
        ("traces/nope.json", "--pick 'traces/nope.json': no report of that trace path or id"),
        ("ffffffff", "--pick 'ffffffff': no report of that trace path or id, nor report id"),
        ("abc", "no report of that trace path or id (a report id has at least 4 of its digits)"),
    ],
)
def test_report_pick_that_matches_nothing_is_one_clear_error(
    analyses: Path, capsys: pytest.CaptureFixture[str], which: str, expected: str
) -> None:
    code, out, err = run(capsys, "report", str(analyses), "--pick", which)
    assert (code, out) == (2, "")
    (line,) = err.splitlines()
    assert line.startswith(f"car: error: {analyses}: ") and expected in line, line


def test_adaptive_analyses_are_told_apart_by_what_they_take(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An adaptive and a fixed analysis of one trace: the adaptive one's label named samples and
    level, which --adaptive does not take (and refuses)."""
    store = tmp_path / "s.sqlite"
    for args in (["--adaptive", "--budget", "200"], ["--samples", "8", "--level", "0.9"]):
        code, _, err = run(capsys, "blame", str(TRACE), *args, "--store", str(store))
        assert code == 0, err
    code, out, _ = run(capsys, "report", str(store), "--format", "markdown")
    assert code == 0
    labels = [line for line in out.splitlines() if line.startswith("### ")]
    adaptive = [line for line in labels if ": adaptive, " in line]
    assert len(labels) == 2 and len(adaptive) == 1
    assert "samples" not in adaptive[0] and "level" not in adaptive[0], adaptive[0]  # 0.95 too


def test_a_store_lists_its_traces_in_the_order_blame_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`car blame DIR` lists 2.json before 10.json; `car report` of its store listed 10.json first."""
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copy(ROOT / "traces" / "pivot.json", runs / "2.json")
    shutil.copy(ROOT / "traces" / "or.json", runs / "10.json")
    store = str(tmp_path / "store.sqlite")
    code, _, _ = run(capsys, "blame", str(runs), *FAST, "--store", store)
    assert code == 0
    code, out, _ = run(capsys, "report", store, "--format", "jsonl")
    assert code == 0
    listed = [json.loads(line)["trace"] for line in out.splitlines()]
    assert listed == [str(runs / "2.json"), str(runs / "10.json")]


def test_a_batch_rerendered_ends_with_its_counts_as_blame_did(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`car blame DIR` ends with its counts line on stderr (with the labels' tally where traces
    carry labels); `car report` of the batch printed it only when the exit code was not 0."""
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copy(ROOT / "traces" / "pivot.json", runs / "pivot.json")
    shutil.copy(ROOT / "traces" / "or.json", runs / "or.json")
    saved = tmp_path / "batch.jsonl"
    code, _, err = run(capsys, "blame", str(runs), *FAST, "--no-store", "-o", str(saved))
    assert code == 0 and "\n2 traces: 2 ok\n" in f"\n{err}", err
    for fmt in ("table", "jsonl"):
        code, _, err = run(capsys, "report", str(saved), "--format", fmt)
        assert (code, err) == (0, "car: 2 traces: 2 ok\n"), err


def test_report_renders_an_empty_shards_batch_as_blame_wrote_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shard that holds no trace writes every output empty (a `car.batch/v1` of no records);
    `car report` of that JSON said "no stored reports (run car blame with a store first)", exit 2."""

    def blame(shard: str, fmt: str) -> Path:
        path = tmp_path / f"{shard.replace('/', 'of')}.{fmt}"
        args = [*FAST, "--no-store", "--shard", shard, "--format", fmt, "-o", str(path)]
        code, _, _ = run(capsys, "blame", str(TRACE), *args)
        assert code == 0
        return path

    # One trace over two shards: one of them is empty.
    (shard,) = [
        s for s in ("1/2", "2/2") if json.loads(blame(s, "json").read_text()).get("records") == []
    ]
    empty = blame(shard, "json")
    for fmt in ("json", "markdown", "junit", "table"):
        code, out, err = run(capsys, "report", str(empty), "--format", fmt)
        assert (code, err) == (0, "")
        assert out == blame(shard, fmt).read_text()


def test_report_of_a_store_whose_runs_finished_no_trace_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run interrupted before any trace finished leaves rollouts and no report: the line told the
    user to run `car blame` with a store, which they had done."""
    from car.store import RolloutStore

    path = tmp_path / "store.sqlite"
    with RolloutStore(path) as store:
        for i in range(3):
            store.put("ns", f"k{i}", "h", "run", {"i": i})
    code, out, err = run(capsys, "report", str(path))
    assert code == 2 and out == ""
    assert err == (
        f"car: error: {path}: no stored reports: no trace finished in the runs that wrote it "
        "(3 rollouts and draws stored); rerun the same `car blame` command to finish them\n"
    )
