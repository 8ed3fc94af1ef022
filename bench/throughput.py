"""Throughput of the HTTP policy backend against the loopback server with a fixed per-call latency.

    .venv/bin/python bench/throughput.py [--latency 0.05] [--seconds 2]

For each concurrency C in 1, 8, 32: (a) policy calls, C in flight at once, through `OpenAIPolicy.act`
(retries, the adaptive limiter, JSON, the real HTTP stack); (b) a whole `car blame` of
traces/support-refund.json with `--concurrency C`. Speed-up is calls per second relative to C = 1,
measured side by side in one run; the target is >= 0.9 * C for (a).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time

import car
from car.backends.openai import OpenAIPolicy
from car.backends.options import BackendOptions, configure
from car.protocols import Decision
from car.rng import EventKey
from car.trace import load_trace

TRACE = "traces/support-refund.json"


async def policy_calls(url: str, concurrency: int, calls: int) -> float:
    trace = load_trace(TRACE)
    policy = OpenAIPolicy(
        "support-refund", trace, options=BackendOptions(base_url=url, max_concurrency=64)
    )
    decision = Decision(
        step=0, actor=trace.actors[0], task=trace.task, history=(), sampling=None, actors=trace.actors
    )
    # Probe and open the C connections outside the clock: the figure is steady-state throughput.
    await policy.act(decision, EventKey(0, 0, 0, "warm"))
    await asyncio.gather(*(policy.act(decision, EventKey(0, i, 0, "warm")) for i in range(concurrency)))
    queue = iter(range(calls))

    async def worker() -> None:
        for i in queue:
            await policy.act(decision, EventKey(1, i, 0, "policy"))

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    await policy.aclose()
    return calls / elapsed


def blame_rate(url: str, concurrency: int) -> float:
    with configure(base_url=url, max_concurrency=64):
        start = time.perf_counter()
        report = car.blame(TRACE, policy="openai:support-refund", concurrency=concurrency)
        elapsed = time.perf_counter() - start
    assert report.locus == 1, report.headline
    return report.budget.policy_calls / elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--seconds", type=float, default=2.0, help="target duration per measurement")
    ap.add_argument("--concurrency", type=int, nargs="*", default=[1, 8, 32])
    args = ap.parse_args()
    print(f"loopback server, {args.latency * 1000:.0f} ms per call")
    print(
        f"{'C':>3} {'calls/s':>9} {'speed-up':>9} {'target':>7}   {'blame calls/s':>13} {'speed-up':>9}"
    )
    base_calls = base_blame = 0.0
    # The server runs in its own process, so that it does not share the client's interpreter lock.
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "car.testing",
            "--scenario",
            "support-refund",
            "--latency",
            str(args.latency),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        for c in args.concurrency:
            n = max(c, int(args.seconds / args.latency * c))
            rate = asyncio.run(policy_calls(url, c, n))
            brate = blame_rate(url, c)
            base_calls = base_calls or rate
            base_blame = base_blame or brate
            print(
                f"{c:>3} {rate:>9.1f} {rate / base_calls:>9.2f} {0.9 * c:>7.1f}   "
                f"{brate:>13.1f} {brate / base_blame:>9.2f}"
            )
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
