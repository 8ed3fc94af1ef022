"""The resumable store: every finished rollout, kept once, in SQLite under `.car/`.

A rollout is keyed by its *namespace* (the trace's content hash, the component specs and their
configuration, the seed) and its *event key* (what was asked: `run` of a plan on a replicate, a `fork`
of a plan's rollout at a step with a forced action, or a `match` draw at a step). Because every random
draw in car is keyed by event, the stored value of a key is exactly what recomputing it would give:
a resumed run recomputes only what is missing and ends with the same report as an uninterrupted run.
Keys include the replicate (and draw) index, so one stored rollout is never handed out as two
independent samples.

What is stored: the value, status, error, policy calls, truncation, the turns (so an estimator can
fork from a stored rollout), and the counter increments the rollout caused (so budgets count a stored
rollout exactly as the fresh one was counted). Environment states are *not* stored (they are arbitrary
plugin values): a fork from a stored rollout asks the environment to `restore` the prefix, as the
protocol allows. Errored rollouts are not stored: a backend that was down is retried on resume.

One process writes (the asyncio loop of the run; the Ray executor ships results back to it). The file
is opened in WAL mode, so `car cache info` can read while a run writes.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import json
import sqlite3
import stat
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from car.errors import InputError
from car.jsonfile import os_reason

__all__ = [
    "BLAME_WAYS",
    "CACHE_WAYS",
    "DEFAULT_DIR",
    "MERGE_WAYS",
    "ROW_FORMAT",
    "STORE_VERSION",
    "MemoryStore",
    "RolloutCache",
    "RolloutStore",
    "StoreError",
    "StoreInfo",
    "StoreUnavailable",
    "StoredResult",
    "clear_store",
    "default_store_path",
    "event_key",
    "merge_source",
    "namespace",
    "open_default_store",
]

STORE_VERSION = "car.store/v1"
# Names how a stored rollout's payload encodes its turns (`car.runner._turn_json`). The namespace holds
# it, as it holds the rng derivation: a new encoding gets a new name, so a build that reads another
# encoding never meets its rows (it recomputes them), whichever build wrote them.
# 2: a turn that is the record's own is kept by its position; 1 (unnamed) kept its text.
ROW_FORMAT = "car.rows/2"
DEFAULT_DIR = ".car"
_FILE = "store.sqlite"
_CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by car (car-blame).\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)

# zlib's level for stored rows: 4 writes them in a third of the default 6's time, 15% larger
# (`bench/RESULTS-engine.md`); any level reads back the same.
_LEVEL = 4

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rollouts (
    ns TEXT NOT NULL, key TEXT NOT NULL, trace_hash TEXT NOT NULL, kind TEXT NOT NULL,
    payload BLOB NOT NULL, created REAL NOT NULL, PRIMARY KEY (ns, key)
);
-- A trace's rows (`rows_for`, once per trace under --executor ray) without a scan of every trace's.
CREATE INDEX IF NOT EXISTS rollouts_by_trace ON rollouts (trace_hash);
CREATE TABLE IF NOT EXISTS results (
    rkey TEXT PRIMARY KEY, trace_id TEXT NOT NULL, trace_path TEXT, trace_hash TEXT NOT NULL,
    report TEXT NOT NULL, created REAL NOT NULL
);
"""
# Each table's columns, in order: what `_init` checks an existing store against.
_COLUMNS = {
    "meta": ("key", "value"),
    "rollouts": ("ns", "key", "trace_hash", "kind", "payload", "created"),
    "results": ("rkey", "trace_id", "trace_path", "trace_hash", "report", "created"),
}


class RolloutCache(Protocol):
    """What the runner needs of a store: look a rollout up, put one in (never twice)."""

    def get(self, ns: str, key: str) -> dict[str, Any] | None: ...

    def put(self, ns: str, key: str, trace_hash: str, kind: str, payload: Mapping[str, Any]) -> bool: ...


