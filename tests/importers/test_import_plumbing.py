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
