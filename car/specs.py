"""Spec strings: how policies, environments and scorers are named on the command line.

    sim:SCENARIO          a simulated scenario's policy, environment or scorer (`car.sim`)
    recorded              environment: recorded observations; scorer: the trace's own outcome
    tool-called:NAME      scorer: 1 if the run called tool NAME
    regex:PATTERN         scorer: 1 if the final answer matches PATTERN
    openai:MODEL          policy: an OpenAI-compatible Chat Completions server (`car.backends`)
    anthropic:MODEL       policy: the Anthropic Messages API
    llm-sim:[B:]MODEL     environment: recorded observations, a model simulates unseen calls
    llm-judge:[B:]MODEL   scorer: a model judges (rubric, or extract-then-compare)
    path/to/file.py@name  a Python object or factory in a file (runs that file's code); only a spec
                          whose text before its last `@` ends in `.py` names a file, so built-in
                          arguments may hold `@` (`regex:refund@A-1`, `rubric=@rubric.txt`)
    NAME[:ARG]            an installed plugin from the entry-point group car.policies,
                          car.environments or car.scorers (the factory is called with ARG and the trace)

A trace file may carry default specs, but only built-in ones (`check_builtin`): loading a trace never
imports or runs code named in it.
"""

from __future__ import annotations

import difflib
import importlib.util
import inspect
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

from car.arguments import method_problem, unbindable
from car.errors import InputError, SpecError, option_name

if TYPE_CHECKING:
    from car.protocols import Environment, Policy, Scorer, Trajectory
    from car.rng import EventKey
    from car.trace import Trace

__all__ = ["Kind", "check_builtin", "make_env", "make_policy", "make_scorer", "runs_here"]

Kind = Literal["policy", "env", "scorer"]

_GROUPS: dict[str, str] = {
    "policy": "car.policies",
    "env": "car.environments",
    "scorer": "car.scorers",
}
_BUILTIN: dict[str, tuple[str, ...]] = {
    "policy": ("sim:", "openai:", "anthropic:"),
    "env": ("recorded", "sim:", "llm-sim:"),
    "scorer": ("recorded", "sim:", "tool-called:", "regex:", "llm-judge:"),
}
# Schemes served by `car.backends` (imported only when one of them is used).
_BACKEND_SCHEMES: dict[str, tuple[str, ...]] = {
    "policy": ("openai", "anthropic"),
    "env": ("llm-sim",),
    "scorer": ("llm-judge",),
}
# How messages name each kind of component.
KIND_WORDS = {"policy": "policy", "env": "environment", "scorer": "scorer"}


def _scheme(spec: str) -> str:
    return spec.split(":", 1)[0] + ":" if ":" in spec else spec


def _builtin_names(kind: str) -> tuple[str, ...]:
    from car.sim import SCENARIOS

    names: list[str] = []
    for b in _BUILTIN[kind]:
        names += [f"sim:{s}" for s in SCENARIOS] if b == "sim:" else [b]
    return tuple(names)


def _names_file(spec: str) -> bool:
    """Whether `spec` is `PATH.py@NAME` (or a `.py` path missing its `@NAME`)."""
    return spec.rpartition("@")[0].endswith(".py") or spec.endswith(".py")


def check_builtin(kind: str, spec: str) -> str | None:
    """Why `spec` is not an acceptable built-in spec for a trace file to name, or None if it is."""
    scheme = _scheme(spec)
    if scheme not in _BUILTIN[kind] and spec not in _BUILTIN[kind]:
        if _names_file(spec):
            return (
                f"{spec!r} names code; a trace may name built-in components only (pass it with "
                f"{option_name(kind)})"
            )
        return f"unknown built-in {KIND_WORDS[kind]} {spec!r}{_suggest(kind, spec, builtin_only=True)}"
    if scheme == "sim:":
        from car.sim import SCENARIOS

        name = spec[4:]
        if name not in SCENARIOS:
            return f"unknown simulated scenario {name!r}{_suggest(kind, spec, builtin_only=True)}"
    # The argument too, as the run would parse it (a pattern that does not compile, a judge's
    # unknown option): a trace `car validate` calls ok is one `car blame` can start on.
    name, _, arg = spec.partition(":")
    if name in _BACKEND_SCHEMES[kind] and (reach := _reaches_out(arg)) is not None:
        return (
            f"{spec!r}: a trace may not set {reach}: it would choose where requests (and the key "
            f"they carry) go, or which local file is sent; give this {KIND_WORDS[kind]} with --{kind}"
        )
    try:
        if kind == "scorer" and name in ("tool-called", "regex"):
            _local_scorer(spec, name, arg)
        elif name in _BACKEND_SCHEMES[kind]:
            from car.backends.registry import check_backend_spec

            check_backend_spec(kind, name, arg, spec)
    except InputError as exc:
        return str(exc)
    return None


