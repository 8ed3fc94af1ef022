"""The spec schemes the backends add, and the one factory `car.specs` calls for them (lazily)."""

from __future__ import annotations

from typing import Any

from car.trace import Trace

__all__ = ["SCHEMES", "check_backend_spec", "make_backend"]

# kind -> scheme -> (module that implements it, one-line description); `car plugins` lists these.
SCHEMES: dict[str, dict[str, tuple[str, str]]] = {
    "policy": {
        "openai:": ("car.backends.openai", "OpenAI-compatible Chat Completions (OpenAI, vLLM, ...)"),
        "anthropic:": ("car.backends.anthropic", "Anthropic Messages API"),
    },
    "env": {
        "llm-sim:": ("car.backends.llm_sim", "recorded observations; a model simulates unseen calls"),
    },
    "scorer": {
        "llm-judge:": ("car.backends.judge", "a model judges: rubric, or extract-then-compare"),
    },
}


def make_backend(kind: str, scheme: str, arg: str, trace: Trace, spec: str) -> Any:
    """Build the component for `spec` (its scheme is one of `SCHEMES[kind]`)."""
    if kind == "policy" and scheme == "openai":
        from car.backends.openai import OpenAIPolicy

        return OpenAIPolicy(arg or None, trace, spec=spec)
    if kind == "policy" and scheme == "anthropic":
        from car.backends.anthropic import AnthropicPolicy

        return AnthropicPolicy(arg or None, trace, spec=spec)
    if kind == "env" and scheme == "llm-sim":
        from car.backends.llm_sim import LLMSimEnvironment

        return LLMSimEnvironment(trace, arg, spec=spec)
    if kind == "scorer" and scheme == "llm-judge":
        from car.backends.judge import LLMJudge

        return LLMJudge(trace, arg, spec=spec)
    raise KeyError(f"{kind} {scheme}")


def check_backend_spec(kind: str, scheme: str, arg: str, spec: str) -> None:
    """Parse `spec`'s argument as `make_backend` would, without connecting or reading a key: a
    SpecError says what is wrong (a trace naming the component is checked when it loads)."""
    from car.backends.options import BackendOptions

    if kind == "env" and scheme == "llm-sim":
        from car.backends.llm_sim import parse_llm_sim

        parse_llm_sim(spec, arg, BackendOptions())
    elif kind == "scorer" and scheme == "llm-judge":
        from car.backends.judge import parse_judge

        parse_judge(spec, arg, BackendOptions())
