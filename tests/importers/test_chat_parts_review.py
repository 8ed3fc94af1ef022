"""openai-chat never drops a turn or a content part without a word: an appended response's first
choice without its message is refused at its place, and content parts with no text that are no
attachment are named by `items-skipped`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run

from car.importers import load_any
from car.trace import Trace

USER = {"role": "user", "content": "q"}


def write(tmp_path: Path, data: Any, name: str = "run.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def warnings(t: Trace) -> dict[str, str]:
    assert t.fidelity is not None
    return {w.code: w.message for w in t.fidelity.warnings}


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (
            {"messages": [USER], "choices": [{"index": 0, "message": None}]},
            "$.choices[0].message: expected the response's assistant message {role, content}, got null",
        ),
        (  # a streamed chunk's choice: a delta, no message
            {"messages": [USER], "response": {"choices": [{"delta": {"content": "a"}}]}},
            "$.response.choices[0].message: missing; expected the response's assistant message "
            "{role, content}",
        ),
    ],
)
def test_an_appended_choice_without_its_message_is_one_located_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: dict[str, Any], said: str
) -> None:
    path = write(tmp_path, data)
    assert run(["import", str(path), "-o", str(tmp_path / "t.json")]) == 2
    err = capsys.readouterr().err
    assert err == f"car: error: {path}: {said}\n"
    assert not (tmp_path / "t.json").exists()


def test_a_dataset_s_answer_options_are_no_appended_response(tmp_path: Path) -> None:
    data = {"messages": [USER, {"role": "assistant", "content": "B"}], "choices": ["A", "B"]}
    t = load_any(write(tmp_path, data))
    assert [s.action.text for s in t.steps] == ["q", "B"]
