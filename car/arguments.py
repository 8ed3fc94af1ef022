"""The type and range of every argument `car.blame`, `blame_async` and `blame_many` take (the
components and callbacks too), checked before any work. A message names the argument as the caller
gave it (`car.errors.option_name`): `samples=` from Python, `--samples` on the command line.

Light on purpose (no numpy): the batch checks its options with it before it loads anything.
"""

from __future__ import annotations

import inspect
import numbers
import os
import sys
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any, ParamSpec, TypeVar

from car.errors import InputError, option_name

__all__ = [
    "MOST_PLANNED",
    "check_arguments",
    "check_sampled_steps",
    "method_problem",
    "parameters_of",
]

P = ParamSpec("P")
T = TypeVar("T")

# A run keeps the result of every job it plans (a sample's row, a match draw, a Shapley unit) until
# it ends. A job waiting for its turn costs nothing (`car.replay.gather_all` makes it when a worker
# frees; made up front as a coroutine and a task, it took 1.3 to 1.8 KB), so what grows is results:
# measured with tracemalloc on simulated traces of 10 and 30 decision steps, 50 to 90 bytes per step
# for a sample's row, about 40 per step for a match sample's draws: a kilobyte apiece from a trace
# of 10 to 25 steps. More than the machine's memory can hold at that rate cannot run at all:
# `--samples`, `--match-samples` and `--budget` above this are refused before anything is allocated,
# rather than growing until the system kills car.
_JOB_BYTES = 1024


