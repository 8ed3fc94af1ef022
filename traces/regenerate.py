"""Regenerate the bundled simulated traces: `python traces/regenerate.py` (tests check they match)."""

from __future__ import annotations

from pathlib import Path

from car.sim import record

HERE = Path(__file__).parent
# The stories the README and the tests use; the planted-truth library (car/sim/planted.py) records its
# traces on the fly in the validation suite instead.
SCENARIOS = (
    "pivot",
    "and",
    "or",
    "support-refund",
    "research-team",
    "long-and",
    "research-team-world",
)


def bundled() -> dict[str, str]:
    """File name -> JSON text of every bundled simulated trace."""
    out = {}
    for name in SCENARIOS:
        trace = record(name, seed=0)
        out[f"{name}.json"] = trace.to_json()
    return out


if __name__ == "__main__":
    for file, text in bundled().items():
        (HERE / file).write_text(text, encoding="utf-8")
        print(f"wrote traces/{file}")
