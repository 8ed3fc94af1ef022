"""Reading each trace's rows out of a store of many traces, this checkout against another revision.

    python -m bench.store_rows                 # this checkout against HEAD
    python -m bench.store_rows --against REV   # ... against any git revision

Under `--executor ray` the driver reads a trace's stored rows (`RolloutStore.rows_for`) before its
task starts, once per trace. Each side makes its own store with its own code (`RolloutStore`, then
TRACES traces of 400 rows of about 1 KB each, one transaction), then times `rows_for` for every
trace, in its own interpreter, alternating, `--repeats` times; the table shows the median seconds.
Both sides must hand back the same rows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROWS_PER_TRACE = 400
SIZES = (100, 400)

_PROGRAM = """
import json, os, random, sys, time, zlib
from car.store import RolloutStore
traces, rows, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = random.Random(0)
with RolloutStore(path) as store:
    with store._db:
        store._db.executemany(
            "INSERT INTO rollouts VALUES (?, ?, ?, ?, ?, ?)",
            (
                ("ns", f"{t}-{r}", f"trace{t}", "run",
                 zlib.compress(json.dumps({"v": rng.random(), "pad": os.urandom(600).hex()}).encode()),
                 0.0)
                for t in range(traces) for r in range(rows)
            ),
        )
    started = time.perf_counter()
    found = [len(store.rows_for(f"trace{t}")) for t in range(traces)]
    took = time.perf_counter() - started
print(json.dumps([took, found]))
"""


def _measure(root: Path, traces: int, store: Path) -> tuple[float, list[int]]:
    store.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", _PROGRAM, str(traces), str(ROWS_PER_TRACE), str(store)],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    took, found = json.loads(done.stdout)
    for stale in store.parent.glob(f"{store.name}*"):
        stale.unlink()
    return float(took), list(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.store_rows", description=__doc__)
    parser.add_argument("--against", default="HEAD", help="git revision to compare with")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    times: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        other = Path(tmp) / "other"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(other), args.against], cwd=ROOT, check=True
        )
        try:
            for _ in range(args.repeats):
                for traces in SIZES:
                    found = []
                    for side, root in (("other", other), ("this", ROOT)):
                        took, rows = _measure(root, traces, Path(tmp) / f"{side}.sqlite")
                        times.setdefault((side, traces), []).append(took)
                        found.append(rows)
                    if found[0] != found[1] or found[1] != [ROWS_PER_TRACE] * traces:
                        raise SystemExit(f"the two sides found other rows at {traces} traces")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=ROOT)
    rev = args.against
    print(f"Command: `python -m bench.store_rows --against {rev}` (median of {args.repeats})")
    print()
    print(f"| `rows_for` of every trace | {rev} (s) | this checkout (s) | speed-up |")
    print("|---|---:|---:|---:|")
    for traces in SIZES:
        old_s, new_s = (statistics.median(times[side, traces]) for side in ("other", "this"))
        label = f"{traces} traces x {ROWS_PER_TRACE} rows"
        print(f"| {label} | {old_s:.2f} | {new_s:.2f} | {old_s / new_s:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
