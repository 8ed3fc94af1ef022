"""Bad input: one line naming the file and the place, exit code 2, no traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, TRACES

GOOD: dict[str, Any] = json.loads((TRACES / "support-refund.json").read_text())


def _edit(fn: Callable[[dict[str, Any]], Any]) -> str:
    doc = json.loads(json.dumps(GOOD))
    fn(doc)
    return json.dumps(doc)


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def go(doc: dict[str, Any]) -> None:
        node = doc
        for p in path[:-1]:
            node = node[p]
        node[path[-1]] = value

    return go


def _delete(path: list[Any]) -> Callable[[dict[str, Any]], None]:
    def go(doc: dict[str, Any]) -> None:
        node = doc
        for p in path[:-1]:
            node = node[p]
        del node[path[-1]]

    return go


# name -> (file content, text the error line must contain)
CORPUS: dict[str, tuple[str | bytes, str]] = {
    "empty": ("", "empty file"),
    "whitespace": ("  \n\t", "empty file"),
    "not-json": ("hello", "line 1 column 1: invalid JSON"),
    "truncated": (json.dumps(GOOD)[:200], "invalid JSON"),
    "trailing-comma": ('{"version": "car.trace/v1",}', "line 1 column"),
    "nan-constant": ('{"version": "car.trace/v1", "x": NaN}', "NaN is not valid JSON"),
    "binary": (b"\xff\xfe\x00garbage", "not UTF-8"),
    "array-root": ("[1, 2]", "not a trace format car recognises"),
    "string-root": ('"trace"', "not a trace format car recognises"),
    "no-version": (_edit(_delete(["version"])), "$.version: missing"),
    "unknown-version": (_edit(_set(["version"], "car.trace/v0")), "$.version: unknown version"),
    "version-number": (_edit(_set(["version"], 1)), "$.version: unknown version"),
    "no-id": (_edit(_delete(["id"])), "$.id: required field is missing"),
    "empty-id": (_edit(_set(["id"], "")), "$.id:"),
    "no-steps": (_edit(_delete(["steps"])), "$.steps: required field is missing"),
    "empty-steps": (_edit(_set(["steps"], [])), "$.steps:"),
    "steps-object": (_edit(_set(["steps"], {"0": {}})), "$.steps:"),
    "no-actors": (_edit(_set(["actors"], [])), "$.actors:"),
    "index-gap": (_edit(_set(["steps", 2, "index"], 5)), "$.steps[2].index: expected 2"),
    "index-negative": (_edit(_set(["steps", 0, "index"], -1)), "$.steps[0].index:"),
    "index-string": (_edit(_set(["steps", 1, "index"], "one")), "$.steps[1].index:"),
    # Never coerced: "no" would become False, "1" would become 1.
    "index-numeric-string": (
        _edit(_set(["steps", 1, "index"], "1")),
        "$.steps[1].index: expected an integer",
    ),
    "failed-string": (
        _edit(_set(["outcome", "failed"], "no")),
        '$.outcome.failed: expected true or false; got "no"',
    ),
    "score-string": (_edit(_set(["outcome", "score"], "0.5")), "$.outcome.score:"),
    "unknown-actor": (
        _edit(_set(["steps", 1, "actor"], "ghost")),
        "$.steps[1].actor: unknown actor 'ghost'",
    ),
    "duplicate-actor": (
        _edit(lambda d: d["actors"].append(dict(d["actors"][0]))),
        "$.actors[1].id: duplicate actor id",
    ),
    "no-action": (
        _edit(_delete(["steps", 0, "action"])),
        "$.steps[0].action: required field is missing",
    ),
    "action-string": (_edit(_set(["steps", 0, "action"], "lookup")), "$.steps[0].action:"),
    "tool-call-no-name": (
        _edit(_delete(["steps", 0, "action", "tool_calls", 0, "name"])),
        "$.steps[0].action.tool_calls[0].name: required field is missing",
    ),
    "tool-args-list": (
        _edit(_set(["steps", 0, "action", "tool_calls", 0, "arguments"], [1])),
        "$.steps[0].action.tool_calls[0].arguments:",
    ),
    "orphan-observation": (
        _edit(_set(["steps", 0, "observations", 0, "call_id"], "nope")),
        "$.steps[0].observations[0].call_id: 'nope' matches no tool call",
    ),
    "unknown-field": (_edit(_set(["steps", 0, "colour"], "red")), "$.steps[0].colour: unknown field"),
    "bad-actor-kind": (_edit(_set(["actors", 0, "kind"], "robot")), "$.actors[0].kind:"),
    "bad-temperature": (
        _edit(_set(["steps", 1, "sampling"], {"temperature": -1})),
        "$.steps[1].sampling.temperature:",
    ),
    # 1e400 parses as inf: a recorded temperature is sent, and a JSON body cannot hold it. Any
    # number beyond a double's range is refused where it is read, before the fields are checked.
    "temperature-overflow": (
        _edit(_set(["steps", 1, "sampling"], {"temperature": 0.125})).replace("0.125", "1e400"),
        "1e400 is beyond the range of a double",
    ),
    # A valid JSON escape that UTF-8 cannot encode: car could not hash, store or write the trace.
    "lone-surrogate": (
        _edit(_set(["steps", 1, "action", "text"], "cut \ud83d")),
        "$.steps[1].action.text: holds a lone UTF-16 surrogate",
    ),
    "bad-score": (_edit(_set(["outcome", "score"], 3)), "$.outcome.score:"),
    "code-in-replay": (
        _edit(_set(["replay", "scorer"], "evil.py@run")),
        "$.replay.scorer: 'evil.py@run' names code",
    ),
    "unknown-builtin": (
        _edit(_set(["replay", "policy"], "sim:support-refnd")),
        "$.replay.policy: unknown simulated scenario",
    ),
    "entry-point-in-replay": (
        _edit(_set(["replay", "env"], "mycompany:prod")),
        "$.replay.env: unknown built-in environment",
    ),
    # The scenario's parameters are read by the sim: components (a trace's own, or --policy sim:NAME).
    "sim-param-string": (
        _edit(_set(["metadata", "sim", "params", "slip"], "x")),
        "$.metadata.sim.params.slip: expected a finite number, got a string",
    ),
    "sim-param-unknown": (
        _edit(_set(["metadata", "sim", "params", "colour"], 1)),
        "$.metadata.sim.params.colour: scenario 'support-refund' has no parameter 'colour'",
    ),
    # In range too: a negative slip runs, and answers no question the scenario states.
    "sim-param-out-of-range": (
        _edit(_set(["metadata", "sim", "params", "slip"], -5)),
        "$.metadata.sim.params.slip: expected a probability in [0, 1], got -5",
    ),
    "sim-param-probability-above-one": (
        _edit(_set(["metadata", "sim", "params", "refund_injected"], 1.7)),
        "$.metadata.sim.params.refund_injected: expected a probability in [0, 1], got 1.7",
    ),
    "sim-params-array": (
        _edit(_set(["metadata", "sim", "params"], [0.5])),
        "$.metadata.sim.params: expected an object of parameter values, got an array",
    ),
    "context-wrong": (_edit(_set(["steps", 1, "context"], "suffix")), "$.steps[1].context:"),
    "message-bad-role": (
        _edit(_set(["steps", 1, "context"], [{"role": "robot", "content": "x"}])),
        "$.steps[1].context",
    ),
}


def test_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 30


@pytest.mark.parametrize("name", sorted(CORPUS))
@pytest.mark.parametrize("command", ["blame", "validate"])
def test_bad_trace_gives_one_line_and_exit_2(run_cli, tmp_path: Path, name: str, command: str) -> None:  # type: ignore[no-untyped-def]
    content, expected = CORPUS[name]
    path = tmp_path / f"{name}.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    r = run_cli(command, path)
    assert r.code == 2, r.err
    assert r.out == ""
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    assert lines[0].startswith(f"car: error: {path}: ")
    assert expected in lines[0]
    assert "Traceback" not in r.err


def test_missing_file_and_directory(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("blame", tmp_path / "nope.json")
    assert r.code == 2 and "nope.json: no such file" in r.err
    r = run_cli("validate", tmp_path)  # a directory is a batch: an empty one is an input error
    assert r.code == 2 and "no trace files (*.json, *.jsonl, *.eval) under this directory" in r.err


def test_a_report_given_to_blame_is_named_as_one(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`car report TRACE` asks "is this a trace?"; `car blame REPORT` said only what it reads."""
    report = tmp_path / "report.json"
    assert run_cli("blame", TRACES / "pivot.json", "--samples", "2", "-o", report).code == 0
    r = run_cli("blame", report)
    assert r.code == 2
    assert r.err == (
        f"car: error: {report}: $.version: unknown version 'car.report/v1'; this car reads "
        "'car.trace/v1'; is this a report? (`car report` reads reports)\n"
    )


