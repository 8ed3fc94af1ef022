"""What car says about a file that is not a usable store: removal only for a damaged SQLite store,
never for someone else's file, and only the options the command at hand has."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from car.store import RolloutStore, StoreError, clear_store
from tests.conftest import TRACES, Result

RunCli = Callable[..., Result]


def _one_line(r: Result) -> str:
    assert r.code == 2 and r.out == "" and r.err.count("\n") == 1, r.err
    assert "Traceback" not in r.err
    return r.err


def _damaged_header(path: Path) -> Path:
    """An SQLite file whose header survives and whose first page does not (SQLite: 'file is not a
    database'): what a store cut short or overwritten looks like."""
    path.write_bytes(b"SQLite format 3\0" + b"\x5a" * 4000)
    return path


def test_a_trace_named_as_the_store_is_never_offered_for_deletion(
    tmp_path: Path, run_cli: RunCli
) -> None:
    victim = tmp_path / "victim.json"
    victim.write_bytes((TRACES / "pivot.json").read_bytes())
    before = victim.read_bytes()
    err = _one_line(run_cli("blame", TRACES / "or.json", "--store", victim, "-q"))
    assert err == (
        f"car: error: {victim}: not a car store (it looks like JSON text); use another file "
        "(--store PATH) or run without a store (--no-store)\n"
    )
    assert "remove" not in err and "cache clear" not in err
    assert victim.read_bytes() == before
    assert not Path(f"{victim}-wal").exists() and not Path(f"{victim}-shm").exists()


def test_cache_clear_refuses_to_delete_a_file_that_is_not_sqlite_even_forced(
    tmp_path: Path, run_cli: RunCli
) -> None:
    victim = tmp_path / "victim.json"
    victim.write_bytes((TRACES / "pivot.json").read_bytes())
    err = _one_line(run_cli("cache", "clear", "--store", victim, "--force"))
    assert err == (
        f"car: error: {victim}: not an SQLite database (it looks like JSON text); "
        "not deleting it, even with --force\n"
    )
    assert victim.exists()
    with pytest.raises(StoreError, match="not an SQLite database"):
        clear_store(victim, force=True)
    assert victim.exists()


def test_cache_clear_force_still_removes_a_damaged_sqlite_store(tmp_path: Path) -> None:
    bad = _damaged_header(tmp_path / "bad.sqlite")
    assert clear_store(bad, force=True) == [bad]


def test_merge_into_a_trace_names_no_option_merge_lacks(tmp_path: Path, run_cli: RunCli) -> None:
    shard = tmp_path / "s1.sqlite"
    with RolloutStore(shard) as store:
        store.put("ns", "k", "h", "run", {"v": 1})
    into = tmp_path / "and.json"
    into.write_bytes((TRACES / "and.json").read_bytes())
    before = into.read_bytes()
    err = _one_line(run_cli("merge", into, shard))
    assert err == (
        f"car: error: {into}: not a car store (it looks like JSON text); "
        "name another store to merge into\n"
    )
    assert into.read_bytes() == before


def test_a_damaged_sqlite_store_is_offered_for_removal_with_this_commands_options(
    tmp_path: Path, run_cli: RunCli
) -> None:
    bad = _damaged_header(tmp_path / "bad.sqlite")
    remove = f"remove it (car cache clear --store {bad} --force)"
    err = _one_line(run_cli("blame", TRACES / "or.json", "--store", bad, "-q"))
    assert err.startswith(f"car: error: {bad}: not a usable car store (file is not a database); ")
    assert err.endswith(
        f"use another file (--store PATH), run without a store (--no-store), or {remove}\n"
    )
    shard = tmp_path / "s1.sqlite"
    RolloutStore(shard).close()
    err = _one_line(run_cli("merge", bad, shard))
    assert err.endswith(f"; name another store to merge into or {remove}\n"), err
    assert "--no-store" not in err and "--store PATH" not in err
    err = _one_line(run_cli("cache", "info", "--store", bad))
    assert err.endswith(f"; name another store with --store or {remove}\n"), err
    assert "--no-store" not in err
    err = _one_line(run_cli("report", bad))
    assert err.endswith(f"; {remove}\n") and "--no-store" not in err and "PATH" not in err, err


@pytest.mark.parametrize(
    ("content", "looks"),
    [
        (b"plain words, not JSON\n", "text"),
        (b"PK\x03\x04" + b"\0" * 40, "a zip archive"),
        (b"\x89PNG\r\n\x1a\n" + b"\0" * 40, "binary data, not SQLite"),
    ],
)
def test_what_a_file_that_is_not_a_store_looks_like(
    tmp_path: Path, run_cli: RunCli, content: bytes, looks: str
) -> None:
    path = tmp_path / "thing.sqlite"
    path.write_bytes(content)
    err = _one_line(run_cli("cache", "info", "--store", path))
    assert err == (
        f"car: error: {path}: not a car store (it looks like {looks}); name another store with --store\n"
    )
    assert path.read_bytes() == content


def test_a_car_store_with_a_damaged_schema_is_offered_for_removal(
    tmp_path: Path, run_cli: RunCli
) -> None:
    path = tmp_path / "s.sqlite"
    RolloutStore(path).close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE rollouts")
    db.execute("CREATE TABLE rollouts (ns TEXT)")  # the wrong columns: car's table, damaged
    db.commit()
    db.close()
    err = _one_line(run_cli("blame", TRACES / "or.json", "--store", path, "-q"))
    assert str(path) in err and f"car cache clear --store {path}" in err, err


def test_a_python_caller_is_named_no_command_line_option(tmp_path: Path) -> None:
    victim = tmp_path / "victim.json"
    victim.write_bytes((TRACES / "pivot.json").read_bytes())
    with pytest.raises(StoreError) as info:
        RolloutStore(victim)
    assert str(info.value) == f"{victim}: not a car store (it looks like JSON text); use another file"


@pytest.mark.parametrize(
    ("name", "content", "what"),
    [
        ("empty.json", b"", "an empty file"),
        ("empty.sqlite", b"", "an empty file"),
        ("blank.jsonl", b" \n\n", "a file of only white space"),
    ],
)
def test_report_of_an_empty_file_says_it_is_empty(
    tmp_path: Path, run_cli: RunCli, name: str, content: bytes, what: str
) -> None:
    """It said "no stored reports (run car blame with a store first)", as of a store that holds
    none, while `car cache info --store` said "an empty file, not a car store"."""
    path = tmp_path / name
    path.write_bytes(content)
    assert _one_line(run_cli("report", path)) == (
        f"car: error: {path}: {what}, with no reports in it; car report reads what car blame "
        "writes: its store, --format json, or --format jsonl\n"
    )
    assert path.read_bytes() == content


def test_merge_names_a_damaged_or_empty_shard_as_the_other_commands_do(
    tmp_path: Path, run_cli: RunCli
) -> None:
    """A damaged shard was "not a car store", where every other command says "not a usable car
    store (...)" and offers `car cache clear --force`; an empty one was "not a car store" too."""
    into = tmp_path / "into.sqlite"
    hint = "name the shard stores that car blame --store wrote"
    header = _damaged_header(tmp_path / "header.sqlite")
    cut = tmp_path / "cut.sqlite"
    with RolloutStore(cut) as store:
        for i in range(200):
            store.put("ns", f"k{i}", "h", "run", {"i": i, "pad": "x" * 200})
    db = sqlite3.connect(cut)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    cut.write_bytes(cut.read_bytes()[:12288])  # cut short: its pages past the third are gone
    for bad in (header, cut):
        other = _one_line(run_cli("cache", "info", "--store", bad))
        reason = other.split("not a usable car store (", 1)[1].split(")", 1)[0]
        err = _one_line(run_cli("merge", into, bad))
        assert err == (
            f"car: error: {bad} (merging into {into}): not a usable car store ({reason}); {hint} "
            f"or remove it (car cache clear --store {bad} --force)\n"
        )
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    assert _one_line(run_cli("merge", into, empty)) == (
        f"car: error: {empty} (merging into {into}): an empty file, not a car store; {hint}\n"
    )
    assert empty.stat().st_size == 0 and not into.exists()


def test_merge_and_cache_info_count_the_same_rows_in_the_same_words(
    tmp_path: Path, run_cli: RunCli
) -> None:
    """A store's rows are rollouts and match draws: `car merge` called them all rollouts."""
    shard = tmp_path / "s1.sqlite"
    with RolloutStore(shard) as store:
        for i in range(1200):
            store.put("ns", f"k{i}", "h", "match" if i % 2 else "run", {"v": i})
    into = tmp_path / "all.sqlite"
    merged = run_cli("merge", into, shard)
    assert merged.code == 0, merged.err
    assert merged.err == f"{shard}: 1,200 rollouts and draws added, 0 already present\n"
    assert merged.out == f"{into}: 1,200 rollouts and draws stored over 1 trace; 0 reports\n"
    info = run_cli("cache", "info", "--store", into)
    assert info.out.startswith(f"{into}: 1,200 rollouts and draws stored (600 match, 600 run) over")


def test_a_store_of_another_car_version_is_never_offered_for_deletion(
    tmp_path: Path, run_cli: RunCli
) -> None:
    """A store that a newer car wrote is intact, and its rollouts are that car's to reuse: it was
    called unusable and offered for removal (`car cache clear`), as a damaged one is."""
    store = tmp_path / "s.sqlite"
    with RolloutStore(store) as st:
        st.put("ns", "k", "h", "run", {"value": 1.0})
    db = sqlite3.connect(store)
    with db:
        db.execute("UPDATE meta SET value='car.store/v2' WHERE key='version'")
    db.close()
    said = (
        f"{store}: written by another version of car (store version 'car.store/v2'; this car reads "
        "'car.store/v1'); read it with the car that wrote it"
    )
    err = _one_line(run_cli("blame", TRACES / "or.json", "--store", store, "-q"))
    assert err == (
        f"car: error: {said}, use another file (--store PATH), or run without a store (--no-store)\n"
    )
    err = _one_line(run_cli("cache", "info", "--store", store))
    assert err == f"car: error: {said} or name another store with --store\n"
    db = sqlite3.connect(store)
    assert db.execute("SELECT COUNT(*) FROM rollouts").fetchone() == (1,)
    db.close()


def test_a_device_or_pipe_named_as_the_store_is_never_opened_nor_deleted(
    tmp_path: Path, run_cli: RunCli
) -> None:
    """`--store /dev/null` (meant as "keep nothing") was opened by SQLite, which made a journal file
    beside it, then called a damaged store and offered for removal; `car cache clear --store
    /dev/null --force`, as advised, deleted the device. A named pipe stands in for it here."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    err = _one_line(run_cli("blame", TRACES / "or.json", "--store", pipe, "-q"))
    assert err == (
        f"car: error: {pipe}: is a named pipe, not a store file; use another file (--store PATH) "
        "or run without a store (--no-store)\n"
    )
    err = _one_line(run_cli("cache", "info", "--store", pipe))
    assert (
        err
        == f"car: error: {pipe}: is a named pipe, not a store file; name another store with --store\n"
    )
    err = _one_line(run_cli("cache", "clear", "--store", pipe, "--force"))
    assert err == f"car: error: {pipe}: is a named pipe, not a car store; not deleting it\n"
    err = _one_line(run_cli("merge", tmp_path / "all.sqlite", pipe))
    assert err.startswith(
        f"car: error: {pipe} (merging into {tmp_path / 'all.sqlite'}): is a named pipe;"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


@pytest.mark.parametrize("version", [None, "9"])
def test_another_programs_database_with_a_meta_table_is_left_as_it_was(
    tmp_path: Path, run_cli: RunCli, version: str | None
) -> None:
    """A database of another program that has a table named `meta` (a common name) was taken for a
    store: car switched it to WAL, added its tables and wrote its version into that table; with a
    version of the program's own there, it was then called a damaged store and offered for removal."""
    app = tmp_path / "app.db"
    db = sqlite3.connect(app)
    with db:
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute("CREATE TABLE users (id INTEGER, name TEXT)")
        if version is not None:
            db.execute("INSERT INTO meta VALUES ('version', ?)", (version,))
    db.close()
    before = app.read_bytes()
    err = _one_line(run_cli("blame", TRACES / "or.json", "--store", app, "-q"))
    assert err == (
        f"car: error: {app}: a SQLite file of another program, not a car store; use another file "
        "(--store PATH) or run without a store (--no-store)\n"
    )
    err = _one_line(run_cli("cache", "info", "--store", app))
    assert "another program" in err and "cache clear" not in err
    assert app.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]
