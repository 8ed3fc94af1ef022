"""What `import_file`, `load_any` and `car import` do around the importers: a run of a multi-run file
that cannot be imported is skipped with a warning (not the whole file), `--item N` counts runs as
the file holds them, `-o -` is stdout, a native trace too deep to write is refused where it is
read, and only a native-looking object falls back to car's own format."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run

from car.errors import InputError
from car.importers import Runs, import_file, load_any
from car.trace import parse_trace

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "importers"
ROOT = Path(__file__).resolve().parents[2]


def _tau(task_id: int, traj: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    if traj is None:
        traj = [{"role": "user", "content": "refund"}, {"role": "assistant", "content": "done"}]
    return {"task_id": task_id, "reward": 0, "info": {}, "traj": traj}


def _write(tmp_path: Path, data: Any, name: str = "runs.json") -> Path:
    f = tmp_path / name
    f.write_text(json.dumps(data))
    return f


def _skips(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "car.importers"]


_EMPTY = "expected at least one turn (message or model call) (found none to import)"


# -- one bad run does not cost the file its good ones ----------------------------------------------


def test_a_tau_bench_run_with_an_empty_trajectory_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    f = _write(tmp_path, [_tau(1), _tau(2, []), _tau(3)])
    runs = import_file(f)
    assert [t.id for t in runs] == ["tau-bench/runs/task-1", "tau-bench/runs/task-3"]
    assert isinstance(runs, Runs) and [i for i, _ in runs.skipped] == [1]
    assert _skips(caplog) == [f"{f}: run 1 skipped: $[1]: {_EMPTY}"]
    assert all(r.levelno == logging.WARNING for r in caplog.records)


def test_a_tau2_simulation_without_messages_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sim = {"id": "s", "task_id": 1, "reward_info": {"reward": 1}, "messages": []}
    good = {**sim, "id": "ok", "messages": [{"role": "user", "content": "hi"}]}
    (t,) = import_file(_write(tmp_path, {"simulations": [sim, good]}))
    assert t.id == "tau2/runs/ok"
    assert _skips(caplog) == [f"{tmp_path / 'runs.json'}: run 0 skipped: $.simulations[0]: {_EMPTY}"]


@pytest.mark.parametrize(
    ("fixture", "key"), [("openai_chat", "messages"), ("anthropic", "messages"), ("atif", "steps")]
)
def test_a_bad_record_in_a_list_of_requests_or_trajectories_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, fixture: str, key: str
) -> None:
    """A list of chat requests, Messages requests or ATIF trajectories failed as a whole on one."""
    good = json.loads((FIXTURES / f"{fixture}.json").read_text())
    f = _write(tmp_path, [good, {**good, key: []}, good])
    runs = import_file(f)
    assert len(runs) == 2 and [i for i, _ in runs.skipped] == [1]
    assert _skips(caplog) == [f"{f}: run 1 skipped: $[1]: {_EMPTY}"]
    assert load_any(f, item=2).source.locator == "$[2]"  # --item counts the skipped run


def _inspect_log(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The fixture log with a second sample that errored on its first model call (a 429: no model
    event), read as Inspect's reader would dump it (the optional extra is not needed)."""
    log = json.loads((FIXTURES / "inspect_log.json").read_text())
    errored = {"id": 99, "epoch": 1, "input": "q", "events": [], "error": {"message": "429 Too Many"}}
    log["samples"].append(errored)
    monkeypatch.setattr("car.importers.inspect_log._read", lambda path: log)
    return _write(tmp_path, log, "errsample.json")


def test_an_inspect_sample_that_errored_before_any_model_call_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    f = _inspect_log(monkeypatch, tmp_path)
    (t,) = import_file(f)
    assert t.source is not None and t.source.locator == "sample 1 epoch 1"
    (line,) = _skips(caplog)
    assert line.startswith(f"{f}: run 1 skipped: $.samples[1]: expected a sample with at least one")
    assert "the sample errored: 429 Too Many" in line