@pytest.mark.parametrize(
    ("args", "name", "what"),
    [
        (["--format", "json"], "out.json", "car.batch/v1 (the results of a car blame batch)"),
        (["--format", "jsonl"], "out.jsonl", "car.record/v1 (car blame's records of its traces)"),
    ],
)
def test_results_given_to_blame_are_named_as_such(  # type: ignore[no-untyped-def]
    run_cli, tmp_path: Path, args: list[str], name: str, what: str
) -> None:
    """A report given to `car blame` asks "is this a report?"; the results of a batch (`--format
    json` or `jsonl`), which `car report` reads as well, were "not a trace format car recognises"
    and a list of foreign formats to name with --from."""
    out = tmp_path / name
    batch = [TRACES / "pivot.json", TRACES / "or.json", "--samples", "2", "--no-store"]
    assert run_cli("blame", *batch, *args, "-o", out).code == 0
    for command in ("blame", "validate"):
        r = run_cli(command, out)
        assert r.code == 2
        assert r.err == (f"car: error: {out}: {what}, not a trace; `car report` reads it\n"), command


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--policy", "sim:suport-refund", "did you mean 'sim:support-refund'"),
        ("--policy", "opnai:gpt-4o", "unknown policy 'opnai:gpt-4o'; did you mean 'openai:gpt-4o'?"),
        ("--scorer", "tool-caled:issue_refund", "did you mean 'tool-called:issue_refund'?"),
        ("--env", "recordd", "did you mean 'recorded'"),
        ("--scorer", "regex:(", "invalid pattern"),
        ("--scorer", f"{ROOT}/scorers/refund.py@refund_outside", "did you mean 'refund_outside_window'"),
        ("--scorer", "scorers/nope.py@x", "no such file"),
        ("--scorer", f"{ROOT}/scorers/refund.py@1x", "is not a Python name"),
        ("--samples", "0", "--samples must be at least 1"),
        ("--level", "1.5", "--level must be in"),
        ("--min-effect", "-0.1", "--min-effect must be in"),
        ("--concurrency", "0", "--concurrency must be at least 1"),
        ("--confidence", "2", "--confidence must be in [0.5, 1), got 2.0"),
        ("--top-p", "5", "--top-p must be at most 1, got 5.0"),
        ("--max-tokens", "0", "--max-tokens must be more than 0, got 0"),
        ("--temperature", "-1", "--temperature must be at least 0, got -1.0"),
        ("--temperature", "inf", "--temperature must be a finite number, got inf"),
        ("--samples", "many", "Invalid value"),
        ("--format", "xml", "Invalid value"),
        ("--method", "nosuch", "Invalid value for '--method': 'nosuch' is not one of"),
        ("--method", "shapely", "'auto'. Did you mean 'shapley'? (see 'car blame --help')"),
        ("--format", "jsnl", "Did you mean 'jsonl'?"),
        ("--fail-on-blame", "nobody", "--fail-on-blame 'nobody': no trace in this run has an actor"),
        ("--price", "input_tokens=-1", "a price is a finite amount of 0 or more"),
        ("--address", "ray://head:10001", "--address 'ray://head:10001' names a Ray cluster, but"),
        ("--bogus", "1", "No such option"),
        # click offered its near spellings (--help, --item), not the option meant
        ("--html", "-q", "No such option: --html. Did you mean '--format html'? (see 'car blame"),
    ],
)
def test_bad_options_give_one_line_and_exit_2(run_cli, option: str, value: str, expected: str) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("blame", TRACES / "support-refund.json", option, value)
    assert r.code == 2, r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    assert expected in lines[0] and "Value error" not in lines[0]
    assert "Traceback" not in r.err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # a subcommand's subcommand was named alone: `car info` is no command
        (["cache", "info", "--bogus"], "No such option: --bogus (see 'car cache info --help')"),
        # an option's missing value (click's error carries no command) pointed at the top level
        (["blame", "x.json", "-o"], "Option '-o' requires an argument. (see 'car blame --help')"),
        (
            ["cache", "info", "--store"],
            "Option '--store' requires an argument. (see 'car cache info --help')",
        ),
        (["--bogus"], "No such option: --bogus (see 'car --help')"),
        # the store merged into is an argument: click named no way to say it
        (
            ["merge", "a.sqlite", "b.sqlite", "-o", "m.sqlite"],
            "No such option: -o. The store to merge into comes first: car merge INTO SHARD... "
            "(see 'car merge --help')",
        ),
    ],
)
def test_a_usage_error_points_at_the_help_of_its_command(  # type: ignore[no-untyped-def]
    run_cli, args: list[str], expected: str
) -> None:
    r = run_cli(*args)
    assert (r.code, r.err) == (2, f"car: error: {expected}\n")


