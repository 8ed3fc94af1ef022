"""Arguments of the wrong type or out of range: one clear error before any work, naming the argument
as the caller gave it (`samples=` from Python, `--samples` on the command line)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

import car
from car.errors import COMMAND_LINE, InputError, option_name
from car.store import MemoryStore
from tests.conftest import TRACES, Result

TRACE = TRACES / "pivot.json"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"samples": "8"}, "samples= must be a whole number, got '8' (str)"),
        ({"samples": 8.0}, "samples= must be a whole number, got 8.0 (float)"),
        ({"samples": True}, "samples= must be a whole number, got True (bool)"),
        ({"samples": 0}, "samples= must be at least 1, got 0"),
        ({"match_samples": -1}, "match_samples= must be 0 or more, got -1"),
        ({"seed": "1"}, "seed= must be a whole number, got '1' (str)"),
        ({"concurrency": 1.5}, "concurrency= must be a whole number, got 1.5 (float)"),
        ({"level": "0.9"}, "level= must be a number in [0.5, 1), got '0.9' (str)"),
        ({"level": 1}, "level= must be in [0.5, 1), got 1"),
        ({"min_effect": None}, "min_effect= must be a number in [0, 1), got None (NoneType)"),
        ({"max_error_rate": 2.0}, "max_error_rate= must be in [0, 1], got 2.0"),
        ({"method": "both"}, "method= must be contrastive, shapley or auto, got 'both'"),
        ({"shapley_method": 1}, "shapley_method= must be exact, permutation or auto, got 1 (int)"),
        (
            {"players": 3},
            "players= must be 'steps', 'agents' or groups of step indices like '0,1;2,3', got 3 (int)",
        ),
        (
            {"players": " "},
            "players= must be 'steps', 'agents' or groups of step indices like '0,1;2,3', got ' '",
        ),
        ({"budget": 0}, "budget= must be at least 1 rollout, got 0"),
        ({"budget_calls": "9"}, "budget_calls= must be a whole number, got '9' (str)"),
        ({"target_width": 1}, "target_width= must be in (0, 1), got 1"),
    ],
)
def test_blame_names_the_python_argument(given: dict[str, Any], message: str) -> None:
    """`car.blame(path, samples="8")` raised TypeError: '<' not supported between 'str' and 'int'."""
    _both_refuse(given, message)


def _both_refuse(given: dict[str, Any], message: str, name: str = "blame") -> None:
    """`car.NAME` and `car.NAME_async` refuse `given` with exactly `message`."""
    with pytest.raises(InputError) as info:
        getattr(car, name)(TRACE, **given)
    assert str(info.value) == message
    with pytest.raises(InputError) as info:
        asyncio.run(getattr(car, f"{name}_async")(TRACE, **given))
    assert str(info.value) == message


@pytest.mark.parametrize("junk", [42, None, b"traces/pivot.json", ["traces/pivot.json"]])
def test_blame_refuses_a_trace_that_is_neither_a_trace_nor_a_path(junk: Any) -> None:
    """`car.blame(42)` raised pathlib's `TypeError: expected str, bytes or os.PathLike object, not
    int`, naming no argument (and `bytes`, which it refused too); `car.blame_many(42)` says
    which argument and what it takes."""
    for call in (car.blame, lambda t: asyncio.run(car.blame_async(t))):
        with pytest.raises(TypeError) as info:
            call(junk)
        assert str(info.value) == (
            "trace: expected a car.Trace or a path (str or os.PathLike), "
            f"got {type(junk).__name__} {junk!r}"
        )


def test_blame_refuses_an_empty_path() -> None:
    """`car.blame("")` said ": is a directory, expected a trace file", naming nothing."""
    with pytest.raises(InputError) as info:
        car.blame("")
    assert str(info.value) == "trace: an empty path (''); name a trace file"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            str(TRACES),
            f"{TRACES}: a directory; car.blame attributes one trace file, "
            f"car.blame_many({str(TRACES)!r}) every trace in it",
        ),
        (
            f"{TRACES}/*.json",
            f"{TRACES}/*.json: a pattern; car.blame attributes one trace file, "
            f"car.blame_many({f'{TRACES}/*.json'!r}) every trace it matches",
        ),
    ],
)
def test_blame_of_a_directory_or_a_pattern_points_at_blame_many(given: str, message: str) -> None:
    """`car.blame("traces/")` said "is a directory, expected a trace file" and a pattern "no such
    file", as `car blame traces/` attributes them all: the function that does is not named."""
    for call in (car.blame, lambda t: asyncio.run(car.blame_async(t))):
        with pytest.raises(InputError) as info:
            call(given)
        assert str(info.value) == message


async def _callback(*args: object) -> None:
    raise AssertionError("never awaited")


@pytest.mark.parametrize(
    ("name", "keyword", "what"),
    [
        ("blame", "progress", "a function (phase, done, total)"),
        ("blame_many", "on_result", "a function taking each car.TraceResult"),
        ("blame_many", "on_interrupted", "a function taking each car.TraceResult"),
    ],
)
def test_an_async_callback_is_refused_before_any_work(name: str, keyword: str, what: str) -> None:
    """car calls its callbacks and never awaits them: `on_result=async_fn` ran the batch, never ran
    the callback's body, and left only a RuntimeWarning that a coroutine was never awaited."""
    _both_refuse(
        {keyword: _callback},
        f"{keyword}= must be {what} or None, got the coroutine function '_callback': car calls it "
        "without awaiting it, so its body would never run; make it a plain function",
        name,
    )


@pytest.mark.parametrize(
    ("options", "kwargs", "message"),
    [
        ({"samples": "8"}, {}, "samples= must be a whole number, got '8' (str)"),
        ({"level": 2.0}, {}, "level= must be in [0.5, 1), got 2.0"),
        ({"adaptive": True, "confidence": "high"}, {}, "confidence= must be a number in [0.5, 1)"),
        ({}, {"concurrency": "8"}, "concurrency= must be a whole number, got '8' (str)"),
        ({}, {"concurrency": 0}, "concurrency= must be at least 1, got 0"),
        ({}, {"traces_at_once": "2"}, "traces_at_once= must be a whole number, got '2' (str)"),
        ({}, {"max_rollouts": "3"}, "max_rollouts= must be a whole number, got '3' (str)"),
        ({}, {"max_policy_calls": -1}, "max_policy_calls= must be 0 or more, got -1"),
        ({}, {"shard": (1, "2")}, "shard= must be a whole number, got '2' (str)"),
        ({}, {"shard": (3, 2)}, "shard= must be (K, N) with 1 <= K <= N, got (3, 2)"),
        # These were taken as given: `item="1"` raised TypeError ('<=' between int and str), gates
        # as a dict made every trace a backend-error ("AttributeError: 'dict' object has no
        # attribute 'check'"), `adaptive="no"` ran the adaptive method, a price of "x" was kept.
        ({"item": "1"}, {}, "item= must be a whole number, got '1' (str)"),
        ({"item": -1}, {}, "item= must be 0 or more, got -1"),
        ({"adaptive": "no"}, {}, "adaptive= must be True or False, got 'no' (str)"),
        (
            {"gates": {"min_match_rate": 0.5}},
            {},
            "gates= must be a car.gates.Gates, got {'min_match_rate': 0.5} (dict)",
        ),
        (
            {"prices": {"input_tokens": "x"}},
            {},
            "prices= must map usage counters to USD per million tokens (numbers, 0 or more), got "
            "{'input_tokens': 'x'} (dict)",
        ),
        ({"prices": [("input_tokens", 1.0)]}, {}, "prices= must map usage counters to USD"),
    ],
)
def test_blame_many_names_the_python_argument_before_any_work(
    options: dict[str, Any], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InputError) as info:
        car.blame_many(TRACE, options=car.BatchOptions(**options), **kwargs)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize(
    ("name", "given", "message"),
    [
        (
            "blame",
            {"sample": 8},
            "car.blame() got an unexpected keyword argument 'sample'; did you mean 'samples'?",
        ),
        ("blame", {"colour": True}, "car.blame() got an unexpected keyword argument 'colour'"),
        (
            "blame",
            {"store": MemoryStore()},
            "car.blame() got an unexpected keyword argument 'store'; a store is car.blame_many()'s: "
            "car.blame_many(trace, store=...) resumes a trace",
        ),
        (
            "blame_many",
            {"samples": 8},
            "car.blame_many() got an unexpected keyword argument "
            "'samples'; options for every trace go in options=car.BatchOptions(samples=...)",
        ),
        (
            "blame_many",
            {"concurency": 8},
            "car.blame_many() got an unexpected keyword argument "
            "'concurency'; did you mean 'concurrency'?",
        ),
    ],
)
def test_an_unknown_keyword_names_the_function_called_and_what_was_meant(
    name: str, given: dict[str, Any], message: str
) -> None:
    """It named `blame_async()` or `blame_many_async()`, which the caller never called, below a
    traceback "During handling of the above exception" of an unrelated "no running event loop"."""
    with pytest.raises(TypeError) as info:
        getattr(car, name)(TRACE, **given)
    assert str(info.value) == message
    assert info.value.__context__ is None


def test_an_error_from_the_run_is_not_chained_to_the_event_loop_check() -> None:
    with pytest.raises(InputError) as info:
        car.blame(TRACE, samples=0)
    assert info.value.__context__ is None


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"method": "shapley", "budget": 3},
            "permutation Shapley over 3 players needs at least 21 rollouts; budget=3 is too small",
        ),
        (
            {"method": "shapley", "budget": 50, "budget_calls": 3},
            "permutation Shapley over 3 players needs at least 21 rollouts and up to 168 policy "
            "calls; budget=50 budget_calls=3 is too small",
        ),
        (  # it said "over 1 players"
            {"method": "shapley", "players": "1", "shapley_method": "exact", "budget": 5},
            "exact Shapley over 1 player needs at least 9 rollouts (8 replicates of the 2^1 "
            "coalitions, at worst); budget=5 is too small",
        ),
    ],
)
def test_a_budget_too_small_names_the_keyword_from_python(given: dict[str, Any], message: str) -> None:
    """It named the command line's `--budget 3` (and `--budget-calls`) to a Python caller."""
    with pytest.raises(car.BudgetError) as info:
        car.blame(TRACE, **given)
    assert str(info.value) == message


def test_an_adaptive_budget_too_small_names_the_keyword_from_python() -> None:
    options = car.BatchOptions(adaptive=True, budget=3)
    [result] = car.blame_many(TRACE, options=options)
    assert result.status == "input-error"
    assert result.error is not None and result.error.endswith("; budget=3 is too small")


def test_the_command_line_names_the_option(run_cli: Callable[..., Result]) -> None:
    r = run_cli("blame", TRACE, "--samples", "0", "--no-store")
    assert (r.code, r.err) == (2, "car: error: --samples must be at least 1, got 0\n")
    r = run_cli("blame", TRACE, TRACES / "or.json", "--shapley", "exact", "--budget", "0")
    assert r.code == 2 and r.err.endswith("car: error: --budget must be at least 1 rollout, got 0\n")


def test_one_helper_names_an_argument_both_ways() -> None:
    assert option_name("match_samples") == "match_samples="
    assert option_name("fmt", "NAME") == "fmt=NAME"
    token = COMMAND_LINE.set(True)
    try:
        assert option_name("match_samples") == "--match-samples"
        assert option_name("shapley_method") == "--shapley"
        assert option_name("fmt", "NAME") == "--from NAME"
    finally:
        COMMAND_LINE.reset(token)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--players", ""], "--players: an empty value (''); give steps, agents or GROUPS"),
        (["--samples", ""], "--samples: an empty value (''); give N"),
        (
            ["--format", ""],
            "--format: an empty value (''); give table, json, jsonl, markdown, github, junit or html",
        ),
        (["--store", ""], "--store: an empty value (''); give a path"),
        (["--no-store", ""], "an empty argument (''); give a path or a value"),  # a flag takes no value
    ],
)
def test_an_empty_value_says_what_the_option_takes(
    run_cli: Callable[..., Result], argv: list[str], expected: str
) -> None:
    """`--players ''` said "give a path or a value": --players takes no path."""
    r = run_cli("blame", TRACE, *argv)
    assert (r.code, r.out, r.err) == (2, "", f"car: error: {expected}\n")


@pytest.mark.parametrize(
    ("players", "message"),
    [
        ("0;9", "step 9 is not a decision step of trace 'pivot-0'; decision steps are 0, 1, 2"),
        ("0,x", "group 1 ('0,x'): 'x' is not a step index; use 'steps', 'agents' or groups like"),
        ("0;0", "step 0 is in more than one group"),
        # int() reads all three as step indices: an Arabic-Indic three, 1_0 as 10, +1 as 1.
        ("\u0663", "group 1 ('\u0663'): '\u0663' is not a step index; use 'steps', 'agents' or"),
        ("0;1_0", "group 2 ('1_0'): '1_0' is not a step index; use 'steps', 'agents' or"),
        ("+1", "group 1 ('+1'): '+1' is not a step index; use 'steps', 'agents' or"),
    ],
)
def test_player_groups_are_named_as_given(
    run_cli: Callable[..., Result], players: str, message: str
) -> None:
    """From Python these named the command line's --players. The command line names the trace too
    (the steps are the trace's), as its --dry-run does."""
    with pytest.raises(InputError) as info:
        car.blame(TRACE, players=players, method="shapley")
    assert str(info.value).startswith(f"players={players!r}: {message}")
    said = f"car: error: {TRACE}: --players {players!r}: {message}"
    for dry in ([], ["--dry-run"]):
        r = run_cli("blame", TRACE, "--players", players, "--method", "shapley", "--no-store", *dry)
        assert r.code == 2 and r.err.startswith(said), r.err


def test_the_adaptive_and_shapley_entry_points_check_with_the_same_rules() -> None:
    """`blame_adaptive_async` and `run_shapley` kept checks of their own that named command-line
    flags from Python (`--concurrency must be at least 1`); they use `check_arguments` now."""
    from car.adaptive import blame_adaptive_async

    with pytest.raises(InputError, match=r"^concurrency= must be at least 1, got 0$"):
        asyncio.run(blame_adaptive_async(str(TRACE), concurrency=0))
    with pytest.raises(InputError, match=r"^confidence= must be in \[0\.5, 1\), got 2$"):
        asyncio.run(blame_adaptive_async(str(TRACE), confidence=2))
    with pytest.raises(InputError, match=r"^budget= must be at least 1 rollout, got 0$"):
        car.blame(str(TRACES / "and.json"), method="shapley", budget=0)


class _NoScore:
    spec = "half-a-scorer"
    deterministic = True


_POLICY = "policy= must be a spec string ('sim:NAME', 'openai:MODEL', 'path/to/policy.py@name') or a "
_POLICY += "car.Policy (an object with spec and act()), got 42 (int)"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"policy": 42}, _POLICY),
        (
            {"env": 1.5},
            "env= must be a spec string ('recorded', 'sim:NAME', 'path/to/env.py@name') or a "
            "car.Environment (an object with spec, restore() and step()), got 1.5 (float)",
        ),
        (
            {"scorer": _NoScore()},
            "scorer= must be a spec string ('tool-called:NAME', 'regex:PATTERN', "
            "'llm-judge:openai:MODEL', 'path/to/scorer.py@name') or a car.Scorer (an object with "
            "spec, deterministic and score()), got an object of type _NoScore, which has no score()",
        ),
        (
            {"progress": "bar"},
            "progress= must be a function (phase, done, total) or None, got 'bar' (str)",
        ),
    ],
)
def test_a_component_of_the_wrong_type_is_named(given: dict[str, Any], message: str) -> None:
    """`car.blame(path, policy=42)` raised AttributeError: 'int' object has no attribute 'spec'."""
    _both_refuse(given, message)


@pytest.mark.parametrize(
    ("options", "kwargs", "message"),
    [
        ({"policy": 42}, {}, _POLICY),
        ({"policy": 42, "adaptive": True}, {}, _POLICY),
        ({}, {"options": 42}, "options= must be a car.BatchOptions or None, got 42 (int)"),
        (
            {},
            {"store": "cache.sqlite"},
            "store= must be a car.store.RolloutStore (an object with get() and put()) or None, "
            "got 'cache.sqlite' (str)",
        ),
        (
            {},
            {"on_result": 1},
            "on_result= must be a function taking each car.TraceResult or None, got 1 (int)",
        ),
        (
            {},
            {"on_interrupted": 1},
            "on_interrupted= must be a function taking each car.TraceResult or None, got 1 (int)",
        ),
        (
            {},
            {"progress": print},
            "progress= must be a car.batch.BatchProgress (an object with trace_started(), "
            "trace_advanced() and trace_finished()) or None, got an object of type "
            "builtin_function_or_method, which has no trace_started(), trace_advanced() or "
            "trace_finished()",
        ),
    ],
)
def test_blame_many_names_a_component_of_the_wrong_type_before_any_work(
    options: dict[str, Any], kwargs: dict[str, Any], message: str
) -> None:
    """A policy of the wrong type was each trace's `backend-error` (AttributeError); `options=42`
    and a progress without methods raised AttributeError, `on_result=1` TypeError."""
    _both_refuse({"options": car.BatchOptions(**options), **kwargs}, message, "blame_many")


class _SyncScorer:
    spec = "sync-scorer"
    deterministic = True

    def score(self, trajectory: object, key: object) -> float:
        return 1.0


class _OneArgPolicy:
    spec = "one-arg-policy"

    async def act(self, decision: object) -> car.Action:
        return car.Action(text="x")


class _SyncStepEnv:
    spec = "sync-env"

    async def restore(self, history: object) -> None:
        return None

    def step(self, state: object, index: int, actor: str, action: object, key: object) -> None:
        return None


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"scorer": _SyncScorer()},
            "scorer= must be a car.Scorer: _SyncScorer.score() must be async "
            "(async def score(...)): car awaits it",
        ),
        (
            {"env": _SyncStepEnv()},
            "env= must be a car.Environment: _SyncStepEnv.step() must be async "
            "(async def step(...)): car awaits it",
        ),
        (
            {"policy": _OneArgPolicy()},
            "policy= must be a car.Policy: _OneArgPolicy.act() takes (decision), and car calls "
            "act(decision, key)",
        ),
        (
            {"policy": _OneArgPolicy},
            "policy= must be a car.Policy object, got the class _OneArgPolicy; pass an instance "
            "(_OneArgPolicy(...))",
        ),
    ],
)
def test_a_component_car_could_not_call_is_refused_before_any_work(
    given: dict[str, Any], message: str
) -> None:
    """A Python object whose method is a plain `def`, takes other arguments than car passes, or is
    a class rather than an instance ran the whole analysis: every rollout ended in a TypeError and
    `car.blame` returned a report of status backend-errors, `car.blame_many` an error per trace.
    Loaded from a file (`--scorer f.py@s`), a plain `def` was refused as it loaded."""
    _both_refuse(given, message)
    _both_refuse({"options": car.BatchOptions(**given)}, message, "blame_many")


class _Unnamed:
    def __init__(self, spec: object) -> None:
        self.spec = spec

    async def act(self, decision: object, key: object) -> car.Action:
        return car.Action(text="x")


@pytest.mark.parametrize(
    ("spec", "given"), [(None, "None (NoneType)"), (42, "42 (int)"), (" ", "' ' (str)")]
)
def test_a_component_whose_spec_is_not_a_name_is_refused_before_any_work(
    spec: object, given: str
) -> None:
    """`spec=None` ran every rollout, then failed building the report with pydantic's
    "1 validation error for Specs"; an empty one made a report and store key naming nothing."""
    message = (
        "policy= must be a car.Policy: _Unnamed.spec names it in the report and the store, so it "
        f"must be a non-empty string, got {given}"
    )
    _both_refuse({"policy": _Unnamed(spec)}, message)
    _both_refuse({"options": car.BatchOptions(policy=_Unnamed(spec))}, message, "blame_many")


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"fail_on_blame": "any"},
            "fail_on_blame= must be a tuple of actor ids, step indices or 'any', got 'any' (str); "
            "for one, ('any',)",
        ),
        (
            {"fail_on_blame": 1},
            "fail_on_blame= must be a tuple of actor ids, step indices or 'any', got 1 (int)",
        ),
        ({"min_match_rate": "0.5"}, "min_match_rate= must be a number in [0, 1], got '0.5' (str)"),
        ({"min_match_rate": 2}, "min_match_rate= must be in [0, 1], got 2"),
    ],
)
def test_gates_of_the_wrong_type_are_refused_in_python_words(
    given: dict[str, Any], message: str
) -> None:
    """`Gates(fail_on_blame="any")` was the gates 'a', 'n' and 'y', so it tripped on no step;
    `min_match_rate="0.5"` raised TypeError ('<=' not supported); a range error named the command
    line's `--min-match-rate`."""
    from car.gates import Gates

    with pytest.raises(InputError) as info:
        Gates(**given)
    assert str(info.value) == message


def test_the_component_check_asks_what_the_protocols_ask() -> None:
    """The members are named in `car.arguments` (which loads no protocol); they must be the
    `runtime_checkable` protocols' own: an object passes exactly when it is an instance."""
    from car.arguments import check_arguments
    from car.protocols import Environment, Policy, Scorer
    from car.specs import make_env, make_policy, make_scorer

    trace = car.load_trace(TRACE)
    real = [
        make_policy("sim:pivot", trace),
        make_env("sim:pivot", trace),
        make_scorer("sim:pivot", trace),
    ]
    for name, protocol in (("policy", Policy), ("env", Environment), ("scorer", Scorer)):
        for value in (*real, _NoScore(), object()):
            try:
                check_arguments(**{name: value})
                passed = True
            except InputError:
                passed = False
            assert passed == isinstance(value, protocol), (name, value)


HUGE = 10**20


@pytest.mark.parametrize("option", ["--samples", "--match-samples", "--budget"])
def test_a_count_no_machine_could_plan_is_refused_before_the_estimate(
    run_cli: Callable[..., Result], option: str
) -> None:
    """`--samples 100000000000000000000` passed: `--dry-run` printed an estimate of 3e20 rollouts,
    and the run planned one job per sample until the system killed it (exit 137, no word)."""
    from car.arguments import MOST_PLANNED

    extra = ["--method", "shapley"] if option == "--budget" else []
    res = run_cli("blame", TRACE, option, str(HUGE), *extra, "--dry-run")
    assert res.code == 2
    assert res.out == ""  # no estimate of a run that cannot happen
    assert res.err.startswith(f"car: error: {option} must be at most {MOST_PLANNED} (")
    assert res.err.endswith(f"got {HUGE}\n") and "memory" in res.err
    assert res.err.count("\n") == 1
    # The bound itself is allowed (its estimate is printed, nothing is run).
    ok = run_cli("blame", TRACE, option, str(MOST_PLANNED), *extra, "--dry-run")
    assert ok.code == 0, ok.err


@pytest.mark.parametrize(
    ("option", "most", "extra"),
    [
        ("--samples", 10, []),
        ("--match-samples", 12, ["--samples", "4"]),
        ("--match-samples", 12, ["--adaptive"]),
    ],
)
def test_samples_a_long_trace_cannot_keep_are_refused_before_any_rollout(
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
    option: str,
    most: int,
    extra: list[str],
) -> None:
    """What a run keeps grows with the trace's length too: `--samples 24000000` (under the cap) of a
    200-step trace started, planned 4.8 billion rollouts and would have needed some 250 GB. Here a
    machine of 6000 bytes keeps 10 samples (50 bytes a step) or 12 match samples (40) of 12 steps."""
    monkeypatch.setattr("car.arguments._memory", lambda: 6000)
    trace = TRACES / "long-and.json"
    for dry in ([], ["--dry-run"]):
        res = run_cli("blame", trace, option, str(most + 1), *extra, "--no-store", *dry)
        assert res.code == 2, res.err
        assert res.err.endswith(
            f"car: error: {trace}: {option} must be at most {most} on a trace of 12 decision steps "
            f"(a run keeps every one's result at every step until it ends, at least "
            f"{50 if option == '--samples' else 40} bytes a step; more would not fit in this "
            f"machine's memory), got {most + 1}\n"
        )
        assert "rollouts done" not in res.err
    ok = run_cli("blame", trace, option, str(most), *extra, "--no-store", "--dry-run")
    assert ok.code == 0, ok.err
    with pytest.raises(InputError, match=r"^samples= must be at most 10 on a trace of 12 "):
        car.blame(trace, samples=11)


def test_a_count_no_machine_could_plan_is_refused_from_python() -> None:
    from car.arguments import MOST_PLANNED

    with pytest.raises(InputError, match=rf"^samples= must be at most {MOST_PLANNED} \("):
        car.blame(TRACE, samples=HUGE)


def test_a_configured_count_no_machine_could_plan_names_where_it_was_set(
    run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from car.arguments import MOST_PLANNED

    monkeypatch.setenv("CAR_SAMPLES", str(HUGE))
    res = run_cli("blame", TRACE, "--dry-run")
    assert res.code == 2 and res.out == ""
    assert res.err == (
        f"car: error: environment variable CAR_SAMPLES: expected at most {MOST_PLANNED}; got '{HUGE}'\n"
    )
    monkeypatch.delenv("CAR_SAMPLES")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "car.toml").write_text(f"match_samples = {HUGE}\n")
    res = run_cli("blame", TRACE, "--dry-run")
    assert res.code == 2 and res.out == ""
    assert res.err == (
        f"car: error: {tmp_path / 'car.toml'}: match_samples: expected at most {MOST_PLANNED}; "
        f"got {HUGE}\n"
    )
