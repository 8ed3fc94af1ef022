"""`car blame` and `car merge` at the scale users bring them, this checkout against another revision.

    python -m bench.scale_speed                 # this checkout against HEAD
    python -m bench.scale_speed --against REV   # ... against any git revision

The inputs are made in a temporary directory by this checkout: six text traces of 130 steps (about
1 KB of text each, four actors: the shape of an imported Who&When run), replayed with the cheap
`file.py@name` policy and scorer of `bench/scale_plugin.py` and the `recorded` environment (all six,
and one of them under permutation Shapley, 129 players), and 200- and 800-step simulated traces
(`car.sim.record("long", n=...)`); `car merge` copies the store the text traces made into a new one.
Each command line runs whole (`python -m car ...`, start-up included) in this checkout and in a
temporary `git worktree` of REV, alternating, `--repeats` times: the table shows the median seconds
(wall, and the CPU the command used, steadier on a loaded machine), peak resident memory, the store
file's size where the command writes one, and whether the two sides' JSON reports are byte for byte
the same (for `car merge`, whether the merged stores hold the same rows).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from car.trace import Trace

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "bench" / "scale_plugin.py"
TEXT_TRACES = 6
TEXT_STEPS = 130

_WORDS = (
    "the page shows a list of results and the next step is to open the first link then read its "
    "summary table before asking the assistant to compare the figures with the task"
)


def text_trace(seed: int) -> Trace:
    """A 130-step run of four actors saying about 1 KB each, failed, its mistake at step 40."""
    from car.trace import Action, Actor, Outcome, Step, Trace

    rng = random.Random(seed)
    agents = ("Orchestrator", "WebSurfer", "Assistant")
    steps = [Step(index=0, actor="human", action=Action(text="What does the page say?"))]
    for i in range(1, TEXT_STEPS):
        words = " ".join(rng.choice(_WORDS.split()) for _ in range(180))
        steps.append(Step(index=i, actor=agents[i % 3], action=Action(text=f"step {i}: {words}")))
    return Trace(
        id=f"text-{seed}",
        task="What does the page say?",
        actors=(Actor(id="human", kind="user"), *(Actor(id=a) for a in agents)),
        steps=tuple(steps),
        outcome=Outcome(failed=True),
        metadata={"mistake_step": 40},
    )


def _inputs(into: Path) -> None:
    # Made in a child process (`main`): this one stays small, as a child's peak memory counts the
    # memory of the process that started it.
    from car import sim

    (into / "text").mkdir()
    for seed in range(TEXT_TRACES):
        (into / "text" / f"{seed}.json").write_text(text_trace(seed).to_json())
    for n in (200, 800):
        (into / f"long-{n}.json").write_text(sim.record("long", n=n).to_json())


_TEXT = (
    "blame",
    "text/",
    "--policy",
    f"{PLUGIN}@policy",
    "--env",
    "recorded",
    "--scorer",
    f"{PLUGIN}@scorer",
)

# (label, arguments after `car`, what the command does with a store: writes a new one, reads the
# one the command before it wrote on its own side, merges that one into a new file, or None).
CELLS: list[tuple[str, tuple[str, ...], str | None]] = [
    ("6 text traces x 130 steps, --no-store", (*_TEXT, "--no-store"), None),
    ("6 text traces x 130 steps, a new store", (*_TEXT, "--store", "S.sqlite"), "new"),
    ("6 text traces x 130 steps, again: all from the store", (*_TEXT, "--store", "S.sqlite"), "kept"),
    ("`car merge` of that store into a new one", ("merge", "M.sqlite", "S.sqlite"), "merge"),
    (
        "1 text trace x 130 steps, Shapley (budget 3,000), --no-store",
        (*_TEXT[:1], "text/0.json", *_TEXT[2:], "--method", "shapley", "--budget", "3000", "--no-store"),
        None,
    ),
    ("long (n=200), --no-store", ("blame", "long-200.json", "--no-store"), None),
    ("long (n=800), --no-store", ("blame", "long-800.json", "--no-store"), None),
]


def _run(root: Path, work: Path, side: str, args: tuple[str, ...]) -> tuple[float, float, float]:
    """(seconds, CPU seconds, peak MB) of `python -m car ARGS` in `root`'s checkout, run in `work`;
    `car blame` writes its JSON report to SIDE.json."""
    names = {"S.sqlite": f"{side}.sqlite", "M.sqlite": f"{side}-merged.sqlite"}
    args = tuple(names.get(a, a) for a in args)
    if args[0] == "blame":
        args = (*args, "--no-progress", "--format", "json", "-o", str(work / f"{side}.json"))
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "car", *args],
        cwd=work,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(child.pid, 0)
    took = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # 1: a gate, never set here
        raise SystemExit(f"car {' '.join(args)} failed in {root}")
    return took, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _output(work: Path, side: str, store: str | None) -> bytes:
    """What a cell's command made on one side: `car blame`'s report, or a digest of the merged
    store's rows (read a row at a time: a child's peak memory counts this process's at its start)."""
    if store != "merge":
        return (work / f"{side}.json").read_bytes()
    digest = hashlib.sha256()
    with contextlib.closing(sqlite3.connect(work / f"{side}-merged.sqlite")) as db:
        for row in db.execute("SELECT ns, key, payload FROM rollouts ORDER BY ns, key"):
            digest.update(repr(row).encode())
    return digest.digest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale_speed", description=__doc__)
    parser.add_argument("--against", default="HEAD", help="git revision to compare with")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    sides = ("other", "this")
    times: dict[tuple[str, int], list[float]] = {}
    cpus: dict[tuple[str, int], list[float]] = {}
    peaks: dict[tuple[str, int], list[float]] = {}
    sizes: dict[tuple[str, int], int] = {}
    same: list[bool] = [True] * len(CELLS)
    with tempfile.TemporaryDirectory() as tmp:
        other = Path(tmp) / "other"
        work = Path(tmp) / "work"
        work.mkdir()
        subprocess.run(
            [
                sys.executable,
                "-c",
                f"import bench.scale_speed as b, pathlib; b._inputs(pathlib.Path({str(work)!r}))",
            ],
            cwd=ROOT,
            check=True,
        )
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(other), args.against], cwd=ROOT, check=True
        )
        try:
            for _ in range(args.repeats):
                for side in sides:
                    (work / f"{side}.sqlite").unlink(missing_ok=True)
                for i, (_, cell, store) in enumerate(CELLS):
                    for side in sides:
                        if store in ("new", "merge"):
                            made = f"{side}.sqlite*" if store == "new" else f"{side}-merged.sqlite*"
                            for stale in work.glob(made):
                                stale.unlink()
                        took, cpu, peak = _run(other if side == "other" else ROOT, work, side, cell)
                        times.setdefault((side, i), []).append(took)
                        cpus.setdefault((side, i), []).append(cpu)
                        peaks.setdefault((side, i), []).append(peak)
                        if store == "new":
                            sizes[side, i] = (work / f"{side}.sqlite").stat().st_size
                    reports = [_output(work, side, store) for side in sides]
                    same[i] = same[i] and reports[0] == reports[1]
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=ROOT)
            shutil.rmtree(other, ignore_errors=True)
    rev = args.against
    print(f"Command: `python -m bench.scale_speed --against {rev}` (median of {args.repeats})")
    print()
    print(
        f"| command | {rev} (s) | this checkout (s) | speed-up | {rev} CPU (s) "
        f"| this checkout CPU (s) | CPU ratio | {rev} peak (MB) | this checkout peak (MB) "
        f"| {rev} store (MB) | this checkout store (MB) | same reports |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for i, (label, _, _) in enumerate(CELLS):
        old_s, new_s = (statistics.median(times[side, i]) for side in sides)
        old_cpu, new_cpu = (statistics.median(cpus[side, i]) for side in sides)
        old_mb, new_mb = (statistics.median(peaks[side, i]) for side in sides)
        stores = [f"{sizes[side, i] / 1e6:.1f}" if (side, i) in sizes else "-" for side in sides]
        print(
            f"| {label} | {old_s:.2f} | {new_s:.2f} | {old_s / new_s:.2f}x | {old_cpu:.2f} "
            f"| {new_cpu:.2f} | {old_cpu / new_cpu:.2f}x | {old_mb:.0f} | {new_mb:.0f} "
            f"| {stores[0]} | {stores[1]} | {'yes' if same[i] else 'NO'} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
