"""A store that cannot be made where it is asked for: the default one is skipped with a notice (a
read-only checkout is common in CI), one named with --store is an error."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from car.store import DEFAULT_DIR
from tests.conftest import TRACES, Result

FAST = ["--samples", "4", "--match-samples", "4"]


@pytest.fixture
def read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory refuses new directories, as a read-only checkout does (tests run as
    root, for whom chmod changes nothing)."""
    monkeypatch.chdir(tmp_path)
    mkdir = Path.mkdir

    def refuse(self: Path, *args: object, **kwargs: object) -> None:
        if self.name == DEFAULT_DIR or self.absolute().parent == tmp_path:
            raise PermissionError(13, "Permission denied", str(self))
        mkdir(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "mkdir", refuse)
    return tmp_path


def test_a_read_only_directory_runs_without_the_default_store(
    read_only: Path, run_cli: Callable[..., Result]
) -> None:
    """`car blame traces/pivot.json` died with a PermissionError traceback on ./.car (exit 1)."""
    r = run_cli("blame", TRACES / "pivot.json", *FAST, "--format", "json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["locus"] == 1  # the report, whole
    (notice,) = r.err.strip().splitlines()
    assert notice.startswith("car: note: ") and "cannot create or write the store" in notice
    assert "running without a store" in notice and "--store PATH" in notice and "--no-store" in notice
    assert not (read_only / DEFAULT_DIR).exists()


def test_a_named_store_that_cannot_be_made_is_one_line_and_exit_2(
    read_only: Path, run_cli: Callable[..., Result]
) -> None:
    r = run_cli("blame", TRACES / "pivot.json", *FAST, "--store", "sub/s.sqlite")
    assert r.code == 2 and r.out == ""
    (line,) = r.err.strip().splitlines()
    assert line == (
        "car: error: sub/s.sqlite: cannot create or write the store here (Permission denied); "
        "use another file (--store PATH) or run without a store (--no-store)"
    )
