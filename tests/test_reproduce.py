"""The HTML report's "Reproduce" command runs the same analysis again, whatever mode it ran in."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from car.html import reproduce_command
from car.report import Report
from tests.conftest import TRACES, Result


@pytest.mark.parametrize(
    "options",
    [
        ["--samples", "8", "--match-samples", "4", "--level", "0.9"],
        ["--adaptive", "--confidence", "0.9", "--budget", "200", "--target-width", "0.2"],
        ["--method", "shapley", "--players", "0,1;2", "--budget", "300", "--samples", "8"],
        ["--method", "shapley", "--shapley", "exact", "--budget", "200", "--samples", "8"],
    ],
    ids=["contrastive", "adaptive", "groups", "exact"],
)
def test_the_reproduce_command_runs_the_same_analysis_again(
    options: list[str], run_cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It always said `--samples N --level L`: an adaptive run's command was refused (--adaptive
    ignores them) and left out --adaptive, and a Shapley run's left out its players and budget."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "and.json").write_text((TRACES / "and.json").read_text())
    first = run_cli("blame", "and.json", *options, "--seed", "3", "--format", "json", "--no-store")
    assert first.code == 0, first.err
    report = Report.model_validate(json.loads(first.out))
    command = shlex.split(reproduce_command(report))
    assert command[:3] == ["car", "blame", "and.json"]
    again = run_cli(*command[1:], "--format", "json", "--no-store")
    assert again.code == 0, again.err
    redone = Report.model_validate(json.loads(again.out))
    assert redone == report


def test_the_reproduce_command_of_a_run_picked_from_a_file_of_several_names_it(
    run_cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`car blame runs.json --item 1`: the page's command left out `--item 1`, so running it was
    refused ('holds 2 runs ...; pick one with --item N')."""
    import html
    import re

    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs.json").write_text(
        (TRACES.parent / "tests" / "fixtures" / "importers" / "tau_bench.json").read_text()
    )
    (tmp_path / "fixed.py").write_text(
        "from car import Action\n\n"
        "class Fixed:\n"
        "    spec = 'fixed'\n\n"
        "    async def act(self, decision, key):\n"
        "        return Action(text='done' if key.uniform() < 0.5 else 'no')\n\n\n"
        "def fixed(trace):\n"
        "    return Fixed()\n"
    )
    args = ["--policy", "fixed.py@fixed", "--env", "recorded", "--scorer", "regex:.", "--samples"]
    args += ["4", "--seed", "3", "--no-store"]
    first = run_cli("blame", "runs.json", "--item", "1", *args, "--format", "json", "-o", "r.json")
    assert first.code == 0, first.err
    again_with = (["report", "r.json"], ["report", "r.json", "--trace", "runs.json"])
    for argv in (*again_with, ["blame", "runs.json", "--item", "1", *args]):
        page = run_cli(*argv, "--format", "html", "-o", "page.html")
        assert page.code == 0, page.err
        (code,) = re.findall(r"Reproduce[^<]*<code>([^<]*)</code>", Path("page.html").read_text())
        command = shlex.split(html.unescape(code).replace("&#58;", ":"))
        assert command[:5] == ["car", "blame", "runs.json", "--item", "1"]
        again = run_cli(*command[1:], "--format", "json", "--no-store")
        assert again.code == 0, again.err
        assert Report.model_validate(json.loads(again.out)) == Report.model_validate_json(
            Path("r.json").read_text()
        )


def test_the_reproduce_command_of_a_contrastive_run_keeps_shapley_off(
    run_cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`car blame --method contrastive` that abstained: the command left `--method contrastive`
    out, so running it (`--method auto`) ran Shapley on top, a different analysis and report."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "and.json").write_text((TRACES / "and.json").read_text())
    options = ["--method", "contrastive", "--samples", "2", "--seed", "3", "--no-store"]
    first = run_cli("blame", "and.json", *options, "--format", "json")
    assert first.code == 0, first.err
    report = Report.model_validate(json.loads(first.out))
    assert report.locus is None and report.shapley is None  # an abstention: auto would add Shapley
    command = shlex.split(reproduce_command(report))
    assert "--method" in command
    again = run_cli(*command[1:], "--format", "json", "--no-store")
    assert again.code == 0, again.err
    assert Report.model_validate(json.loads(again.out)) == report
