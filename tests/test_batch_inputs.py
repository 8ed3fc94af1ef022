"""What a batch takes as input, and how bad input ends: one line naming the file and the place, exit
code 2, no traceback, and nothing already computed lost."""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import car
from car.batch import BatchOptions, blame_many, expand_paths
from car.errors import InputError
from car.importers.batch import check_path, trace_files
from tests.conftest import Result

TRACES = Path(__file__).resolve().parent.parent / "traces"
PIVOT = TRACES / "pivot.json"
FAST = ["--samples", "4", "--match-samples", "4", "--no-progress"]


def _run(run_cli: Callable[..., Result], argv: list[str]) -> tuple[int, str, str]:
    r = run_cli(*argv)
    return r.code, r.out, r.err


def _traces(folder: Path, *names: str) -> Path:
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PIVOT, folder / name)
    return folder


# -- one path given as a string --------------------------------------------------------------
def test_blame_many_takes_one_path_as_a_string_or_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A str is one path, never its characters (`"/"` walked the whole filesystem)."""
    monkeypatch.chdir(tmp_path)
    _traces(tmp_path, "p.json")
    opts = BatchOptions(samples=2, match_samples=0)
    for given in ("p.json", Path("p.json")):
        results = blame_many(given, options=opts)
        assert [(r.path, r.status) for r in results] == [("p.json", "ok")]


@pytest.mark.parametrize("junk", [42, None, b"p.json", [42], ["p.json", None]])
def test_blame_many_refuses_what_is_not_paths(junk: Any) -> None:
    with pytest.raises(TypeError, match=r"paths: expected a path or a list of paths"):
        blame_many(junk)


def test_blame_many_refuses_a_trace_or_its_json_as_paths() -> None:
    """A dict was a list of its keys: `blame_many(json.load(f))` gave one `input-error` per key
    (`version: no such file`, `id: no such file`, ...); a `car.Trace`, whose fields iterate, was
    'a list holding tuple'. Each is named, with what attributes a trace that is not a file."""
    trace = car.load_trace(PIVOT)
    data = json.loads(PIVOT.read_text())
    for given, what in ((data, "dict"), (trace, "Trace"), ([trace], "a list holding Trace")):
        with pytest.raises(TypeError) as info:
            blame_many(given)
        message = str(info.value)
        assert message.startswith(
            f"paths: expected a path or a list of paths (str or os.PathLike), got {what} "
        )
        assert message.endswith(
            "; blame_many reads trace files, and car.blame(trace) attributes a car.Trace"
        )


# -- entries that cannot be read or checked ---------------------------------------------------
def test_a_broken_link_in_a_folder_is_an_error_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    monkeypatch.chdir(tmp_path)
    _traces(tmp_path / "d", "a.json")
    (tmp_path / "d" / "gone.json").symlink_to(tmp_path / "nowhere.json")
    code, out, _ = _run(run_cli, ["validate", "d"])
    assert code == 2
    assert "gone.json" in out and "a broken link" in out and "a.json" in out
    code, out, err = _run(run_cli, ["blame", "d", *FAST, "--no-store", "--format", "jsonl"])
    assert code == 2 and "Traceback" not in err
    records = {r["trace"]: r for r in map(json.loads, out.splitlines())}
    assert records["d/a.json"]["status"] == "ok"  # the other trace is still attributed
    assert records["d/gone.json"]["status"] == "input-error"
    assert "d/gone.json: a broken link" in records["d/gone.json"]["error"]


def test_a_glob_through_linked_folders_takes_each_file_once_as_the_folder_walk_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`**` follows links round a loop: each file came back once per turn (`d/sub/up/sub/a.json`,
    ...), about 40 times, every one attributed anew."""
    monkeypatch.chdir(tmp_path)
    _traces(tmp_path / "d", "a.json")
    _traces(tmp_path / "d" / "sub", "b.json")
    (tmp_path / "d" / "sub" / "up").symlink_to("..")
    walked = expand_paths("d")
    assert walked == ["d/a.json", "d/sub/b.json"]
    assert expand_paths("d/**/*.json") == walked


def _deny(monkeypatch: pytest.MonkeyPatch, listing: str, checking: str) -> None:
    """As an unprivileged user sees them: `listing` (a folder, chmod 000) cannot be listed, and
    `checking` (a link into such a folder) cannot be checked."""
    real_scandir, real_stat = os.scandir, os.stat

    def scandir(path: Any = ".") -> Any:
        if os.fspath(path).endswith(listing):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_scandir(path)

    def stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if isinstance(path, str | os.PathLike) and os.fspath(path).endswith(checking):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "stat", stat)


