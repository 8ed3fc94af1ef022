"""Who&When on the real logs: every file imports and validates, and the labels map onto step indices."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from cli_helpers import run

from car.importers import load_any
from car.trace import parse_trace


def _speaker(entry: dict[str, str]) -> str:
    return entry.get("name") or entry["role"]


@pytest.mark.parametrize("name", ["Hand-Crafted/1.json", "Algorithm-Generated/1.json"])
def test_history_i_is_step_i(who_and_when: Path, name: str) -> None:
    path = who_and_when / name
    raw = json.loads(path.read_text())
    t = load_any(path)
    assert len(t.steps) == len(raw["history"])
    for i, entry in enumerate(raw["history"]):
        step = t.steps[i]
        assert step.index == i
        assert step.action.text == entry["content"]
        speaker = _speaker(entry)
        assert step.actor == speaker or step.metadata.get("speaker") == speaker


def test_the_labelled_step_is_the_step_car_shows_with_that_index(who_and_when: Path) -> None:
    path = who_and_when / "Hand-Crafted" / "1.json"
    raw = json.loads(path.read_text())
    t = load_any(path)
    label = t.metadata["who_and_when"]
    k = int(raw["mistake_step"])
    assert label["mistake_step"] == k
    assert t.steps[k].action.text == raw["history"][k]["content"]
    assert t.steps[k].actor == raw["mistake_agent"]
    assert label["mistake_reason"] == raw["mistake_reason"]
    assert t.metadata["ground_truth"] == raw["ground_truth"]
    assert t.task == raw["question"]
    assert t.fidelity is not None and t.fidelity.class_ == "C"


def test_magentic_roles_are_one_agent_with_the_qualifier_kept(who_and_when: Path) -> None:
    t = load_any(who_and_when / "Hand-Crafted" / "1.json")
    ids = {a.id: a.kind for a in t.actors}
    assert ids["Orchestrator"] == "agent" and ids["human"] == "user"
    assert not any("(" in a for a in ids)
    qualified = [s for s in t.steps if "speaker" in s.metadata]
    assert qualified and all(s.metadata["speaker"].startswith(s.actor + " (") for s in qualified)


def test_algorithm_generated_keeps_system_prompts_and_terminal_is_not_a_decision(
    who_and_when: Path,
) -> None:
    raw = json.loads((who_and_when / "Algorithm-Generated" / "1.json").read_text())
    t = load_any(who_and_when / "Algorithm-Generated" / "1.json")
    for name, prompt in raw["system_prompt"].items():
        if any(a.id == name for a in t.actors):
            assert t.actor(name).system_prompt == prompt
    terminal = [a for a in t.actors if a.id == "Computer_terminal"]
    assert terminal and terminal[0].kind == "tool" and not terminal[0].decides


@pytest.mark.slow
def test_all_184_logs_import_and_validate(
    who_and_when: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = sorted(who_and_when.glob("*/*.json"))
    assert len(files) == 184
    per_set: Counter[str] = Counter()
    steps: Counter[str] = Counter()
    agents: Counter[str] = Counter()
    mismatched = 0
    for f in files:
        raw = json.loads(f.read_text())
        t = load_any(f)
        again = parse_trace(json.loads(t.to_json()), source=str(f))
        assert again == t
        k = int(raw["mistake_step"])
        assert t.metadata["who_and_when"]["mistake_step"] == k
        assert t.steps[k].action.text == raw["history"][k]["content"]
        assert len(t.steps) == len(raw["history"])
        assert t.metadata["expected"] == raw["ground_truth"]
        if t.steps[k].actor != raw["mistake_agent"]:
            mismatched += 1
            assert t.fidelity is not None
            assert "label-speaker-mismatch" in {w.code for w in t.fidelity.warnings}
        per_set[f.parent.name] += 1
        steps[f.parent.name] += len(t.steps)
        agents[f.parent.name] += sum(1 for a in t.actors if a.kind == "agent")
    with capsys.disabled():
        for name in sorted(per_set):
            print(
                f"\nWho&When {name}: {per_set[name]} logs, {steps[name]} steps "
                f"(mean {steps[name] / per_set[name]:.1f}), {agents[name]} agent actors "
                f"(mean {agents[name] / per_set[name]:.2f})"
            )
        print(f"Who&When: labelled agent differs from the labelled step's speaker in {mismatched} logs")
    # `car validate DIR` agrees: every file ok, exit 0
    assert run(["validate", str(who_and_when)]) == 0
    assert "184 files, 184 runs ok, 0 failed" in capsys.readouterr().out


def test_an_extract_judge_checks_answers_against_the_ground_truth(who_and_when: Path) -> None:
    # `llm-judge:...?mode=extract` needs the expected answer; an imported log supplies it.
    from car.backends.judge import LLMJudge
    from car.backends.options import configure

    path = who_and_when / "Hand-Crafted" / "1.json"
    t = load_any(path)
    with configure(base_url="http://127.0.0.1:9/v1"):  # built, never called
        judge = LLMJudge(t, "openai:m?mode=extract")
    assert judge.expected == json.loads(path.read_text())["ground_truth"]


def _log(tmp_path: Path, **fields: object) -> Path:
    f = tmp_path / "log.json"
    f.write_text(json.dumps({"mistake_agent": "A", "mistake_step": "0", **fields}))
    return f


def test_agents_who_never_speak_keep_their_system_prompts(tmp_path: Path) -> None:
    f = _log(
        tmp_path,
        history=[{"content": "hi", "role": "user", "name": "A"}],
        system_prompt={"A": "You are A.", "Silent_Expert": "You check facts.", "Blank": ""},
    )
    t = load_any(f)
    assert [a.id for a in t.actors] == ["A", "Silent_Expert"]
    assert t.actor("Silent_Expert").system_prompt == "You check facts."
    assert [s.actor for s in t.steps] == ["A"]


def test_every_algorithm_generated_system_prompt_is_kept(who_and_when: Path) -> None:
    # 14 of the 126 logs name an agent in system_prompt who never speaks (e.g. 89.json).
    for f in sorted((who_and_when / "Algorithm-Generated").glob("*.json")):
        raw = json.loads(f.read_text())
        prompts = {a.id: a.system_prompt for a in load_any(f).actors}
        for name, prompt in raw["system_prompt"].items():
            if prompt.strip():
                assert prompts.get(name) == prompt, (f.name, name)


def test_null_content_and_null_system_prompts_are_accepted(tmp_path: Path) -> None:
    call = [{"id": "c1", "type": "function", "function": {"name": "run", "arguments": "{}"}}]
    f = _log(
        tmp_path,
        history=[
            {"content": "go", "role": "user", "name": "A"},
            {"content": None, "role": "assistant", "name": "B", "tool_calls": call},
            {"content": None, "role": "user", "name": "A"},
        ],
        system_prompt={"A": None, "B": "You are B."},
    )
    t = load_any(f)
    assert [s.action.text for s in t.steps] == ["go", "", ""]
    assert t.actor("A").system_prompt is None and t.actor("B").system_prompt == "You are B."
    # the tool calls are not replayed (class C) but kept, and the warning says so
    assert t.steps[1].metadata["fields"] == {"tool_calls": call}
    assert t.fidelity is not None
    warning = next(w for w in t.fidelity.warnings if w.code == "items-skipped")
    assert "'tool_calls'" in warning.message and "history[1]" in warning.message


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({}, "$.history: missing; expected an array of messages ({content, role, name?})"),
        (
            {"history": None},
            "$.history: expected an array of messages ({content, role, name?}), got null",
        ),
    ],
)
def test_a_log_without_history_says_it_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: dict[str, object], says: str
) -> None:
    """A log with no `history` at all said "$.history: expected an array, got null", as if it held
    a null."""
    f = tmp_path / "log.json"
    f.write_text(json.dumps({"question": "q", "mistake_agent": "A", "mistake_step": "0", **body}))
    capsys.readouterr()
    assert run(["import", "--from", "who-and-when", str(f)]) == 2
    assert capsys.readouterr().err == f"car: error: {f}: {says}\n"
