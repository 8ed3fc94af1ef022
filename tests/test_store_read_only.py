"""A finished store on read-only media (a CI artifact mounted read-only) is read where it is: a
store in WAL mode needs an -shm file beside it, which SQLite cannot make there."""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from car.store import RolloutStore
from tests.conftest import TRACES, Result

FAST = ["--samples", "4", "--match-samples", "4"]


@pytest.fixture
def artifact(tmp_path: Path) -> Iterator[Path]:
    """A directory to hold a store, made read-only by `_read_only` once the store is in it."""
    directory = tmp_path / "artifact"
    directory.mkdir()
    yield directory
    directory.chmod(0o755)  # for the clean-up


def _read_only(directory: Path, store: Path) -> None:
    """No new file can be made in `directory`. Root is not bound by the directory's mode: for root,
    the store's -shm name is a link, which SQLite will not follow, so it fails as on a read-only
    mount ("unable to open database file")."""
    directory.chmod(0o555)
    if os.geteuid() == 0:
        Path(f"{store}-shm").symlink_to("nowhere")


def _store_of_a_run(path: Path, run_cli: Callable[..., Result]) -> None:
    r = run_cli("blame", TRACES / "pivot.json", *FAST, "--store", path, "-q")
    assert r.code == 0, r.err


def test_a_finished_store_is_read_on_read_only_media(
    artifact: Path, run_cli: Callable[..., Result]
) -> None:
    """`car report` and `car cache info` said "cannot create or write the store here (unable to open
    database file)" (exit 2)."""
    store = artifact / "s.sqlite"
    _store_of_a_run(store, run_cli)
    _read_only(artifact, store)
    r = run_cli("report", store, "--format", "json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["locus"] == 1
    r = run_cli("cache", "info", "--store", store)
    assert r.code == 0, r.err
    assert r.out.startswith(f"{store}: ") and "over 1 trace; 1 report" in r.out


def test_rows_in_a_write_ahead_log_on_read_only_media_are_named_not_left_out(
    tmp_path: Path, artifact: Path, run_cli: Callable[..., Result]
) -> None:
    """A store copied while a run was writing it: its last rows are in its -wal file, which SQLite
    reads only with an -shm file. Reading it as immutable would leave them out without a word."""
    with RolloutStore(tmp_path / "live.sqlite") as live:
        live.put("ns", "k", "h", "run", {"value": 1.0})
        assert (tmp_path / "live.sqlite-wal").stat().st_size > 0
        store = artifact / "s.sqlite"
        shutil.copy(tmp_path / "live.sqlite", store)
        shutil.copy(tmp_path / "live.sqlite-wal", f"{store}-wal")
    _read_only(artifact, store)
    r = run_cli("cache", "info", "--store", store)
    assert r.code == 2 and r.out == ""
    assert r.err.strip() == (
        f"car: error: {store}: cannot read the rows in its write-ahead log s.sqlite-wal here: SQLite "
        "needs to make s.sqlite-shm beside it; copy s.sqlite and s.sqlite-wal to a writable "
        "directory and read the copy"
    )


def test_a_shard_with_rows_in_its_log_on_read_only_media_is_named_as_merged(
    tmp_path: Path, artifact: Path, run_cli: Callable[..., Result]
) -> None:
    """`car merge` named such a shard without the "(merging into ...)" that its every other line has."""
    with RolloutStore(tmp_path / "live.sqlite") as live:
        live.put("ns", "k", "h", "run", {"value": 1.0})
        shard = artifact / "s.sqlite"
        shutil.copy(tmp_path / "live.sqlite", shard)
        shutil.copy(tmp_path / "live.sqlite-wal", f"{shard}-wal")
    _read_only(artifact, shard)
    into = tmp_path / "all.sqlite"
    r = run_cli("merge", into, shard)
    assert r.code == 2 and not into.exists()
    assert r.err.startswith(
        f"car: error: {shard} (merging into {into}): cannot read the rows in its write-ahead log "
    )


def test_clearing_a_store_on_read_only_media_is_one_line(
    artifact: Path, run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`car cache clear` of a store it cannot delete ended in an OSError traceback (exit 1)."""
    store = artifact / "s.sqlite"
    _store_of_a_run(store, run_cli)
    if os.geteuid() == 0:  # root deletes in a read-only directory: the mount refuses it instead
        unlink = Path.unlink

        def read_only_mount(self: Path, missing_ok: bool = False) -> None:
            if self.parent == artifact:
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
            unlink(self, missing_ok)

        monkeypatch.setattr(Path, "unlink", read_only_mount)
    else:
        artifact.chmod(0o555)
    r = run_cli("cache", "clear", "--store", store)
    assert (r.code, r.out) == (2, "")
    reason = os.strerror(errno.EROFS if os.geteuid() == 0 else errno.EACCES)
    assert r.err == f"car: error: {store}: cannot remove the store ({reason})\n"
    assert store.exists()
