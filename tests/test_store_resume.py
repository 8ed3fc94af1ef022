"""The resumable store: same reports with and without it, nothing counted twice, clear errors."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from car.attribution import blame_async
from car.batch import BatchOptions, blame_many
from car.cli import main
from car.replay import Plan, Replay
from car.runner import Runner
from car.sim import make as sim_make
from car.store import RolloutStore, StoreError, clear_store, merge_source
from car.trace import load_trace

TRACES = Path(__file__).resolve().parent.parent / "traces"


def _report(path: Path, store: RolloutStore | None, **kw: object) -> dict[str, object]:
    runner = Runner(store) if store is not None else None
    rep = asyncio.run(
        blame_async(path, samples=8, seed=5, runner=runner, method="contrastive", **kw)  # type: ignore[arg-type]
    )
    return rep.model_dump()


@pytest.mark.parametrize("name", ["pivot", "research-team", "support-refund"])
def test_store_gives_identical_reports_and_stores_each_rollout_once(tmp_path: Path, name: str) -> None:
    path = TRACES / f"{name}.json"
    plain = _report(path, None)
    with RolloutStore(tmp_path / "s.sqlite") as store:
        first = _report(path, store)
        rows = store.count()
        second = _report(path, store)
        assert store.count() == rows  # the second run added nothing
    assert first == plain == second
    trace = load_trace(path)
    m = len(trace.decision_steps)
    # every rollout run (one factual, at most 8 per decision step: a row reuses a rollout for later
    # steps it reproduced) and 8 match draws per step, each stored once
    rollouts = first["budget"]["rollouts"]  # type: ignore[index]
    assert rollouts <= 1 + 8 * m
    assert rows == rollouts + 8 * m


def test_budget_counts_a_stored_rollout_once(tmp_path: Path) -> None:
    path = TRACES / "support-refund.json"
    with RolloutStore(tmp_path / "s.sqlite") as store:
        r1 = Runner(store)
        a = asyncio.run(blame_async(path, samples=8, runner=r1))
        r2 = Runner(store)
        b = asyncio.run(blame_async(path, samples=8, runner=r2))
    assert a.budget == b.budget
    assert r1.stats.fresh == a.budget.rollouts and r1.stats.stored == 0
    assert r2.stats.stored == a.budget.rollouts and r2.stats.fresh == 0
    assert r2.stats.fresh_policy_calls == 0


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("car.rng", "DERIVATION"),  # draws made another way are other rollouts
        # A build reads the rows of its own encoding only: one that wrote (or reads) turns another
        # way recomputes them rather than failing on them, whichever of the two is newer.
        ("car.store", "ROW_FORMAT"),
    ],
)
def test_a_new_derivation_or_row_encoding_never_reuses_stored_rollouts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, name: str
) -> None:
    import importlib

    path = TRACES / "support-refund.json"
    with RolloutStore(tmp_path / "s.sqlite") as store:
        asyncio.run(blame_async(path, samples=8, runner=Runner(store)))
        monkeypatch.setattr(importlib.import_module(module), name, "another/test")
        again = Runner(store)
        asyncio.run(blame_async(path, samples=8, runner=again))
    assert again.stats.stored == 0 and again.stats.fresh > 0


def test_more_samples_reuse_the_first_replicates_and_never_duplicate(tmp_path: Path) -> None:
    path = TRACES / "pivot.json"
    with RolloutStore(tmp_path / "s.sqlite") as store:
        four = asyncio.run(blame_async(path, samples=4, match_samples=0, runner=Runner(store)))
        r = Runner(store)
        eight = asyncio.run(blame_async(path, samples=8, match_samples=0, runner=r))
        # replicates 0-3 come from the store, 4-7 are new
        assert r.stats.stored == four.budget.rollouts
        assert r.stats.fresh == eight.budget.rollouts - four.budget.rollouts > 0
        assert store.count(kind="run") == eight.budget.rollouts


def test_fork_from_a_stored_rollout_matches_a_fresh_fork(tmp_path: Path) -> None:
    trace = load_trace(TRACES / "research-team.json")
    comps = [
        sim_make(k, "research-team", trace, "sim:research-team") for k in ("policy", "env", "scorer")
    ]

    async def forks(store: RolloutStore | None) -> list[tuple[float | None, str]]:
        replay: Replay = Replay(trace, *comps, seed=2)
        if store is not None:
            replay = Runner(store).bind(replay)
        out = []
        for r in range(6):
            base = await replay.run(Plan.resample_from(trace, 0), r)
            for step in trace.decision_steps:
                f = await replay.fork(base, step, trace.steps[step].action)
                out.append((f.value, "|".join(t.identity() for t in f.turns)))
        return out

    fresh = asyncio.run(forks(None))
    with RolloutStore(tmp_path / "s.sqlite") as store:
        first = asyncio.run(forks(store))
        n = store.count()
        second = asyncio.run(forks(store))  # every run and fork now comes from the store
        assert store.count() == n
    assert fresh == first == second


def test_errored_rollouts_are_not_stored_so_resume_retries_them(tmp_path: Path) -> None:
    plugin = tmp_path / "flaky.py"
    plugin.write_text(
        "from car.sim import make\n"
        "class Down:\n"
        "    spec = 'flaky'\n"
        "    async def act(self, decision, key):\n"
        "        raise ConnectionError('backend down')\n"
        "def policy(trace):\n"
        "    return Down()\n"
    )
    path = TRACES / "pivot.json"
    with RolloutStore(tmp_path / "s.sqlite") as store:
        rep = asyncio.run(
            blame_async(
                path, policy=f"{plugin}@policy", samples=4, match_samples=0, runner=Runner(store)
            )
        )
        assert rep.status == "backend-errors"
        assert store.count(kind="run") == 1  # only the factual arm (copied, scored) finished


def test_default_store_dir_has_gitignore_and_cachedir_tag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert (
        _run_main(["blame", str(TRACES / "pivot.json"), "--samples", "4", "-q", "--format", "json"]) == 0
    )
    assert (tmp_path / ".car" / ".gitignore").read_text() == "*\n"
    assert (
        (tmp_path / ".car" / "CACHEDIR.TAG")
        .read_text()
        .startswith("Signature: 8a477f597d28d172789f06886806bc55")
    )
    assert (tmp_path / ".car" / "store.sqlite").exists()


def _run_main(argv: list[str]) -> int:
    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_corrupted_and_foreign_stores_give_one_line_and_the_way_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database at all" * 100)
    code = _run_main(["blame", str(TRACES / "pivot.json"), "--store", str(bad), "-q"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{bad}: not a car store (it looks like text)" in err
    assert "--store PATH" in err and "--no-store" in err
    assert "car cache clear" not in err  # not SQLite: someone's file, never offered for deletion

    foreign = tmp_path / "other.db"
    db = sqlite3.connect(foreign)
    db.execute("CREATE TABLE accounts (id INTEGER)")
    db.commit()
    db.close()
    code = _run_main(["blame", str(TRACES / "pivot.json"), "--store", str(foreign), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "another program" in err and err.count("\n") == 1
    # clearing refuses to delete a file that car did not make, unless forced
    with pytest.raises(StoreError, match="--force"):
        clear_store(foreign)
    assert foreign.exists()
    assert clear_store(foreign, force=True) == [foreign]

    code = _run_main(["cache", "info", "--store", str(bad)])
    assert code == 2 and "Traceback" not in capsys.readouterr().err


def test_a_store_damaged_past_its_header_gives_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Opening works (the schema pages are intact); the damage shows mid-query."""
    path = tmp_path / "s.sqlite"
    with RolloutStore(path) as store:
        blame_many([TRACES], options=BatchOptions(samples=8, match_samples=2), store=store)
    data = bytearray(path.read_bytes())
    for offset in range(len(data) * 2 // 3, len(data), 4096):
        data[offset : offset + 512] = b"\x5a" * 512
    path.write_bytes(bytes(data))
    for argv in (["cache", "info", "--store", str(path)], ["report", str(path)]):
        code = _run_main(argv)
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert str(path) in err and "damaged" in err and "car cache clear" in err


def _open_new_store(path: str) -> str:
    try:
        RolloutStore(path).close()
    except StoreError as exc:
        return str(exc)
    return ""


def test_processes_creating_one_store_at_once_all_succeed(tmp_path: Path) -> None:
    """CI shards pointed at one new store path: none is told to delete a healthy store."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(8) as pool:
        for attempt in range(25):
            path = str(tmp_path / f"new{attempt}.sqlite")
            assert list(pool.map(_open_new_store, [path] * 8)) == [""] * 8


def test_a_damaged_stored_rollout_gives_the_store_up_and_is_computed_again(tmp_path: Path) -> None:
    """A payload that does not decompress raised StoreError out of the attribution: the trace was
    an input error. It is given up as any damage found in the file is, and the rest is computed."""
    path = TRACES / "pivot.json"
    store_path = tmp_path / "s.sqlite"
    with RolloutStore(store_path) as store:
        fresh = asyncio.run(blame_async(path, samples=2, match_samples=0, runner=Runner(store)))
    db = sqlite3.connect(store_path)
    db.execute("UPDATE rollouts SET payload = x'00112233'")
    db.commit()
    db.close()
    with RolloutStore(store_path) as store:
        again = asyncio.run(blame_async(path, samples=2, match_samples=0, runner=Runner(store)))
        assert store.damaged and (store.unwritable or "").startswith("a stored rollout is damaged (")
    assert again.model_dump() == fresh.model_dump()


def test_a_damaged_stored_report_is_one_line_offering_removal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`car report` of a store must not show fewer reports than it holds: the damage is an error."""
    store_path = tmp_path / "s.sqlite"
    argv = ["blame", str(TRACES / "pivot.json"), "--samples", "2", "--store", str(store_path), "-q"]
    assert _run_main(argv) == 0
    db = sqlite3.connect(store_path)
    db.execute("UPDATE results SET report = '{\"cut'")
    db.commit()
    db.close()
    capsys.readouterr()
    assert _run_main(["report", str(store_path)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"car: error: {store_path}: a stored report is damaged ("), line
    assert line.endswith(f"; remove it (car cache clear --store {store_path} --force)"), line


def test_cache_info_and_clear(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    assert (
        _run_main(["blame", str(TRACES / "pivot.json"), "--samples", "2", "--store", str(store), "-q"])
        == 0
    )
    capsys.readouterr()
    assert _run_main(["cache", "info", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "over 1 trace; 1 report;" in out
    assert _run_main(["cache", "clear", "--store", str(store)]) == 0
    assert not store.exists()


def test_shards_partition_the_batch_and_merge_recombines(tmp_path: Path) -> None:
    opts = BatchOptions(samples=4, match_samples=2)
    whole = {r.trace_id: r.report.model_dump() for r in blame_many([TRACES], options=opts)}  # type: ignore[union-attr]
    seen: list[str] = []
    stores = []
    for k in (1, 2, 3):
        s = RolloutStore(tmp_path / f"shard{k}.sqlite")
        stores.append(s.path)
        for r in blame_many([TRACES], options=opts, store=s, shard=(k, 3)):
            assert r.report is not None
            assert r.report.model_dump() == whole[r.trace_id]
            seen.append(r.trace_id or "")
        s.close()
    assert sorted(seen) == sorted(whole)  # every trace in exactly one shard
    assert _run_main(["merge", str(tmp_path / "all.sqlite"), *map(str, stores)]) == 0
    with RolloutStore(tmp_path / "all.sqlite") as merged:
        runs = [r for r in blame_many([TRACES], options=opts, store=merged)]
        assert all(r.fresh_rollouts == 0 for r in runs)  # everything came from the merged store
        assert len(merged.results()) == len(whole)


def test_a_merge_reads_a_shard_a_batch_at_a_time(tmp_path: Path) -> None:
    # A shard of a large run holds gigabytes: the merge must not hold all its rollouts at once.
    import os
    import tracemalloc

    with RolloutStore(tmp_path / "shard.sqlite") as shard:
        for i in range(2000):  # 2000 rollouts of about 6.5 KB each once compressed: 13 MB
            shard.put("ns", f"k{i}", "trace", "run", {"turns": os.urandom(6000).hex()})
    source = merge_source(tmp_path / "shard.sqlite", tmp_path / "all.sqlite")
    with RolloutStore(tmp_path / "all.sqlite") as into, source:
        tracemalloc.start()
        assert into.merge_from(source) == (2000, 0)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert into.count() == 2000
    assert peak < 6_000_000, peak  # batches of 256 rollouts, about 1.7 MB each


def test_a_traces_rows_are_read_without_reading_every_other_traces(tmp_path: Path) -> None:
    # Under --executor ray the driver reads each trace's rows before its task starts: a scan of the
    # whole store for each trace would cost traces x rows.
    def steps_to_read_mine(others: int) -> int:
        with RolloutStore(tmp_path / f"s{others}.sqlite") as store:
            for i in range(5):
                store.put("ns", f"mine{i}", "mine", "run", {"i": i})
            for i in range(others):
                store.put("ns", f"other{i}", "other", "run", {"i": i})
            steps = 0

            def tick() -> int:
                nonlocal steps
                steps += 1
                return 0

            store._db.set_progress_handler(tick, 10)  # every 10 SQLite instructions
            assert len(store.rows_for("mine")) == 5
            store._db.set_progress_handler(None, 0)
        return steps

    assert steps_to_read_mine(2000) < steps_to_read_mine(20) + 20


def test_different_analyses_of_one_trace_are_stored_side_by_side(tmp_path: Path) -> None:
    """Shapley over steps and over agents, and an adaptive run: three results, none overwritten."""
    trace = [str(TRACES / "research-team.json")]
    with RolloutStore(tmp_path / "store.sqlite") as store:
        for options in (
            BatchOptions(samples=4, match_samples=0, method="shapley", players="steps", budget=200),
            BatchOptions(samples=4, match_samples=0, method="shapley", players="agents", budget=200),
            BatchOptions(match_samples=0, adaptive=True, budget=200),
        ):
            [result] = blame_many(trace, options=options, store=store)
            assert result.status == "ok", result.error
        assert len(store.results()) == 3


NAMED_POLICY = """
from car.sim import make

class Named:
    spec = "my-policy"  # a name of its own, not the file's

    def __init__(self, inner):
        self.inner = inner

    async def act(self, decision, key):
        return await self.inner.act(decision, key)

def policy(trace):
    return Named(make("policy", "pivot", trace, "sim:pivot"))
"""


# The same with `__slots__`, which leaves no room for a spec of car's.
FIXED_NAME_POLICY = NAMED_POLICY.replace("class Named:\n", 'class Named:\n    __slots__ = ("inner",)\n')
assert FIXED_NAME_POLICY != NAMED_POLICY


@pytest.mark.parametrize("source", [NAMED_POLICY, FIXED_NAME_POLICY], ids=["named", "slotted"])
def test_an_edited_plugin_file_is_not_served_its_old_rollouts(tmp_path: Path, source: str) -> None:
    """A file's object that names itself (`spec = "my-policy"`) was keyed by that name alone: after an
    edit the store served the old code's rollouts (and another file of that name would share them).
    One that cannot take the loading spec (`__slots__` without it) was keyed by its own name too."""
    plugin = tmp_path / "plugin.py"
    plugin.write_text(source)
    spec = f"{plugin}@policy"
    options = BatchOptions(policy=spec, samples=4, match_samples=0, method="contrastive")
    with RolloutStore(tmp_path / "store.sqlite") as store:
        [first] = blame_many([str(TRACES / "pivot.json")], options=options, store=store)
        assert first.report is not None and first.report.specs.policy == spec
        plugin.write_text(source + "# edited\n")
        [again] = blame_many([str(TRACES / "pivot.json")], options=options, store=store)
        assert (again.stored_rollouts, again.fresh_rollouts) == (0, first.fresh_rollouts)


SLOW_POLICY = """
import asyncio
from car.sim import make

class Slow:
    def __init__(self, inner):
        self.inner = inner
        self.spec = "slow-sim"
    async def act(self, decision, key):
        await asyncio.sleep(0.01)
        return await self.inner.act(decision, key)

def policy(trace):
    name = trace.replay.policy.split(":", 1)[1]
    return Slow(make("policy", name, trace, trace.replay.policy))
"""


def _car(*args: str, cwd: Path, stderr: int = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "car", *args], cwd=cwd, stdout=subprocess.DEVNULL, stderr=stderr
    )


def _records(path: Path) -> dict[str, dict[str, object]]:
    import json

    out = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        out[rec["trace_id"]] = rec
    return out


ARGS = [
    "blame",
    str(TRACES),
    "--policy",
    "slow.py@policy",
    "--samples",
    "12",
    "--match-samples",
    "4",
    "--concurrency",
    "2",
    "--format",
    "jsonl",
    "--no-progress",
]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted run of the batch: its records and its store."""
    d = tmp_path_factory.mktemp("reference")
    (d / "slow.py").write_text(SLOW_POLICY)
    ref = _car(*ARGS, "--store", "ref.sqlite", "-o", "ref.jsonl", cwd=d)
    assert ref.wait(timeout=300) == 0
    return d


@pytest.mark.parametrize(
    ("how", "expected_rc", "last_line"),
    [
        (signal.SIGKILL, -signal.SIGKILL, None),
        (signal.SIGINT, 130, "car: interrupted"),
        # a CI runner's timeout: it died of the signal, without a word
        (signal.SIGTERM, 143, "car: terminated"),
    ],
)
def test_interrupt_mid_batch_then_resume_is_identical_with_no_duplicates(
    tmp_path: Path,
    reference: Path,
    how: signal.Signals,
    expected_rc: int,
    last_line: str | None,
) -> None:
    (tmp_path / "slow.py").write_text(SLOW_POLICY)

    def rollouts(store: RolloutStore) -> int:  # runs and forks (a Shapley fallback forks)
        return store.count(kind="run") + store.count(kind="fork")

    with RolloutStore(reference / "ref.sqlite") as ref_store:
        total_runs = rollouts(ref_store)
        total_rows = ref_store.count()

    err = tmp_path / "victim.err"
    with err.open("wb") as err_file:
        victim = _car(
            *ARGS, "--store", "run.sqlite", "-o", "run.jsonl", cwd=tmp_path, stderr=err_file.fileno()
        )
    store_file = tmp_path / "run.sqlite"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until a real part of the work is stored
        if store_file.exists():
            try:
                db = sqlite3.connect(f"file:{store_file}?mode=ro", uri=True)
                at = db.execute(
                    "SELECT COUNT(*) FROM rollouts WHERE kind IN ('run', 'fork')"
                ).fetchone()[0]
                db.close()
            except sqlite3.Error:
                at = 0
            if at >= total_runs // 3:
                break
        time.sleep(0.02)
    victim.send_signal(how)
    assert victim.wait(timeout=60) == expected_rc
    if last_line is not None:  # one line says why, after the estimate: where the reports went
        (said,) = err.read_text().splitlines()[1:]
        with RolloutStore(store_file) as s:
            stored = s.count()
        resume = (
            f"rerun the same command to resume from run.sqlite ({stored:,} rollouts and draws stored)"
        )
        assert said.startswith(f"{last_line}; ") and said.endswith(f"; {resume}")
        assert "run.jsonl" in said  # the records streamed there, one for every trace
    with RolloutStore(store_file) as s:
        runs_at_kill = rollouts(s)
    assert 0 < runs_at_kill < total_runs  # interrupted in the middle

    streamed = _records(tmp_path / "run.jsonl") if (tmp_path / "run.jsonl").exists() else {}
    resumed = _car(*ARGS, "--store", "run.sqlite", "-o", "run2.jsonl", cwd=tmp_path)
    assert resumed.wait(timeout=300) == 0
    final = _records(tmp_path / "run2.jsonl")
    expected = _records(reference / "ref.jsonl")
    assert set(final) == set(expected)
    for tid, rec in final.items():
        assert rec["report"] == expected[tid]["report"], tid
    if last_line is not None:  # a clean stop streams a record for every trace...
        assert set(streamed) == set(expected)
    for tid, rec in streamed.items():  # ...what finished before the interruption as it will be
        if rec["status"] != "interrupted":
            assert rec["report"] == expected[tid]["report"]
    with RolloutStore(store_file) as s:
        assert rollouts(s) == total_runs  # no rollout stored twice, none missing
        assert s.count() == total_rows
    fresh = sum(r["rollouts"]["fresh"] for r in final.values())  # type: ignore[index]
    stored = sum(r["rollouts"]["stored"] for r in final.values())  # type: ignore[index]
    assert stored == runs_at_kill  # every rollout done before the interruption was reused...
    assert fresh == total_runs - runs_at_kill  # ...and only the missing ones were computed


def _damaged_store(path: Path) -> Path:
    """A car store whose schema and meta pages are intact (it opens, and is recognisably car's) but
    whose rollouts are not: the damage shows only when they are read."""
    with RolloutStore(path) as store:
        for i in range(50):
            store.put("ns", f"k{i}", "h", "run", {"i": i})
    data = bytearray(path.read_bytes())
    size = int.from_bytes(data[16:18], "big")  # the page size, from the SQLite header
    for offset in range(3 * size, len(data), size):  # the pages after sqlite_master and meta's
        data[offset : offset + 8] = b"\x5a" * 8
    path.write_bytes(bytes(data))
    return path


def test_merge_blames_the_damaged_source_not_the_destination(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "dest.sqlite"
    with RolloutStore(dest) as store:
        store.put("ns", "mine", "h", "run", {"keep": True})
    src = _damaged_store(tmp_path / "shard.sqlite")
    assert _run_main(["merge", str(dest), str(src)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"car: error: {src} (merging into {dest}): the store is damaged"), err
    assert f"--store {src}" in err and f"--store {dest}" not in err, err
    with RolloutStore(dest, create=False) as store:  # nothing half-merged
        assert store.count() == 1 and store.get("ns", "mine") == {"keep": True}


@pytest.mark.parametrize("kind", ["trace", "foreign", "missing", "directory"])
def test_merge_never_offers_to_delete_what_is_not_a_car_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """`car merge m.sqlite trace.json` suggested deleting the trace; and left an empty m.sqlite."""
    src = tmp_path / "trace.json"
    if kind == "trace":
        src.write_bytes((TRACES / "pivot.json").read_bytes())
    elif kind == "foreign":
        src = tmp_path / "accounts.db"
        db = sqlite3.connect(src)
        db.execute("CREATE TABLE accounts (id INTEGER)")
        db.commit()
        db.close()
    elif kind == "directory":
        src = tmp_path / "shards"
        src.mkdir()
    before = src.read_bytes() if src.is_file() else None
    dest = tmp_path / "new" / "m.sqlite"
    assert _run_main(["merge", str(dest), str(src)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"car: error: {src} (merging into {dest}): "), err
    assert "car cache clear" not in err and "car blame --store" in err, err
    if before is not None:
        assert src.read_bytes() == before  # the file was not touched
    assert not dest.parent.exists()  # nor a destination made


def test_reading_an_empty_file_never_makes_it_a_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    assert _run_main(["cache", "info", "--store", str(empty)]) == 2
    assert "an empty file, not a car store" in capsys.readouterr().err
    assert empty.stat().st_size == 0
