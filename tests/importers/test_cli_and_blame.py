"""`car import`, `car blame` on foreign files, the fidelity class in the report, importer plugins."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run
from rich.console import Console

import car
from car.importers import Document, import_file, load_any, registry
from car.protocols import Decision, Trajectory
from car.render import render_table
from car.rng import EventKey
from car.trace import Action, Trace, load_trace

GROUP_CHAT = {
    "question": "What is 6 x 7?",
    "ground_truth": "42",
    "history": [
        {"role": "user", "name": "Planner", "content": "Solver, compute 6 x 7."},
        {"role": "assistant", "name": "Solver", "content": "6 x 7 = 48"},
        {"role": "user", "name": "Planner", "content": "FINAL: 48"},
    ],
    "mistake_agent": "Solver",
    "mistake_step": "1",
    "mistake_reason": "arithmetic slip",
}


def test_import_writes_a_native_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "chat.json"
    src.write_text(json.dumps(GROUP_CHAT))
    out = tmp_path / "trace.json"
    assert run(["import", str(src), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "who-and-when" in err and "class C" in err
    t = load_trace(out)
    assert t.source is not None and t.source.format == "who-and-when"
    assert t.metadata["who_and_when"]["mistake_step"] == 1
    assert t.steps[1].actor == "Solver"


def test_import_to_stdout_and_several_runs_to_a_directory(
    tmp_path: Path, fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["import", str(fixtures / "responses.json")]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == "car.trace/v1"
    # two runs: a directory is required, and gets one file per run
    assert run(["import", str(fixtures / "tau_bench.json")]) == 2
    assert "--item N" in capsys.readouterr().err
    out = tmp_path / "runs"
    assert run(["import", str(fixtures / "tau_bench.json"), "-o", str(out)]) == 0
    assert len(list(out.glob("*.json"))) == 2
    assert (
        run(
            ["import", str(fixtures / "tau_bench.json"), "--item", "1", "-o", str(tmp_path / "one.json")]
        )
        == 0
    )
    assert load_trace(tmp_path / "one.json").outcome.failed is False
    assert run(["import", str(fixtures / "tau_bench.json"), "--item", "5"]) == 2
    assert "out of range" in capsys.readouterr().err


class Recorded:
    """Replays the recorded action at every step (a stand-in for a backend)."""

    spec = "test:recorded"

    def __init__(self, trace: Trace) -> None:
        self.trace = trace

    async def act(self, decision: Decision, key: EventKey) -> Action:
        steps = self.trace.steps
        return steps[decision.step].action if decision.step < len(steps) else Action(text="")


class WrongAnswer:
    spec = "test:wrong-answer"
    deterministic = True

    async def score(self, trajectory: Trajectory, key: EventKey) -> float | None:
        return 1.0 if "48" in trajectory.final_text else 0.0


def test_blame_on_a_class_c_import_reports_the_class_and_the_role_play_note(tmp_path: Path) -> None:
    src = tmp_path / "chat.json"
    src.write_text(json.dumps(GROUP_CHAT))
    trace = load_any(src)
    report = car.blame(src, policy=Recorded(trace), scorer=WrongAnswer(), samples=4, match_samples=1)
    assert report.fidelity == "C"
    assert report.trace_path == str(src)
    assert any("speaker and text only" in n for n in report.notes)
    console = Console(record=True, width=200, file=io.StringIO(), no_color=True)
    render_table(report, console)
    text = console.export_text()
    assert "trace fidelity: class C" in text
    assert "role-play each agent from its prompt" in text


def test_blame_on_a_native_trace_has_no_fidelity() -> None:
    root = Path(__file__).resolve().parents[2]
    report = car.blame(root / "traces" / "pivot.json", samples=4, match_samples=1)
    assert report.fidelity is None


class Shouting:
    """A toy plugin: lines of SPEAKER: text."""

    name = "shouting"
    description = "SPEAKER: text transcripts in a JSON object {shout: [...]}"

    def sniff(self, data: Any, path: str) -> bool:
        return isinstance(data, dict) and "shout" in data

    def convert(self, doc: Document) -> list[Trace]:
        from car.importers import Builder

        b = Builder(doc, self.name)
        for i, line in enumerate(doc.at.obj(doc.data)["shout"]):
            who, _, text = (doc.at / "shout" / i).string(line).partition(": ")
            b.step(who, text)
        return [b.build(trace_id="shout", fidelity="C", locator="$", at=doc.at)]


class _EP:
    name = "shouting"
    value = "tests:Shouting"

    def load(self) -> type[Shouting]:
        return Shouting


def test_importer_plugins_come_from_the_entry_point_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[str] = []

    def fake_entry_points(group: str) -> list[_EP]:
        seen.append(group)
        return [_EP()]

    monkeypatch.setattr(registry, "entry_points", fake_entry_points)
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"shout": ["A: hi", "B: hello"]}))
    (t,) = import_file(f)
    assert "car.importers" in seen
    assert t.source is not None and t.source.format == "shouting"
    assert [s.actor for s in t.steps] == ["A", "B"]
    assert run(["validate", str(f), "--from", "shouting"]) == 0
    assert "from shouting" in capsys.readouterr().out


def test_the_importer_plugins_are_looked_up_once_however_many_files_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The lookup reads every installed distribution's metadata: done per file, it was most of the
    # time a folder of a thousand traces took to load before the run's estimate showed.
    seen: list[str] = []

    def counting_entry_points(group: str) -> list[_EP]:
        seen.append(group)
        return [_EP()]

    monkeypatch.setattr(registry, "entry_points", counting_entry_points)
    for i in range(5):
        f = tmp_path / f"s{i}.json"
        f.write_text(json.dumps({"shout": ["A: hi", "B: hello"]}))
        assert load_any(f).source is not None
    assert seen == ["car.importers"]


def test_inspect_logs_read_through_inspect_ai(tmp_path: Path, fixtures: Path) -> None:
    pytest.importorskip("inspect_ai", reason="the optional extra car-blame[inspect] is not installed")
    from inspect_ai.log import EvalLog, write_eval_log

    log = EvalLog.model_validate(json.loads((fixtures / "inspect_log.json").read_text()))
    for suffix in (".eval", ".json"):
        path = tmp_path / f"run{suffix}"
        write_eval_log(log, str(path))
        (t,) = import_file(path)
        assert t.source is not None and t.source.format == "inspect"
        assert t.fidelity is not None and t.fidelity.class_ == "A"
        assert t.steps[0].sampling is not None and t.steps[0].sampling.seed == 7
        assert t.steps[0].observations[0].content == "4"
        assert t.outcome.failed is True


class Broken(Shouting):
    name = "broken"

    def convert(self, doc: Document) -> list[Trace]:
        raise ZeroDivisionError("oops")


class _BrokenEP(_EP):
    name = "broken"

    def load(self) -> type[Shouting]:
        return Broken


def test_an_importer_bug_is_one_line_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(registry, "entry_points", lambda group: [_BrokenEP()])
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"shout": []}))
    assert run(["validate", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{f}: the broken importer failed: ZeroDivisionError: oops" in err


class Capturing:
    """Records the decisions it is asked about and answers with the recorded action."""

    spec = "test:capturing"

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.decisions: list[Decision] = []

    async def act(self, decision: Decision, key: EventKey) -> Action:
        self.decisions.append(decision)
        return self.trace.steps[decision.step].action


def test_class_a_contexts_reach_the_policy_exactly(fixtures: Path) -> None:
    import asyncio

    from car.builtins import RecordedEnvironment, ToolCalledScorer
    from car.replay import Replay

    trace = import_file(fixtures / "otel_genai.json")[0]
    policy = Capturing(trace)
    replay = Replay(trace, policy, RecordedEnvironment(trace), ToolCalledScorer("weather"))
    action = asyncio.run(replay.sample_recorded(1, 0))
    assert action == trace.steps[1].action
    (decision,) = policy.decisions
    assert decision.messages() == trace.steps[1].context
    assert decision.sampling == trace.steps[1].sampling
    # the recorded environment serves the imported observations for the recorded calls
    env = RecordedEnvironment(trace)
    state = asyncio.run(env.restore(()))
    result = asyncio.run(env.step(state, 0, "planner", trace.steps[0].action, EventKey(0, 0, 0, "env")))
    assert {o.call_id: o.content for o in result.observations} == {"call_p": "rain", "call_r": "sun"}


class SolverCoin:
    """The solver gets 6 x 7 right half the time; the planner reports what the solver said."""

    spec = "test:solver-coin"

    async def act(self, decision: Decision, key: EventKey) -> Action:
        if decision.actor.id == "Solver":
            return Action(text="6 x 7 = 42" if key.uniform() < 0.5 else "6 x 7 = 48")
        said = decision.history[-1].action.text if decision.history else ""
        if decision.step == 0:
            return Action(text="Solver, compute 6 x 7.")
        return Action(text="FINAL: " + said.rsplit("= ", 1)[-1])


def test_a_labelled_log_shows_and_counts_the_label_agreement(tmp_path: Path) -> None:
    from car.batch import BatchOptions, blame_many
    from car.outputs import counts_line, render_output

    right = tmp_path / "right.json"
    right.write_text(json.dumps(GROUP_CHAT))  # labelled step 1 by Solver
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({**GROUP_CHAT, "mistake_step": "2", "mistake_agent": "Planner"}))
    report = car.blame(right, policy=SolverCoin(), scorer=WrongAnswer(), samples=32, match_samples=1)
    assert report.locus == 1 and report.labelled is not None
    assert (report.labelled.step, report.labelled.agent) == (1, "Solver")
    console = Console(record=True, width=200, file=io.StringIO(), no_color=True)
    render_table(report, console)
    assert (
        "labelled mistake (who-and-when): step 1 by Solver; car names step 1 (Solver): "
        "step agrees, agent agrees" in console.export_text()
    )
    from car.html import render_html

    page = render_html(report)
    assert "<dt>label</dt><dd>labelled mistake (who-and-when): step 1 by Solver;" in page
    options = BatchOptions(policy=SolverCoin(), scorer=WrongAnswer(), samples=32, match_samples=1)
    results = blame_many([right, wrong], options=options)
    assert [r.status for r in results] == ["ok", "ok"]
    line = counts_line(results)
    assert line.endswith("; labelled step named in 1 of 2, labelled agent in 1 of 2")
    assert "step differs, agent differs" in render_output("markdown", results, batch=True)
    # A trace without a label says nothing about labels.
    plain = car.blame(Path(__file__).resolve().parents[2] / "traces" / "pivot.json", samples=4)
    assert plain.labelled is None


def test_an_abstention_beside_a_label_reads_as_one(tmp_path: Path) -> None:
    """car naming no step was shown as a wrong answer ("car names no step: step differs, agent
    differs"); it is an abstention, in the table, Markdown and HTML alike."""
    from car.html import render_html
    from car.outputs import counts_line, render_output

    src = tmp_path / "chat.json"
    src.write_text(json.dumps(GROUP_CHAT))  # labelled step 1 by Solver
    trace = load_any(src)
    # The record replayed at every step: nothing re-decided rescues anything, so car abstains.
    report = car.blame(src, policy=Recorded(trace), scorer=WrongAnswer(), samples=4, match_samples=1)
    assert report.locus is None and report.labelled is not None
    said = (
        "labelled mistake (who-and-when): step 1 by Solver; car abstains (names no step), so there "
        "is nothing to compare"
    )
    console = Console(record=True, width=300, file=io.StringIO(), no_color=True)
    render_table(report, console)
    assert said in console.export_text()
    assert f"<dt>label</dt><dd>{said}</dd>" in render_html(report)
    options = car.BatchOptions(policy=Recorded(trace), scorer=WrongAnswer(), samples=4, match_samples=1)
    results = car.blame_many([src], options=options)
    markdown = render_output("markdown", results, batch=True)
    assert said in markdown and "differs" not in markdown
    # The counts still say the labelled step was not named.
    assert counts_line(results).endswith("labelled step named in 0 of 1, labelled agent in 0 of 1")


class DownFor(SolverCoin):
    """SolverCoin whose backend fails on every decision of the task it names."""

    def __init__(self, task: str) -> None:
        self.task = task

    async def act(self, decision: Decision, key: EventKey) -> Action:
        if decision.task == self.task:
            raise RuntimeError("server down")
        return await super().act(decision, key)


def test_a_trace_whose_backend_failed_is_not_counted_against_the_label(tmp_path: Path) -> None:
    """Its partial report names no step because the trace failed: the count said "named in 1 of 2"
    for one trace attributed rightly and one the backend lost."""
    from car.outputs import counts_line

    right = tmp_path / "right.json"
    right.write_text(json.dumps(GROUP_CHAT))
    down = tmp_path / "down.json"
    down.write_text(json.dumps({**GROUP_CHAT, "question": "What is 6 x 8?"}))
    policy = DownFor("What is 6 x 8?")
    options = car.BatchOptions(policy=policy, scorer=WrongAnswer(), samples=32, match_samples=1)
    results = car.blame_many([right, down], options=options)
    assert [r.status for r in results] == ["ok", "backend-error"]
    assert results[1].report is not None  # the partial report is kept
    line = counts_line(results)
    assert line.endswith("labelled step named in 1 of 1, labelled agent in 1 of 1"), line


class SolverWrong:
    """The failure is the solver's wrong product, whatever the planner then reports."""

    spec = "test:solver-wrong"
    deterministic = True

    async def score(self, trajectory: Trajectory, key: EventKey) -> float | None:
        return float(any(t.actor == "Solver" and "48" in t.action.text for t in trajectory.turns))


def test_a_step_credited_by_shapley_alone_is_compared_with_the_label(tmp_path: Path) -> None:
    """The summary calls a trace `blamed` when the contrastive estimate abstained and Shapley
    credited one step; the label line said "car abstains (names no step)" and the count a miss."""
    from car.batch import TraceResult
    from car.outputs import counts_line, summary_rows
    from car.report import label_line

    src = tmp_path / "chat.json"
    src.write_text(json.dumps(GROUP_CHAT))  # labelled step 1 by Solver
    report = car.blame(
        src, policy=SolverCoin(), scorer=SolverWrong(), samples=32, match_samples=1, method="shapley"
    )
    assert report.shapley is not None
    abstained = report.model_copy(update={"locus": None, "locus_actor": None, "shared": []})
    result = TraceResult(str(src), report.trace_id, "ok", abstained)
    assert summary_rows([result])[0]["outcome"] == "blamed"
    assert label_line(abstained) == (
        "labelled mistake (who-and-when): step 1 by Solver; car's Shapley credit goes to step 1 "
        "(Solver): step agrees, agent agrees"
    )
    assert counts_line([result]).endswith("labelled step named in 1 of 1, labelled agent in 1 of 1")


def test_validate_shows_file_names_and_errors_literally(
    tmp_path: Path, fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "run[bold].json").write_text((fixtures / "responses.json").read_text())
    (tmp_path / "bad[red].json").write_text('{"x":')
    assert run(["validate", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:3] for line in out.splitlines() if "].json" in line}
    assert rows["bad[red].json"] == ["FAILED", f"{tmp_path / 'bad[red].json'}:"]
    assert rows["run[bold].json"][0] == "openai-responses"


def test_validate_dir_shows_a_run_that_cannot_be_imported_as_a_failed_row(
    tmp_path: Path, fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run was skipped with a warning on stderr only: the table listed the good run as `#0`,
    said "0 failed" and exited 0."""
    runs = json.loads((fixtures / "tau_bench.json").read_text())
    runs[0]["traj"] = []
    (tmp_path / "tau.json").write_text(json.dumps(runs))
    assert run(["validate", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    rows = {line.split()[1]: line.split()[2] for line in out.splitlines() if "tau.json" in line}
    assert rows == {"#0": "FAILED", "#1": "tau-bench"}
    assert out.rstrip().endswith("1 file, 1 run ok, 1 failed")


def test_validate_of_one_file_says_what_each_warning_is(
    fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said "2 warnings" and nothing more: the fix a warning names (which variable turns content
    capture on, ...) was only in the JSON trace or in blame's notes."""
    assert run(["validate", str(fixtures / "anthropic.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "2 warnings" in lines[0]
    assert lines[1] == (
        "  warning attachments-unresolved: images or documents were not imported (text only; first at "
        "$.messages[2].content[2])"
    )
    assert lines[2].startswith("  warning thinking-not-replayed: 1 thinking block is kept verbatim")
    assert len(lines) == 3


def test_import_of_several_runs_refuses_a_file_for_o(
    tmp_path: Path, fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = fixtures / "tau_bench.json"
    for target in (tmp_path / "out.json", tmp_path / "existing"):
        if target.name == "existing":
            target.write_text("keep me")
        assert run(["import", str(src), "-o", str(target)]) == 2
        assert capsys.readouterr().err.splitlines() == [
            f"car: error: {src}: holds 2 runs; -o {target} names a file; write them to a directory "
            "with -o DIR, or pick one with --item N (0 to 1)"
        ]
    assert not (tmp_path / "out.json").exists()
    assert (tmp_path / "existing").read_text() == "keep me"
    # --item picks one run, which -o FILE takes
    assert run(["import", str(src), "--item", "1", "-o", str(tmp_path / "out.json")]) == 0
    assert load_trace(tmp_path / "out.json").id == "tau-bench/tau_bench/task-4/trial-0"


def test_import_makes_missing_parent_directories(
    tmp_path: Path, fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "new" / "dir" / "x.json"
    assert run(["import", str(fixtures / "responses.json"), "-o", str(out)]) == 0
    assert load_trace(out).version == "car.trace/v1"
    (tmp_path / "blocker").write_text("a file")
    bad = tmp_path / "blocker" / "x.json"
    capsys.readouterr()
    assert run(["import", str(fixtures / "responses.json"), "-o", str(bad)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"car: error: {bad}: cannot write the trace ({tmp_path / 'blocker'} is not a directory)"
    ]


def test_import_of_an_emoji_cut_in_half_writes_the_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "chat.json"
    src.write_text(
        json.dumps({"messages": [{"role": "user", "content": "cut \ud83d"}, {"role": "assistant"}]})
    )
    out = tmp_path / "out" / "trace.json"
    assert run(["import", str(src), "-o", str(out)]) == 0
    assert "invalid-unicode" in capsys.readouterr().err
    assert load_trace(out).steps[0].action.text == "cut \ufffd"
    assert [p.name for p in out.parent.iterdir()] == ["trace.json"]


def test_a_failed_write_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from car.errors import InputError
    from car.importers import convert

    src = tmp_path / "src" / "chat.json"
    src.parent.mkdir()
    src.write_text(json.dumps(GROUP_CHAT))
    out = tmp_path / "out" / "trace.json"

    def fail(a: object, b: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(convert.os, "replace", fail)
    assert run(["import", str(src), "-o", str(out)]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"car: error: {out}: cannot write the trace (No space left on device)"
    )
    assert list(out.parent.iterdir()) == []
    # text UTF-8 cannot encode (here a native trace built in memory) is refused before writing
    trace = load_any(src)
    cut = trace.model_copy(update={"task": "cut \ud83d"})
    with pytest.raises(InputError, match="lone UTF-16 surrogate"):
        convert._write(out, cut)
    assert list(out.parent.iterdir()) == []


def test_import_refuses_an_o_that_would_overwrite_the_file_it_imports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`car import self.json -o self.json` replaced the input with the converted trace and exited 0
    (`car blame -o` refuses to overwrite the trace it attributes)."""
    src = tmp_path / "self.json"
    src.write_text(json.dumps(GROUP_CHAT))
    before = src.read_bytes()
    for spelled in (str(src), str(tmp_path / "." / "self.json")):
        assert run(["import", str(src), "-o", spelled]) == 2
        assert capsys.readouterr().err.splitlines() == [
            f"car: error: -o {spelled} would overwrite {src}, the file it imports; write the trace "
            "elsewhere"
        ]
    assert src.read_bytes() == before
    # a trace written into a directory under the name of the file it was read from
    out = tmp_path / "runs"
    assert run(["import", str(src), "-o", f"{out}/"]) == 0
    (written,) = out.iterdir()
    again = written.read_bytes()
    capsys.readouterr()
    assert run(["import", str(written), "-o", str(out)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"car: error: -o {out} would overwrite {written}, the file it imports; write the trace elsewhere"
    ]
    assert written.read_bytes() == again and list(tmp_path.glob("**/*.tmp")) == []


def test_import_o_with_a_trailing_slash_is_a_directory_made_if_missing(
    tmp_path: Path, fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-o newdir/` wrote one run to a plain file called `newdir`."""
    out = tmp_path / "new" / "dir"
    assert run(["import", str(fixtures / "responses.json"), "-o", f"{out}/"]) == 0
    assert out.is_dir()
    (written,) = out.iterdir()
    assert written.suffix == ".json" and load_trace(written).version == "car.trace/v1"
    assert capsys.readouterr().err.splitlines()[-1] == f"wrote 1 trace to {out}"
    # several runs: a name ending in .json is a directory too when it ends in /
    runs = tmp_path / "runs.json"
    assert run(["import", str(fixtures / "tau_bench.json"), "-o", f"{runs}/"]) == 0
    assert runs.is_dir() and len(list(runs.glob("*.json"))) == 2


class _FullDisk(io.StringIO):
    """stdout on a full disk: a write, or only the flush (buffered output), raises ENOSPC."""

    def __init__(self, on: str) -> None:
        super().__init__()
        self.on = on

    def write(self, text: str) -> int:
        if self.on == "write":
            raise OSError(28, "No space left on device")
        return super().write(text)

    def flush(self) -> None:
        raise OSError(28, "No space left on device")


@pytest.mark.parametrize("on", ["write", "flush"])
@pytest.mark.parametrize(
    ("argv", "kept"),
    [
        (["validate", "anthropic.json"], "car-validate-*.txt"),
        (["validate", "."], "car-validate-*.txt"),
        (["import", "responses.json"], "car-trace-*.json"),
        (["import", "responses.json", "-o", "-"], "car-trace-*.json"),
    ],
)
def test_validate_and_import_keep_what_stdout_refuses(
    tmp_path: Path,
    fixtures: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    on: str,
    argv: list[str],
    kept: str,
) -> None:
    """One error line naming where the output was saved, exit 2: it was a traceback, and the
    converted trace (or a directory's table) was lost."""
    import shutil
    import sys
    import tempfile

    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    for name in ("anthropic.json", "responses.json"):
        shutil.copy(fixtures / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdout", _FullDisk(on))
    code = run(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    (saved,) = (tmp_path / "tmp").glob(kept)
    what = "the trace" if argv[0] == "import" else "the results"
    assert err.splitlines() == [
        f"car: error: stdout: cannot write {what} (No space left on device); saved it to {saved} instead"
    ]
    text = saved.read_text()
    if argv[0] == "import":
        assert Trace.model_validate_json(text).source is not None
    else:
        assert "anthropic.json" in text and ("ok:" in text or "openai-responses" in text)
