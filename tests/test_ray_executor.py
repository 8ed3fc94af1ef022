"""The Ray executor against a small local Ray instance: same reports as the local executor."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from car.batch import INTERRUPTED_RUNNING, BatchOptions, TraceResult, blame_many, plan_batch
from car.progress import PhaseProgress
from car.store import RolloutStore

ray = pytest.importorskip("ray")

TRACES = Path(__file__).resolve().parent.parent / "traces"


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    import logging

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    yield
    ray.shutdown()


@pytest.mark.slow
def test_ray_matches_local_and_fills_the_same_store(local_ray: None, tmp_path: Path) -> None:
    from car.executors.ray import run_ray

    opts = BatchOptions(samples=6, match_samples=3, seed=11)
    local = {
        r.trace_id: r
        for r in blame_many([TRACES], options=opts, store=RolloutStore(tmp_path / "l.sqlite"))
    }

    store = RolloutStore(tmp_path / "r.sqlite")
    seen = []
    results = run_ray(
        options=opts,
        store=store,
        concurrency=3,
        planned=plan_batch([TRACES], opts),
        on_result=lambda r: seen.append(r.trace_id),
    )
    assert sorted(seen) == sorted(local)
    for r in results:
        assert r.report is not None and r.status == "ok"
        assert r.report.model_dump() == local[r.trace_id].report.model_dump()  # type: ignore[union-attr]
    with RolloutStore(tmp_path / "l.sqlite") as lstore:
        assert store.count() == lstore.count()  # every rollout landed in the driver's store once
    assert len(store.results()) == len(local)

    # resume through Ray: everything comes from the store
    again = run_ray(options=opts, store=store, concurrency=3, planned=plan_batch([TRACES], opts))
    assert all(r.fresh_rollouts == 0 and r.stored_rollouts > 0 for r in again)
    store.close()


class _Lines(PhaseProgress):
    """The lines one trace in a log prints, and one where it finishes."""

    def trace_finished(self, result: TraceResult) -> None:
        self._say(f"{result.label}: finished")


@pytest.mark.slow
def test_ray_relays_a_trace_s_phases_to_the_driver_s_display(local_ray: None) -> None:
    """One trace in a log prints a line as each phase starts and at each quarter of it: under Ray
    it printed none, the progress of the trace staying in its worker."""
    from car.executors.ray import run_ray

    opts = BatchOptions(samples=12, match_samples=3)
    planned = plan_batch([TRACES / "pivot.json"], opts)
    here, there = io.StringIO(), io.StringIO()
    blame_many([], options=opts, planned=planned, progress=_Lines(here))
    run_ray(options=opts, store=None, concurrency=2, planned=planned, progress=_Lines(there))
    assert "contrastive arms: 25% of" in here.getvalue()
    assert there.getvalue() == here.getvalue()


@pytest.mark.slow
def test_ray_reports_errors_as_records(local_ray: None, tmp_path: Path) -> None:
    from car.executors.ray import run_ray

    (tmp_path / "broken.json").write_text("{")
    opts = BatchOptions(samples=2, match_samples=0)
    planned = plan_batch([tmp_path / "broken.json", TRACES / "pivot.json"], opts)
    results = run_ray(options=opts, store=None, concurrency=2, planned=planned)
    assert [r.status for r in results] == ["input-error", "ok"]


@pytest.mark.slow
def test_ray_fail_fast_stops_at_an_unreadable_trace_as_the_local_executor_does(
    local_ray: None, tmp_path: Path
) -> None:
    """An unreadable trace is a failure known before anything starts: under `--fail-fast` no other
    trace runs. The Ray driver reported it and went on with every readable trace."""
    from car.executors.ray import run_ray

    (tmp_path / "broken.json").write_text("{")
    opts = BatchOptions(samples=2, match_samples=0)
    paths = [tmp_path / "broken.json", TRACES / "pivot.json"]
    local = blame_many(paths, options=opts, fail_fast=True)
    results = run_ray(
        options=opts, store=None, concurrency=2, planned=plan_batch(paths, opts), fail_fast=True
    )
    assert [r.status for r in results] == [r.status for r in local] == ["input-error"]


@pytest.mark.slow
def test_ray_workers_get_the_drivers_backend_options(local_ray: None) -> None:
    """`--base-url` and the other backend options reach the workers (they live in a context
    variable of the driver, which a Ray task does not inherit by itself)."""
    from car.backends.options import configure
    from car.executors.ray import run_ray
    from car.sim import scenario_for
    from car.testing import LoopbackServer, ScenarioModel

    opts = BatchOptions(policy="openai:support-refund", samples=4, match_samples=2)
    model = ScenarioModel(scenario_for("support-refund"))
    with LoopbackServer({"support-refund": model}) as server, configure(base_url=server.url):
        planned = plan_batch([TRACES / "support-refund.json"], opts)
        results = run_ray(options=opts, store=None, concurrency=2, planned=planned)
    assert [r.status for r in results] == ["ok"], [r.error for r in results]
    report = results[0].report
    assert report is not None and report.specs.policy == "openai:support-refund"
    assert report.budget.errored == 0


@pytest.mark.slow
def test_ray_grants_an_automatic_shapley_run_what_the_cap_leaves(local_ray: None) -> None:
    from car.executors.ray import run_ray

    opts = BatchOptions(samples=32, match_samples=0)  # and.json at seed 0: credit shared
    planned = plan_batch([TRACES / "and.json"], opts)
    assert planned[0].estimate is not None
    cap = planned[0].estimate.rollouts + 150
    (alone,) = blame_many([TRACES / "and.json"], options=replace(opts, method="contrastive"))
    assert alone.report is not None
    left = cap - alone.report.budget.rollouts  # what the contrastive part spent, not its estimate
    (result,) = run_ray(options=opts, store=None, concurrency=2, planned=planned, max_rollouts=cap)
    report = result.report
    assert report is not None and report.shapley is not None
    assert report.budget.rollouts <= cap
    assert f"Shapley budget cut: --max-rollouts left {left} of its 1000 rollouts" in report.notes


@pytest.mark.slow
def test_ray_keeps_a_trace_that_does_not_fit_waiting_as_the_local_executor_does(
    local_ray: None,
) -> None:
    """Three traces of 97 estimated rollouts under a cap of 193: the second fits once the first has
    settled at the 79 it used, the third never does. Under Ray the second and third were skipped at
    once: the driver reserved each trace in turn and kept none waiting for room."""
    from car.executors.ray import run_ray

    opts = BatchOptions(samples=32, match_samples=0, method="contrastive")
    paths = [TRACES / "and.json", TRACES / "pivot.json", TRACES / "or.json"]
    local = blame_many(paths, options=opts, max_rollouts=193)
    planned = plan_batch(paths, opts)
    results = run_ray(options=opts, store=None, concurrency=2, planned=planned, max_rollouts=193)
    outcome = [(r.trace_id, r.status, r.error) for r in results]
    assert outcome == [(r.trace_id, r.status, r.error) for r in local]
    assert [status for _, status, _ in outcome] == ["ok", "ok", "budget"]
    assert outcome[2][2] == "skipped: needs 97 rollouts, 60 left of --max-rollouts 193"


SLOW_POLICY = """\
import asyncio
from pathlib import Path
from car.sim import make
LOG = Path(__file__).with_name("calls.log")
def note(line):
    with LOG.open("a") as fh:
        fh.write(line + "\\n")