@pytest.mark.parametrize("command", ["blame", "validate", "import"])
def test_debug_shows_the_traceback(run_cli, tmp_path: Path, command: str) -> None:  # type: ignore[no-untyped-def]
    """--debug adds the traceback and keeps the exit code (2 for bad input, as without it)."""
    path = tmp_path / "bad.json"
    path.write_text("{", encoding="utf-8")
    r = run_cli(command, path, "--debug")
    assert r.code == 2
    assert "Traceback (most recent call last)" in r.err and "car.errors.InputError" in r.err


def test_missing_policy_is_explained(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "t.json"
    path.write_text(_edit(_delete(["replay"])), encoding="utf-8")
    r = run_cli("blame", path)
    assert r.code == 2
    assert "names no policy" in r.err and "--policy openai:MODEL or anthropic:MODEL" in r.err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("report", "{dir}"), "is a directory, expected a car store, a JSON report or batch records"),
        (("report", "{bin}"), "not a car store, report or results file (byte 0 is not UTF-8 text)"),
        (("cache", "clear", "--store", "{dir}", "--force"), "is a directory, not a car store"),
        (("cache", "info", "--store", "{dir}"), "is a directory, not a store file"),
        (("blame", str(TRACES / "pivot.json"), "--store", "{dir}"), "is a directory, not a store"),
    ],
)
def test_stores_and_results_that_are_directories_or_binary(  # type: ignore[no-untyped-def]
    run_cli, tmp_path: Path, args: tuple[str, ...], expected: str
) -> None:
    folder = tmp_path / "results.jsonl"
    folder.mkdir()
    binary = tmp_path / "results-bin.jsonl"
    binary.write_bytes(b"\xff\xfe{")
    r = run_cli(*(a.format(dir=folder, bin=binary) for a in args))
    assert r.code == 2, r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("car: error: ") and expected in lines[0], r.err
    assert folder.is_dir()  # never deleted


