"""`car blame --dry-run` refuses what the run would refuse, with the run's words, and sends nothing.

The dry run passed (exit 0) on every trace it could read: a trace naming no policy or no scorer, a
plugin file without the object named, a pattern that does not compile, a hosted model without its
API key. The run then refused each of them with exit 2.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from car.testing.loopback import LoopbackServer
from tests.conftest import TRACES, Result

RunCli = Callable[..., Result]
PIVOT = TRACES / "pivot.json"


def _pivot_with(tmp_path: Path, name: str, replay: dict[str, str] | None) -> Path:
    """traces/pivot.json with `$.replay` replaced (None: left out)."""
    doc = json.loads(PIVOT.read_text(encoding="utf-8"))
    if replay is None:
        doc.pop("replay")
    else:
        doc["replay"] = replay
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _error_line(r: Result) -> str:
    lines = [line for line in r.err.splitlines() if line.startswith("car: error: ")]
    assert len(lines) == 1, r.err
    return lines[0].removeprefix("car: error: ")


@pytest.mark.parametrize(
    ("case", "args", "says"),
    [
        ("no-specs", [], "names no policy"),
        ("no-scorer", ["--policy", "sim:pivot"], "names no scorer"),
        ("plain", ["--policy", "plugin.py@missing"], "plugin.py defines no 'missing'"),
        ("plain", ["--scorer", "regex:["], "invalid pattern"),
        ("plain", ["--policy", "openai:gpt-4o"], "OpenAI needs an API key"),
        ("plain", ["--scorer", "regex:never-in-the-answer"], "says the recorded run did not fail"),
        ("plain", ["--method", "shapley", "--budget", "5"], "--budget 5 is too small"),
        ("plain", ["--adaptive", "--budget", "5"], "--budget 5 is too small"),
    ],
)
def test_a_dry_run_refuses_what_the_run_refuses_in_its_words(
    run_cli: RunCli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    args: list[str],
    says: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    (tmp_path / "plugin.py").write_text("present = None\n", encoding="utf-8")
    replay = {
        "no-specs": None,
        "no-scorer": {"env": "sim:pivot"},
        "plain": {"policy": "sim:pivot", "env": "sim:pivot", "scorer": "sim:pivot"},
    }[case]
    trace = _pivot_with(tmp_path, "t.json", replay)

    real = run_cli("blame", trace, *args, "--no-store")  # each stops before its first rollout
    assert real.code == 2, real.err
    run_says = _error_line(real)
    assert says in run_says
    assert run_says.startswith(f"{trace}: ")  # the run names the trace too, as the dry run does

    dry = run_cli("blame", trace, *args, "--no-store", "--dry-run")
    assert dry.code == 2, dry.err
    assert dry.out.startswith("estimate: 1 trace, ")  # the estimate is still printed
    assert _error_line(dry) == run_says  # the run's words, located the same way


def test_a_dry_run_of_a_batch_names_every_trace_the_run_refuses(run_cli: RunCli, tmp_path: Path) -> None:
    """Who&When files name no policy or scorer: every one was refused by the run, none by the dry
    run."""
    first = _pivot_with(tmp_path, "a.json", None)
    second = _pivot_with(tmp_path, "b.json", None)
    r = run_cli("blame", first, second, "--policy", "sim:pivot", "--no-store", "--dry-run")
    assert r.code == 2
    lines = r.err.splitlines()
    assert [line.split(": ")[2] for line in lines] == [str(first), str(second)]
    assert all("names no scorer" in line for line in lines)
    both = ["--policy", "sim:pivot", "--scorer", "sim:pivot", "--no-store", "--dry-run"]
    ok = run_cli("blame", first, second, *both)
    assert (ok.code, ok.err) == (0, "")


def test_a_dry_run_builds_a_model_policy_without_sending_a_request(
    run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with LoopbackServer() as server:
        r = run_cli(
            "blame", PIVOT, "--policy", "openai:m", "--base-url", server.url, "--no-store", "--dry-run"
        )
        assert (r.code, r.err) == (0, ""), r.err
        assert server.requests == []


@pytest.mark.parametrize(
    ("source", "says"),
    [
        # nothing close to 'nope': what the file itself defines, not what it imports
        (
            "import json\nfrom car import Trajectory\n\n"
            "async def refund_outside_window(t: Trajectory) -> float:\n    return 1.0\n",
            "plugin.py defines no 'nope'; it defines refund_outside_window",
        ),
        ("async def nope_(t):\n    return 1.0\n", "plugin.py defines no 'nope'; did you mean 'nope_'?"),
        ("x = 1\n", "plugin.py defines no 'nope'"),
    ],
)
def test_a_name_the_file_lacks_is_told_what_it_has(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, says: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plugin.py").write_text(source, encoding="utf-8")
    r = run_cli("blame", PIVOT, "--scorer", "plugin.py@nope", "--no-store")
    assert r.code == 2
    assert _error_line(r).endswith(f"scorer 'plugin.py@nope': {says}")