def _memory() -> int:
    """The machine's physical memory in bytes; the address space where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):  # no sysconf (Windows), or no such name
        return sys.maxsize


MOST_PLANNED = max(1, _memory() // _JOB_BYTES)

# What a job keeps grows with the trace: at least 50 bytes per decision step for a sample's row and
# 40 for a match sample's draws (the least measured above). On a long trace a `--samples` or
# `--match-samples` under `MOST_PLANNED` can still want more than the machine's memory: 24 million
# samples of a 200-step trace started, to need some 250 GB a day later.
_STEP_BYTES = {"samples": 50, "match_samples": 40}


def check_sampled_steps(steps: int, **counts: int) -> None:
    """Refuse `samples` or `match_samples` that, times the trace's decision `steps`, keep more
    results than this machine's memory holds; before any rollout."""
    for name, n in counts.items():
        most = max(1, _memory() // _STEP_BYTES[name] // max(1, steps))
        if n > most:
            raise InputError(
                f"{option_name(name)} must be at most {most} on a trace of {steps} decision steps "
                f"(a run keeps every one's result at every step until it ends, at least "
                f"{_STEP_BYTES[name]} bytes a step; more would not fit in this machine's memory), "
                f"got {n}"
            )


def _given(value: object) -> str:
    return f"{value!r} ({type(value).__name__})"


def _whole(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"{option_name(name)} must be a whole number, got {_given(value)}")
    return int(value)


def _count(
    name: str,
    value: object,
    *,
    least: int,
    unit: str = "",
    optional: bool = False,
    planned: bool = False,
) -> None:
    """`planned`: a count of jobs whose results a run keeps, so at most `MOST_PLANNED`."""
    if value is None and optional:
        return
    n = _whole(name, value)
    if n < least:
        bound = "0 or more" if least == 0 else f"at least {least}{unit}"
        raise InputError(f"{option_name(name)} must be {bound}, got {n}")
    if planned and n > MOST_PLANNED:
        raise InputError(
            f"{option_name(name)} must be at most {MOST_PLANNED} (a run keeps every one's result "
            f"until it ends, about {_JOB_BYTES} bytes apiece on a 20-step trace; more would not fit "
            f"in this machine's memory), got {n}"
        )


def _number(name: str, value: object, *, interval: str, optional: bool = False) -> None:
    """`interval` as written in the message ("[0.5, 1)"); its brackets say which ends are in."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(f"{option_name(name)} must be a number in {interval}, got {_given(value)}")
    low, high = (float(end.strip("[]() ")) for end in interval.split(","))
    x = float(value)
    above = low <= x if interval[0] == "[" else low < x
    below = x <= high if interval[-1] == "]" else x < high
    if not (above and below):
        raise InputError(f"{option_name(name)} must be in {interval}, got {value}")


def _choice(name: str, value: object, *, choices: tuple[str, ...]) -> None:
    if value not in choices:
        words = ", ".join(choices[:-1]) + " or " + choices[-1]
        got = repr(value) if isinstance(value, str) else _given(value)
        raise InputError(f"{option_name(name)} must be {words}, got {got}")


def _players(name: str, value: object) -> None:
    """Only its form: which steps a group names is `car.shapley.parse_players`'s to check."""
    if not isinstance(value, str) or not value.strip():
        got = repr(value) if isinstance(value, str) else _given(value)
        raise InputError(
            f"{option_name(name)} must be 'steps', 'agents' or groups of step indices like "
            f"'0,1;2,3', got {got}"
        )


def _shard(name: str, value: object) -> None:
    if value is None:
        return
    if not (isinstance(value, tuple | list) and len(value) == 2):
        raise InputError(f"{option_name(name)} must be a pair (K, N), got {_given(value)}")
    k, n = (_whole(name, v) for v in value)
    if not (n >= 1 and 1 <= k <= n):
        raise InputError(f"{option_name(name)} must be (K, N) with 1 <= K <= N, got ({k}, {n})")


def _lacks(value: object, members: tuple[str, ...]) -> list[str]:
    """The members `value` lacks; a name ending in `()` must be callable."""
    return [
        m
        for m in members
        if not (callable(getattr(value, m[:-2], None)) if m.endswith("()") else hasattr(value, m))
    ]


def _which(value: object, missing: list[str]) -> str:
    """What was given, and for an object, what it lacks."""
    if value is None or isinstance(value, numbers.Number | str | bytes | list | tuple | dict | set):
        return _given(value)
    return f"an object of type {type(value).__name__}, which has no {_listed(missing, 'or')}"


def _listed(names: tuple[str, ...] | list[str], last: str) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {last} {names[-1]}"


# The arguments car passes each component method, positionally (`car.replay`).
_CALLED_WITH = {
    "act": ("decision", "key"),
    "score": ("trajectory", "key"),
    "restore": ("history",),
    "step": ("state", "index", "actor", "action", "key"),
}


def method_problem(component: object, name: str) -> str | None:
    """Why car could not call `component.<name>` as it does (a plain `def`, which car awaits, or
    parameters that do not take car's arguments), or None. Found now, it is one line; found by the
    first rollout, it was a TypeError in every rollout, far from the cause."""
    fn = getattr(component, name)
    plain = inspect.unwrap(fn.__func__ if inspect.ismethod(fn) else fn)
    owner = type(component).__name__
    if inspect.isfunction(plain) and not inspect.iscoroutinefunction(plain):
        return f"{owner}.{name}() must be async (async def {name}(...)): car awaits it"
    args = _CALLED_WITH[name]
    takes = unbindable(fn, args)
    if takes is not None:
        return f"{owner}.{name}() takes {takes}, and car calls {name}({', '.join(args)})"
    return None


def unbindable(fn: Callable[..., Any], args: tuple[str, ...]) -> str | None:
    """`fn`'s parameters, without the annotations that would hide them, when a call with as many
    positional arguments as `args` cannot bind to them; None when it can, or when `fn` has no
    signature to read (a builtin: the call will tell)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*args)
    except TypeError:
        empty = inspect.Parameter.empty
        bare = signature.replace(
            parameters=[p.replace(annotation=empty) for p in signature.parameters.values()],
            return_annotation=empty,
        )
        return str(bare)
    return None


def _component(name: str, value: object, *, kind: str, members: tuple[str, ...], specs: str) -> None:
    """None (the trace's own), a spec string, or an object with what `car.protocols.<kind>` needs
    (its `runtime_checkable` members, named here so that `import car.arguments` stays light),
    whose methods car can call."""
    if value is None or isinstance(value, str):
        return
    if inspect.isclass(value):
        raise InputError(
            f"{option_name(name)} must be a car.{kind} object, got the class {value.__name__}; "
            f"pass an instance ({value.__name__}(...))"
        )
    missing = _lacks(value, members)
    if missing:
        raise InputError(
            f"{option_name(name)} must be a spec string ({specs}) or a car.{kind} (an object with "
            f"{_listed(members, 'and')}), got {_which(value, missing)}"
        )
    spec = getattr(value, "spec", None)  # present: `_lacks` found it
    if not isinstance(spec, str) or not spec.strip():
        raise InputError(
            f"{option_name(name)} must be a car.{kind}: {type(value).__name__}.spec names it in the "
            f"report and the store, so it must be a non-empty string, got {_given(spec)}"
        )
    for member in members:
        problem = method_problem(value, member[:-2]) if member.endswith("()") else None
        if problem is not None:
            raise InputError(f"{option_name(name)} must be a car.{kind}: {problem}")


def _object(name: str, value: object, *, what: str, members: tuple[str, ...]) -> None:
    """None, or an object with `members` (`what` says what is meant)."""
    if value is None:
        return
    missing = _lacks(value, members)
    if missing:
        raise InputError(f"{option_name(name)} must be {what} or None, got {_which(value, missing)}")


def _callable(name: str, value: object, *, what: str) -> None:
    if value is not None and not callable(value):
        raise InputError(f"{option_name(name)} must be {what} or None, got {_given(value)}")
    if inspect.iscoroutinefunction(value):  # called and never awaited: its body would never run
        raise InputError(
            f"{option_name(name)} must be {what} or None, got the coroutine function "
            f"{getattr(value, '__name__', '?')!r}: car calls it without awaiting it, so its body "
            "would never run; make it a plain function"
        )


def _flag(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise InputError(f"{option_name(name)} must be True or False, got {_given(value)}")


def _gates(name: str, value: object) -> None:
    from car.gates import Gates  # here: car.gates loads the report model, and this module is light

    if not isinstance(value, Gates):  # a dict of its fields has no `check()` for each report
        raise InputError(f"{option_name(name)} must be a car.gates.Gates, got {_given(value)}")


def _prices(name: str, value: object) -> None:
    ok = isinstance(value, dict) and all(
        isinstance(k, str)
        and isinstance(v, numbers.Real)
        and not isinstance(v, bool)
        and 0 <= float(v) < float("inf")
        for k, v in value.items()
    )
    if not ok:
        raise InputError(
            f"{option_name(name)} must map usage counters to USD per million tokens (numbers, 0 or "
            f"more), got {_given(value)}"
        )


# The judge as car's advice spells it: the scorer that fits any run. Named here for `scorer=` of
# the wrong type, and by `car.attribution` to a trace that names no scorer.
JUDGE_SPEC = "llm-judge:openai:MODEL"

_RULES: dict[str, Callable[[str, object], object]] = {
    "policy": partial(
        _component,
        kind="Policy",
        members=("spec", "act()"),
        specs="'sim:NAME', 'openai:MODEL', 'path/to/policy.py@name'",
    ),
    "env": partial(
        _component,
        kind="Environment",
        members=("spec", "restore()", "step()"),
        specs="'recorded', 'sim:NAME', 'path/to/env.py@name'",
    ),
    "scorer": partial(
        _component,
        kind="Scorer",
        members=("spec", "deterministic", "score()"),
        specs=f"'tool-called:NAME', 'regex:PATTERN', '{JUDGE_SPEC}', 'path/to/scorer.py@name'",
    ),
    "progress": partial(_callable, what="a function (phase, done, total)"),
    "options": partial(_object, what="a car.BatchOptions", members=("blame_kwargs()",)),
    "store": partial(
        _object,
        what="a car.store.RolloutStore (an object with get() and put())",
        members=("get()", "put()"),
    ),
    "on_result": partial(_callable, what="a function taking each car.TraceResult"),
    "on_interrupted": partial(_callable, what="a function taking each car.TraceResult"),
    "batch_progress": partial(
        _object,
        what="a car.batch.BatchProgress (an object with trace_started(), trace_advanced() and "
        "trace_finished())",
        members=("trace_started()", "trace_advanced()", "trace_finished()"),
    ),
    "samples": partial(_count, least=1, planned=True),
    "match_samples": partial(_count, least=0, planned=True),
    "seed": _whole,
    "concurrency": partial(_count, least=1),
    "traces_at_once": partial(_count, least=1),
    "level": partial(_number, interval="[0.5, 1)"),
    "confidence": partial(_number, interval="[0.5, 1)"),
    "min_effect": partial(_number, interval="[0, 1)"),
    "max_error_rate": partial(_number, interval="[0, 1]"),
    "method": partial(_choice, choices=("contrastive", "shapley", "auto")),
    "shapley_method": partial(_choice, choices=("exact", "permutation", "auto")),
    "players": _players,
    "budget": partial(_count, least=1, unit=" rollout", optional=True, planned=True),
    "budget_calls": partial(_count, least=1, optional=True),
    "target_width": partial(_number, interval="(0, 1)", optional=True),
    "max_rollouts": partial(_count, least=0, optional=True),
    "max_policy_calls": partial(_count, least=0, optional=True),
    "shard": _shard,
    "item": partial(_count, least=0, optional=True),
    "adaptive": _flag,
    "gates": _gates,
    "prices": _prices,
}


# Rules kept apart under another key, for an argument whose name means another thing elsewhere:
# `blame_many`'s `progress` is an object with methods, `blame`'s a function.
_SHOWN = {"batch_progress": "progress"}


def check_arguments(**values: object) -> None:
    """Check each argument car has a rule for, by name (`samples=8`); the others pass. A component
    (`policy`, `env`, `scorer`) is a spec string or any object with its protocol's members. The
    first that is the wrong type or out of range is an `InputError` naming it, what is valid and
    what was given."""
    for name, value in values.items():
        rule = _RULES.get(name)
        if rule is not None:
            rule(_SHOWN.get(name, name), value)


def parameters_of(
    function: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[[Callable[..., T]], Callable[P, T]]:
    """Give a synchronous face (`car.blame`, taking `**options` to name an unknown keyword itself)
    the parameters of the coroutine function it runs (`car.blame_async`): `help()` lists them and a
    type checker checks every call (a misspelt keyword, a seed that is a string)."""

    def face(sync: Callable[..., T]) -> Callable[P, T]:
        sync.__signature__ = inspect.signature(function)  # type: ignore[attr-defined]
        return sync

    return face
