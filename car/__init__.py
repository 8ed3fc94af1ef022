"""car: find which step of a failed agent run caused the failure, by intervention.

    import car
    report = car.blame("traces/support-refund.json")
    print(report.headline)

Read `car.trace` (the recorded run), then `car.replay` (the one agent loop), then `car.attribution`
(`blame`, the entry point) and you have the whole idea.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from car.attribution import blame, blame_async
    from car.batch import BatchOptions, TraceResult, blame_many, blame_many_async
    from car.errors import BackendError, BudgetError, CarError, InputError, SpecError
    from car.protocols import Decision, Environment, EnvStep, Policy, Scorer, Trajectory, Turn
    from car.replay import Plan, Replay, Rollout
    from car.report import Report
    from car.rng import EventKey
    from car.trace import Action, Actor, Observation, Step, ToolCall, Trace, load_trace

# Where each public name lives. They are imported on first use, so `car --help`, `car validate` and
# the other commands that never attribute do not pay for numpy and scipy at start-up.
_HOME = {
    **dict.fromkeys(("BatchOptions", "TraceResult", "blame_many", "blame_many_async"), "car.batch"),
    **dict.fromkeys(("blame", "blame_async"), "car.attribution"),
    **dict.fromkeys(
        ("BackendError", "BudgetError", "CarError", "InputError", "SpecError"), "car.errors"
    ),
    **dict.fromkeys(
        ("Decision", "Environment", "EnvStep", "Policy", "Scorer", "Trajectory", "Turn"),
        "car.protocols",
    ),
    **dict.fromkeys(("Plan", "Replay", "Rollout"), "car.replay"),
    "Report": "car.report",
    "EventKey": "car.rng",
    **dict.fromkeys(
        ("Action", "Actor", "Observation", "Step", "ToolCall", "Trace", "load_trace"), "car.trace"
    ),
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'car' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names, the submodules loaded and the module's own dunders (not `importlib`, `Any`
    and the like, which this file imports for itself): what completion offers in a shell."""
    own = {
        name
        for name, value in globals().items()
        if name.startswith("__") or getattr(value, "__name__", "").startswith("car.")
    }
    return sorted({*__all__, *own})


__version__ = "0.1.0"

__all__ = [
    "Action",
    "Actor",
    "BackendError",
    "BatchOptions",
    "BudgetError",
    "CarError",
    "Decision",
    "EnvStep",
    "Environment",
    "EventKey",
    "InputError",
    "Observation",
    "Plan",
    "Policy",
    "Replay",
    "Report",
    "Rollout",
    "Scorer",
    "SpecError",
    "Step",
    "ToolCall",
    "Trace",
    "TraceResult",
    "Trajectory",
    "Turn",
    "__version__",
    "blame",
    "blame_async",
    "blame_many",
    "blame_many_async",
    "load_trace",
]
