"""The replay engine's speed and memory on validation cells, this checkout against another revision.

    python -m bench.engine_speed                 # this checkout against HEAD
    python -m bench.engine_speed --against REV   # ... against any git revision

Each cell runs in its own interpreter, in this checkout and in a temporary `git worktree` of REV,
alternating between the two, `--repeats` times; the table shows the median seconds and peak resident
memory (the interpreter's own, imports included) and the ratios; a second table times whole command
lines (`python -m car ...`, start-up included), three runs per repeat. The cells are seeded, so both
sides do the same work when the revisions draw the same numbers, and comparable work when they do not
(the same budgets and seeds).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (label, Python expression run inside the revision's checkout)
CELLS = [
    (
        "Shapley, planted-and, car-shared, 320 rollouts x 60 seeds",
        'shapley_cell(Case("planted-and"), "car-shared", 320, 60)',
    ),
    (
        "contrastive, cascade, car-rows, 576 rollouts x 60 seeds",
        'contrastive_cell(Case("cascade"), "car-rows", 576, 60)',
    ),
    (
        "contrastive, long (n=30), car-fixed, 960 rollouts x 10 seeds",
        'contrastive_cell(Case("long", (("n", 30),)), "car-fixed", 960, 10)',
    ),
    (
        "car.blame, a 200-step trace (long, n=200), default settings",
        'blame(scenario_for("long", None, n=200).recorded_trace(0))',
    ),
    (
        "car.blame, 240,000 match draws (long-and, 12 steps x match_samples=20000)",
        'blame("traces/long-and.json", match_samples=20000)',
    ),
]

_PROGRAM = """
import json, resource, time
from bench.credit import shapley_cell
from bench.suite import Case, contrastive_cell
from car import blame
from car.sim import scenario_for
t = time.perf_counter()
eval({expr!r})
took = time.perf_counter() - t
print(json.dumps([took, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]))
"""


def _measure(root: Path) -> list[tuple[float, float]]:
    """(seconds, peak MB) of every cell, each in a fresh interpreter."""
    out = []
    for _, expr in CELLS:
        done = subprocess.run(
            [sys.executable, "-c", _PROGRAM.format(expr=expr)],
            cwd=root,
            env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
        )
        took, peak = json.loads(done.stdout)
        out.append((float(took), float(peak)))
    return out


# Command lines timed whole (start-up included), as `python -m car ARGS` in the revision's checkout.
COMMANDS = [
    ("car", "--version"),
    ("car", "validate", "traces/and.json"),
    ("car", "blame", "traces/pivot.json", "--no-store"),
]


def _command_seconds(root: Path) -> list[float]:
    out = []
    for command in COMMANDS:
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "car", *command[1:]],
            cwd=root,
            env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            check=True,
        )
        out.append(time.perf_counter() - started)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.engine_speed", description=__doc__)
    parser.add_argument("--against", default="HEAD", help="git revision to compare with")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        other = Path(tmp) / "other"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(other), args.against],
            cwd=ROOT,
            check=True,
        )
        try:
            runs: dict[str, list[list[tuple[float, float]]]] = {"this": [], "other": []}
            commands: dict[str, list[list[float]]] = {"this": [], "other": []}
            for _ in range(args.repeats):
                runs["other"].append(_measure(other))
                runs["this"].append(_measure(ROOT))
                for _ in range(3):  # short: more repeats for a stable median
                    commands["other"].append(_command_seconds(other))
                    commands["this"].append(_command_seconds(ROOT))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=ROOT)
    rev = args.against
    print(f"Command: `python -m bench.engine_speed --against {rev}` (median of {args.repeats})")
    print()
    print(
        f"| cell | {rev} (s) | this checkout (s) | speed-up | {rev} peak (MB) "
        "| this checkout peak (MB) | memory ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for i, (label, _) in enumerate(CELLS):
        old_s = statistics.median(r[i][0] for r in runs["other"])
        new_s = statistics.median(r[i][0] for r in runs["this"])
        old_mb = statistics.median(r[i][1] for r in runs["other"])
        new_mb = statistics.median(r[i][1] for r in runs["this"])
        print(
            f"| {label} | {old_s:.2f} | {new_s:.2f} | {old_s / new_s:.2f}x "
            f"| {old_mb:.0f} | {new_mb:.0f} | {old_mb / new_mb:.2f}x |"
        )
    print()
    print(f"| command (wall, start-up included) | {rev} (s) | this checkout (s) | speed-up |")
    print("|---|---:|---:|---:|")
    for i, command in enumerate(COMMANDS):
        old_s = statistics.median(r[i] for r in commands["other"])
        new_s = statistics.median(r[i] for r in commands["this"])
        print(f"| `{' '.join(command)}` | {old_s:.2f} | {new_s:.2f} | {old_s / new_s:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
