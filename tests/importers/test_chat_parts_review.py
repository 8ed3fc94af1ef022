"""OpenAI-style messages never lose a turn, a part or reasoning without a word: an appended
response's first choice without its message is refused at its place; content parts with no text
that are no attachment are named by `items-skipped`; images (content parts, mini-swe-agent v2's,
an Ollama message's `images`) give `attachments-unresolved`; an Ollama message's `thinking` is its
action's reasoning; and a chat request with one broken message names it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run, warnings, write

from car.importers import load_any

USER = {"role": "user", "content": "q"}


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


def test_content_parts_without_text_are_named_not_dropped_unsaid(tmp_path: Path) -> None:
    video = {"type": "video_url", "video_url": {"url": "https://example.com/v.mp4"}}
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    data = {
        "messages": [
            {"role": "system", "content": "watch"},  # no Anthropic request: openai-chat reads it
            {"role": "user", "content": [{"type": "text", "text": "what happens?"}, video]},
            {"role": "assistant", "content": [thinking, {"type": "text", "text": "a fall"}]},
            {"role": "user", "content": [{"type": "video_url", "video_url": {"url": "x"}}, {}]},
        ]
    }
    t = load_any(write(tmp_path, data))
    assert [s.action.text for s in t.steps] == ["what happens?", "a fall", ""]
    assert warnings(t)["items-skipped"] == (
        "content parts car does not import were left out: 'video_url' (first at "
        "$.messages[1].content[1]), 'thinking' (first at $.messages[2].content[0]), without a type "
        "(first at $.messages[3].content[1])"
    )


def test_text_parts_and_attachments_are_not_named_as_skipped(tmp_path: Path) -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}
    data = {
        "messages": [
            {"role": "system", "content": "look"},
            {"role": "user", "content": [{"type": "text", "text": "what is it?"}, image, "plain"]},
            {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
        ]
    }
    codes = warnings(load_any(write(tmp_path, data)))
    assert "items-skipped" not in codes
    assert "attachments-unresolved" in codes


def test_images_in_a_mini_swe_agent_v2_trajectory_are_warned_about_where_they_sit(
    tmp_path: Path,
) -> None:
    # With a multimodal_regex, mini-swe-agent v2 expands every message it saves into content parts;
    # a screenshot the agent looked at becomes an image_url part of the tool's result.
    screenshot = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    data = {
        "trajectory_format": "mini-swe-agent-1.1",
        "info": {"mini_version": "2.0.0", "exit_status": "Submitted"},
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "You can run bash."}]},
            {"role": "user", "content": [{"type": "text", "text": "Fix the layout."}]},
            {"role": "assistant", "content": "Look first.", "tool_calls": [call]},
            {
                "role": "tool",
                "tool_call_id": "c1",
                "content": [{"type": "text", "text": "saved shot.png"}, screenshot],
            },
            {"role": "assistant", "content": "Done."},
        ],
    }
    t = load_any(write(tmp_path, data, "run.traj.json"))
    assert t.steps[0].observations[0].content == "saved shot.png"
    assert warnings(t)["attachments-unresolved"] == (
        "images or files in messages were not imported (text only; first at $.messages[3].content[1])"
    )


@pytest.mark.parametrize(
    ("broken", "said"),
    [
        ({"content": "and then?"}, "$.messages[2].role: missing; expected a role (system, "),
        ({"role": None, "content": "and then?"}, "$.messages[2].role: expected a role (system, "),
        ("and then?", '$.messages[2]: expected a chat message {role, content}, got the string "and'),
    ],
)
def test_a_chat_request_with_one_broken_message_names_it_not_an_unknown_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], broken: Any, said: str
) -> None:
    messages = [{"role": "system", "content": "s"}, USER, broken]
    f = write(tmp_path, {"model": "gpt-4o", "messages": messages})
    for command in (["validate"], ["import"], ["blame", "--policy", "sim:pivot"]):
        assert run([command[0], str(f), *command[1:]]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"car: error: {f}: {said}") and err.count("\n") == 1, err


def test_images_beside_an_ollama_message_s_text_are_warned_about_where_they_sit(
    tmp_path: Path,
) -> None:
    # Ollama's native /api/chat messages carry images as a list of base64 strings beside the text.
    data = {
        "model": "llava",
        "messages": [
            {"role": "user", "content": "what is in this picture?", "images": ["iVBORw0KGgo="]},
            {"role": "assistant", "content": "a cat"},
        ],
    }
    t = load_any(write(tmp_path, data))
    assert [s.action.text for s in t.steps] == ["what is in this picture?", "a cat"]
    assert warnings(t)["attachments-unresolved"] == (
        "images or files in messages were not imported (text only; first at $.messages[0].images[0])"
    )


def test_the_thinking_of_an_ollama_message_is_kept_as_its_reasoning(tmp_path: Path) -> None:
    # Ollama's native /api/chat writes a thinking model's reasoning as the message's `thinking`.
    data = {
        "model": "qwen3",
        "messages": [
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4", "thinking": "Two and two make four."},
        ],
    }
    t = load_any(write(tmp_path, data))
    answer = t.steps[1]
    assert answer.action.text == "4"
    assert answer.action.reasoning == ({"thinking": "Two and two make four."},)
    assert answer.metadata["thinking"] == "Two and two make four."
    assert warnings(t)["thinking-not-replayed"].startswith("1 reasoning field")