def test_unreadable_entries_in_a_folder_are_errors_not_crashes_nor_silence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    monkeypatch.chdir(tmp_path)
    _traces(tmp_path / "d", "a.json", "locked/x.json")
    (tmp_path / "d" / "link.json").symlink_to(tmp_path / "d" / "locked" / "x.json")
    _deny(monkeypatch, "locked", "link.json")
    code, out, err = _run(run_cli, ["validate", "d"])
    assert code == 2 and err == ""
    assert "link.json" in out and "locked" in out and "permission denied" in out.lower()
    code, out, err = _run(run_cli, ["blame", "d", *FAST, "--no-store", "--format", "jsonl"])
    assert code == 2 and "Traceback" not in err
    records = {r["trace"]: r for r in map(json.loads, out.splitlines())}
    assert records["d/a.json"]["status"] == "ok"
    assert records["d/link.json"]["error"] == "d/link.json: cannot check it (Permission denied)"
    assert records["d/locked"]["error"] == "d/locked: cannot read this directory (Permission denied)"


def test_a_file_named_directly_that_cannot_be_checked_is_no_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    """Whether a named path is a directory is asked of os.path, which says no when it may not look:
    the file is then read, and says why it cannot be (here it can)."""
    monkeypatch.chdir(tmp_path)
    _traces(tmp_path / "d", "x.json")
    _deny(monkeypatch, "nothing", "x.json")
    code, _, err = _run(run_cli, ["blame", "d/x.json", *FAST, "--no-store", "-o", "d/x.md"])
    assert code == 0, err


