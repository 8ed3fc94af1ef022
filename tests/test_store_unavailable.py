"""A store that cannot be made where it is asked for: the default one is skipped with a notice (a
read-only checkout is common in CI), one named with --store is an error. A store that fills up or
is found damaged, before the run or during it, costs the run its store, never a report."""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import car.batch
import car.ci
from car.store import DEFAULT_DIR, MERGE_WAYS, RolloutStore, StoreUnavailable
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
    r = run_cli("blame", TRACES / "pivot.json", *FAST, "--format", "json", "--no-progress")
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


# -- a store that fills up -------------------------------------------------------------------------
def _fills_after(store: RolloutStore, pages: int) -> RolloutStore:
    """`store`, whose file SQLite lets grow by `pages` pages only: past them every write fails as
    on a full disk ("database or disk is full")."""
    (count,) = store._db.execute("PRAGMA page_count").fetchone()
    store._db.execute(f"PRAGMA max_page_count = {count + pages}")
    return store


def test_a_store_that_fills_up_mid_run_costs_the_store_not_the_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    """Every trace of the batch was a backend error ("OperationalError: database or disk is full"):
    the attribution, computed, was thrown away for want of a place to keep its rollouts."""
    monkeypatch.chdir(tmp_path)
    args = ["blame", TRACES / "pivot.json", TRACES / "or.json", *FAST, "--format", "json"]
    whole = run_cli(*args, "--no-store")
    assert whole.code == 0, whole.err
    opened = car.ci.open_store
    monkeypatch.setattr(car.ci, "open_store", lambda *a: _fills_after(opened(*a), 4))
    r = run_cli(*args, "--store", "s.sqlite", "--no-progress")
    assert r.code == 2
    records = [dict(rec, rollouts=None) for rec in json.loads(r.out)["records"]]
    assert records == [dict(rec, rollouts=None) for rec in json.loads(whole.out)["records"]]
    (line,) = [x for x in r.err.splitlines() if x.startswith("car: error:")]
    assert line == (
        "car: error: s.sqlite: cannot write the store (database or disk is full); the rest of the run "
        "was not stored, so a rerun computes it again (the reports are complete); use another file "
        "(--store PATH) or run without a store (--no-store)"
    )
    with RolloutStore(tmp_path / "s.sqlite") as store:  # what it kept is still a store
        assert store.count() > 0


def test_merging_into_a_full_store_is_one_line_and_merges_nothing(tmp_path: Path) -> None:
    """`car merge` into a full disk ended in an OperationalError traceback."""
    shard = RolloutStore(tmp_path / "shard.sqlite")
    for i in range(200):
        shard.put("ns", f"k{i}", "h", "run", {"turns": "x" * 200, "i": i})
    with shard, RolloutStore(tmp_path / "all.sqlite", ways=MERGE_WAYS) as target:
        _fills_after(target, 2)
        with pytest.raises(StoreUnavailable) as caught:
            target.merge_from(shard)
        assert str(caught.value) == (
            f"{tmp_path / 'all.sqlite'}: cannot create or write the store here (database or disk "
            "is full); name another store to merge into"
        )
        assert target.count() == 0  # all or nothing


