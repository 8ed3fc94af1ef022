"""The command line and the public API: reports, determinism, literal printing, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import car
from car.report import Report
from tests.conftest import ROOT, TRACES


def test_public_api_is_pinned() -> None:
    assert sorted(car.__all__) == sorted(
        [
            "Action",
            "Actor",
            "BackendError",
            "BatchOptions",
            "TraceResult",
            "blame_many",
            "blame_many_async",
            "BudgetError",
            "CarError",
            "Decision",
            "EnvStep",
            "Environment",
            "EventKey",
            "InputError",
            "Observation",
            "Plan",
            "Policy",
            "Replay",
            "Report",
            "Rollout",
            "Scorer",
            "SpecError",
            "Step",
            "ToolCall",
            "Trace",
            "Trajectory",
            "Turn",
            "__version__",
            "blame",
            "blame_async",
            "load_trace",
        ]
    )
    for name in car.__all__:
        assert hasattr(car, name)
    assert set(dir(car)) >= set(car.__all__)
    # what completion offers is car's: not what car/__init__.py imports for itself
    assert not {"importlib", "Any", "TYPE_CHECKING", "annotations"} & set(dir(car))
    with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
        _ = car.nonesuch  # type: ignore[attr-defined]


def test_the_command_line_starts_without_the_numeric_stack() -> None:
    # `car --help`, `car --version`, `car validate` and the other commands that never attribute load
    # numpy and scipy only when a command needs them (they are most of the start-up time).
    code = (
        "import sys; import car.cli; "
        "print(sorted(m for m in ('numpy', 'scipy', 'httpx', 'car.attribution') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == "[]"


def test_blame_table_names_the_locus(run_cli) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("blame", TRACES / "support-refund.json")
    assert r.code == 0, r.err
    assert "Step 1 (support: PLAN: refund the order) is where the run was decided" in r.out
    assert "action-match rate" in r.out and "budget: 50 rollouts" in r.out and "seed 0" in r.out
    first_row = next(line for line in r.out.splitlines() if line.lstrip().startswith("1 "))
    assert "locus" in first_row and "PLAN: refund" in first_row


def test_json_report_has_the_documented_fields(run_cli) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("blame", TRACES / "pivot.json", "--format", "json", "--seed", "5")
    assert r.code == 0
    doc = json.loads(r.out)
    Report.model_validate(doc)
    assert doc["version"] == "car.report/v1"
    assert doc["locus"] == 1 and doc["seed"] == 5
    for key in ("trace_id", "abstained_reason", "match_rate", "budget", "specs", "steps"):
        assert key in doc
    step = doc["steps"][1]
    assert set(step["rescue"]) == {"estimate", "low", "high", "n"}
    assert set(step["drop"]) >= {"estimate", "low", "high"}
    assert step["match_rate"]["n"] == 8
    # the factual copy, then one row per replicate: at least one rollout each, fewer than one per step
    assert 1 + 32 <= doc["budget"]["rollouts"] < 1 + 3 * 32
    assert doc["specs"] == {"policy": "sim:pivot", "env": "sim:pivot", "scorer": "sim:pivot"}


@pytest.mark.parametrize("name", ["support-refund", "research-team", "and"])
def test_same_seed_same_json_at_any_concurrency(run_cli, name: str) -> None:  # type: ignore[no-untyped-def]
    a = run_cli(
        "blame", TRACES / f"{name}.json", "--format", "json", "--concurrency", "1", "--seed", "11"
    )
    b = run_cli(
        "blame", TRACES / f"{name}.json", "--format", "json", "--concurrency", "8", "--seed", "11"
    )
    c = run_cli(
        "blame", TRACES / f"{name}.json", "--format", "json", "--concurrency", "8", "--seed", "12"
    )
    assert a.code == b.code == 0
    assert a.out == b.out
    assert a.out != c.out


def test_output_file(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "report.json"
    r = run_cli("blame", TRACES / "or.json", "--format", "json", "-o", out)
    assert r.code == 0 and r.out == ""
    assert json.loads(out.read_text())["locus"] == 0
    table = tmp_path / "report.txt"
    r = run_cli("blame", TRACES / "or.json", "-o", table)
    assert r.code == 0 and "is where the run was decided" in table.read_text()


def test_trace_text_prints_literally(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    doc = json.loads((TRACES / "support-refund.json").read_text())
    doc["id"] = "[bold red]id[/bold red]"
    doc["steps"][1]["action"]["text"] = "[link=http://x]go[/link] [blink]\x1b[31mRED\x07"
    doc.pop("replay")
    path = tmp_path / "markup.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    r = run_cli(
        "blame",
        path,
        "--policy",
        "sim:support-refund",
        "--env",
        "sim:support-refund",
        "--scorer",
        "tool-called:issue_refund",
        "--samples",
        "4",
    )
    assert r.code == 0, r.err
    assert "\x1b" not in r.out and "\x07" not in r.out
    assert "[bold red]id[/bold red]" in r.out
    assert "[link=http://x]go[/link] [blink]\\x1" in r.out


def test_file_scorer_from_the_scorers_folder(run_cli) -> None:  # type: ignore[no-untyped-def]
    r = run_cli(
        "blame",
        TRACES / "support-refund.json",
        "--scorer",
        ROOT / "scorers" / "refund.py@refund_outside_window",
        "--format",
        "json",
    )
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["locus"] == 1
    assert doc["specs"]["scorer"].endswith("refund.py@refund_outside_window")


SLOTTED_SCORER = """
class Refunded:
    __slots__ = ()  # takes no attribute of car's: neither its spec nor `deterministic`

    async def score(self, trajectory, key):
        calls = [c.name for t in trajectory.turns for c in t.action.tool_calls]
        return float("issue_refund" in calls)

