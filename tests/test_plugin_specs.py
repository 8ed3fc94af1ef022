"""Components named by spec strings: installed plugins (entry points) and plugin files."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from car.protocols import Trajectory
from car.rng import EventKey
from car.trace import Trace
from tests.conftest import TRACES


class _ToolScorer:
    """Scores 1 when the run called the tool named by the spec's argument; its own spec leaves the
    argument out, as a plugin's may."""

    spec = "tool-plugin"
    deterministic = True

    def __init__(self, tool: str) -> None:
        self.tool = tool

    async def score(self, trajectory: Trajectory, key: EventKey) -> float | None:
        calls = [c.name for t in trajectory.turns for c in t.action.tool_calls]
        return float(self.tool in calls)


def _make_tool_scorer(arg: str, trace: Trace) -> _ToolScorer:
    return _ToolScorer(arg)


class _EntryPoint:
    name = "tool"
    value = "tool_plugin:make"

    def load(self) -> Any:
        return _make_tool_scorer


@pytest.fixture
def tool_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    import car.specs

    monkeypatch.setattr(
        car.specs, "entry_points", lambda group: [_EntryPoint()] if group == "car.scorers" else []
    )


def _refused(run_cli, option: str, spec: str) -> str:  # type: ignore[no-untyped-def]
    """The one error line `car blame` of the bundled support trace gives for `option spec` (exit 2,
    nothing on stdout), after the trace's name."""
    trace = TRACES / "support-refund.json"
    r = run_cli("blame", trace, option, spec, "--no-store")
    assert r.code == 2 and r.out == "", r.err
    [line] = r.err.splitlines()
    assert line.startswith(f"car: error: {trace}: "), line
    return str(line.removeprefix(f"car: error: {trace}: "))


def test_an_entry_point_argument_keys_its_own_stored_rollouts(run_cli, tool_plugin: None) -> None:  # type: ignore[no-untyped-def]
    """The store keyed a plugin's rollouts by the spec its component gave itself, which need not
    carry the argument: `tool:lookup_order` was served `tool:issue_refund`'s stored outcomes."""
    trace = TRACES / "support-refund.json"

    def blame(scorer: str, *store: str) -> dict[str, Any]:
        r = run_cli("blame", trace, "--scorer", scorer, "--samples", "8", "--format", "json", *store)
        assert r.code == 0, r.err
        doc: dict[str, Any] = json.loads(r.out)
        return doc

    first = blame("tool:issue_refund")
    assert first["locus"] == 1 and first["specs"]["scorer"] == "tool:issue_refund"
    fresh = blame("tool:lookup_order", "--no-store")
    second = blame("tool:lookup_order")
    assert second["specs"]["scorer"] == "tool:lookup_order"
    assert (second["locus"], second["steps"]) == (fresh["locus"], fresh["steps"])
    assert second["locus"] != first["locus"]


@pytest.mark.parametrize(
    ("signature", "takes"),
    [("", "()"), ("trajectory, key, extra", "(trajectory, key, extra)"), ("t, *, key", "(t, *, key)")],
)
def test_a_scorer_function_car_cannot_call_is_refused_before_any_work(  # type: ignore[no-untyped-def]
    run_cli, tmp_path, signature: str, takes: str
) -> None:
    """A bare async scorer whose parameters do not take (trajectory) or (trajectory, key) was
    accepted, then failed scoring the record with a TypeError, after a report of dashes."""
    plugin = tmp_path / "scorer.py"
    plugin.write_text(f"async def judge({signature}):\n    return 1.0\n", encoding="utf-8")
    spec = f"{plugin}@judge"
    assert _refused(run_cli, "--scorer", spec) == (
        f"scorer {spec!r}: judge() takes {takes}, "
        "and car calls a scorer function as judge(trajectory) or judge(trajectory, key)"
    )