def _lock(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """As an unprivileged user sees a folder after `chmod 000`: the folder itself can be checked,
    nothing inside it can be checked, read, written or made (root may do all of it)."""
    inside = os.fspath(folder) + os.sep
    real_stat, real_mkdir = os.stat, os.mkdir
    real_read, real_write = Path.read_bytes, Path.write_bytes

    def denied(path: Any) -> bool:
        return isinstance(path, str | os.PathLike) and os.path.abspath(path).startswith(inside)

    def refuse(path: Any) -> PermissionError:
        return PermissionError(errno.EACCES, "Permission denied", os.fspath(path))

    def stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if denied(path):
            raise refuse(path)
        return real_stat(path, *args, **kwargs)

    def mkdir(path: Any, *args: Any, **kwargs: Any) -> None:
        if denied(path):
            raise refuse(path)
        real_mkdir(path, *args, **kwargs)

    def read_bytes(self: Path) -> bytes:
        if denied(self):
            raise refuse(self)
        return real_read(self)

    def write_bytes(self: Path, data: Any) -> int:
        if denied(self):
            raise refuse(self)
        return real_write(self, data)

    monkeypatch.setattr(os, "stat", stat)
    monkeypatch.setattr(os, "mkdir", mkdir)
    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    monkeypatch.setattr(Path, "write_bytes", write_bytes)


def test_validate_and_import_of_a_path_inside_a_folder_car_may_not_enter_say_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    """`car validate FILE`, `car import -o PATH` and `car report FILE` asked pathlib whether the
    path was a directory, which raises there: a PermissionError traceback, exit 1. They ask as
    `car blame` does (os.path says no where it may not look), then the file read or written names
    its error: one line, exit 2."""
    monkeypatch.chdir(tmp_path)
    _traces(tmp_path / "locked", "x.json")
    _lock(monkeypatch, tmp_path / "locked")
    code, out, err = _run(run_cli, ["validate", "locked/x.json"])
    assert (code, out) == (2, "")
    assert err == "car: error: locked/x.json: cannot read: Permission denied\n"
    code, out, err = _run(run_cli, ["import", str(PIVOT), "-o", "locked/out.json"])
    assert (code, out) == (2, "")
    assert err == "car: error: locked/out.json: cannot write the trace (Permission denied)\n"
    several = Path(__file__).parent / "fixtures" / "importers" / "tau_bench.json"
    code, out, err = _run(run_cli, ["import", str(several), "-o", "locked/runs"])
    assert (code, out) == (2, "")
    assert err == "car: error: locked/runs: cannot create the directory (Permission denied)\n"
    code, out, err = _run(run_cli, ["report", "locked/x.json"])  # `car report` had the same shape
    assert (code, out) == (2, "")
    assert err == "car: error: locked/x.json: cannot read: Permission denied\n"


# -- one rule for which files a folder holds ---------------------------------------------------
def test_validate_and_blame_take_the_same_files_in_natural_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = ["10.json", "2.json", "B.JSON", "a.json", ".hidden/c.json", ".dot.json", "sub/1.jsonl"]
    _traces(tmp_path, *names)
    (tmp_path / "notes.txt").write_text("")
    expected = [str(tmp_path / n) for n in ["2.json", "10.json", "a.json", "B.JSON", "sub/1.jsonl"]]
    assert expand_paths([tmp_path]) == expected
    assert [str(p) for p in trace_files(tmp_path)] == expected
    assert [r.file for r in check_path(tmp_path)] == expected
    monkeypatch.chdir(tmp_path)
    assert expand_paths(".")[:3] == ["2.json", "10.json", "a.json"]  # as pathlib spells them


# -- a run's own outputs are not its inputs ---------------------------------------------------
def test_the_same_command_again_resumes_with_its_report_inside_the_input_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    monkeypatch.chdir(tmp_path)
    _traces(tmp_path / "d", "a.json")
    argv = ["blame", "d", *FAST, "--store", str(tmp_path / "s.sqlite")]
    argv += ["--report", "jsonl=d/results.jsonl", "-o", "d/summary.md", "--format", "markdown"]
    first = _run(run_cli, argv)
    assert first[0] == 0
    code, _, err = _run(run_cli, argv)
    assert code == 0, err
    assert "1 trace: 1 ok" in err
    # a file named as a trace still clashes
    code, _, err = _run(run_cli, ["blame", "d/results.jsonl", "--report", "jsonl=d/results.jsonl"])
    assert code == 2 and "would overwrite the trace d/results.jsonl" in err


# -- -q keeps the errors --------------------------------------------------------------------
def test_quiet_batch_still_prints_each_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    monkeypatch.chdir(tmp_path)
    _traces(tmp_path / "d", "a.json")
    (tmp_path / "d" / "broken.json").write_text('{"version": "car.trace/v1", "id": ')
    code, _, err = _run(run_cli, ["blame", "d", *FAST, "--no-store", "-q"])
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("car: error: d/broken.json")


def test_a_trace_whose_scenario_parameters_are_bad_leaves_the_others_their_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    """A `metadata.sim.params` value the scenario cannot read is that trace's input error; it
    stopped the whole batch with a traceback when the sim: components were built."""
    monkeypatch.chdir(tmp_path)
    _traces(tmp_path / "d", "a.json")
    doc = json.loads(PIVOT.read_text())
    doc["metadata"]["sim"]["params"]["p"] = "high"
    (tmp_path / "d" / "b.json").write_text(json.dumps(doc))
    code, out, err = _run(run_cli, ["blame", "d", *FAST, "--no-store", "--format", "jsonl"])
    assert code == 2 and "Traceback" not in err
    records = {r["trace"]: r for r in map(json.loads, out.splitlines())}
    assert records["d/a.json"]["status"] == "ok"
    assert records["d/b.json"]["status"] == "input-error"
    assert "$.metadata.sim.params.p: expected a finite number, got a string" in err


@pytest.mark.parametrize("command", ["validate", "blame"])
def test_an_error_quoting_a_lone_surrogate_can_be_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result], command: str
) -> None:
    """An error that quotes the input (a value, a key) holding a lone UTF-16 surrogate: the table on
    stdout (and a JSONL record) holds its escape, as the file did; printing the character itself
    raised UnicodeEncodeError, a traceback that lost every other file's row."""
    monkeypatch.chdir(tmp_path)
    _traces(tmp_path / "d", "a.json")
    doc = PIVOT.read_text()
    (tmp_path / "d" / "b.json").write_text(doc.replace('"pivot-0"', '"cut \\udfff"'))
    (tmp_path / "d" / "c.json").write_text(doc.replace('"task"', '"t\\ud800sk"'))
    (tmp_path / "d" / "e.json").write_text(doc.replace('"p": 0.3', '"p\\udc00": 0.3'))  # in a path
    extra = [*FAST, "--no-store", "--format", "jsonl"] if command == "blame" else []
    code, out, err = _run(run_cli, [command, "d", *extra])
    assert code == 2 and "Traceback" not in err
    if command == "blame":
        records = [json.loads(line) for line in out.splitlines()]
        status = {r["trace"]: r["status"] for r in records}
        bad = {f"d/{name}.json": "input-error" for name in "bce"}
        assert status == {"d/a.json": "ok", **bad}
        out = " ".join(r["error"] for r in records if r["error"])
    assert "cut \\udfff" in out and "t\\ud800sk" in out  # escapes, as in the files
    assert "$.metadata.sim.params.p\\udc00" in out