class Slow:
    spec = "slow"
    def __init__(self, inner, trace_id):
        self.inner, self.trace_id = inner, trace_id
    async def act(self, decision, key):
        if self.trace_id.startswith("slow"):
            note(f"started {self.trace_id}")
            try:
                await asyncio.sleep(30)
            except BaseException:  # cancelled (or interrupted)
                note(f"cancelled {self.trace_id}")
                raise
        for _ in range(1000):  # the fast trace finishes once a slow one is under way
            if LOG.exists() and "started" in LOG.read_text():
                break
            await asyncio.sleep(0.01)
        return await self.inner.act(decision, key)
def policy(trace):
    name = trace.replay.policy.split(":", 1)[1]
    return Slow(make("policy", name, trace, trace.replay.policy), trace.id)
"""


class CallbackFailed(Exception):
    pass


@pytest.mark.slow
def test_an_on_result_that_raises_stops_the_ray_batch_cleanly(local_ray: None, tmp_path: Path) -> None:
    """As under the local executor: the traces still running are cancelled and awaited, then the
    callback's exception propagates. The Ray driver let it propagate at once, the other tasks left
    running on the workers (each policy call here waits 30 s)."""
    from car.executors.ray import run_ray

    (tmp_path / "slow.py").write_text(SLOW_POLICY)
    doc = json.loads((TRACES / "pivot.json").read_text())
    (tmp_path / "a.json").write_text(json.dumps(doc))
    for n in (1, 2, 3):
        (tmp_path / f"slow{n}.json").write_text(json.dumps({**doc, "id": f"slow-{n}"}))
    opts = BatchOptions(policy=f"{tmp_path}/slow.py@policy", samples=2, match_samples=0)
    seen: list[str] = []

    def on_result(result: TraceResult) -> None:
        seen.append(result.path)
        raise CallbackFailed(result.path)

    store = RolloutStore(tmp_path / "s.sqlite")
    with pytest.raises(CallbackFailed):
        run_ray(
            options=opts,
            store=store,
            concurrency=4,
            planned=plan_batch([tmp_path], opts),
            on_result=on_result,
        )
    assert [Path(p).name for p in seen] == ["a.json"]
    calls = (tmp_path / "calls.log").read_text().splitlines()
    started = {line.split()[1] for line in calls if line.startswith("started")}
    cancelled = {line.split()[1] for line in calls if line.startswith("cancelled")}
    assert started and cancelled == started  # every slow trace that ran was cancelled, none left
    assert [r.trace_id for r in store.results()] == ["pivot-0"]  # the finished report is kept
    store.close()


@pytest.mark.slow
def test_sigterm_stops_a_ray_batch_as_ctrl_c_does(tmp_path: Path) -> None:
    """`ray.init` took SIGTERM for its own handler: a stack dump from logging.cc and exit 15, the
    traces on the workers left to Ray. car's handler stays: one line, exit 143, the running tasks
    cancelled, the finished report kept."""
    import signal

    from tests.conftest import interrupt_after

    (tmp_path / "slow.py").write_text(SLOW_POLICY)
    doc = json.loads((TRACES / "pivot.json").read_text())
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "a.json").write_text(json.dumps(doc))
    for n in (1, 2, 3):
        (tmp_path / "runs" / f"slow{n}.json").write_text(json.dumps({**doc, "id": f"slow-{n}"}))
    argv = ["blame", "runs", "--executor", "ray", "--policy", f"{tmp_path}/slow.py@policy"]
    argv += ["--samples", "2", "--match-samples", "0", "--store", "s.sqlite", "--format", "jsonl"]
    argv += ["--report", "jsonl=car.jsonl"]
    code, lines = interrupt_after(argv, tmp_path, "car: [1/4]", signal.SIGTERM, wait=120)
    assert code == 143
    rest = lines[next(i for i, x in enumerate(lines) if x.startswith("car: [1/4]")) + 1 :]
    with RolloutStore(tmp_path / "s.sqlite") as store:
        stored = store.count()
    assert rest == [
        "car: terminated; the 1 finished trace's report is in car.jsonl, and on stdout; rerun the "
        f"same command to resume from s.sqlite ({stored:,} rollouts and draws stored)"
    ]
    # What a cancelled task ran never comes back from its worker: unknown, not 0.
    records = [json.loads(line) for line in (tmp_path / "car.jsonl").read_text().splitlines()]
    cut = [r for r in records if r["status"] == "interrupted"]
    assert len(cut) == 3
    for record in cut:
        assert record["error"] == INTERRUPTED_RUNNING
        assert (record["rollouts"], record["usage"]) == ({"fresh": None, "stored": None}, None)
    calls = (tmp_path / "calls.log").read_text().splitlines()
    started = {line.split()[1] for line in calls if line.startswith("started")}
    cancelled = {line.split()[1] for line in calls if line.startswith("cancelled")}
    assert started and cancelled == started
    with RolloutStore(tmp_path / "s.sqlite") as store:
        assert [r.trace_id for r in store.results()] == ["pivot-0"]


@pytest.mark.slow
def test_a_store_found_damaged_costs_no_ray_trace(local_ray: None, tmp_path: Path) -> None:
    """Reading the first trace's stored rows found the damage, and the StoreError stopped the batch:
    no trace ran; then that trace failed. As under the local executor, the store is given up and
    every trace runs without it."""
    from car.executors.ray import run_ray
    from tests.test_store_resume import _damaged_store

    store = RolloutStore(_damaged_store(tmp_path / "s.sqlite"))
    opts = BatchOptions(samples=2, match_samples=0)
    planned = plan_batch([TRACES / "pivot.json", TRACES / "or.json"], opts)
    first, second = run_ray(options=opts, store=store, concurrency=2, planned=planned)
    assert [first.status, second.status] == ["ok", "ok"]
    assert first.report is not None and second.report is not None
    assert store.damaged and store.unwritable is not None
    store.close()