def test_a_file_environment_without_restore_is_named_by_its_spec(run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """It was refused as if it had been passed from Python: `--env must be a spec string ... or a
    car.Environment`, though the user had given a spec string."""
    plugin = tmp_path / "env.py"
    plugin.write_text(
        "class Shop:\n"
        "    spec = 'shop'\n"
        "    async def step(self, state, index, actor, action, key):\n"
        "        raise AssertionError('never reached')\n"
        "shop = Shop()\n",
        encoding="utf-8",
    )
    spec = f"{plugin}@shop"
    assert _refused(run_cli, "--env", spec) == (
        f"environment {spec!r}: Shop has no restore() "
        "method (async def restore(history) -> state: the state after a recorded prefix)"
    )


def test_a_trace_is_offered_only_the_built_ins_it_may_name(run_cli, tmp_path, tool_plugin: None) -> None:  # type: ignore[no-untyped-def]
    """A trace naming an unknown component was offered an installed plugin (`did you mean
    'tool'?`) or `path/to/file.py@name`, which a trace may not name: the next try was refused too."""
    doc = json.loads((TRACES / "support-refund.json").read_text(encoding="utf-8"))
    for spec in ("tooll", "sim:xyzzy"):
        doc["replay"]["scorer"] = spec
        path = tmp_path / "t.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        r = run_cli("validate", path)
        assert r.code == 2
        [line] = r.err.splitlines()
        assert line.startswith(f"car: error: {path}: $.replay.scorer: unknown ")
        assert "'tool'" not in line and "file.py" not in line
        assert "; known: recorded, sim:pivot," in line
    # On the command line both are offered.
    r = run_cli("blame", TRACES / "support-refund.json", "--scorer", "tooll", "--no-store")
    assert r.code == 2 and "did you mean 'tool'?" in r.err


def test_a_plugin_file_imports_the_modules_beside_it(  # type: ignore[no-untyped-def]
    run_cli, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`from refund_rules import ...` in scorers/refund.py failed (`No module named
    'refund_rules'`) though refund_rules.py sat beside it, from any working directory."""
    import sys

    monkeypatch.setattr(sys, "path", list(sys.path))
    folder = tmp_path / "scorers"
    folder.mkdir()
    (folder / "car_test_refund_rules.py").write_text("TOOL = 'issue_refund'\n", encoding="utf-8")
    (folder / "refund.py").write_text(
        "from car_test_refund_rules import TOOL\n"
        "async def refunded(trajectory):\n"
        "    return float(any(c.name == TOOL for t in trajectory.turns for c in t.action.tool_calls))\n",
        encoding="utf-8",
    )
    try:
        r = run_cli(
            "blame",
            TRACES / "support-refund.json",
            "--scorer",
            f"{folder / 'refund.py'}@refunded",
            "--samples",
            "8",
            "--format",
            "json",
            "--no-store",
        )
    finally:
        sys.modules.pop("car_test_refund_rules", None)
    assert r.code == 0, r.err
    assert json.loads(r.out)["locus"] == 1


def test_car_plugins_says_which_installed_names_a_built_in_takes(  # type: ignore[no-untyped-def]
    run_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin called `regex` was listed as `regex[:ARG]`, though `regex:ARG` is always the
    built-in's; one called `recorded` as usable bare, though `recorded` is the built-in's."""
    from importlib.metadata import EntryPoint

    import car.plugins

    listed = {
        "car.scorers": [
            EntryPoint(name=n, value=f"pkg:{n}", group="car.scorers")
            for n in ("regex", "recorded", "mine")
        ]
    }
    monkeypatch.setattr(car.plugins, "entry_points", lambda group: listed.get(group, []))
    r = run_cli("plugins")
    assert r.code == 0
    rows = {line.split()[0]: line for line in r.out.splitlines() if "pkg:" in line}
    assert set(rows) == {"regex[:ARG]", "recorded:ARG", "mine[:ARG]"}
    assert "(never used: regex:ARG names the built-in)" in rows["regex[:ARG]"]
    assert "never used" not in rows["recorded:ARG"] + rows["mine[:ARG]"]


@pytest.mark.parametrize(
    ("option", "word", "method"), [("--policy", "a policy", "act"), ("--env", "an environment", "step")]
)
def test_an_async_function_named_as_a_policy_or_environment_is_one_line(  # type: ignore[no-untyped-def]
    run_cli, tmp_path, option: str, word: str, method: str
) -> None:
    """It was called as a factory: a coroutine never awaited (Python's RuntimeWarning on stderr) and
    a line about `a coroutine, which has no act()`, or a TypeError from the call."""
    plugin = tmp_path / "fns.py"
    plugin.write_text(f"async def {method}(*args):\n    return None\n", encoding="utf-8")
    spec = f"{plugin}@{method}"
    assert _refused(run_cli, option, spec) == (
        f"{word.split()[1]} {spec!r}: {method} is an "
        f"async function; {word} is an object with async {method}() (or a plain function, a "
        "factory, that returns one)"
    )


def test_an_upgraded_plugin_is_not_served_its_old_version_s_rollouts(  # type: ignore[no-untyped-def]
    run_cli, monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """A plugin file's rollouts are keyed by its code; an installed plugin's were keyed by its spec
    alone, so after an upgrade the store served what the old version had scored."""
    import car.specs

    class _Dist:
        name = "tool-plugin"
        version = "1.0"

    class _Installed(_EntryPoint):
        dist = _Dist()

    monkeypatch.setattr(
        car.specs, "entry_points", lambda group: [_Installed()] if group == "car.scorers" else []
    )
    store = str(tmp_path / "store.sqlite")
    trace = TRACES / "support-refund.json"

    def stored() -> bool:
        r = run_cli("blame", trace, "--scorer", "tool:issue_refund", "--samples", "4", "--store", store)
        assert r.code == 0, r.err
        (line,) = [x for x in r.out.splitlines() if x.startswith("budget:")]
        return re.search(r"^budget: (\d+) rollouts \(\1 stored\)", line) is not None

    assert (stored(), stored()) == (False, True)
    _Dist.version = "2.0"
    assert (stored(), stored()) == (False, True)


def test_a_plugin_that_fails_to_import_names_its_error_s_type(  # type: ignore[no-untyped-def]
    run_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file plugin's import failure says `SyntaxError: ...`; an installed plugin's said only
    the message ("invalid syntax"), which does not say what kind of failure it was."""
    import car.specs

    class _Broken(_EntryPoint):
        def load(self) -> Any:
            raise ModuleNotFoundError("No module named 'tool_plugin'")

    monkeypatch.setattr(
        car.specs, "entry_points", lambda group: [_Broken()] if group == "car.scorers" else []
    )
    assert _refused(run_cli, "--scorer", "tool:x") == (
        "scorer 'tool:x': plugin 'tool_plugin:make' failed to import: "
        "ModuleNotFoundError: No module named 'tool_plugin'"
    )