def test_a_file_name_that_is_not_utf8_is_shown_escaped_and_stops_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    """A trace named with a byte that is not UTF-8: the report, the JSONL record and the store
    show the byte as an escape. Writing the name itself raised UnicodeEncodeError (storing the
    report, writing -o or --report), a traceback that lost the whole batch."""
    monkeypatch.chdir(tmp_path)
    _traces(tmp_path / "d", "a.json")
    try:
        shutil.copy(PIVOT, tmp_path / "d" / os.fsdecode(b"b\xff.json"))
    except (OSError, UnicodeError):
        pytest.skip("this file system takes only UTF-8 names")
    argv = ["blame", "d", *FAST, "--method", "contrastive", "-q"]
    code, _, err = _run(run_cli, [*argv, "--report", "jsonl=r.jsonl", "--report", "markdown=r.md"])
    assert (code, err) == (0, "")
    records = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert sorted(r["trace"] for r in records) == ["d/a.json", "d/b\\xff.json"]
    assert "xff.json" in (tmp_path / "r.md").read_text()  # Markdown escapes the backslash
    code, out, _ = _run(run_cli, ["report", ".car/store.sqlite", "--format", "jsonl"])
    assert code == 0 and sorted(json.loads(line)["trace"] for line in out.splitlines()) == [
        "d/a.json",
        "d/b\\xff.json",
    ]


# -- prices of counters that do not exist ----------------------------------------------------
def test_a_price_for_a_counter_no_backend_reports_is_named_before_any_work(
    run_cli: Callable[..., Result],
) -> None:
    """A typo would cost 0 for the whole run; a plugin may report a counter of its own, so the name
    is kept, and said before any work as well as after the run."""
    code, _, err = _run(run_cli, ["blame", str(PIVOT), *FAST, "--no-store", "--price", "foo=1"])
    assert code == 0
    lines = err.splitlines()
    assert lines[0] == (
        "car: note: --price foo: car's backends report input_tokens, output_tokens, "
        "cache_creation_input_tokens, cache_read_input_tokens; foo costs only if a plugin reports it"
    )
    assert any(line.startswith("car: note: --price foo: no such counter in this run") for line in lines)


def test_the_known_counters_are_those_the_backends_count() -> None:
    from car.backends.http import _USAGE_NAMES
    from car.ci import USAGE_COUNTERS

    assert set(USAGE_COUNTERS) == set(_USAGE_NAMES.values())


def test_expanding_an_empty_folder_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no trace files"):
        expand_paths([tmp_path])


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["pivot.json", "or.json", "--min-match-rate", "0.99"], "car: 2 traces: 2 gate"),
        (["pivot.json", "or.json", "--max-rollouts", "0"], "car: 2 traces: 2 budget"),
    ],
)
def test_quiet_batch_says_why_it_exits_1(
    monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result], argv: list[str], line: str
) -> None:
    """A batch's tripped gates and budget skips exited 1 under -q with nothing on stderr (one trace
    prints `car: gate: ...`): the counts line says why, as `car report` says it."""
    monkeypatch.chdir(TRACES)
    code, out, err = _run(run_cli, ["blame", *argv, *FAST, "--no-store", "-q", "--format", "json"])
    assert code == 1 and json.loads(out)["version"] == "car.batch/v1"
    assert err.splitlines() == [line]
    # --exit-zero: nothing to explain
    code, _, err = _run(run_cli, ["blame", *argv, *FAST, "--no-store", "-q", "--exit-zero"])
    assert (code, err) == (0, "")


# -- no policy anywhere -----------------------------------------------------------------------
def test_a_batch_whose_traces_all_name_no_policy_fails_once_before_its_estimate(
    run_cli: Callable[..., Result], tmp_path: Path
) -> None:
    """Each trace would fail alike (imported logs name no policy), after an estimate of work that
    never runs: one line instead, exit 2. A folder where some trace names one runs as before."""
    record = json.loads(PIVOT.read_text())
    del record["replay"]["policy"]
    for i in range(3):
        (tmp_path / f"{i}.json").write_text(json.dumps(record | {"id": f"run-{i}"}))
    code, out, err = _run(run_cli, ["blame", str(tmp_path), *FAST, "--no-store"])
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "car: error: none of the 3 traces names a policy: pass the model that recorded them "
        "(--policy openai:MODEL or anthropic:MODEL, with --base-url for a local server), or "
        "--policy sim:NAME, path/to/policy.py@name, or an installed plugin"
    ]
    code, _, err = _run(run_cli, ["blame", str(tmp_path), *FAST, "--no-store", "--policy", "sim:pivot"])
    assert code == 0 and "3 traces: 3 ok" in err
    shutil.copy(PIVOT, tmp_path / "3.json")
    code, out, err = _run(run_cli, ["blame", str(tmp_path), *FAST, "--no-store"])
    assert code == 2 and "names no policy" in out and "estimate: 4 traces" in err


