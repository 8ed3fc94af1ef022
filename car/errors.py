"""Exceptions raised by car.

    CarError                 root; every error car raises on purpose
    +-- InputError           bad trace file, bad spec string, bad option (exit code 2)
    |   +-- SpecError        a component spec string that names nothing car knows
    +-- BackendError         a policy, environment or scorer backend failed (exit code 3)
    +-- BudgetError          the requested method cannot be paid for within the budget (exit code 2)

`RolloutError` is internal to the replay engine: it ends one rollout as an error outcome (counted and
reported, never scored) and never escapes to the user.
"""

from __future__ import annotations

__all__ = ["BackendError", "BudgetError", "CarError", "InputError", "RolloutError", "SpecError"]


class CarError(Exception):
    """Root of car's exceptions. `exit_code` is what the command line exits with."""

    exit_code = 2


class InputError(CarError):
    """The user's input (a file, a spec string, an option) is not valid."""

    exit_code = 2


class SpecError(InputError):
    """A component spec string names nothing car knows."""


class BudgetError(CarError):
    """The requested method needs more rollouts than the budget allows."""

    exit_code = 2


class BackendError(CarError):
    """A backend (model server, environment, scorer) failed; partial results are kept."""

    exit_code = 3


class RolloutError(Exception):
    """Ends one rollout as an error outcome (for example an unseen call in a recorded environment)."""
