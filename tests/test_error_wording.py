"""Error messages in the user's words: no pydantic phrases, no Python hints on the command line, one
message per problem."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, TRACES, Result

GOOD: dict[str, Any] = json.loads((TRACES / "support-refund.json").read_text())


def _edited(fn: Callable[[dict[str, Any]], object]) -> str:
    doc = json.loads(json.dumps(GOOD))
    fn(doc)
    return json.dumps(doc)


# pydantic error type -> (an edit of a good trace, the whole message after the file name)
PYDANTIC_WORDS: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "too_short": (
        lambda d: d.update(steps=[]),
        "$.steps: expected at least one step; got an empty array",
    ),
    "too_short-actors": (
        lambda d: d.update(actors=[]),
        "$.actors: expected at least one actor; got an empty array",
    ),
    "string_too_short": (lambda d: d.update(id=""), '$.id: expected a non-empty string; got ""'),
    "missing": (lambda d: d["steps"][0].pop("actor"), "$.steps[0].actor: required field is missing"),
    "int_type": (
        lambda d: d["steps"][0].update(index="0"),
        '$.steps[0].index: expected an integer; got "0"',
    ),
    "greater_than_equal": (
        lambda d: d["steps"][0].update(index=-1),
        "$.steps[0].index: expected at least 0; got -1",
    ),
    "less_than_equal": (
        lambda d: d["outcome"].update(score=3),
        "$.outcome.score: expected at most 1; got 3",
    ),
    "literal_error": (
        lambda d: d["actors"][0].update(kind="robot"),
        "$.actors[0].kind: expected 'agent', 'user', 'tool' or 'other'; got \"robot\"",
    ),
    # The other member of the union (context = "prefix") failing is not a second problem.
    "literal_error-in-union": (
        lambda d: d["steps"][1].update(context=[{"role": "robot", "content": "x"}]),
        "$.steps[1].context[0].role: expected 'system', 'user', 'assistant' or 'tool'; got \"robot\"",
    ),
    "extra_forbidden": (
        lambda d: d["steps"][0].update(colour="red"),
        "$.steps[0].colour: unknown field (check the spelling; `car schema` lists the fields)",
    ),
}


@pytest.mark.parametrize("kind", sorted(PYDANTIC_WORDS))
def test_trace_errors_use_plain_words(run_cli, tmp_path: Path, kind: str) -> None:  # type: ignore[no-untyped-def]
    """Empty steps read "Tuple should have at least 1 item after validation, not 0" (pydantic's)."""
    edit, expected = PYDANTIC_WORDS[kind]
    path = tmp_path / "t.json"
    path.write_text(_edited(edit))
    r = run_cli("validate", path)
    assert r.code == 2 and r.out == ""
    assert r.err.splitlines() == [f"car: error: {path}: {expected}"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('samples = "4"', "samples: expected an integer; got '4'"),
        ("samples = true", "samples: expected an integer; got True"),
        ("samples = 4.0", "samples: expected an integer; got 4.0"),
        ('level = "0.9"', "level: expected a number; got '0.9'"),
        ("policy = 3", "policy: expected a string; got 3"),
    ],
)
@pytest.mark.parametrize("file", ["car.toml", "pyproject.toml"])
def test_configuration_values_must_have_their_type(
    run_cli,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    file: str,
    text: str,
    message: str,
) -> None:
    """docs/backends.md: values of the wrong type are errors. `samples = "4"` was read as 4."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / file).write_text(text + "\n" if file == "car.toml" else f"[tool.car]\n{text}\n")
    where = f"{tmp_path / file}: [tool.car]" if file == "pyproject.toml" else str(tmp_path / file)
    r = run_cli("blame", TRACES / "support-refund.json", "--no-store")
    assert r.code == 2 and r.out == ""
    assert r.err.splitlines() == [f"car: error: {where}: {message}"]


def test_environment_variables_are_text_parsed_as_the_key_type(run_cli) -> None:  # type: ignore[no-untyped-def]
    from car.config import resolve

    values = {"CAR_SAMPLES": "4", "CAR_LEVEL": "0.9", "CAR_TIMEOUT": "30"}
    out = resolve({"samples": 32, "level": 0.95}, set(), values, Path("/"))
    assert (out["samples"], out["level"], out["timeout"]) == (4, 0.9, 30.0)
    (Path.cwd() / "car.toml").write_text("samples = 4\nlevel = 0.9\ntimeout = 30\nthinking = 8000\n")
    out = resolve({"samples": 32, "level": 0.95}, set(), {})
    assert (out["samples"], out["level"], out["timeout"], out["thinking"]) == (4, 0.9, 30.0, "8000")


def test_a_car_variable_that_sets_nothing_is_said(run_cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`CAR_SAMPLE=4` changed nothing without a word, where a file's unknown key is an error."""
    monkeypatch.setenv("CAR_SAMPLE", "4")
    monkeypatch.setenv("CAR_NOTHING_LIKE_IT", "1")
    r = run_cli("blame", TRACES / "pivot.json", "--no-store", "--samples", "4", "--format", "json")
    assert r.code == 0
    notes = [line for line in r.err.splitlines() if "is not a car setting" in line]
    assert notes == [
        "car: note: CAR_NOTHING_LIKE_IT is not a car setting and changes nothing",
        "car: note: CAR_SAMPLE is not a car setting and changes nothing (did you mean CAR_SAMPLES?)",
    ]
    r = run_cli("blame", TRACES / "pivot.json", "--no-store", "--samples", "4", "-q")
    assert "is not a car setting" not in r.err