# -- every trace refused alike ----------------------------------------------------------------
def test_a_batch_every_trace_of_which_is_refused_alike_fails_once_before_its_estimate(
    run_cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without an API key each trace of a folder failed with the same line, after an estimate of
    work that never runs (`~272,968 policy calls` for four Who&When logs): one line instead, exit 2.
    A folder where another refusal is among them runs as before, each on its own line."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    for name in ("pivot.json", "or.json", "and.json"):
        shutil.copy(TRACES / name, tmp_path / name)
    keyless = ["--policy", "openai:gpt-4o", "--scorer", "sim:pivot", "--no-store"]
    code, out, err = _run(run_cli, ["blame", str(tmp_path), *FAST, *keyless])
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "car: error: every one of the 3 traces would be refused: OpenAI needs an API key: set "
        "OPENAI_API_KEY in the environment (or name another variable with --api-key-env)"
    ]
    # Refused for different reasons (one file is no trace): each is said, as before.
    (tmp_path / "broken.json").write_text("{")
    code, out, err = _run(run_cli, ["blame", str(tmp_path), *FAST, *keyless])
    assert code == 2 and err.startswith("estimate: 4 traces (1 unreadable)")
    assert out.count("OpenAI needs an API key") == 3 and "4 traces: 4 input-error" in err


def test_validate_matches_a_pattern_the_shell_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    """`car validate 'd/*.json'` (quoted) said "no such file", where `car blame` matches it."""
    monkeypatch.chdir(tmp_path)
    _traces(tmp_path / "d", "a.json", "b.json", "x/c.json")
    code, out, _ = _run(run_cli, ["validate", "d/*.json"])
    assert code == 0
    assert "d/a.json" in out and "d/b.json" in out and "c.json" not in out
    assert "2 files, 2 runs ok, 0 failed" in out
    code, out, _ = _run(run_cli, ["validate", "d/a*.json"])  # one file: its one line
    assert code == 0 and out.startswith("d/a.json: ok: car.trace/v1")
    code, out, err = _run(run_cli, ["validate", "d/z*.json"])
    assert code == 2 and err.strip() == "car: error: d/z*.json: the pattern matches no file"


def test_an_output_that_ends_in_a_separator_names_a_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    """`-o out/` (out not there yet) wrote the report as a file named `out`."""
    monkeypatch.chdir(tmp_path)
    _traces(tmp_path, "p.json")
    code, _, err = _run(run_cli, ["blame", "p.json", *FAST, "--no-store", "-o", "out/"])
    assert code == 2 and "out/ names a directory (it ends in /)" in err and "-o out/FILE" in err
    code, _, err = _run(run_cli, ["blame", "p.json", *FAST, "--no-store", "--report", "junit=x/"])
    assert code == 2 and err.strip() == (
        "car: error: --report 'junit=x/': x/ names a directory (it ends in /); the report is one "
        "file: name it (junit=x/FILE)"
    )
    assert not (tmp_path / "out").exists() and not (tmp_path / "x").exists()
    code, _, _ = _run(run_cli, ["blame", "p.json", *FAST, "--no-store", "-o", "out/r.json"])
    assert code == 0 and json.loads((tmp_path / "out" / "r.json").read_text())["trace_id"]


def test_one_file_named_by_two_spellings_is_attributed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`car blame t/pivot.json ./t/pivot.json` attributed the file twice: duplicates were matched
    on the path as typed. The first spelling is kept, for a missing file too."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "pivot.json").write_text("{}")
    (tmp_path / "t" / "or.json").write_text("{}")
    named = ["t/pivot.json", "./t/pivot.json", "t//pivot.json", "t/../t/pivot.json", "t/*.json"]
    assert expand_paths(named) == ["t/pivot.json", "t/or.json"]
    assert expand_paths(["gone.json", "./gone.json"]) == ["gone.json"]


def test_validate_checks_a_file_named_twice_once(run_cli: Callable[..., Result]) -> None:
    """`car validate t.json ./t.json` listed the file twice and said "1 file, 2 runs ok"."""
    pivot = Path(__file__).resolve().parents[1] / "traces" / "pivot.json"
    other = pivot.parent / ".." / "traces" / "pivot.json"
    once = run_cli("validate", pivot)
    r = run_cli("validate", pivot, other, pivot)
    assert (r.code, r.out) == (0, once.out) and "ok" in once.out
