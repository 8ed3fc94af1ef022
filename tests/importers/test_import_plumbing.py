"""What `import_file`, `load_any` and `car import` do around the importers: a run of a multi-run file
that cannot be imported is skipped with a warning (not the whole file), `--item N` counts runs as
the file holds them, `-o -` is stdout, a native trace too deep to write is refused where it is
read, and only a native-looking object falls back to car's own format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run

from car.errors import InputError
from car.importers import import_file, load_any

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
