"""The Ray executor (`car blame --executor ray [--address ADDR]`): one Ray task per trace.

- One actor holds the concurrency limit, so rollouts in flight stay under `--concurrency` across every
  worker and machine, exactly as the local executor's semaphore does in one process.
- Another holds the run's budget (`car.batch.BudgetGuard`). A trace whose estimate does not fit waits
  in the driver, asked again each time a running trace settles, and is skipped only when nothing
  running could free room, as under the local executor.
- The store has one writer, this driver. A task receives the stored rows of its trace (so it resumes
  what is already done), runs with an in-memory store, and ships back the rows it added; the driver
  writes them to SQLite as each task finishes. Randomness is keyed by event, so the reports are
  identical to the local executor's for the same seed.
- Backend options (`--base-url`, key variable, timeouts, sampling overrides) live in a context
  variable of the driver; each task takes them along and sets them in its worker.
- A batch stops as under the local executor: when `on_result` raises (or `--fail-fast`, an error,
  Ctrl-C), the tasks still running are cancelled and awaited before the exception propagates; a
  trace that finishes meanwhile is stored but not handed to the callback. A worker's event loop
  wakes every `_WAKE_SECONDS`, so a cancellation is noticed even while it waits on a slow model.
- Resumption is per finished trace: a driver killed mid-batch keeps every trace that finished, while
  the rollouts of traces still running on workers are recomputed on resume. So an interrupted run's
  record of such a trace has its rollouts null: what the task ran never came back.
- A task's trace reports its phases to a third actor (`_Ticks`: each phase's start and each hundredth
  of it), which the driver empties into its progress display while it waits for tasks to finish, so
  one trace in a log prints the same phase lines as under the local executor.

Use it when one machine's event loop is not enough: a CPU-heavy environment or scorer (simulators,
test suites run per rollout) or a cluster. Rollouts that only wait on a model API are I/O-bound and
run best on the local executor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import asdict
from typing import Any, TypeVar

from car.backends.options import BackendOptions, configure, current
from car.batch import (
    INTERRUPTED_RUNNING,
    BatchOptions,
    BatchProgress,
    BudgetGuard,
    TraceResult,
    _Planned,
    attribute_one,
    deliver,
)
from car.errors import InputError, one_line
from car.runner import Runner
from car.store import MemoryStore, RolloutCache, RolloutStore

__all__ = ["run_ray"]

T = TypeVar("T")


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError(
            "--executor ray needs Ray: pip install 'car-blame[ray]' (or use --executor local)"
        ) from None
    return ray


class _ActorLimiter:
    """The runner's `Limiter`, backed by the shared slots actor."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    async def acquire(self) -> None:
        await self.actor.acquire.remote()

    async def release(self) -> None:
        await self.actor.release.remote()


