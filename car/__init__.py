"""car: find which step of a failed agent run caused the failure, by intervention.

    import car
    report = car.blame("traces/support-refund.json")
    print(report.headline)

Read `car.trace` (the recorded run), then `car.replay` (the one agent loop), then `car.blame` (the
attribution entry point) and you have the whole idea.
"""

from __future__ import annotations

from car.batch import BatchOptions, TraceResult, blame_many, blame_many_async
from car.blame import blame, blame_async
from car.errors import BackendError, BudgetError, CarError, InputError, SpecError
from car.protocols import Decision, Environment, EnvStep, Policy, Scorer, Trajectory, Turn
from car.replay import Plan, Replay, Rollout
from car.report import Report
from car.rng import EventKey
from car.trace import Action, Actor, Observation, Step, ToolCall, Trace, load_trace

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