SEVERAL_RUNS = ROOT / "tests" / "fixtures" / "importers" / "tau_bench.json"  # two runs


def test_a_file_of_several_runs_names_the_option_on_the_command_line(run_cli) -> None:  # type: ignore[no-untyped-def]
    """The command line suggested `(load_any(path, item=N))` to its user."""
    r = run_cli("blame", SEVERAL_RUNS, "--no-store")
    assert r.code == 2 and r.out == ""
    assert r.err.splitlines() == [
        f"car: error: {SEVERAL_RUNS}: holds 2 runs (0: $[0], 1: $[1]); pick one with --item N, or "
        "split them with `car import FILE -o DIR`"
    ]
    r = run_cli("blame", SEVERAL_RUNS, "--no-store", "--item", "2")
    assert r.err.splitlines() == [
        f"car: error: {SEVERAL_RUNS}: --item 2 is out of range: the file holds 2 runs (0 to 1)"
    ]


def test_a_file_of_several_runs_names_the_argument_in_python(run_cli) -> None:  # type: ignore[no-untyped-def]
    import car
    from car.errors import InputError
    from car.importers import load_any

    run_cli("validate", SEVERAL_RUNS)  # the command line, run in this process first, says --item
    with pytest.raises(InputError) as info:
        car.blame(SEVERAL_RUNS)
    assert str(info.value).endswith(
        "pick one with car.importers.load_any(path, item=N), or split them with `car import FILE -o DIR`"
    )
    assert "--item" not in str(info.value)
    with pytest.raises(InputError, match=r": item=2 is out of range: the file holds 2 runs"):
        load_any(SEVERAL_RUNS, item=2)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("trailing-comma.json", '{"version": "car.trace/v1", "steps": [1,]}', "line 1 column 41"),
        ("missing-comma.json", '{\n  "a": 1\n  "b": 2\n}', "line 3 column 3"),
        ("bad-line.jsonl", '{"a": 1}\n{"b":\n', "line 2 column 6"),
    ],
)
@pytest.mark.parametrize("command", ["blame", "validate", "import"])
def test_malformed_json_is_one_message_with_its_line_and_column(
    run_cli,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    command: str,
    name: str,
    content: str,
    message: str,
) -> None:
    """It also said "not a trace format car recognises; car knows: ..." after the JSON error."""
    path = tmp_path / name
    path.write_text(content)
    r = run_cli(command, path)
    assert r.code == 2 and r.out == ""
    (line,) = r.err.splitlines()
    assert line.startswith(f"car: error: {path}: {message}: invalid JSON: "), line
    assert "recognises" not in line