def test_components_are_closed_when_the_budget_is_refused() -> None:
    """A Shapley budget that cannot pay is refused before any rollout; the policy's connections
    are still closed, in a single call and in a batch."""
    import car
    from car.batch import BatchOptions, blame_many
    from car.errors import BudgetError
    from car.importers import load_any
    from car.specs import make_policy

    path = str(TRACES / "and.json")
    trace = load_any(path)

    class Closable:
        def __init__(self) -> None:
            self.inner = make_policy("sim:and", trace)
            self.spec, self.closed = self.inner.spec, 0

        async def act(self, decision, key):  # type: ignore[no-untyped-def]
            return await self.inner.act(decision, key)

        async def aclose(self) -> None:
            self.closed += 1

    policy = Closable()
    with pytest.raises(BudgetError, match="budget=1 is too small"):
        car.blame(trace, policy=policy, method="shapley", budget=1, samples=2)
    assert policy.closed == 1
    policy = Closable()
    options = BatchOptions(policy=policy, method="shapley", budget=1, samples=2)
    [result] = blame_many([path], options=options)
    assert result.status == "input-error" and policy.closed == 1


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["import", "traces/pivot.json", "-o", ""], "-o: an empty value (''); give a path"),
        (["validate", ""], "an empty argument (''); give a path or a value"),
        (["report", ""], "an empty argument (''); give a path or a value"),
        (["blame", "traces/pivot.json", "--store", ""], "--store: an empty value (''); give a path"),
    ],
)
def test_an_empty_value_is_never_read_as_the_current_directory(
    run_cli, argv: list[str], expected: str
) -> None:  # type: ignore[no-untyped-def]
    r = run_cli(*argv)
    assert (r.code, r.out) == (
        2,
        "",
    ) and r.err.strip() == f"car: error: {expected}"


