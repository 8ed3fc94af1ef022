"""`car plugins`: what can be named in a spec string, and where each name comes from.

Built-ins are listed with the module that implements them; installed plugins with their entry-point
group, the distribution that provides them and the object they point to. Listing never imports a
plugin: a broken plugin cannot break the listing.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import entry_points

__all__ = ["Available", "available", "describe_plugins"]

_GROUPS = {"policy": "car.policies", "env": "car.environments", "scorer": "car.scorers"}
_TITLES = {"policy": "policies", "env": "environments", "scorer": "scorers"}
_BUILTINS: dict[str, list[tuple[str, str, str]]] = {
    "policy": [("sim:SCENARIO", "car.sim", "a simulated scenario's decision program")],
    "env": [
        ("recorded", "car.builtins", "recorded observations for identical calls; else an error"),
        ("sim:SCENARIO", "car.sim", "a simulated scenario's world"),
    ],
    "scorer": [
        ("recorded", "car.builtins", "the trace's own outcome, for the recorded run only"),
        ("sim:SCENARIO", "car.sim", "a simulated scenario's failure condition"),
        ("tool-called:NAME", "car.builtins", "1 if the run called tool NAME"),
        ("regex:PATTERN", "car.builtins", "1 if the final answer matches PATTERN"),
    ],
}
_ARG = {
    "openai:": "openai:MODEL",
    "anthropic:": "anthropic:MODEL",
    "llm-sim:": "llm-sim:[openai:|anthropic:]MODEL[?OPTIONS]",
    "llm-judge:": "llm-judge:[openai:|anthropic:]MODEL[?OPTIONS]",
}


@dataclass(frozen=True)
class Available:
    kind: str
    name: str
    origin: str
    summary: str


def available() -> list[Available]:
    """Every built-in and installed component, per kind."""
    from car.backends.registry import SCHEMES
    from car.specs import shadowed

    out: list[Available] = []
    for kind, group in _GROUPS.items():
        for name, module, summary in _BUILTINS[kind]:
            out.append(Available(kind, name, f"built-in ({module})", summary))
        for scheme, (module, summary) in SCHEMES[kind].items():
            out.append(Available(kind, _ARG.get(scheme, scheme), f"built-in ({module})", summary))
        for ep in sorted(entry_points(group=group), key=lambda e: e.name):
            dist = ep.dist.name if ep.dist is not None else "unknown distribution"
            name, summary = f"{ep.name}[:ARG]", ep.value
            hidden = shadowed(kind, ep.name)
            if hidden == "always":
                summary += f" (never used: {ep.name}:ARG names the built-in)"
            elif hidden == "bare":
                name = f"{ep.name}:ARG"  # `recorded` alone is the built-in
            out.append(Available(kind, name, f"entry point {group} in {dist}", summary))
        out.append(Available(kind, "path/to/file.py@name", "a Python file you name", "runs that file"))
    return out


def describe_plugins() -> str:
    rows = available()
    lines: list[str] = []
    for kind in _GROUPS:
        lines.append(f"{_TITLES[kind]}:")
        mine = [r for r in rows if r.kind == kind]
        width = max(len(r.name) for r in mine)
        for r in mine:
            lines.append(f"  {r.name:<{width}}  {r.summary}  [{r.origin}]")
    importers = sorted(entry_points(group="car.importers"), key=lambda e: e.name)
    if importers:
        lines.append("importers:")
        for ep in importers:
            dist = ep.dist.name if ep.dist is not None else "unknown distribution"
            lines.append(f"  {ep.name}  {ep.value}  [entry point car.importers in {dist}]")
    return "\n".join(lines) + "\n"