class MemoryStore:
    """A store in memory: preloaded rows plus the rows added since (shipped back by remote workers,
    which never write the SQLite file themselves: it has one writer)."""

    def __init__(self, rows: Mapping[tuple[str, str], dict[str, Any]] | None = None) -> None:
        self._rows: dict[tuple[str, str], dict[str, Any]] = dict(rows or {})
        self.added: list[tuple[str, str, str, str, dict[str, Any]]] = []

    def get(self, ns: str, key: str) -> dict[str, Any] | None:
        return self._rows.get((ns, key))

    def put(self, ns: str, key: str, trace_hash: str, kind: str, payload: Mapping[str, Any]) -> bool:
        if (ns, key) in self._rows:
            return False
        self._rows[ns, key] = dict(payload)
        self.added.append((ns, key, trace_hash, kind, dict(payload)))
        return True


class _Foreign(sqlite3.DatabaseError):
    pass


class _OtherVersion(sqlite3.DatabaseError):
    pass


class StoreError(InputError):
    """The store file cannot be used (corrupted, foreign, newer version, unwritable)."""


# What a command can do instead of using a store file that will not do, naming only its own
# options: `car blame` has --store and --no-store; `car cache info` names its store with --store;
# `car merge` takes the store to merge into as an argument; `car report` only reads. A Python caller
# is named no option at all (the default).
BLAME_WAYS = ("use another file (--store PATH)", "run without a store (--no-store)")
CACHE_WAYS = ("name another store with --store",)
MERGE_WAYS = ("name another store to merge into",)
_PYTHON_WAYS = ("use another file",)


def _either(ways: Sequence[str]) -> str:
    """ "a", "a or b", "a, b, or c"."""
    if len(ways) <= 2:
        return " or ".join(ways)
    return ", ".join(ways[:-1]) + ", or " + ways[-1]


def _way_out(path: Path, ways: Sequence[str]) -> str:
    """For a damaged store only (an SQLite file, or car's own tables): the caller's ways, or
    removing it."""
    force = "" if path.parent.name == DEFAULT_DIR else " --force"
    return _either([*ways, f"remove it (car cache clear --store {path}{force})"])


def _advise(ways: Sequence[str]) -> str:
    """ "; a or b" to end a message with; nothing when there is no other way."""
    return f"; {_either(ways)}" if ways else ""


class StoreUnavailable(StoreError):
    """The store cannot be created or written where it is asked for (a read-only directory, no
    permission): not damage, so the way out is another place, never deleting it."""

    def __init__(self, path: Path, reason: str, ways: Sequence[str] = _PYTHON_WAYS) -> None:
        self.what = f"{path}: cannot create or write the store here ({reason})"
        super().__init__(f"{self.what}{_advise(ways)}")


# What SQLite says when the file or its WAL companions cannot be created or written (a full disk
# too: not damage, so removing the store is never the advice).
_UNWRITABLE = (
    sqlite3.SQLITE_PERM,
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_FULL,
)


