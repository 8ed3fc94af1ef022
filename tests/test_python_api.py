"""The Python API as a script uses it: what `help()` and a type checker see of `car.blame` and
`car.blame_many`, docstring examples, the report's described fields, a store shared with a worker
thread, and errors that name Python's keywords."""

from __future__ import annotations

import asyncio
import doctest
import importlib
import inspect
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

import car
from car.store import RolloutStore
from tests.conftest import ROOT, TRACES, Result


@pytest.mark.parametrize(
    ("name", "first", "keywords"),
    [
        ("blame", "trace", {"samples": "int", "seed": "int", "scorer": "str | Scorer | None"}),
        ("blame_many", "paths", {"options": "BatchOptions | None", "concurrency": "int"}),
    ],
)
def test_help_lists_the_keywords_of_the_synchronous_functions(
    name: str, first: str, keywords: dict[str, str]
) -> None:
    """`help(car.blame)` showed `blame(trace, **options: Any)`: the keywords were in prose only."""
    sync, run = getattr(car, name), getattr(car, f"{name}_async")
    params = inspect.signature(sync).parameters
    assert list(params) == list(inspect.signature(run).parameters)
    assert next(iter(params)) == first
    for keyword, annotation in keywords.items():
        assert params[keyword].kind is inspect.Parameter.KEYWORD_ONLY
        assert params[keyword].annotation == annotation
    assert inspect.signature(sync).return_annotation == inspect.signature(run).return_annotation
    assert sync.__name__ == name and "From a running event loop" in (sync.__doc__ or "")


def test_a_script_type_checks_its_calls(tmp_path: Path) -> None:
    """A misspelt keyword or a value of the wrong type passed `mypy --strict`: `car.blame` and
    `car.blame_many` took `**Any`, and `BatchOptions` typed its components `Any`."""
    script = tmp_path / "script.py"
    script.write_text(
        textwrap.dedent(
            """\
            import car

            report: car.Report = car.blame("run.json", samples=8, seed=1)
            results: list[car.TraceResult] = car.blame_many(
                ["runs/"], options=car.BatchOptions(samples=8), concurrency=4
            )
            car.blame("run.json", sample=8)
            car.blame("run.json", seed="1")
            car.blame_many("runs/", option=car.BatchOptions())
            car.BatchOptions(policy=3)
            car.BatchOptions(method="shap", shapley_method="exact")
            """
        ),
        encoding="utf-8",
    )
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n", encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--config-file",
            str(config),
            "--cache-dir",
            str(tmp_path / "cache"),
            # As for an installed package: car's own modules are read, their errors not reported.
            "--follow-imports=silent",
            str(script),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    errors = [line.split(": error: ")[1] for line in done.stdout.splitlines() if ": error: " in line]
    assert errors == [
        'Unexpected keyword argument "sample" for "blame"; did you mean "samples"?  [call-arg]',
        'Argument "seed" to "blame" has incompatible type "str"; expected "int"  [arg-type]',
        'Unexpected keyword argument "option" for "blame_many"; did you mean "options"?  [call-arg]',
        'Argument "policy" to "BatchOptions" has incompatible type "int"; '
        'expected "str | Policy | None"  [arg-type]',
        # `car.blame(method="shap")` was flagged, `BatchOptions(method="shap")` typed a str.
        'Argument "method" to "BatchOptions" has incompatible type "Literal[\'shap\']"; '
        "expected \"Literal['contrastive', 'shapley', 'auto']\"  [arg-type]",
    ], done.stdout + done.stderr