def _reaches_out(arg: str) -> str | None:
    """The first option of a backend spec's argument that a trace file may not set, or None: a
    server (`base_url`), the environment variable whose key is sent (`api_key_env`), a file read
    and sent (`rubric=@PATH`). Loading a trace runs no code, and it sends nothing anywhere the
    user did not choose."""
    from urllib.parse import parse_qsl

    for key, value in parse_qsl(arg.partition("?")[2], keep_blank_values=True):
        if key in ("base_url", "api_key_env"):
            return key
        if key == "rubric" and value.startswith("@"):
            return "rubric=@FILE"
    return None


def shadowed(kind: str, name: str) -> Literal["always", "bare"] | None:
    """Whether a built-in takes the specs an installed plugin called `name` would answer, as `_make`
    tries them: "always" (`regex:ARG` is the built-in's), "bare" (`recorded` is the built-in's,
    `recorded:ARG` the plugin's), or None. `car plugins` says so."""
    if name == "sim" or name in _BACKEND_SCHEMES[kind]:
        return "always"
    if kind == "scorer" and name in ("tool-called", "regex"):
        return "always"
    if kind != "policy" and name == "recorded":
        return "bare"
    return None


def runs_here(kind: str, spec: str) -> bool:
    """Whether `spec` names a built-in that runs in this process and calls out to nothing: no model
    (the backends, a judge), no plugin's code. `car blame --dry-run` scores the record only with
    such a scorer."""
    return check_builtin(kind, spec) is None and spec.partition(":")[0] not in _BACKEND_SCHEMES[kind]


def _suggest(kind: str, spec: str, *, builtin_only: bool = False) -> str:
    """A close name, else the list. `builtin_only`: for a trace file, which may name neither an
    installed plugin nor a file, so neither is offered."""
    names = list(_builtin_names(kind))
    if not builtin_only:
        names += [ep.name for ep in entry_points(group=_GROUPS[kind])]
    scheme, colon, rest = spec.partition(":")
    schemes = [n for n in names if n.endswith(":")]
    if colon and rest and scheme + colon not in schemes:
        # A misspelt scheme keeps its argument: 'opnai:gpt-4o' is 'openai:gpt-4o', not 'openai:'.
        close = difflib.get_close_matches(scheme + colon, schemes, n=1, cutoff=0.6)
        if close:
            return f"; did you mean {close[0] + rest!r}?"
    # Never suggest what the user typed (`tool-called:` is a known name, but incomplete).
    close = difflib.get_close_matches(spec, [n for n in names if n != spec], n=1, cutoff=0.6)
    if close:
        return f"; did you mean {close[0]!r}?"
    shown = [n if not n.endswith(":") else n + "ARG" for n in names]
    if builtin_only:
        return f"; known: {', '.join(shown)}"
    return f"; known: {', '.join(shown)}, or path/to/file.py@name"


# Plugin files already executed, by resolved path and the file's size and mtime: a batch builds every
# trace's components, and a plugin module runs once per process (again only when the file changes),
# as an import would.
_FILE_MODULES: dict[tuple[str, int, int], ModuleType] = {}