def test_a_store_that_cannot_be_made_on_a_full_disk_is_not_called_damaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    """It was "not a usable car store (database or disk is full)", with removing it as a way out."""
    monkeypatch.chdir(tmp_path)
    connect = sqlite3.connect

    def full(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        db = connect(*args, **kwargs)
        db.execute("PRAGMA max_page_count = 1")  # no room for car's tables
        return db

    monkeypatch.setattr(sqlite3, "connect", full)
    r = run_cli("blame", TRACES / "pivot.json", *FAST, "--store", "s.sqlite")
    assert r.code == 2 and r.out == ""
    (line,) = r.err.strip().splitlines()
    assert line == (
        "car: error: s.sqlite: cannot create or write the store here (database or disk is full); "
        "use another file (--store PATH) or run without a store (--no-store)"
    )


# -- a store damaged mid-run -----------------------------------------------------------------------
def _truncate(path: Path) -> None:
    """Cut the store file to two pages, as another program might mid-run: its WAL checkpointed
    first, from a connection of its own, so the run's connection drops its cached pages and finds
    the damage on its next read or write."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    with path.open("r+b") as fh:
        fh.truncate(8192)


_DAMAGED_LINE = (
    "car: error: t.sqlite: the store is damaged (database disk image is malformed); the rest of the "
    "run was not stored, so a rerun computes it again (the reports are complete); use another file "
    "(--store PATH), run without a store (--no-store), or remove it (car cache clear --store "
    "t.sqlite --force)"
)


@pytest.mark.parametrize("found_on", ["write", "read"])
def test_a_store_damaged_mid_run_costs_the_store_not_the_other_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result], found_on: str
) -> None:
    """Damage found on a write (storing the next finished report) stopped the batch with one "the
    store is damaged" line: no report written, the finished traces' reports lost. Found reading the
    next trace's rows, it failed that trace, and then every later trace the same way; later only
    that trace (an input error, though nothing was wrong with it)."""
    monkeypatch.chdir(tmp_path)
    paths = [TRACES / "pivot.json", TRACES / "or.json", TRACES / "and.json"]
    args = ["blame", *paths, *FAST, "--format", "json", "-o", "t.json", "--no-progress"]
    assert run_cli(*args, "--no-store").code == 0
    whole = json.loads((tmp_path / "t.json").read_text())["records"]
    (tmp_path / "t.json").unlink()
    one_at_a_time = functools.partial(car.ci.blame_many_async, traces_at_once=1)
    monkeypatch.setattr(car.ci, "blame_many_async", one_at_a_time)
    put_result = RolloutStore.put_result
    stored: list[str] = []

    def damage(store: RolloutStore, *a: Any) -> None:
        if found_on == "write" and len(stored) == 1:  # before the second trace's report is stored
            _truncate(store.path)
        put_result(store, *a)
        stored.append(a[0])
        if found_on == "read" and len(stored) == 1:  # before the second trace starts
            _truncate(store.path)

    monkeypatch.setattr(RolloutStore, "put_result", damage)
    r = run_cli(*args, "--store", "t.sqlite")
    assert r.code == 2
    records = json.loads((tmp_path / "t.json").read_text())["records"]
    assert [dict(x, rollouts=None) for x in records] == [dict(x, rollouts=None) for x in whole]
    (line,) = [x for x in r.err.splitlines() if x.startswith("car: error:")]
    assert line == _DAMAGED_LINE


# -- a store damaged before the run ----------------------------------------------------------------
def _damage_rows(path: Path) -> None:
    """Overwrite the header of every page after car's meta table and its index: the store opens (its
    schema and version are intact) and the damage shows at the first read of a rollout."""
    assert not Path(f"{path}-wal").exists()  # closed: every row is in the file itself
    data = bytearray(path.read_bytes())
    size = int.from_bytes(data[16:18], "big")  # the page size, from the SQLite header
    for offset in range(3 * size, len(data), size):
        data[offset : offset + 8] = b"\x5a" * 8
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("traces", "method"),
    [(["pivot.json", "and.json"], "auto"), (["and.json"], "auto"), (["and.json"], "shapley")],
)
def test_a_store_damaged_before_the_run_costs_the_store_not_a_trace(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_cli: Callable[..., Result],
    traces: list[str],
    method: str,
) -> None:
    """The first trace whose read found the damage was an input error ("the store is damaged"),
    though nothing is wrong with the trace; one trace alone then had no report at all. It now runs
    without the store, as after damage found mid-run."""
    monkeypatch.chdir(tmp_path)
    paths = [TRACES / t for t in traces]
    args = ["blame", *paths, *FAST, "--method", method, "--budget", "64", "--format", "json"]
    args += ["-o", "t.json", "--no-progress", "--store", "t.sqlite"]
    first = run_cli(*args)
    assert first.code == 0, first.err
    whole = json.loads((tmp_path / "t.json").read_text())
    (tmp_path / "t.json").unlink()
    _damage_rows(tmp_path / "t.sqlite")
    r = run_cli(*args)
    assert r.code == 2 and (tmp_path / "t.json").exists(), r.err
    again = json.loads((tmp_path / "t.json").read_text())
    if len(traces) > 1:  # a batch's records, each attributed afresh
        assert [x["status"] for x in again["records"]] == ["ok"] * len(traces)
        whole, again = ([dict(x, rollouts=None) for x in d["records"]] for d in (whole, again))
    assert again == whole
    (line,) = [x for x in r.err.splitlines() if x.startswith("car: error:")]
    assert line == _DAMAGED_LINE and "Traceback" not in r.err


def test_blame_many_runs_every_trace_without_a_store_found_damaged(tmp_path: Path) -> None:
    """From Python the store says what happened; no trace is failed for it."""
    paths = [TRACES / "pivot.json", TRACES / "or.json"]
    opts = car.batch.BatchOptions(samples=4, match_samples=0)
    with RolloutStore(tmp_path / "t.sqlite") as store:
        car.batch.blame_many(paths, options=opts, store=store)
    _damage_rows(tmp_path / "t.sqlite")
    with RolloutStore(tmp_path / "t.sqlite") as store:
        results = car.batch.blame_many(paths, options=opts, store=store, traces_at_once=1)
        assert store.damaged and store.unwritable is not None
        assert store.unwritable.startswith("the store is damaged")
    assert [r.status for r in results] == ["ok", "ok"]
    assert [r.stored_rollouts for r in results] == [0, 0]


def test_commands_that_read_the_whole_store_say_its_damage_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    """Reading every row (`car cache info`, `car report`, `car merge` into it or from it) cannot go
    on without the store, as a run can: each is one line naming it, with removal as a way out."""
    monkeypatch.chdir(tmp_path)
    for name in ("t.sqlite", "other.sqlite"):
        assert run_cli("blame", TRACES / "pivot.json", *FAST, "--store", name, "-q").code == 0
    _damage_rows(tmp_path / "t.sqlite")
    for argv in (
        ["cache", "info", "--store", "t.sqlite"],
        ["report", "t.sqlite"],
        ["merge", "t.sqlite", "other.sqlite"],
        ["merge", "other.sqlite", "t.sqlite"],
    ):
        r = run_cli(*argv)
        assert r.code == 2 and "Traceback" not in r.err, (argv, r.err)
        (line,) = r.err.splitlines()
        assert "t.sqlite" in line and "the store is damaged" in line, (argv, line)
        assert "car cache clear --store t.sqlite" in line, (argv, line)