def _mypy_errors(tmp_path: Path, code: str) -> list[str]:
    """What `mypy --strict` says of a script, as it would with car installed."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code), encoding="utf-8")
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n", encoding="utf-8")
    done = subprocess.run(
        [
            *(sys.executable, "-m", "mypy", "--strict", "--config-file", str(config)),
            *("--cache-dir", str(tmp_path / "cache"), "--follow-imports=silent", str(script)),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return [line for line in done.stdout.splitlines() if ": error: " in line]


def test_read_only_component_attributes_type_check(tmp_path: Path) -> None:
    """The protocols declared `spec` and `deterministic` as settable attributes, so a policy that
    is a frozen dataclass, or a scorer whose `spec` is a property, failed `mypy --strict`
    ("Protocol member Policy.spec expected settable variable, got read-only attribute"), though
    car takes them and never sets either."""
    errors = _mypy_errors(
        tmp_path,
        """\
        from collections.abc import Sequence
        from dataclasses import dataclass

        import car


        @dataclass(frozen=True)
        class Frozen:
            spec: str = "frozen"

            async def act(self, decision: car.Decision, key: car.EventKey) -> car.Action:
                return car.Action(text="x")


        class Judge:
            @property
            def spec(self) -> str:
                return "judge"

            @property
            def deterministic(self) -> bool:
                return True

            async def score(self, trajectory: car.Trajectory, key: car.EventKey) -> float | None:
                return 1.0


        @dataclass(frozen=True)
        class World:
            spec: str = "world"

            async def restore(self, history: Sequence[car.Turn]) -> int:
                return len(history)

            async def step(
                self, state: int, index: int, actor: str, action: car.Action, key: car.EventKey
            ) -> car.EnvStep:
                return car.EnvStep(observations=(), state=state + 1, next_actor=None)


        car.blame("run.json", policy=Frozen(), env=World(), scorer=Judge())
        car.BatchOptions(policy=Frozen(), env=World(), scorer=Judge())
        """,
    )
    assert errors == []


def test_a_store_made_in_one_thread_serves_a_batch_run_in_another(tmp_path: Path) -> None:
    """A script's `asyncio.to_thread(car.blame_many, ..., store=store)` (or a worker thread) found
    its store "damaged (SQLite objects created in a thread can only be used in that same thread)",
    stored nothing, and gave the store up: the next run in the first thread recomputed everything."""
    store = RolloutStore(tmp_path / "store.sqlite")
    trace = str(TRACES / "pivot.json")

    async def in_a_thread() -> list[car.TraceResult]:
        return await asyncio.to_thread(car.blame_many, trace, store=store)

    first = asyncio.run(in_a_thread())
    assert (store.unwritable, store.damaged) == (None, False)
    again = car.blame_many(trace, store=store)
    rollouts = first[0].report.budget.rollouts if first[0].report else 0
    assert (first[0].fresh_rollouts, first[0].stored_rollouts) == (rollouts, 0)
    assert (again[0].fresh_rollouts, again[0].stored_rollouts) == (0, rollouts)
    assert again[0].report == first[0].report
    store.close()


def _example_code(doc: str) -> str:
    """The code of a docstring's indented examples: a plain block as it is, a doctest's lines after
    their `>>> ` or `... ` prompt (its output lines are doctest's to check)."""
    lines = [line[4:] for line in doc.splitlines() if line.startswith("    ")]
    if any(line.startswith(">>> ") for line in lines):
        lines = [line[4:] for line in lines if line.startswith((">>> ", "... "))]
    return "\n".join(lines)


@pytest.mark.parametrize("module", ["car", "car.attribution", "car.batch"])
def test_the_docstring_examples_run(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`help(car.batch)` showed `car.blame_many(["runs/"], on_result=print, samples=16)`, a
    TypeError since `samples` goes in `options=car.BatchOptions(...)`."""
    monkeypatch.chdir(ROOT)
    mod = importlib.import_module(module)
    code = _example_code(mod.__doc__ or "")
    exec(compile(code, f"{module} docstring", "exec"), {"car": car})
    outcome = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert (code or outcome.attempted) and outcome.failed == 0


def test_every_field_of_the_report_is_described() -> None:
    """A script reads `report.locus`, `report.factual`, `step.rescue.n`: 30 of the report's 34
    fields (and most of its parts') had no description in the schema, nor anywhere else."""
    schema = car.Report.model_json_schema()
    undescribed = [
        f"{model}.{name}"
        for model, body in [("Report", schema), *schema["$defs"].items()]
        for name, field in body.get("properties", {}).items()
        if not field.get("description")
    ]
    assert undescribed == []


def test_a_trace_naming_code_is_told_the_keyword_from_python(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    """A trace may name built-in components only; from Python the advice said `--scorer`."""
    doc = json.loads((TRACES / "pivot.json").read_text(encoding="utf-8"))
    doc["replay"]["scorer"] = "scorers/refund.py@refund_outside_window"
    path = tmp_path / "code.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(car.InputError) as info:
        car.blame(path)
    assert str(info.value).startswith(f"{path}: $.replay.scorer: ")
    assert str(info.value).endswith("built-in components only (pass it with scorer=)")
    r = run_cli("blame", path, "--no-store")
    assert r.code == 2 and r.err.endswith("built-in components only (pass it with --scorer)\n")