def test_an_unknown_format_names_the_option_or_the_argument(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from car.errors import InputError
    from car.importers import load_any

    path = tmp_path / "x.json"
    path.write_text("[1, 2]")
    r = run_cli("validate", path)
    assert r.err.startswith(f"car: error: {path}: not a trace format car recognises; car knows: ")
    assert r.err.endswith(" (name one with --from NAME)\n")
    with pytest.raises(InputError, match=r"\(name one with fmt=NAME\)$"):
        load_any(path)


@pytest.mark.parametrize(
    ("place", "key", "spec", "says"),
    [
        ("car.toml", "scorer", "regex:(", "scorer 'regex:(': invalid pattern"),
        ("pyproject.toml", "env", "no-such-file.py@env", "environment 'no-such-file.py@env': no such"),
        ("CAR_POLICY", "policy", "opnai:gpt-4o", "unknown policy 'opnai:gpt-4o'"),
    ],
)
def test_a_configured_spec_error_names_where_it_was_set(  # type: ignore[no-untyped-def]
    run_cli, monkeypatch, tmp_path: Path, place: str, key: str, spec: str, says: str
) -> None:
    """`scorer = "regex:("` in car.toml said only "scorer 'regex:(': invalid pattern ...": the
    user could not tell it came from a file, or which one; an option names itself."""
    monkeypatch.chdir(tmp_path)
    if place == "CAR_POLICY":
        monkeypatch.setenv(place, spec)
        origin = "environment variable CAR_POLICY"
    elif place == "car.toml":
        (tmp_path / place).write_text(f'{key} = "{spec}"\n')
        origin = f"{tmp_path / place}, key {key}"
    else:
        (tmp_path / place).write_text(f'[tool.car]\n{key} = "{spec}"\n')
        origin = f"{tmp_path / place} [tool.car], key {key}"
    trace = TRACES / "pivot.json"
    for extra in (["--dry-run"], ["--no-store", "--no-progress"]):
        r = run_cli("blame", trace, *extra)
        assert r.code == 2, r.err
        line = r.err.splitlines()[-1]
        assert says in line and line.endswith(f" (from {origin})"), line
    # Given on the command line, the option is the place: no origin is added.
    r = run_cli("blame", trace, "--dry-run", f"--{key}", spec)
    assert r.code == 2 and "(from " not in r.err


# A two-agent chat as Who&When imports one: turns of text, no tool calls, no components named.
CHAT: dict[str, Any] = {
    "version": "car.trace/v1",
    "id": "chat-0",
    "task": "What is 6 x 7?",
    "actors": [{"id": "Planner"}, {"id": "Solver"}],
    "steps": [
        {"index": 0, "actor": "Planner", "action": {"text": "Solver, compute 6 x 7."}},
        {"index": 1, "actor": "Solver", "action": {"text": "6 x 7 = 48"}},
    ],
    "outcome": {"failed": True, "label": "incorrect answer", "detail": "expected 42"},
}


class _Unasked:
    """A policy for a chat no `sim:` scenario recorded (which a `sim:` policy refuses before the
    scorer is looked at); never asked, as the missing scorer stops the run first."""

    spec = "unasked"

    async def act(self, decision: Any, key: Any) -> Any:
        raise AssertionError("no rollout runs without a scorer")


def _refused(trace: Path, policy: Any) -> str:
    """What `car.blame` says of `trace`, which names no scorer."""
    import car
    from car.errors import InputError

    with pytest.raises(InputError) as caught:
        car.blame(trace, policy=policy)
    return str(caught.value)


def _refund_naming_no_scorer(tmp_path: Path, **metadata: str) -> Path:
    refund = tmp_path / "refund.json"
    refund.write_text(_edited(lambda d: (d.pop("replay"), d["metadata"].update(metadata))))
    return refund


def test_the_missing_scorer_advice_fits_the_trace(tmp_path: Path) -> None:
    """A trace that names no scorer was told to use tool-called:NAME first, whatever it held: a chat
    with no tool calls is scored by a judge (or a pattern), and one with tools is told which."""
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps(CHAT))
    assert _refused(chat, _Unasked()) == (
        "trace 'chat-0' names no scorer: its steps call no tools, so pass "
        "scorer='llm-judge:openai:MODEL' (a model judges each run; see car plugins), "
        "scorer='regex:PATTERN' (on the final answer), or scorer='path/to/scorer.py@name'"
    )
    assert _refused(_refund_naming_no_scorer(tmp_path), "sim:support-refund") == (
        "trace 'support-refund-0' names no scorer: pass one: scorer='tool-called:NAME' (it called "
        "issue_refund, lookup_order), scorer='llm-judge:openai:MODEL' (a model judges each run; "
        "see car plugins), scorer='regex:PATTERN' (on the final answer), or "
        "scorer='path/to/scorer.py@name'"
    )


