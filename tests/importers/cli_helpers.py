from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from car.cli import main
from car.trace import Trace


def run(args: list[str]) -> int:
    """Run the command line in-process; its exit code (0 when it returns normally)."""
    try:
        main(args)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def write(tmp_path: Path, data: Any, name: str = "run.json") -> Path:
    """`data` as JSON in the file `name` under `tmp_path`."""
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def warnings(t: Trace) -> dict[str, str]:
    """The import's warnings of `t`, by code."""
    assert t.fidelity is not None
    return {w.code: w.message for w in t.fidelity.warnings}