scorer = Refunded()
"""


def test_a_file_scorer_that_takes_no_attributes_is_named_by_its_spec(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """An object with `__slots__` refused `spec` and `deterministic`: the run failed on the missing
    attribute, and the report could not name the file that scored it."""
    plugin = tmp_path / "slotted.py"
    plugin.write_text(SLOTTED_SCORER)
    r = run_cli(
        "blame",
        TRACES / "support-refund.json",
        "--scorer",
        f"{plugin}@scorer",
        "--samples",
        "4",
        "--format",
        "json",
    )
    assert r.code == 0, r.err
    assert json.loads(r.out)["specs"]["scorer"] == f"{plugin}@scorer"


def test_backend_failures_exit_3_and_keep_the_report(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    policy = tmp_path / "down.py"
    policy.write_text(
        "from car import BackendError\n"
        "class Down:\n"
        "    spec = 'down'\n"
        "    async def act(self, decision, key):\n"
        "        raise BackendError('connection refused by 127.0.0.1:9')\n"
        "down = Down()\n",
        encoding="utf-8",
    )
    out = tmp_path / "r.json"
    r = run_cli(
        "blame", TRACES / "pivot.json", "--policy", f"{policy}@down", "--format", "json", "-o", out
    )
    assert r.code == 3
    last = r.err.strip().splitlines()[-1]
    assert last.startswith(f"car: error: {TRACES / 'pivot.json'}: too many rollouts errored")
    doc = json.loads(out.read_text())
    assert doc["status"] == "backend-errors" and doc["budget"]["errored"] == 96
    assert "connection refused" in doc["first_error"]


def test_python_api_blame_and_module_entry_point() -> None:
    report = car.blame(TRACES / "support-refund.json", seed=1, samples=16)
    assert report.locus == 1
    done = subprocess.run(
        [sys.executable, "-m", "car", "--version"], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == f"car {car.__version__}"


def test_help_works(run_cli) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("blame", "--help")
    assert r.code == 0 and "--samples" in r.out


def test_at_signs_in_builtin_spec_arguments_do_not_name_plugin_files() -> None:
    # Only `PATH.py@NAME` names a file: patterns and Vertex-style model ids may contain `@`.
    from car.backends.options import configure
    from car.builtins import RegexScorer
    from car.specs import check_builtin, make_policy, make_scorer
    from car.trace import load_trace

    trace = load_trace(TRACES / "support-refund.json")
    scorer = make_scorer("regex:refund@A-1042", trace)
    assert isinstance(scorer, RegexScorer) and scorer.pattern == "refund@A-1042"
    with configure(base_url="http://127.0.0.1:9/v1"):  # built only, never called
        policy = make_policy("openai:claude-3-5-sonnet@20240620", trace)
    assert policy.model == "claude-3-5-sonnet@20240620"  # type: ignore[attr-defined]
    # A trace file may name such built-ins, but still no code.
    assert check_builtin("scorer", "regex:refund@A-1042") is None
    assert check_builtin("policy", "openai:claude-3-5-sonnet@20240620") is None
    assert "names code" in str(check_builtin("scorer", "evil.py@run"))


def test_builtin_scorer_without_its_argument_says_what_is_missing(run_cli) -> None:  # type: ignore[no-untyped-def]
    trace = TRACES / "support-refund.json"
    for spec, needs in (
        ("tool-called:", "needs a tool name (tool-called:NAME)"),
        ("regex:", "needs a pattern (regex:PATTERN)"),
    ):
        r = run_cli("blame", trace, "--scorer", spec, "--no-store")
        assert r.code == 2
        assert needs in r.err and "did you mean" not in r.err


def test_plugin_file_spec_mistakes_stay_clear(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    plugin = tmp_path / "plugin.py"
    plugin.write_text("policy = None\n", encoding="utf-8")
    trace = TRACES / "support-refund.json"
    r = run_cli("blame", trace, "--policy", plugin, "--no-store")
    assert r.code == 2 and f"name the object in the file: {plugin}@NAME" in r.err
    r = run_cli("blame", trace, "--policy", f"{plugin}@", "--no-store")
    assert r.code == 2 and "'' is not a Python name (use FILE.py@NAME)" in r.err
    r = run_cli("blame", trace, "--policy", tmp_path / "missing.py@policy", "--no-store")
    assert r.code == 2 and "no such file" in r.err


def test_ctrl_c_while_the_command_line_is_imported_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Ctrl-C in the command's first fraction of a second printed the import's traceback."""
    import builtins
    import tomllib

    import car.__main__ as entry

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert scripts["project"]["scripts"]["car"] == "car.__main__:run"
    real_import = builtins.__import__

    def interrupted(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "car.cli":
            raise KeyboardInterrupt
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", interrupted)
    with pytest.raises(SystemExit) as exc:
        entry.run()
    assert exc.value.code == 130
    assert capsys.readouterr().err == "car: interrupted\n"


def test_sigterm_while_the_command_line_is_imported_is_one_line() -> None:
    """A SIGTERM in the command's first fraction of a second killed car without a word."""
    code = textwrap.dedent(
        """
        import builtins, os, signal, time
        import car.__main__ as entry
        real_import = builtins.__import__
        def terminated(name, *args, **kwargs):
            if name == "car.cli":
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)  # the handler raises before this ends
            return real_import(name, *args, **kwargs)
        builtins.__import__ = terminated
        entry.run()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stderr) == (143, "car: terminated\n")


def test_the_view_of_a_slotted_file_scorer_copies_like_the_object(tmp_path: Path) -> None:
    """The view's attribute lookup reached for the object it wraps before a copy had set it up."""
    import copy

    from car.specs import make_scorer
    from car.trace import load_trace

    plugin = tmp_path / "slotted.py"
    plugin.write_text(SLOTTED_SCORER)
    scorer = make_scorer(f"{plugin}@scorer", load_trace(TRACES / "support-refund.json"))
    twin = copy.copy(scorer)
    assert (twin.spec, twin.deterministic, twin.score) == (scorer.spec, False, scorer.score)
