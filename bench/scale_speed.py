"""`car blame` at the scale users bring it, this checkout against another revision.

    python -m bench.scale_speed                 # this checkout against HEAD
    python -m bench.scale_speed --against REV   # ... against any git revision

The inputs are made in a temporary directory by this checkout: six text traces of 130 steps (about
1 KB of text each, four actors: the shape of an imported Who&When run), replayed with the cheap
`file.py@name` policy and scorer of `bench/scale_plugin.py` and the `recorded` environment, and
200- and 800-step simulated traces (`car.sim.record("long", n=...)`). Each command line runs whole
(`python -m car blame ...`, start-up included) in this checkout and in a temporary `git worktree` of
REV, alternating, `--repeats` times: the table shows the median seconds (wall, and the CPU the
command used, steadier on a loaded machine), peak resident memory, the store file's size where the
command writes one, and whether the two sides' JSON reports are byte for byte the same.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from car import sim
from car.trace import Action, Actor, Outcome, Step, Trace

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
    (into / "text").mkdir()
    for seed in range(TEXT_TRACES):
        (into / "text" / f"{seed}.json").write_text(text_trace(seed).to_json())
    for n in (200, 800):
        (into / f"long-{n}.json").write_text(sim.record("long", n=n).to_json())


_TEXT = ("text/", "--policy", f"{PLUGIN}@policy", "--env", "recorded", "--scorer", f"{PLUGIN}@scorer")

# (label, arguments after `car blame`, store file the command writes or None); a command reading a
# store reads the one the command before it wrote, on its own side.
CELLS: list[tuple[str, tuple[str, ...], str | None]] = [
    ("6 text traces x 130 steps, --no-store", (*_TEXT, "--no-store"), None),
    ("6 text traces x 130 steps, a new store", (*_TEXT, "--store", "S.sqlite"), "new"),
    ("6 text traces x 130 steps, again: all from the store", (*_TEXT, "--store", "S.sqlite"), "kept"),
    ("long (n=200), --no-store", ("long-200.json", "--no-store"), None),
    ("long (n=800), --no-store", ("long-800.json", "--no-store"), None),
]


def _run(root: Path, work: Path, side: str, args: tuple[str, ...]) -> tuple[float, float, float]:
    """(seconds, CPU seconds, peak MB) of `python -m car blame ARGS` in `root`'s checkout, run in
    `work`."""
    args = tuple(a.replace("S.sqlite", f"{side}.sqlite") for a in args)
    out = work / f"{side}.json"
    started = time.perf_counter()
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "car",
            "blame",
            *args,
            "--no-progress",
            "--format",
            "json",
            "-o",
            str(out),
        ],
        cwd=work,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(child.pid, 0)
    took = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # 1: a gate, never set here
        raise SystemExit(f"car blame {' '.join(args)} failed in {root}")
    return took, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


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
        _inputs(work)
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(other), args.against], cwd=ROOT, check=True
        )
        try:
            for _ in range(args.repeats):
                for side in sides:
                    (work / f"{side}.sqlite").unlink(missing_ok=True)
                for i, (_, cell, store) in enumerate(CELLS):
                    for side in sides:
                        if store == "new":
                            for stale in work.glob(f"{side}.sqlite*"):
                                stale.unlink()
                        took, cpu, peak = _run(other if side == "other" else ROOT, work, side, cell)
                        times.setdefault((side, i), []).append(took)
                        cpus.setdefault((side, i), []).append(cpu)
                        peaks.setdefault((side, i), []).append(peak)
                        if store == "new":
                            sizes[side, i] = (work / f"{side}.sqlite").stat().st_size
                    reports = [(work / f"{side}.json").read_bytes() for side in sides]
                    same[i] = same[i] and reports[0] == reports[1]
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=ROOT)
            shutil.rmtree(other, ignore_errors=True)
    rev = args.against
    print(f"Command: `python -m bench.scale_speed --against {rev}` (median of {args.repeats})")
    print()
    print(
        f"| `car blame` | {rev} (s) | this checkout (s) | speed-up | {rev} CPU (s) "
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