def _file_module(kind: str, spec: str, path: Path, path_text: str) -> ModuleType:
    resolved = path.resolve()
    stat = resolved.stat()
    key = (str(resolved), stat.st_size, stat.st_mtime_ns)
    if key in _FILE_MODULES:
        return _FILE_MODULES[key]
    module_name = f"car_plugin_{abs(hash(str(resolved)))}"
    loader_spec = importlib.util.spec_from_file_location(module_name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise SpecError(f"{KIND_WORDS[kind]} {spec!r}: cannot load {path_text!r} as Python")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[module_name] = module
    folder = str(resolved.parent)
    if folder not in sys.path:
        # Its sibling modules import as they would beside a script (`from helpers import x`);
        # appended, so that they shadow nothing installed (car's own modules included).
        sys.path.append(folder)
    try:
        loader_spec.loader.exec_module(module)
    except Exception as exc:
        raise SpecError(
            f"{KIND_WORDS[kind]} {spec!r}: importing {path_text} failed: {type(exc).__name__}: {exc}"
        ) from exc
    _FILE_MODULES[key] = module
    return module


def _load_file_object(kind: str, spec: str) -> Any:
    path_text, _, name = spec.rpartition("@")
    path = Path(path_text)
    if not name.isidentifier():
        raise SpecError(f"{KIND_WORDS[kind]} {spec!r}: {name!r} is not a Python name (use FILE.py@NAME)")
    if not path.is_file():
        raise SpecError(f"{KIND_WORDS[kind]} {spec!r}: no such file {path_text!r}")
    module = _file_module(kind, spec, path, path_text)
    try:
        return getattr(module, name)
    except AttributeError:
        found = [n for n in vars(module) if not n.startswith("_")]
        close = difflib.get_close_matches(name, found, n=1)
        # Else what the file itself defines (not what it imports), when that is a short list.
        own = [
            n
            for n in found
            if callable(vars(module)[n])
            and getattr(vars(module)[n], "__module__", None) == module.__name__
        ]
        hint = (
            f"; did you mean {close[0]!r}?"
            if close
            else f"; it defines {', '.join(own)}"
            if 0 < len(own) <= 8
            else ""
        )
        raise SpecError(f"{KIND_WORDS[kind]} {spec!r}: {path_text} defines no {name!r}{hint}") from None


_METHOD = {"policy": "act", "env": "step", "scorer": "score"}


@dataclass
class FunctionScorer:
    """Wraps `async def f(trajectory) -> float | None` (or with a second `key` argument)."""

    fn: Callable[..., Awaitable[float | None]]
    spec: str
    deterministic: bool = True

    async def score(self, trajectory: Trajectory, key: EventKey) -> float | None:
        if len(inspect.signature(self.fn).parameters) >= 2:
            return await self.fn(trajectory, key)
        return await self.fn(trajectory)


def _function_problem(fn: Callable[..., Any]) -> str | None:
    """Why `FunctionScorer` could not call `fn` as it does, or None: refused now, it is one line;
    found by the first rollout, it was a TypeError scoring the record."""
    try:
        count = len(inspect.signature(fn).parameters)
    except (TypeError, ValueError):  # no signature to read: the call will tell
        return None
    takes = unbindable(fn, ("trajectory", "key") if count >= 2 else ("trajectory",))
    if takes is None:
        return None
    name = getattr(fn, "__name__", "score")
    return (
        f"{name}() takes {takes}, and car calls a scorer function as {name}(trajectory) or "
        f"{name}(trajectory, key)"
    )


def _instantiate(kind: str, spec: str, obj: Any, trace: Trace, arg: str | None) -> Any:
    method = _METHOD[kind]
    if hasattr(obj, method) and not inspect.isclass(obj):
        component = obj
    elif kind == "scorer" and inspect.iscoroutinefunction(obj):
        problem = _function_problem(obj)
        if problem is not None:
            raise SpecError(f"scorer {spec!r}: {problem}")
        component = FunctionScorer(obj, spec, getattr(obj, "deterministic", True))
    elif inspect.iscoroutinefunction(obj):
        # Called as a factory, it would build a coroutine that is never awaited (and Python warns).
        name, article = getattr(obj, "__name__", method), "an" if kind == "env" else "a"
        raise SpecError(
            f"{KIND_WORDS[kind]} {spec!r}: {name} is an async function; {article} {KIND_WORDS[kind]} "
            f"is an object with async {method}() (or a plain function, a factory, that returns one)"
        )
    elif callable(obj):
        try:
            component = obj(trace) if arg is None else obj(arg, trace)
        except InputError:
            raise
        except Exception as exc:
            raise SpecError(
                f"{KIND_WORDS[kind]} {spec!r}: the factory failed: {type(exc).__name__}: {exc}"
            ) from exc
    else:
        raise SpecError(f"{KIND_WORDS[kind]} {spec!r}: {type(obj).__name__} has no {method}() method")
    if not hasattr(component, method):
        hint = ""
        if kind == "scorer" and (component is None or isinstance(component, int | float | str)):
            name = getattr(obj, "__name__", "score")
            hint = (
                f": it looks like a scorer function, which must be async (async def {name}"
                "(trajectory) -> float | None), or a factory that returns an object with async score()"
            )
        raise SpecError(
            f"{KIND_WORDS[kind]} {spec!r}: built a {type(component).__name__}, which has no {method}()"
            + hint
        )
    if kind == "env" and not callable(getattr(component, "restore", None)):
        # Else the check of a component passed from Python refused it, as if no spec had been given.
        raise SpecError(
            f"environment {spec!r}: {type(component).__name__} has no restore() method (async def "
            "restore(history) -> state: the state after a recorded prefix)"
        )
    _check_async(kind, spec, component, (method, "restore") if kind == "env" else (method,))
    if not getattr(component, "spec", None):
        component = _with(component, spec=spec)
    if kind == "scorer" and not hasattr(component, "deterministic"):
        component = _with(component, deterministic=False)  # unknown: estimate the factual arm by replay
    return component


class _Labelled:
    """A plugin object seen with attributes that it would not take itself (frozen, a read-only
    property, `__slots__`): they are the view's own, everything else is the object's."""

    def __init__(self, inner: object, attrs: dict[str, object]) -> None:
        self.__dict__.update(attrs, _inner=inner)

    def __getattr__(self, name: str) -> Any:
        if "_inner" not in self.__dict__:  # being copied or unpickled: not set up yet
            raise AttributeError(name)
        return getattr(self.__dict__["_inner"], name)


def _with(component: Any, **attrs: object) -> Any:
    """`component` with `attrs` set on it, or a view of it that has them if it refuses them."""
    try:
        for name, value in attrs.items():
            setattr(component, name, value)
    except (AttributeError, TypeError):
        return _Labelled(component, attrs)
    return component


def _check_async(kind: str, spec: str, component: Any, methods: tuple[str, ...]) -> None:
    """Each of `methods` that the component defines with plain `def`, or with parameters that do not
    take what car passes, is refused now: otherwise each rollout fails with a TypeError far from
    the cause."""
    for name in methods:
        problem = method_problem(component, name) if callable(getattr(component, name, None)) else None
        if problem is not None:
            raise SpecError(f"{KIND_WORDS[kind]} {spec!r}: {problem}")


def _local_scorer(spec: str, scheme: str, arg: str) -> Scorer:
    """`tool-called:NAME` or `regex:PATTERN` (neither needs the trace)."""
    from car import builtins as b

    if scheme == "tool-called":
        if not arg:
            raise SpecError(f"scorer {spec!r} needs a tool name (tool-called:NAME)")
        return b.ToolCalledScorer(arg)
    if not arg:
        raise SpecError(f"scorer {spec!r} needs a pattern (regex:PATTERN)")
    return b.RegexScorer(arg)


def _make(kind: str, spec: str, trace: Trace) -> Any:
    from car import builtins as b
    from car import sim

    spec = spec.strip()
    if not spec:
        raise SpecError(f"empty {KIND_WORDS[kind]} spec")
    scheme, _, arg = spec.partition(":")
    if scheme == "sim" and "sim:" in _BUILTIN[kind]:
        return sim.make(kind, arg, trace, spec)
    if kind == "env" and spec == "recorded":
        return b.RecordedEnvironment(trace)
    if scheme in _BACKEND_SCHEMES[kind]:
        from car.backends.registry import make_backend

        return make_backend(kind, scheme, arg, trace, spec)
    if kind == "scorer":
        if spec == "recorded":
            return b.RecordedScorer(trace)
        if scheme in ("tool-called", "regex"):
            return _local_scorer(spec, scheme, arg)
    for ep in entry_points(group=_GROUPS[kind]):
        if ep.name == scheme:
            try:
                factory = ep.load()
            except Exception as exc:
                raise SpecError(
                    f"{KIND_WORDS[kind]} {spec!r}: plugin {ep.value!r} failed to import: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            # As for a file: the store keys rollouts by the spec, and a spec the plugin gives its
            # component need not carry ARG (`NAME:a` and `NAME:b` would share rollouts); and by
            # the distribution's version, as a file's by its code (an upgrade may answer otherwise).
            dist = getattr(ep, "dist", None)
            installed = f"{dist.name} {dist.version}" if dist is not None else None
            component = _instantiate(kind, spec, factory, trace, arg)
            return _with(component, spec=spec, car_plugin_distribution=installed)
    # Files last: a built-in's or an entry point's argument may contain `@` or even `.py@`.
    if spec.endswith(".py"):
        raise SpecError(f"{KIND_WORDS[kind]} {spec!r}: name the object in the file: {spec}@NAME")
    if _names_file(spec):
        component = _instantiate(kind, spec, _load_file_object(kind, spec), trace, None)
        # The file's code decides the rollouts, and the store keys them by this spec (with the
        # file's hash): a spec the object gives itself need not name the file, so this one replaces
        # it (and the report's reproduce line runs the same file).
        return _with(component, spec=spec)
    raise SpecError(f"unknown {KIND_WORDS[kind]} {spec!r}{_suggest(kind, spec)}")


def make_policy(spec: str, trace: Trace) -> Policy:
    policy: Policy = _make("policy", spec, trace)
    from car.backends.options import current

    if current().thinking is not None and not getattr(policy, "accepts_thinking", False):
        # An option that would change nothing is refused, not ignored.
        raise InputError(
            f"--thinking {current().thinking}: policy {spec!r} has no thinking settings "
            "(anthropic:MODEL has)"
        )
    return policy


def make_env(spec: str, trace: Trace) -> Environment:
    env: Environment = _make("env", spec, trace)
    return env


def make_scorer(spec: str, trace: Trace) -> Scorer:
    scorer: Scorer = _make("scorer", spec, trace)
    return scorer