def _unwritable(exc: sqlite3.Error) -> bool:
    return (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in _UNWRITABLE


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def namespace(
    trace_hash: str,
    specs: Mapping[str, str],
    config: Mapping[str, Any],
    seed: int,
    slack: int | None,
) -> str:
    """The key prefix shared by every rollout of one trace under one set of components and seed.

    car's own version is part of it, the derivation of draws from event keys and the rows' encoding:
    a new release may replay differently (a fixed bug, a changed simulated scenario, other draws), a
    stale rollout must never be handed back as if it were computed now, and a build must never meet
    a row it cannot read.
    """
    from car import __version__
    from car.rng import DERIVATION

    return _digest(
        {
            "v": STORE_VERSION,
            "car": __version__,
            "rng": DERIVATION,
            "rows": ROW_FORMAT,
            "trace": trace_hash,
            "specs": dict(specs),
            "config": dict(config),
            "seed": seed,
            "slack": slack,
        }
    )


def event_key(kind: str, *parts: Any) -> str:
    """The key of one requested rollout or draw within a namespace."""
    return _digest([kind, *parts])


def default_store_path(cwd: Path | None = None) -> Path:
    return (cwd or Path.cwd()) / DEFAULT_DIR / _FILE


def _prepare_default_dir(directory: Path) -> None:
    # Keep the store out of version control and out of backups, without asking.
    directory.mkdir(parents=True, exist_ok=True)
    ignore = directory / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n", encoding="utf-8")
    tag = directory / "CACHEDIR.TAG"
    if not tag.exists():
        tag.write_text(_CACHEDIR_TAG, encoding="utf-8")


def open_default_store(notice: Callable[[str], None]) -> RolloutStore | None:
    """The default store, `.car/store.sqlite` here; or, when it cannot be made or written here (a
    read-only checkout is common in CI), None and one `notice`: the run goes on without a store."""
    try:
        return RolloutStore(default_store_path(), ways=BLAME_WAYS)
    except StoreUnavailable as exc:
        notice(
            f"car: note: {exc.what}; running without a store, so nothing is kept for a rerun "
            "(choose one with --store PATH, or --no-store to run without one)"
        )
        return None


@dataclass(frozen=True)
class StoreInfo:
    path: str
    bytes: int
    rollouts: int
    traces: int
    results: int
    by_kind: dict[str, int]

    def holds(self) -> str:
        """ "3 traces; 1 report": what it holds besides the rollouts."""
        from car.report import many

        return f"{many(self.traces, 'trace')}; {many(self.results, 'report')}"


@dataclass(frozen=True)
class StoredResult:
    trace_id: str
    trace_path: str | None
    trace_hash: str
    report: dict[str, Any]
    created: float


_SQLITE_HEADER = b"SQLite format 3\0"


def _special(path: Path) -> str | None:
    """What a path that is neither a file nor a directory is ("a character device": `/dev/null`,
    given to mean "keep nothing"); None for anything else. SQLite would open it and make a journal
    beside it, and deleting it would delete the device."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    kinds = (
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for special, name in kinds if special(mode)), None)


def _head(path: Path) -> bytes | None:
    """The first bytes of a regular file; None when it cannot be read (opening it then names why)
    or is not a regular file (a pipe would block)."""
    try:
        if not path.is_file():
            return None
        with path.open("rb") as fh:
            return fh.read(512)
    except OSError:
        return None


def _not_sqlite(path: Path) -> str | None:
    """What a file that is not an SQLite database looks like ("JSON text", "a zip archive"), from
    its first bytes; None for an SQLite file, an empty one (SQLite makes a database of it), a missing
    one or one that cannot be read."""
    head = _head(path)
    if not head or head.startswith(_SQLITE_HEADER):
        return None
    if head.startswith(b"PK\x03\x04"):
        return "a zip archive"
    try:  # a character cut at the end of the sample is still text
        text = codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return "binary data, not SQLite"
    if "\0" in text:
        return "binary data, not SQLite"
    return "JSON text" if text.lstrip("\ufeff \t\r\n")[:1] in ("{", "[") else "text"


def _open_read_only(path: Path, where: str | None = None) -> sqlite3.Connection:
    """A connection that reads `path` and never writes. A WAL store on read-only media (a CI artifact
    mounted read-only) has no -shm file and SQLite cannot make one: it is then read as immutable,
    unless its -wal file holds rows, which that would silently leave out (said of `where`, the
    path as the caller names it: `path` by default)."""
    db = sqlite3.connect(
        f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=30.0, check_same_thread=False
    )
    try:
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return db
    except sqlite3.Error as exc:
        if (getattr(exc, "sqlite_errorcode", 0) & 0xFF) != sqlite3.SQLITE_CANTOPEN:
            return db  # damage or a lock: the first query says so as for any store
    db.close()
    wal = Path(f"{path}-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        raise StoreError(
            f"{where or path}: cannot read the rows in its write-ahead log {wal.name} here: SQLite "
            f"needs to make {path.name}-shm beside it; copy {path.name} and {wal.name} to a writable "
            "directory and read the copy"
        )
    return sqlite3.connect(f"{path.absolute().as_uri()}?immutable=1", uri=True, check_same_thread=False)


class RolloutStore:
    """A SQLite file of stored rollouts and finished reports, usable from any thread.

    `ways` is what the caller can do instead when the file will not do (see `BLAME_WAYS`): a file
    that is not SQLite, or another program's database, is named for what it is and never offered
    for deletion; only a damaged car or SQLite store is (`car cache clear`)."""

    def __init__(
        self, path: str | Path, *, create: bool = True, ways: Sequence[str] = _PYTHON_WAYS
    ) -> None:
        self.path = Path(path)
        self.ways = tuple(ways)
        # Why the store stopped taking writes mid-run, once it has ("cannot write the store (database
        # or disk is full)", or "the store is damaged (...)"): later writes are skipped, the run goes
        # on, and its caller says what was not kept. Once damage is found, reads find nothing either.
        self.unwritable: str | None = None
        self.damaged = False
        self._writing = threading.Lock()  # one connection: two threads' writes, one transaction each
        if not create and not self.path.exists():
            raise StoreError(f"{self.path}: no such store")
        if not create and self.path.is_file() and self.path.stat().st_size == 0:
            # SQLite would happily make an empty file into a store: reading one never writes.
            raise StoreError(f"{self.path}: an empty file, not a car store")
        if self.path.is_dir():
            raise StoreError(f"{self.path}: is a directory, not a store file{_advise(ways)}")
        special = _special(self.path)
        if special is not None:
            raise StoreError(f"{self.path}: is {special}, not a store file{_advise(ways)}")
        looks = _not_sqlite(self.path)
        if looks is not None:  # someone's trace or notes: SQLite would not touch it, nor may we
            raise StoreError(f"{self.path}: not a car store (it looks like {looks}){_advise(ways)}")
        if create:
            try:
                if self.path.parent.name == DEFAULT_DIR:
                    _prepare_default_dir(self.path.parent)
                else:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreUnavailable(self.path, os_reason(exc), ways) from None
        try:
            # Any thread may use it (a script that runs `blame_many` in a worker thread with a store
            # it made, or in `asyncio.to_thread`); `_write` keeps each write a transaction of its own.
            self._db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
        except sqlite3.Error as exc:
            if _unwritable(exc):
                raise StoreUnavailable(self.path, str(exc), ways) from None
            raise StoreError(f"{self.path}: cannot open the store ({exc}){_advise(ways)}") from None
        try:
            try:
                self._init_waiting()
            except sqlite3.DatabaseError as exc:
                if create or not _unwritable(exc):
                    raise
                # Only reading, where SQLite cannot write (a store on read-only media): read-only.
                self._db.close()
                self._db = _open_read_only(self.path)
                self._refuse_foreign()
                self._check()
        except _Foreign as exc:
            self._db.close()
            raise StoreError(f"{self.path}: {exc}, not a car store{_advise(ways)}") from None
        except _OtherVersion as exc:
            self._db.close()
            raise StoreError(
                f"{self.path}: {exc}; {_either(['read it with the car that wrote it', *ways])}"
            ) from None
        except sqlite3.DatabaseError as exc:
            self._db.close()
            if _unwritable(exc):  # a read-only directory or file, not damage: never suggest deleting it
                raise StoreUnavailable(self.path, str(exc), ways) from None
            raise StoreError(f"{self.path}: not a usable car store ({exc}); {self._way_out()}") from None

    def _way_out(self) -> str:
        return _way_out(self.path, self.ways)

    def _init_waiting(self) -> None:
        """`_init`, waiting out another process that is creating the same store at this moment
        (switching a new file to WAL takes a lock that the busy timeout does not always wait for)."""
        for attempt in range(20):
            try:
                self._init()
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == 19:
                    raise
                time.sleep(0.05 * (attempt + 1))

    def _init(self) -> None:
        db = self._db
        self._refuse_foreign()
        db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode survives a killed process (only an OS crash can lose the last commits).
        db.execute("PRAGMA synchronous=NORMAL")
        # One transaction: another process making the same store never sees car's tables without
        # the version that tells them from another program's (`_refuse_foreign`). OR IGNORE: both
        # may find the version missing.
        try:
            db.executescript(
                f"BEGIN IMMEDIATE; {_SCHEMA}"
                f"INSERT OR IGNORE INTO meta VALUES ('version', '{STORE_VERSION}');"
                f"INSERT OR IGNORE INTO meta VALUES ('created', '{time.time()}'); COMMIT;"
            )
        except sqlite3.Error:
            if db.in_transaction:
                db.rollback()
            raise
        self._check()

    def _refuse_foreign(self) -> None:
        """A database with tables is car's only if its `meta` table names a car store version:
        another program's (which may well have a `meta` table) is never written to."""
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            return
        row = None
        if "meta" in tables:
            try:
                row = self._db.execute("SELECT value FROM meta WHERE key='version'").fetchone()
            except sqlite3.OperationalError as exc:
                if "no such column" not in str(exc):  # a lock: waited out by the caller
                    raise
        if row is None or not str(row[0]).startswith("car.store/"):
            raise _Foreign("a SQLite file of another program")

    def _check(self) -> None:
        """The version and car's tables, as this car reads them."""
        row = self._db.execute("SELECT value FROM meta WHERE key='version'").fetchone()
        if row is not None and row[0] != STORE_VERSION and str(row[0]).startswith("car.store/"):
            # Intact, and its rollouts are the other car's to reuse: never offered for removal.
            raise _OtherVersion(
                f"written by another version of car (store version {row[0]!r}; this car reads "
                f"{STORE_VERSION!r})"
            )
        if row is None or row[0] != STORE_VERSION:
            found = "no store version" if row is None else f"store version {row[0]!r}"
            raise sqlite3.DatabaseError(f"{found}, this car reads {STORE_VERSION!r}")
        for table, columns in _COLUMNS.items():
            have = [r[1] for r in self._db.execute(f"PRAGMA table_info({table})")]
            if have != list(columns):  # car's table, altered: damage, found now rather than mid-run
                raise sqlite3.DatabaseError(
                    f"the schema is damaged: table {table} has columns {', '.join(have)}"
                )

    @contextlib.contextmanager
    def _intact(self, what: str | None = None) -> Iterator[None]:
        """A file damaged past its header fails mid-query: one line naming the file, not a traceback
        (a lock or I/O failure, `OperationalError`, is not damage and passes through)."""
        try:
            yield
        except sqlite3.OperationalError:
            raise
        except sqlite3.DatabaseError as exc:
            raise self._damage(f"the store is damaged ({exc})", what) from None

    def _damage(self, reason: str, what: str | None = None) -> StoreError:
        """The error for damage found in the file; the store is given up for the rest of the run."""
        self.damaged = True
        self.unwritable = reason
        return StoreError(f"{what or self.path}: {reason}; {self._way_out()}")

    def _read(self, sql: str, args: Sequence[Any]) -> list[Any]:
        """The rows a run asks for (a rollout, a trace's rows). Damage found here, made before the run
        or during it, costs the run its store as on a write: nothing is wrong with the trace, so none
        fails for it; this and every later read find nothing, and the run computes afresh."""
        if self.damaged:
            return []
        try:
            with self._intact():
                return self._db.execute(sql, args).fetchall()
        except StoreError:  # damage: `_intact` gave the store up
            return []

    def ways_out(self) -> str:
        """What to do instead of using this store: the caller's ways; removing it too once damaged."""
        return self._way_out() if self.damaged else _either(self.ways)

    # -- rollouts ------------------------------------------------------------------------------
    def get(self, ns: str, key: str) -> dict[str, Any] | None:
        """The stored rollout of a key; None when there is none, or the store is found damaged."""
        rows = self._read("SELECT payload FROM rollouts WHERE ns=? AND key=?", (ns, key))
        if not rows:
            return None
        try:
            payload: dict[str, Any] = json.loads(zlib.decompress(rows[0][0]))
        except (zlib.error, ValueError) as exc:
            self._damage(f"a stored rollout is damaged ({exc})")  # given up, as for any damage
            return None
        return payload

    def _write(self, sql: str, row: Sequence[Any]) -> int:
        """One write in a transaction of its own; the rows it changed. A write SQLite refuses (a full
        disk, a lock held past the timeout) or that finds the file damaged costs the run its store,
        never its results: the reason is kept in `unwritable` and this and every later write change
        nothing."""
        if self.unwritable is not None:
            return 0
        try:
            with self._writing, self._intact(), self._db:
                return int(self._db.execute(sql, row).rowcount)
        except sqlite3.OperationalError as exc:
            self.unwritable = f"cannot write the store ({exc})"
        except StoreError:  # damage: `_intact` gave the store up
            pass
        return 0

    def put(self, ns: str, key: str, trace_hash: str, kind: str, payload: Mapping[str, Any]) -> bool:
        """Store one rollout; False if the key was already there (it is never stored twice) or the
        store cannot be written (`unwritable`)."""
        blob = zlib.compress(json.dumps(payload, separators=(",", ":")).encode(), _LEVEL)
        row = (ns, key, trace_hash, kind, blob, time.time())
        return self._write("INSERT OR IGNORE INTO rollouts VALUES (?, ?, ?, ?, ?, ?)", row) == 1

    def rows_for(self, trace_hash: str) -> dict[tuple[str, str], dict[str, Any]]:
        """Every stored row of one trace (what a remote worker needs to resume it)."""
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for ns, key in self._read("SELECT ns, key FROM rollouts WHERE trace_hash=?", (trace_hash,)):
            payload = self.get(ns, key)
            if payload is not None:
                out[ns, key] = payload
        return out

    def count(self, *, ns: str | None = None, kind: str | None = None) -> int:
        sql, args = "SELECT COUNT(*) FROM rollouts WHERE 1=1", list[str]()
        if ns is not None:
            sql, args = sql + " AND ns=?", [*args, ns]
        if kind is not None:
            sql, args = sql + " AND kind=?", [*args, kind]
        with self._intact():
            return int(self._db.execute(sql, args).fetchone()[0])

    # -- finished reports ----------------------------------------------------------------------
    def put_result(
        self, rkey: str, trace_id: str, trace_path: str | None, trace_hash: str, report: str
    ) -> None:
        row = (rkey, trace_id, trace_path, trace_hash, report, time.time())
        self._write("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?)", row)

    def results(self) -> list[StoredResult]:
        with self._intact():
            rows = self._db.execute(
                "SELECT trace_id, trace_path, trace_hash, report, created FROM results "
                "ORDER BY trace_path, trace_id, created"
            ).fetchall()
        out = []
        for trace_id, trace_path, trace_hash, report, created in rows:
            try:
                body = json.loads(report)
            except ValueError as exc:  # `car report` must not show fewer reports than were stored
                raise self._damage(f"a stored report is damaged ({exc})") from None
            out.append(StoredResult(trace_id, trace_path, trace_hash, body, created))
        return out

    # -- maintenance ---------------------------------------------------------------------------
    def info(self) -> StoreInfo:
        with self._intact():
            by_kind = dict(
                self._db.execute("SELECT kind, COUNT(*) FROM rollouts GROUP BY kind").fetchall()
            )
            traces = self._db.execute("SELECT COUNT(DISTINCT trace_hash) FROM rollouts").fetchone()[0]
            results = self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        size = sum(
            p.stat().st_size
            for p in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm"))
            if p.exists()
        )
        return StoreInfo(str(self.path), size, sum(by_kind.values()), int(traces), int(results), by_kind)

    def merge_from(self, src: RolloutStore) -> tuple[int, int]:
        """Copy the rollouts and reports of another store in, all or nothing; returns (added,
        already present). Damage found while reading names the source (`merge_source` opens it)."""
        added = skipped = 0
        where = f"{src.path} (merging into {self.path})"
        with self._intact(), self._db:
            for table, verb in (("rollouts", "IGNORE"), ("results", "REPLACE")):
                for row in _batched(src, where, f"SELECT * FROM {table}"):
                    try:
                        cur = self._db.execute(
                            f"INSERT OR {verb} INTO {table} VALUES (?, ?, ?, ?, ?, ?)", row
                        )
                    except sqlite3.OperationalError as exc:  # a full disk: nothing of it merged
                        raise StoreUnavailable(self.path, str(exc), self.ways) from None
                    if table == "rollouts":
                        added += cur.rowcount
                        skipped += 1 - cur.rowcount
        return added, skipped

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._db.close()

    def __enter__(self) -> RolloutStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_MERGE_BATCH = 256  # rows read at a time from a store being merged in


def _batched(src: RolloutStore, where: str, sql: str) -> Iterator[Any]:
    """The rows of a query on `src`, read `_MERGE_BATCH` at a time: a merge holds that many rollouts
    in memory, not the whole shard. Damage found reading them names `where`, not the destination."""
    with src._intact(where):
        cursor = src._db.execute(sql)
    while True:
        with src._intact(where):
            rows = cursor.fetchmany(_MERGE_BATCH)
        if not rows:
            return
        yield from rows


def merge_source(path: str | Path, into: str | Path) -> RolloutStore:
    """A shard store to merge in, checked before the destination is created: a missing file, a
    directory, an empty file or a file that is not a car store (a trace given by mistake) is one
    line that never suggests deleting it, and opening never writes to such a file. A damaged SQLite
    file is named as every command names a damaged store, with `car cache clear` as a way out."""
    p = Path(path)
    where = f"{p} (merging into {into})"
    hint = "name the shard stores that car blame --store wrote"
    if not p.is_file():
        special = _special(p)
        what = "is a directory" if p.is_dir() else f"is {special}" if special else "no such file"
        raise StoreError(f"{where}: {what}; {hint}")
    if p.stat().st_size == 0:
        raise StoreError(f"{where}: an empty file, not a car store; {hint}")
    looks = _not_sqlite(p)
    if looks is not None:
        raise StoreError(f"{where}: not a car store (it looks like {looks}); {hint}")
    ours, damage = _read_meta(p, where)
    if damage is not None:  # as every other command says of a damaged store, with the way out
        raise StoreError(f"{where}: not a usable car store ({damage}); {_way_out(p, (hint,))}")
    if not ours:
        raise StoreError(f"{where}: not a car store; {hint}")
    return RolloutStore(p, create=False, ways=(hint,))


def _is_car_store(p: Path) -> bool:
    return _read_meta(p)[0]


def _read_meta(p: Path, where: str | None = None) -> tuple[bool, str | None]:
    """Whether `p` (named `where` in an error) is a car store, read without writing; and SQLite's
    word for its damage, if the file is damaged (a lock, a missing table or a file that cannot be
    opened is not damage)."""
    try:
        db = _open_read_only(p, where)
        try:
            row = db.execute("SELECT value FROM meta WHERE key='version'").fetchone()
        finally:
            db.close()
    except sqlite3.OperationalError:
        return False, None
    except sqlite3.DatabaseError as exc:
        return False, str(exc)
    except sqlite3.Error:
        return False, None
    return row is not None and str(row[0]).startswith("car.store/"), None


def clear_store(path: str | Path, *, force: bool = False) -> list[Path]:
    """Delete a store file and its WAL companions. A damaged default store (`.car/store.sqlite`)
    is deleted too; any other file that is not a car store needs `force`, so that a mistyped
    `--store` never deletes someone else's data; and a file that is not SQLite at all (a trace,
    notes) is never deleted, forced or not."""
    p = Path(path)
    if p.is_dir():
        raise StoreError(f"{p}: is a directory, not a car store; not deleting it")
    special = _special(p)
    if special is not None:
        raise StoreError(f"{p}: is {special}, not a car store; not deleting it")
    looks = _not_sqlite(p)
    if looks is not None:
        even = ", even with --force" if force else ""
        raise StoreError(f"{p}: not an SQLite database (it looks like {looks}); not deleting it{even}")
    if (
        p.exists()
        and not force
        and not (p.parent.name == DEFAULT_DIR and p.name == _FILE)
        and not _is_car_store(p)
    ):
        raise StoreError(f"{p}: not a car store; not deleting it (pass --force to delete it anyway)")
    removed = []
    for f in (p, Path(f"{p}-wal"), Path(f"{p}-shm")):
        if f.exists():
            try:
                f.unlink()
            except OSError as exc:  # a read-only mount or directory
                raise StoreError(f"{f}: cannot remove the store ({os_reason(exc)})") from None
            removed.append(f)
    return removed
