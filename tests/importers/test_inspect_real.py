"""A real Inspect AI evaluation (mock model, no network) imported through the `inspect` extra."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from car.importers import import_file


# Inspect and its dependencies emit their own deprecation and resource warnings; they are not car's.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_real_inspect_eval_imports_as_class_a(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("inspect_ai", reason="the optional extra car-blame[inspect] is not installed")
    import inspect_ai.model._model as model_module
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, get_model
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate, system_message, use_tools
    from inspect_ai.tool import tool

    async def count_text_tokens(self: Any, text: str) -> int:
        return len(text) // 4  # the default tokenizer downloads its tables; tests stay offline

    monkeypatch.setattr(model_module.ModelAPI, "count_text_tokens", count_text_tokens)
    monkeypatch.setenv("INSPECT_LOG_DIR", str(tmp_path / "logs"))

    @tool
    def add() -> Any:
        async def execute(x: int, y: int) -> int:
            """Add two numbers.

            Args:
                x: the first number
                y: the second number
            """
            return x + y

        return execute

    outputs = [
        ModelOutput.for_tool_call("mockllm/model", "add", {"x": 1, "y": 2}),
        ModelOutput.from_content("mockllm/model", "4"),
    ]
    task = Task(
        dataset=[Sample(input="What is 1+2?", target="3")],
        solver=[system_message("You add."), use_tools(add()), generate()],
        scorer=match(),
    )
    (log,) = eval(
        task,
        model=get_model("mockllm/model", custom_outputs=outputs),
        log_dir=str(tmp_path / "logs"),
        display="none",
        seed=7,
        temperature=0.5,
    )
    assert log.status == "success", log.error
    (t,) = import_file(log.location)
    assert t.fidelity is not None and t.fidelity.class_ == "A"
    assert t.source is not None and t.source.format == "inspect"
    first, second = t.steps
    assert isinstance(first.context, tuple)
    assert [m.role for m in first.context] == ["system", "user"]
    (call,) = first.action.tool_calls
    assert (call.name, call.arguments) == ("add", {"x": 1, "y": 2})
    assert first.observations[0].call_id == call.id and first.observations[0].content == "3"
    assert first.sampling is not None and (first.sampling.seed, first.sampling.temperature) == (7, 0.5)
    assert second.action.text == "4"
    assert t.outcome.failed is True  # the answer 4 does not match the target 3
