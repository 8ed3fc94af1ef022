"""How long `car blame` takes on each bundled trace, and car's own CPU per executed rollout step.

    python -m bench.blame_speed            # prints a Markdown table

The simulated policies and environments cost next to nothing, so the CPU measured here is car's own
overhead per step (context building, keyed randomness, bookkeeping, estimation); with a real model the
time is dominated by the backend. Default settings, so traces with shared credit also run the Shapley
fallback (up to 1000 rollouts). Wall time of the command includes interpreter start-up and imports;
the command runs with `--no-store` so that every repetition computes afresh.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import car

ROOT = Path(__file__).resolve().parent.parent
REPEATS = 5


def measure(path: Path) -> dict[str, float]:
    cpu: list[float] = []
    wall: list[float] = []
    steps: list[int] = []
    reports = []
    for seed in range(REPEATS):
        c0, w0 = time.process_time(), time.perf_counter()
        report = car.blame(path, seed=seed)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
        steps.append(report.budget.env_calls + report.budget.policy_calls)  # executed work units
        reports.append(report)
    cmd = []
    for _ in range(3):
        w0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "car", "blame", str(path), "--no-store"],
            check=True,
            capture_output=True,
        )
        cmd.append(time.perf_counter() - w0)
    first = reports[0].budget  # seed 0: what the command runs
    return {
        "rollouts": first.rollouts,
        "policy_calls": first.policy_calls,
        "env_calls": first.env_calls,
        "api_wall_ms": 1000 * statistics.median(wall),
        "cli_wall_ms": 1000 * statistics.median(cmd),
        # Seeds differ in work (a Shapley fallback runs on some): CPU over work, summed over seeds.
        "cpu_us_per_step": 1e6 * sum(cpu) / max(sum(steps), 1),
    }


def main() -> None:
    print(
        "| trace | rollouts | policy calls | env steps | `car.blame` wall | `car blame` command wall "
        "| CPU per executed step |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    paths = sorted((ROOT / "traces").glob("*.json"))
    for path in paths:
        # Untimed: a process's first attribution of a scenario pays for its imports (numpy, scipy,
        # the simulated scenario), which the command-wall column counts and car's own CPU should not.
        car.blame(path, samples=1, match_samples=1, method="contrastive")
    for path in paths:
        m = measure(path)
        print(
            f"| {path.stem} | {m['rollouts']:.0f} | {m['policy_calls']:.0f} | {m['env_calls']:.0f} "
            f"| {m['api_wall_ms']:.0f} ms | {m['cli_wall_ms']:.0f} ms | {m['cpu_us_per_step']:.0f} µs |"
        )


if __name__ == "__main__":
    main()
