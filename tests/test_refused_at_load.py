"""`car validate` calls ok only what `car blame` can start on, and both say where the problem is.

A trace naming `regex:[` as its scorer was ok for `car validate`; `car blame` then failed with
"scorer 'regex:[': invalid pattern", naming neither the file nor `$.replay.scorer`. A chat log
holding only a user message was ok too; `car blame` refused it with a hint to set
`$.actors[].kind`, which an imported file does not have.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from car.errors import InputError
from car.trace import load_trace
from tests.conftest import TRACES, Result

RunCli = Callable[..., Result]


def _pivot_naming(tmp_path: Path, kind: str, spec: str) -> Path:
    doc = json.loads((TRACES / "pivot.json").read_text(encoding="utf-8"))
    doc["replay"][kind] = spec
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("kind", "spec", "says"),
    [
        ("scorer", "regex:[", "scorer 'regex:[': invalid pattern: "),
        ("scorer", "regex:", "needs a pattern"),
        ("scorer", "tool-called:", "needs a tool name"),
        ("scorer", "llm-judge:gpt-4o-mini?mode=vote", "mode must be 'rubric' or 'extract'"),
        ("scorer", "llm-judge:gpt-4o-mini?colour=red", "unknown option 'colour'"),
        ("env", "llm-sim:gpt-4o-mini?colour=red", "unknown option 'colour'"),
        ("env", "llm-sim:openai:", "name a model after 'openai:'"),
        # A trace chooses no server, no key and no file to send: it could send the user's key from
        # any variable, or any local file, to a server of its choosing.
        (
            "scorer",
            "llm-judge:gpt-4o?base_url=https://elsewhere.example/v1",
            "a trace may not set base_url: it would choose where requests (and the key they carry) "
            "go, or which local file is sent; give this scorer with --scorer",
        ),
        ("scorer", "llm-judge:gpt-4o?mode=rubric&api_key_env=AWS_SECRET", "may not set api_key_env"),
        ("scorer", "llm-judge:gpt-4o?rubric=@/home/me/.ssh/id_rsa", "may not set rubric=@FILE"),
        ("env", "llm-sim:gpt-4o?base_url=http://127.0.0.1:9/v1", "may not set base_url"),
    ],
)
def test_a_bad_built_in_spec_in_a_trace_is_refused_where_it_is(
    run_cli: RunCli, tmp_path: Path, kind: str, spec: str, says: str
) -> None:
    trace = _pivot_naming(tmp_path, kind, spec)
    where = f"{trace}: $.replay.{kind}: "
    with pytest.raises(InputError) as caught:
        load_trace(trace)
    assert str(caught.value).startswith(where) and says in str(caught.value)
    for command in (["validate"], ["blame", "--no-store"]):
        r = run_cli(*command, trace)
        assert r.code == 2 and r.out == ""
        assert r.err.startswith(f"car: error: {where}") and says in r.err
        assert r.err.count("\n") == 1


def test_a_good_built_in_spec_in_a_trace_still_loads(tmp_path: Path) -> None:
    for kind, spec in [
        ("scorer", "regex:refund@A-[0-9]+"),
        ("scorer", "tool-called:refund"),
        ("scorer", "llm-judge:anthropic:claude?mode=extract&expected=42&repeats=3"),
        ("env", "llm-sim:gpt-4o-mini?temperature=0"),
    ]:
        assert getattr(load_trace(_pivot_naming(tmp_path, kind, spec)).replay, kind) == spec


def test_a_chat_log_without_an_assistant_turn_fails_validate_as_it_fails_blame(
    run_cli: RunCli, tmp_path: Path
) -> None:
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}), encoding="utf-8")
    expected = (
        f"car: error: {chat}: no decision steps: the openai-chat file records no assistant turn, "
        "so there is nothing to attribute\n"
    )
    checked = run_cli("validate", chat)
    assert (checked.code, checked.out, checked.err) == (2, "", expected)
    blamed = run_cli("blame", chat, "--policy", "sim:pivot", "--scorer", "sim:pivot", "--no-store")
    assert (blamed.code, blamed.err) == (2, expected)
    table = run_cli("validate", tmp_path)  # a directory: the file's row fails, in the same words
    assert table.code == 2 and "FAILED" in table.out and "records no assistant turn" in table.out


def test_a_car_trace_without_an_agent_keeps_its_hint(run_cli: RunCli, tmp_path: Path) -> None:
    doc = json.loads((TRACES / "pivot.json").read_text(encoding="utf-8"))
    doc["actors"] = [{**a, "kind": "tool"} for a in doc["actors"]]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    r = run_cli("validate", path)
    assert r.code == 2
    assert r.err == (
        f"car: error: {path}: no decision steps: no actor is an agent "
        "(set $.actors[].kind to 'agent', or stochastic: true)\n"
    )


def test_the_command_line_may_still_name_a_judge_on_its_own_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a trace may not set, the user may: the refusal is of the trace's say, not the option."""
    from car.specs import make_scorer

    monkeypatch.setenv("MY_KEY", "sk-test")
    trace = load_trace(TRACES / "pivot.json")
    judge = make_scorer("llm-judge:gpt-4o?base_url=http://127.0.0.1:9/v1&api_key_env=MY_KEY", trace)
    assert judge.spec.startswith("llm-judge:gpt-4o?base_url=")
