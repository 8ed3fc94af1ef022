"""What the resumable store costs and what resuming saves, measured side by side in one run.

    .venv/bin/python bench/store_overhead.py [--samples 32] [--latency-ms 0] [--repeat 3]

For the shipped traces, times `car.blame_many` three ways in the same process: without a store, with
a fresh store (every rollout written), and resumed from that store (every rollout read). Prints the
ratios to the no-store time (best of `--repeat`). `--latency-ms` adds a sleep to every policy call to
stand in for a model API: the store's cost is fixed per rollout, so it shrinks relative to real calls.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from car.batch import BatchOptions, blame_many
from car.sim import make
from car.store import RolloutStore
from car.trace import Trace, load_trace

TRACES = Path(__file__).resolve().parent.parent / "traces"


class Delayed:
    def __init__(self, inner: Any, delay: float) -> None:
        self.inner, self.delay, self.spec = inner, delay, f"delayed:{inner.spec}"

    async def act(self, decision: Any, key: Any) -> Any:
        await asyncio.sleep(self.delay)
        return await self.inner.act(decision, key)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=32)
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    paths = sorted(str(p) for p in TRACES.glob("*.json"))
    traces: list[Trace] = [load_trace(p) for p in paths]

    def policy_for(trace: Trace) -> Any:
        assert trace.replay is not None and trace.replay.policy is not None
        inner = make("policy", trace.replay.policy[4:], trace, trace.replay.policy)
        return Delayed(inner, args.latency_ms / 1000) if args.latency_ms else inner

    def run(store: RolloutStore | None) -> float:
        start = time.perf_counter()
        for trace, path in zip(traces, paths, strict=True):
            opts = BatchOptions(policy=policy_for(trace), samples=args.samples)
            [res] = blame_many([path], options=opts, store=store, concurrency=16)
            assert res.status == "ok", res.error
        return time.perf_counter() - start

    best: dict[str, float] = {"no store": 1e9, "fresh store": 1e9, "resumed": 1e9}
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            best["no store"] = min(best["no store"], run(None))
            with RolloutStore(Path(tmp) / "s.sqlite") as store:
                best["fresh store"] = min(best["fresh store"], run(store))
                best["resumed"] = min(best["resumed"], run(store))
                rows = store.count()
    base = best["no store"]
    print(f"{len(paths)} traces, {args.samples} samples/step, latency {args.latency_ms} ms, {rows} rows")
    for name, t in best.items():
        print(f"  {name:12s} {t:7.3f} s   ratio {t / base:5.2f}")


if __name__ == "__main__":
    main()