def test_car_validate_and_import_item_0_keep_the_good_samples(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    f = _inspect_log(monkeypatch, tmp_path)
    # validate checks the good sample and fails naming the other, as `car validate DIR` does
    assert run(["validate", str(f)]) == 2
    out, err = capsys.readouterr()
    assert out.startswith(f"{f} (sample 1 epoch 1): ok:")
    assert err.startswith(f"car: error: {f}: run 1 cannot be imported: $.samples[1]: expected")
    assert run(["import", str(f), "--item", "0"]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == "inspect/arith/1/epoch-1"
    # validate said it as an error, not also as a warning; --item 0 warns of no other run
    assert _skips(caplog) == []


def test_an_otlp_trace_whose_every_call_failed_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def chat(trace: str, sid: int, *, failed: bool) -> dict[str, Any]:
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": "q"}]}]
            ),
        }
        if not failed:
            out = [{"role": "assistant", "parts": [{"type": "text", "content": "a"}]}]
            attrs["gen_ai.output.messages"] = json.dumps(out)
        span: dict[str, Any] = {
            "traceId": trace * 32,
            "spanId": f"{sid:016x}",
            "name": "chat",
            "startTimeUnixNano": str(sid),
            "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()],
        }
        if failed:
            span["status"] = {"code": 2, "message": "429 rate limit"}
        return span

    spans = [chat("a", 1, failed=True), chat("b", 2, failed=False)]
    f = _write(tmp_path, {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
    (t,) = import_file(f)
    assert t.id == "b" * 32
    (line,) = _skips(caplog)
    assert line.startswith(
        f"{f}: run 0 skipped: $.resourceSpans[0].scopeSpans[0].spans[0]: expected a model call "
        "that did not fail"
    )
    assert f"every model call of trace {'a' * 32} failed" in line


# -- --item N counts runs as the file holds them ---------------------------------------------------


def test_item_counts_skipped_runs_and_names_the_one_picked_when_it_is_bad(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    f = _write(tmp_path, [_tau(1), _tau(2, []), _tau(3)])
    assert load_any(f, item=2).id == "tau-bench/runs/task-3"
    assert _skips(caplog) == []  # the run picked is fine: the others are none of its business
    with pytest.raises(InputError) as exc:
        load_any(f, item=1)
    assert str(exc.value) == f"{f}: $[1]: {_EMPTY}; item=1 picks this run, which cannot be imported"
    assert run(["import", str(f), "--item", "1"]) == 2
    err = capsys.readouterr().err
    assert err == f"car: error: {f}: $[1]: {_EMPTY}; --item 1 picks this run, which cannot be imported\n"
    with pytest.raises(InputError, match=r"item=3 is out of range: the file holds 3 runs \(0 to 2\)"):
        load_any(f, item=3)


def test_a_file_of_several_runs_lists_them_by_their_index_in_the_file(tmp_path: Path) -> None:
    f = _write(tmp_path, [_tau(1), _tau(2, []), _tau(3)])
    with pytest.raises(InputError) as exc:
        load_any(f)
    assert "holds 3 runs (0: $[0], 1: cannot be imported, 2: $[2]); pick one" in str(exc.value)
    # one run that imports is the file's run, as `car import` writes it
    assert load_any(_write(tmp_path, [_tau(1, []), _tau(2)], "two.json")).id == "tau-bench/two/task-2"


def test_a_file_none_of_whose_runs_imports_is_one_line_naming_the_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    f = _write(tmp_path, [_tau(1, []), _tau(2, [])])
    assert run(["import", str(f), "-o", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"car: error: {f}: $[0]: {_EMPTY}; none of the file's 2 runs can be imported\n"
    )
    assert _skips(caplog) == [] and not (tmp_path / "out").exists()


def test_car_import_to_a_directory_writes_the_good_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _write(tmp_path, [_tau(1), _tau(2, []), _tau(3)])
    assert run(["import", str(f), "-o", str(tmp_path / "out")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "tau-bench_runs_task-1.json",
        "tau-bench_runs_task-3.json",
    ]
    assert run(["import", str(f)]) == 2
    assert "holds 3 runs; write them to a directory with -o DIR, or pick one with --item N (0 to 2)" in (
        capsys.readouterr().err
    )


def test_the_skip_warning_is_one_line_on_stderr_of_the_command(tmp_path: Path) -> None:
    # in-process, pytest's log capture takes the record; the real command has no handler but
    # Python's last resort, which writes the message to stderr as it is
    f = _write(tmp_path, [_tau(1), _tau(2, [])])
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "car", "import", str(f), "-o", f"{out}/"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and [p.name for p in out.iterdir()] == ["tau-bench_runs_task-1.json"]
    assert done.stderr == (
        f"car: warning: {f}: run 1 skipped: $[1]: {_EMPTY}\n"
        "imported tau-bench/runs/task-1: tau-bench, class B, 2 steps, 2 actors; warnings: "
        f"sampling-missing\nwrote 1 trace to {out}\n"
    )


def test_validate_of_a_file_with_a_run_that_cannot_be_imported_fails_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # `car validate DIR` lists such a run as a failed row and exits 2; the file alone says the same
    f = _write(tmp_path, [_tau(1), _tau(2, []), _tau(3)])
    assert run(["validate", str(f)]) == 2
    out, err = capsys.readouterr()
    assert [line.split(": ok:")[0] for line in out.splitlines() if ": ok:" in line] == [
        f"{f} ($[0])",
        f"{f} ($[2])",
    ]
    assert err == f"car: error: {f}: run 1 cannot be imported: $[1]: {_EMPTY}\n"
    assert _skips(caplog) == []  # an error, not also a warning
    assert run(["validate", str(tmp_path)]) == 2


# -- -o - is stdout ----------------------------------------------------------------------------------


def test_dash_output_writes_the_trace_to_stdout_not_a_file_named_dash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    f = _write(tmp_path, [_tau(1)])
    assert run(["import", str(f), "-o", "-"]) == 0
    out, err = capsys.readouterr()
    assert parse_trace(json.loads(out)).id == "tau-bench/runs/task-1"
    assert "wrote" not in err and not (tmp_path / "-").exists()


def test_dash_output_refuses_several_runs_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    f = _write(tmp_path, [_tau(1), _tau(2)])
    assert run(["import", str(f), "-o", "-"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and not (tmp_path / "-").exists()
    assert err == (
        f"car: error: {f}: holds 2 runs; -o - writes one trace to stdout; write them to a "
        "directory with -o DIR, or pick one with --item N (0 to 1)\n"
    )


# -- a native trace nested too deep: validate and import agree --------------------------------------


def _deep_native(tmp_path: Path) -> Path:
    value: Any = 1
    for _ in range(300):
        value = [value]
    trace = json.loads((ROOT / "traces" / "pivot.json").read_text())
    trace["metadata"] = {"deep": value}
    return _write(tmp_path, trace, "deep.json")


def test_a_native_trace_nested_too_deep_is_refused_by_validate_as_by_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _deep_native(tmp_path)
    expected = (
        f"car: error: {f}: $.metadata: expected a value nested at most 255 levels deep, got one "
        "nested 301 levels deep, which car cannot write; flatten it\n"
    )
    assert run(["validate", str(f)]) == 2
    assert capsys.readouterr().err == expected
    assert run(["import", str(f), "-o", str(tmp_path / "out.json")]) == 2
    assert capsys.readouterr().err == expected
    assert not (tmp_path / "out.json").exists()


# -- only a native-looking object falls back to car's own format -------------------------------------


def test_a_foreign_format_with_steps_is_not_recognised_rather_than_sent_to_car_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a workflow log with `steps` of its own and no `version`: it was read as a native trace with a
    # missing version, whose advice (go through `car import`) was circular under `car import`
    log = {"workflow": "triage", "steps": [{"name": "classify", "output": "refund"}]}
    f = _write(tmp_path, log, "workflow.json")
    assert run(["import", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"car: error: {f}: not a trace format car recognises; car knows: car, ")
    assert "$.version" not in err and err.count("\n") == 1


def test_a_native_trace_with_a_broken_version_still_says_what_is_wrong(tmp_path: Path) -> None:
    trace = json.loads((ROOT / "traces" / "pivot.json").read_text())
    f = _write(tmp_path, {**trace, "version": "v1"}, "old.json")
    with pytest.raises(InputError, match=r"\$\.version: unknown version 'v1'; this car reads"):
        import_file(f)
    assert load_any(ROOT / "traces" / "pivot.json").source is None  # a good one loads as ever
