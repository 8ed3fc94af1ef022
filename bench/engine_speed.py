"""The replay engine's speed on validation cells, this checkout against another revision, side by side.

    python -m bench.engine_speed                 # this checkout against HEAD
    python -m bench.engine_speed --against REV   # ... against any git revision

Each revision runs the same cells in its own interpreter (a temporary `git worktree` for REV),
alternating between the two, `--repeats` times; the table shows the median seconds and the ratio.
The cells are seeded, so both sides do the same work when the revisions draw the same numbers, and
comparable work when they do not (the same budgets and seeds).
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
]

_PROGRAM = """
import json, time
from bench.credit import shapley_cell
from bench.suite import Case, contrastive_cell
out = []
for expr in {exprs!r}:
    t = time.perf_counter()
    eval(expr)
    out.append(time.perf_counter() - t)
print(json.dumps(out))
"""


def _time(root: Path) -> list[float]:
    program = _PROGRAM.format(exprs=[expr for _, expr in CELLS])
    done = subprocess.run(
        [sys.executable, "-c", program],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    times: list[float] = json.loads(done.stdout)
    return times


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
            runs: dict[str, list[list[float]]] = {"this": [], "other": []}
            for _ in range(args.repeats):
                runs["other"].append(_time(other))
                runs["this"].append(_time(ROOT))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=ROOT)
    print(f"Command: `python -m bench.engine_speed --against {args.against}` (median of {args.repeats})")
    print()
    print(f"| cell | {args.against} (s) | this checkout (s) | speed-up |")
    print("|---|---:|---:|---:|")
    for i, (label, _) in enumerate(CELLS):
        old = statistics.median(r[i] for r in runs["other"])
        new = statistics.median(r[i] for r in runs["this"])
        print(f"| {label} | {old:.2f} | {new:.2f} | {old / new:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
