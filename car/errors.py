"""Exceptions raised by car.

    CarError                 root; every error car raises on purpose
    +-- InputError           bad trace file, bad spec string, bad option (exit code 2)
    |   +-- SpecError        a component spec string that names nothing car knows
    +-- BackendError         a policy, environment or scorer backend failed (exit code 3)
    +-- BudgetError          the requested method cannot be paid for within the budget (exit code 2)

`RolloutError` is internal to the replay engine: it ends one rollout as an error outcome (counted and
reported, never scored) and never escapes to the user. `option_name` is how a message names an
argument: the option on the command line, the keyword in Python.
"""

from __future__ import annotations

from contextvars import ContextVar

__all__ = [
    "COMMAND_LINE",
    "BackendError",
    "BudgetError",
    "CarError",
    "InputError",
    "RolloutError",
    "SpecError",
    "flag_name",
    "one_line",
    "option_name",
]

# True while the `car` command runs (`car.cli.main` sets it): a message that says how to fix the
# input names the command line's option there (`--item N`), the Python argument elsewhere (`item=N`).
COMMAND_LINE: ContextVar[bool] = ContextVar("car_command_line", default=False)

# Keywords whose option is not the keyword spelled with dashes.
_FLAGS = {"fmt": "--from", "shapley_method": "--shapley"}


LINE_LIMIT = 2000  # characters of an error line: its start names the place, its end the way out


def one_line(text: str, limit: int = LINE_LIMIT) -> str:
    """A message as one line: its whitespace runs made one space, and a message that quotes a huge
    value (a 100 KB field, a plugin's megabyte of output) cut in the middle, where the value is: the
    place at its start and the advice at its end stay."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    head, tail = limit * 3 // 4, limit // 4
    return f"{line[:head]} … [{len(line) - head - tail:,} characters left out] … {line[-tail:]}"


def option_name(keyword: str, value: str | None = None) -> str:
    """How a message names the argument `keyword`, with `value` if given: the command line's option
    while `car` runs (`--match-samples`, `--from NAME`), the Python keyword elsewhere
    (`match_samples=`, `fmt=NAME`). The one place that knows both spellings."""
    if not COMMAND_LINE.get():
        return f"{keyword}={value or ''}"
    flag = _FLAGS.get(keyword, "--" + keyword.replace("_", "-"))
    return f"{flag} {value}" if value else flag


def flag_name(keyword: str) -> str:
    """How a message names a switch turned on: `--adaptive` while `car` runs, `adaptive=True`
    elsewhere."""
    return option_name(keyword) if COMMAND_LINE.get() else option_name(keyword, "True")


def option_spec(keyword: str, spec: str, *, quoted: bool = False) -> str:
    """Advice to pass `spec` as `keyword`: `--scorer 'regex:PATTERN'` while `car` runs (in quotes
    where a shell would read the spec: `quoted`), `scorer='regex:PATTERN'` in Python."""
    if not COMMAND_LINE.get():
        return f"{keyword}={spec!r}"
    return option_name(keyword, f"'{spec}'" if quoted else spec)


class CarError(Exception):
    """Root of car's exceptions. `exit_code` is what the command line exits with; `located`: the
    message already says where the input it is about was set (a file, a variable, an option)."""

    exit_code = 2
    located = False


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
