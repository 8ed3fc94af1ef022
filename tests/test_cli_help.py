"""The command line's help: shown for a missing command, readable placeholders, examples that work."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, TRACES

COMMANDS = [
    ["blame"],
    ["validate"],
    ["import"],
    ["report"],
    ["merge"],
    ["schema"],
    ["plugins"],
    ["cache", "info"],
    ["cache", "clear"],
]
WITH_EXAMPLES = ["blame", "validate", "import", "report"]


@pytest.mark.parametrize(
    ("args", "usage"),
    [([], "Usage: car [OPTIONS] COMMAND [ARGS]..."), (["cache"], "Usage: car cache [OPTIONS] COMMAND")],
    ids=["car", "car cache"],
)
def test_a_group_without_a_command_shows_its_help(run_cli, args: list[str], usage: str) -> None:  # type: ignore[no-untyped-def]
    """click's convention for a group called without a command (its NoArgsIsHelpError): the help as
    `--help` shows it, on stderr, and exit code 2 (a usage error). It was one flattened error line."""
    r = run_cli(*args)
    assert r.code == 2 and r.out == ""
    lines = r.err.splitlines()
    assert lines[0].startswith(usage), r.err
    assert "Commands:" in lines and "car: error" not in r.err
    help_ = run_cli(*args, "--help")
    assert help_.code == 0 and help_.out == r.err


@pytest.mark.parametrize(
    ("group", "lines"),
    [
        (
            [],
            {
                "blame": "Find which step of each failed run caused its failure.",
                "plugins": "List the policies, environments and scorers car can use.",
                "validate": "Check trace files, or every trace file under a directory.",
                "import": "Convert a run log in another format into a car trace.",
                "schema": "Print the JSON Schema of the trace (or report) format.",
                "merge": "Combine shard stores (from `car blame --shard K/N`) into one.",
                "report": "Re-render saved results in any format, without new model calls.",
                "cache": "Inspect or clear the rollout store.",
            },
        ),
        (
            ["cache"],
            {
                "info": "Show what the store holds.",
                "clear": "Delete the store (every stored rollout and report).",
            },
        ),
    ],
    ids=["car", "car cache"],
)
def test_the_command_list_reads_in_full_at_80_columns(  # type: ignore[no-untyped-def]
    run_cli, monkeypatch: pytest.MonkeyPatch, group: list[str], lines: dict[str, str]
) -> None:
    """Each command's line in the list is a whole sentence: `car --help` cut three of them off
    ("Rank the steps of failed runs by how much re-deciding them...")."""
    monkeypatch.setenv("COLUMNS", "80")
    r = run_cli(*group, "--help")
    assert r.code == 0, r.err
    listed = r.out.split("Commands:\n", 1)[1].splitlines()
    assert {row.split()[0]: " ".join(row.split()[1:]) for row in listed} == lines
    assert max(len(row) for row in listed) <= 80


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_shows_placeholders_not_python_types(run_cli, command: list[str]) -> None:  # type: ignore[no-untyped-def]
    r = run_cli(*command, "--help")
    assert r.code == 0, r.err
    # typer showed `TRACE <list[str]>`, `--samples <int>`, and arguments as `{TRACE}...` or `{trace}`.
    assert not re.search(r"[<>{}]", r.out), r.out
    usage = r.out.splitlines()[0]
    arguments = usage.split("[OPTIONS]", 1)[1].split()
    for name in arguments:  # one spelling: upper case (a choice of words is written as the words)
        assert re.fullmatch(r"\[?([A-Z]+|[a-z|]+)\]?(\.\.\.)?", name), usage
        shown = name.removeprefix("[").removesuffix("]")
        if shown.removesuffix("...").isupper():  # the Arguments section spells it the same way
            assert re.search(rf"^  {re.escape(shown)}  ", r.out, re.M), r.out


def test_blame_help_shows_an_example_and_the_thinking_option(run_cli) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("blame", "--help")
    assert "Usage: car blame [OPTIONS] TRACE...\n" in r.out
    assert "    car blame traces/support-refund.json\n" in r.out
    assert "<list[str]>" not in r.out and "--thinking off|adaptive|N" in r.out
    thinking = " ".join(r.out.split("--thinking off|adaptive|N", 1)[1].split("--help")[0].split())
    assert thinking.startswith("Extended thinking of anthropic:MODEL policies: off, adaptive, or a")
    assert "(1024 or more)" in thinking


def test_a_bad_thinking_value_is_one_line(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("blame", "--thinking", "1000", tmp_path / "x.json")
    assert r.code == 2 and r.out == ""
    assert r.err.splitlines() == [
        "car: error: --thinking must be off, adaptive or a budget of at least 1024 tokens, got '1000'"
    ]


def _examples(help_text: str) -> list[str]:
    lines = help_text.split("Examples:\n", 1)[1].splitlines()
    return [line.strip() for line in lines if line.strip()]


def test_every_help_example_works_offline(
    run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """Each example of each command, run as written in a folder holding the bundled traces (and,
    for `car import`, two foreign files under the names the examples use)."""
    shutil.copytree(TRACES, tmp_path / "traces")
    fixtures = ROOT / "tests" / "fixtures" / "importers"
    shutil.copy(fixtures / "openai_chat.json", tmp_path / "chat.json")
    shutil.copy(fixtures / "tau_bench.json", tmp_path / "tau-bench.json")
    monkeypatch.chdir(tmp_path)
    ran = 0
    for command in WITH_EXAMPLES:
        examples = _examples(run_cli(command, "--help").out)
        assert 1 <= len(examples) <= 3 and any(e.startswith(f"car {command} ") for e in examples)
        for example in examples:
            args = shlex.split(example, comments=True)
            assert args[0] == "car"
            r = run_cli(*args[1:], "--debug")
            assert r.code == 0, (example, r.err)
            ran += 1
    assert ran >= 8
    assert (tmp_path / "summary.md").read_text().startswith("## car blame")
    assert (tmp_path / "report.html").stat().st_size > 0
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [
        "tau-bench_tau-bench_task-3_trial-0.json",
        "tau-bench_tau-bench_task-4_trial-0.json",
    ]


def test_the_loopback_server_help_says_what_it_is_for_and_its_example_works(run_cli) -> None:  # type: ignore[no-untyped-def]
    """`python -m car.testing --help` had no description; its example is run here as written, against
    the server it describes (started in-process, on the port it chose)."""
    from car.backends import openai as openai_backend
    from car.sim import scenario_for
    from car.testing import LoopbackServer, ScenarioModel

    done = subprocess.run(
        [sys.executable, "-m", "car.testing", "--help"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    text = " ".join(done.stdout.split())
    assert "A local model server speaking the OpenAI and Anthropic APIs, to try `car blame`" in text
    example = done.stdout.split("example:\n", 1)[1].replace("\\\n", " ").splitlines()
    serve, blame = (shlex.split(line, comments=True) for line in example[:2])
    assert serve == ["python", "-m", "car.testing", "--scenario", "support-refund"]
    assert blame[:2] == ["car", "blame"] and "--base-url" in blame
    Path("traces").symlink_to(TRACES)
    openai_backend._CAPS.clear()  # capabilities are cached per base URL for the process
    with LoopbackServer({"support-refund": ScenarioModel(scenario_for("support-refund"))}) as server:
        port = server.url.split(":")[-1].split("/")[0]
        r = run_cli(*(arg.replace("PORT", port) for arg in blame[1:]), "--no-store")
    assert r.code == 0, r.err
    assert "Step 1 (support: PLAN: refund the order) is where the run was decided" in r.out
