"""The Python API as a script uses it: what `help()` and a type checker see of `car.blame` and
`car.blame_many`."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import car
from tests.conftest import ROOT


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
    `car.blame_many` took `**Any`."""
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
    ], done.stdout + done.stderr