class _Slots:
    """A semaphore shared by every task (run as an async Ray actor)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._sem: asyncio.Semaphore | None = None

    def _get(self) -> asyncio.Semaphore:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.limit)
        return self._sem

    async def acquire(self) -> None:
        await self._get().acquire()

    async def release(self) -> None:
        self._get().release()


class _Ticks:
    """What the tasks' traces report of their phases, kept until the driver takes it (run as a Ray
    actor: a synchronous one runs each caller's calls in the order they were sent, so a trace's
    reports stay in order)."""

    def __init__(self) -> None:
        self._ticks: list[tuple[str, str, int, int]] = []

    def put(self, label: str, phase: str, done: int, total: int) -> None:
        self._ticks.append((label, phase, done, total))

    def take(self) -> list[tuple[str, str, int, int]]:
        ticks, self._ticks = self._ticks, []
        return ticks


class _Relay:
    """The `BatchProgress` a task's trace reports to: its reports go to the `_Ticks` actor, whose
    driver hands them to its display. Only each phase's start and the first report in each hundredth
    of it are sent (a report per rollout would be an actor call per rollout); a quarter, where
    `PhaseProgress` prints a line, starts a hundredth, so the lines are the local executor's."""

    def __init__(self, ticks: Any) -> None:
        self.ticks = ticks
        self._last: tuple[str, int, int] | None = None  # the phase, total and hundredth last sent
        self._sent: Any = None  # the last report's reference

    def trace_started(self, label: str, total: int) -> None:
        pass  # the driver's display heard it when the driver started the task

    def trace_advanced(self, label: str, phase: str, done: int, total: int) -> None:
        step = (phase, total, 100 * done // total if total > 0 else 0)
        if step != self._last:
            self._last = step
            self._sent = self.ticks.put.remote(label, phase, done, total)

    def trace_finished(self, result: TraceResult) -> None:
        pass  # the driver's display hears it from the driver

    async def sent(self) -> None:
        """Wait until the actor holds every report sent: the driver takes them as the task ends,
        before it shows the trace finished."""
        if self._sent is not None:
            await self._sent


def _attribute_task(
    path: str,
    trace: Any,
    options: BatchOptions,
    rows: dict[tuple[str, str], dict[str, Any]],
    slots: Any,
    concurrency: int,
    backend: BackendOptions,
    guard: Any,
    key: int,
    ticks: Any,
) -> tuple[TraceResult, list[tuple[str, str, str, str, dict[str, Any]]]]:
    memory = MemoryStore(rows)
    runner = Runner(memory, concurrency, limiter=_ActorLimiter(slots))
    relay = _Relay(ticks) if ticks is not None else None

    async def grant(
        rollouts: int, policy_calls: int, *, spent_rollouts: int, spent_calls: int
    ) -> tuple[int, int]:
        granted: tuple[int, int] = await guard.grant.remote(
            key, rollouts, policy_calls, spent_rollouts=spent_rollouts, spent_calls=spent_calls
        )
        return granted

    async def attribute() -> TraceResult:
        result = await attribute_one(path, trace, options, runner, relay, grant)
        if relay is not None:
            await relay.sent()
        return result

    with configure(**asdict(backend)):
        result = asyncio.run(_awake(attribute()))
    return result, memory.added


def _cut(item: _Planned) -> TraceResult:
    """A trace whose task an interrupt cancelled. What it ran is unknown here: `ray.cancel` stops
    the run in its worker, whose result (its counts, and the rows it added, which the driver would
    have stored) never comes back, so its rollouts are None, not 0, and a rerun computes them again.
    """
    trace_id = item.trace.id if item.trace is not None else None
    return TraceResult(
        item.path,
        trace_id,
        "interrupted",
        error=INTERRUPTED_RUNNING,
        fresh_rollouts=None,
        stored_rollouts=None,
        usage=None,
    )


_WAKE_SECONDS = 0.1
# How often the driver, waiting for a task to finish, takes what the running traces reported of
# their phases to its display (only when it has one).
_RELAY_SECONDS = 0.2


async def _awake(work: Coroutine[Any, Any, T]) -> T:
    """`work`, the loop waking every `_WAKE_SECONDS` meanwhile. `ray.cancel` raises KeyboardInterrupt
    in the worker only when its main thread next runs Python, and a loop waiting on a slow model
    call runs none: the task would go on until that call returned. Interrupted, `asyncio.run`
    cancels `work` and awaits it, so its rollouts stop and its components close."""

    async def tick() -> None:
        while True:
            await asyncio.sleep(_WAKE_SECONDS)

    ticker = asyncio.ensure_future(tick())
    try:
        return await work
    finally:
        ticker.cancel()


def run_ray(
    *,
    options: BatchOptions,
    store: RolloutCache | None,
    concurrency: int,
    planned: Sequence[_Planned],
    address: str | None = None,
    fail_fast: bool = False,
    max_rollouts: int | None = None,
    max_policy_calls: int | None = None,
    on_result: Callable[[TraceResult], None] | None = None,
    on_interrupted: Callable[[TraceResult], None] | None = None,
    progress: BatchProgress | None = None,
) -> list[TraceResult]:
    """Attribute the planned traces as Ray tasks; results in input order, as the local executor.
    Interrupted (Ctrl-C, SIGTERM), each trace that was running is handed to `on_interrupted`, as
    `blame_many` does, but with its counts unknown (None): see `_cut`."""
    ray = _ray()
    started = False
    if not ray.is_initialized():
        import logging
        import signal

        on_term = signal.getsignal(signal.SIGTERM)
        ray.init(
            address=address,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.ERROR,
        )
        if on_term is not None:  # Ray takes SIGTERM for a stack dump and exit 15: car's stays
            signal.signal(signal.SIGTERM, on_term)
        started = True
    try:
        slots = ray.remote(_Slots).options(max_concurrency=100_000).remote(concurrency)
        task = ray.remote(_attribute_task)
        results: list[TraceResult | None] = [None] * len(planned)
        refs: dict[Any, int] = {}  # the running traces' tasks
        guard = ray.remote(BudgetGuard).remote(max_rollouts, max_policy_calls)
        ticks = ray.remote(_Ticks).remote() if progress is not None else None
        backend = current()  # the driver's --base-url and friends, for every worker

        failures: list[Exception] = []  # raised by on_result: the batch stops, then the first

        def finish(i: int, result: TraceResult) -> None:
            results[i] = result
            try:
                # Once the batch is stopping, a trace that still finishes is stored, not handed on.
                deliver(result, store, progress, None if failures else on_result)
            except Exception as exc:  # the caller's callback raised
                failures.append(exc)

        def admit(waiting: list[int]) -> list[int]:
            """Start the waiting traces that fit, in order, and skip those that nothing running could
            make fit (`BudgetGuard.admit`, on which the local executor waits); the rest wait on."""
            if failures:
                return []  # stopping: nothing more starts
            verdicts = ray.get(guard.admit_each.remote([(i, planned[i].estimate) for i in waiting]))
            for i, verdict in zip(waiting, verdicts, strict=True):
                item = planned[i]
                assert item.trace is not None
                if verdict is None:
                    need = item.estimate.rollouts if item.estimate is not None else 0
                    hash_ = item.trace.content_hash()
                    # A store found damaged here is given up and hands this trace no rows.
                    rows = store.rows_for(hash_) if isinstance(store, RolloutStore) else {}
                    if progress is not None:
                        progress.trace_started(item.path, need)
                    mine = (item.path, item.trace, options, rows)
                    refs[task.remote(*mine, slots, concurrency, backend, guard, i, ticks)] = i
                elif verdict != BudgetGuard.WAIT:
                    finish(i, TraceResult(item.path, item.trace.id, "budget", error=verdict))
            return [i for i, v in zip(waiting, verdicts, strict=True) if v == BudgetGuard.WAIT]

        def relay() -> None:
            """Hand the display what the running traces reported of their phases since last time."""
            if ticks is not None and progress is not None:
                for label, phase, done, total in ray.get(ticks.take.remote()):
                    progress.trace_advanced(label, phase, done, total)

        def collect(ref: Any, *, cancelled: bool = False) -> TraceResult | None:
            """The finished task's result, its rows written to the store and its reservation settled;
            None for a task that `cancelled` stopped before it finished."""
            i = refs.pop(ref)
            result: TraceResult
            added: list[tuple[str, str, str, str, dict[str, Any]]]
            try:
                result, added = ray.get(ref)
            except Exception as exc:  # a worker or node died: this trace fails, the batch goes on
                if cancelled:
                    return None
                item = planned[i]
                message = one_line(str(exc), 500)
                result, added = (
                    TraceResult(
                        item.path,
                        item.trace.id if item.trace is not None else None,
                        "backend-error",
                        error=f"Ray task failed: {type(exc).__name__}: {message}",
                    ),
                    [],
                )
            if store is not None:
                for ns, key, trace_hash, kind, payload in added:
                    store.put(ns, key, trace_hash, kind, payload)
            ray.get(guard.settle.remote(i, result))
            finish(i, result)
            return result

        unreadable = [i for i, item in enumerate(planned) if item.trace is None]
        for i in unreadable:
            finish(i, TraceResult(planned[i].path, None, "input-error", error=planned[i].error))
        # Fail-fast: a trace that could not be read is a failure known before anything starts.
        readable = [i for i, item in enumerate(planned) if item.trace is not None]
        waiting = [] if fail_fast and unreadable else admit(readable)
        cut: list[int] = []  # the traces cancelled before they finished
        interrupted = False
        try:
            while refs and not failures:
                poll = None if ticks is None else _RELAY_SECONDS
                done, _ = ray.wait(list(refs), num_returns=1, timeout=poll)
                relay()  # a finished task's reports included: it sent them all before it ended
                if not done:
                    continue
                result = collect(done[0])
                if fail_fast and result is not None and result.status != "ok":
                    break
                if waiting:
                    waiting = admit(waiting)  # what it settled may make room
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            # Stopped (fail-fast, a callback that raised, an error, Ctrl-C): no task outlives the
            # batch. Each is cancelled and awaited; one that finished anyway is kept.
            for ref in refs:
                ray.cancel(ref)
            while refs:
                done, _ = ray.wait(list(refs), num_returns=1)
                i = refs[done[0]]
                if collect(done[0], cancelled=True) is None:
                    cut.append(i)
            if interrupted and on_interrupted is not None:
                for i in sorted(cut):
                    on_interrupted(_cut(planned[i]))
        if failures:
            raise failures[0]
        return [r for r in results if r is not None]
    finally:
        if started:
            ray.shutdown()