def test_the_missing_scorer_advice_names_the_option_on_the_command_line(
    run_cli: Callable[..., Result], tmp_path: Path
) -> None:
    """The command line's advice names `--scorer` (quoting the specs a shell would read); Python's,
    above, the `scorer=` keyword: Python callers were told to pass a command-line option."""
    refund = _refund_naming_no_scorer(tmp_path)
    r = run_cli("blame", refund, "--policy", "sim:support-refund")
    assert r.code == 2
    assert r.err.startswith("car: error: ") and r.err.endswith(
        "trace 'support-refund-0' names no scorer: pass one: --scorer "
        "tool-called:NAME (it called issue_refund, lookup_order), --scorer "
        "'llm-judge:openai:MODEL' (a model judges each run; see car plugins), --scorer "
        "'regex:PATTERN' (on the final answer), or --scorer path/to/scorer.py@name\n"
    )


def test_a_trace_holding_the_expected_answer_is_advised_the_extract_judge(tmp_path: Path) -> None:
    """A Who&When log carries its ground truth (the trace's `metadata.expected`), which the judge's
    extract mode checks each run's answer against: the advice named only the rubric judge."""
    log = tmp_path / "ww.json"
    log.write_text(
        json.dumps(
            {
                "question": "What is 6 x 7?",
                "ground_truth": "42",
                "mistake_agent": "Solver",
                "mistake_step": "1",
                "history": [
                    {"role": "user", "name": "Planner", "content": "Solver, compute 6 x 7."},
                    {"role": "assistant", "name": "Solver", "content": "6 x 7 = 48"},
                ],
            }
        )
    )
    assert _refused(log, _Unasked()).split(" names no scorer: ")[1] == (
        "it holds the expected answer, so pass scorer='llm-judge:openai:MODEL?mode=extract' (a "
        "model reads each run's final answer, compared with the expected one; see car plugins), "
        "scorer='regex:PATTERN' (on the final answer), or scorer='path/to/scorer.py@name'"
    )
    # With tool calls too, the answer check leads.
    refund = _refund_naming_no_scorer(tmp_path, expected="7.50")
    assert _refused(refund, "sim:support-refund") == (
        "trace 'support-refund-0' names no scorer: it holds the expected answer, so pass "
        "scorer='llm-judge:openai:MODEL?mode=extract' (a model reads each run's final answer, "
        "compared with the expected one; see car plugins), scorer='tool-called:NAME' (it called "
        "issue_refund, lookup_order), scorer='regex:PATTERN' (on the final answer), or "
        "scorer='path/to/scorer.py@name'"
    )


def test_the_missing_policy_advice_names_the_python_keyword_in_python(tmp_path: Path) -> None:
    """From Python the advice said `--policy openai:MODEL`, an option no Python caller can pass."""
    import car
    from car.errors import InputError

    refund = tmp_path / "refund.json"
    refund.write_text(_edited(lambda d: d.pop("replay")))
    with pytest.raises(InputError) as caught:
        car.blame(refund)
    assert str(caught.value) == (
        "trace 'support-refund-0' names no policy: pass the model that recorded it "
        "(policy='openai:MODEL' or anthropic:MODEL, with base_url= for a local server), or "
        "policy='sim:NAME', path/to/policy.py@name, or an installed plugin"
    )