@pytest.mark.parametrize(
    ("command", "suffix"),
    [(c, ".json") for c in ("validate", "blame", "report", "import")]
    # `car report` refuses a JSONL file whose first record is no report before the second line
    + [(c, ".jsonl") for c in ("validate", "blame", "import")],
)
def test_an_integer_too_long_to_read_is_named_at_its_place(
    run_cli: Callable[..., Any], tmp_path: Path, command: str, suffix: str
) -> None:
    """A number of more than 4,300 digits said only "invalid JSON: Exceeds the limit (4300 digits)
    for integer string conversion ... use sys.set_int_max_str_digits()", with no line."""
    doc = json.dumps(GOOD, indent=2).replace('"version"', '"n": -' + "7" * 5000 + ',\n  "version"', 1)
    path = tmp_path / f"big{suffix}"
    if suffix == ".jsonl":  # a record per line: the place is the line of the second record
        doc = (
            json.dumps({"a": 1}) + "\n" + json.dumps(GOOD).replace("{", '{"n": ' + "7" * 5000 + ", ", 1)
        )
    path.write_text(doc)
    res = run_cli(command, path)
    assert res.code == 2
    where = "line 2 column 8" if suffix == ".json" else "line 2 column 7"
    assert res.err == (
        f"car: error: {path}: {where}: invalid JSON: an integer of 5000 digits, more than the 4300 "
        "car reads\n"
    ), res.err


def test_reading_json_names_a_long_integer_without_a_second_parse_of_good_files() -> None:
    from car.jsonfile import loads

    assert loads('{"a": [1, -2, 3.5]}') == {"a": [1, -2, 3.5]}
    with pytest.raises(json.JSONDecodeError) as info:
        loads('{"a": 1,\n "b": ' + "1" * 4301 + "}")
    assert (info.value.lineno, info.value.colno) == (2, 7)


@pytest.mark.parametrize("command", ["validate", "blame", "import"])
def test_a_number_beyond_a_double_in_a_car_trace_is_refused_at_its_place(
    run_cli: Callable[..., Any], tmp_path: Path, command: str
) -> None:
    """1e400 in a car trace (metadata, arguments, ...) parsed as infinity, which validated and was
    written as null (`car import` turned the value into null without a word)."""
    trace = json.loads((TRACES / "pivot.json").read_text())
    trace["metadata"]["cost"] = 1.0
    doc = json.dumps(trace, indent=2).replace('"cost": 1.0', '"cost": -1e400', 1)
    line = doc[: doc.index("-1e400")].count("\n") + 1
    column = len(doc[: doc.index("-1e400")].rsplit("\n", 1)[-1]) + 1
    path = tmp_path / "inf.json"
    path.write_text(doc)
    res = run_cli(command, path)
    assert res.code == 2
    assert res.err == (
        f"car: error: {path}: line {line} column {column}: invalid JSON: -1e400 is beyond the range "
        "of a double (JSON has no infinity, so car would write it as null); write a smaller number, "
        "or the value as a string\n"
    ), res.err


def test_finite_numbers_and_such_text_in_strings_still_load(tmp_path: Path) -> None:
    from car.trace import load_trace

    trace = json.loads((TRACES / "pivot.json").read_text())
    trace["metadata"].update(big=1e300, note="1e400 is text here")
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(trace))
    loaded = load_trace(path)
    assert (loaded.metadata["big"], loaded.metadata["note"]) == (1e300, "1e400 is text here")
