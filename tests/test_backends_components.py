"""llm-sim environment, llm-judge scorer, configuration and `car plugins`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import car
from car.backends import http as http_backend
from car.backends import openai as openai_backend
from car.backends.judge import normalise_answer
from car.backends.options import configure
from car.cli import main
from car.config import resolve
from car.errors import InputError, SpecError
from car.testing import Faults, LoopbackServer
from car.trace import Action, Message
from tests.conftest import ROOT

TRACE = str(ROOT / "traces" / "support-refund.json")


@pytest.fixture(autouse=True)
def _fresh() -> None:
    # Capabilities and limits are cached per base URL; ports get reused across tests.
    openai_backend._CAPS.clear()
    http_backend._LIMITERS.clear()


# -- llm-sim -----------------------------------------------------------------------------------------
def _tool_sim(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]], u: float) -> Action:
    user = messages[-1].content
    if "random word" in user:  # the capability probe
        return Action(text="ok")
    assert "Now simulate this call" in user
    return Action(text=json.dumps({"status": "escalated", "ticket": "SIM-1"}))


def test_llm_sim_answers_unseen_calls_and_says_so() -> None:
    # The support-refund record never calls `escalate`: the recorded environment errors on it.
    plain = car.blame(TRACE, env="recorded", seed=1, samples=16)
    assert plain.budget.errored > 0
    with LoopbackServer({"toolsim": _tool_sim}) as server, configure(base_url=server.url):
        report = car.blame(TRACE, env="llm-sim:openai:toolsim", seed=1, samples=16)
        prompts = [b["messages"][-1]["content"] for _, b in server.requests]
    assert report.budget.errored == 0
    assert report.locus == 1
    assert any("observations were simulated" in n for n in report.notes)
    prompt = next(p for p in prompts if "escalate(" in p)
    assert "Tool `escalate`" in prompt and '"reason"' in prompt  # the tool's schema
    assert "lookup_order(" in prompt and "refund_window_days" in prompt  # recorded outputs


@pytest.mark.parametrize(
    ("kind", "fault", "said"),
    [
        ("openai", "refusal", "were refusals"),
        ("anthropic", "refusal", "were refusals"),
        ("openai", "length", "were cut at max tokens"),
        ("anthropic", "length", "were cut at max tokens"),
    ],
)
def test_llm_sim_says_how_many_simulated_outputs_were_refusals_or_cut(
    kind: str, fault: str, said: str
) -> None:
    """A refusal ("I'm sorry, but I can't help with that.") became the tool's output, and an answer
    cut at max tokens too, with no word in the report; the policy's own draws are counted so."""
    probe = ["ok"] * 6 if kind == "openai" else []  # the capability probe gets plain answers
    faults = Faults(script=probe, rates={fault: 1.0})
    with LoopbackServer({"toolsim": _tool_sim}, faults=faults) as server:
        url = server.url if kind == "openai" else server.anthropic_url
        with configure(base_url=url):
            report = car.blame(TRACE, env=f"llm-sim:{kind}:toolsim", seed=1, samples=16)
    (simulated,) = [n for n in report.notes if "observations were simulated" in n]
    count = int(simulated.split(": ")[1].split()[0])
    line = f"llm-sim:{kind}:toolsim: {count} of {count} answers {said} (used as the tool's output)"
    assert line in report.notes


# -- llm-judge ---------------------------------------------------------------------------------------
def _rubric_judge(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]], u: float) -> Action:
    transcript = messages[-1].content
    return Action(text="Verdict: FAIL" if "call issue_refund" in transcript else "Verdict: PASS")


def _noisy_judge(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]], u: float) -> Action:
    right = _rubric_judge(messages, tools, u).text
    if u < 0.1:  # flips 10% of verdicts
        return Action(text="PASS" if right.endswith("FAIL") else "FAIL")
    return Action(text=right)


def test_rubric_judge_finds_the_locus() -> None:
    with LoopbackServer({"judge": _rubric_judge}) as server, configure(base_url=server.url):
        report = car.blame(TRACE, scorer="llm-judge:openai:judge", seed=2, samples=16)
        system = next(b["messages"][0]["content"] for _, b in server.requests if len(b["messages"]) == 2)
    assert report.locus == 1
    assert report.factual.estimate == 1.0 and not report.factual_exact
    assert "FAIL" in system


def test_repeated_judging_reports_judge_noise_separately() -> None:
    with LoopbackServer({"judge": _noisy_judge}) as server, configure(base_url=server.url):
        report = car.blame(TRACE, scorer="llm-judge:openai:judge?repeats=3", seed=3, samples=8)
    note = next(n for n in report.notes if n.startswith("judge noise"))
    assert "3 judgements per trajectory" in note and "separate from the policy noise" in note


def test_a_judge_says_how_many_of_its_answers_were_cut_at_max_tokens() -> None:
    faults = Faults(script=["ok"] * 6, rates={"length": 1.0})  # the probe gets plain answers
    with LoopbackServer({"judge": _rubric_judge}, faults=faults) as server:
        with configure(base_url=server.url):
            report = car.blame(TRACE, scorer="llm-judge:openai:judge", seed=2, samples=4)
        judged = server.count("chat/completions") - 6
    line = f"llm-judge:openai:judge: {judged} of {judged} answers were cut at max tokens"
    line += " (read as the judgement)"
    assert line in report.notes


def _extractor(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]], u: float) -> Action:
    answers = [ln for ln in messages[-1].content.splitlines() if "ANSWER:" in ln]
    return Action(text=answers[-1].split("ANSWER:", 1)[1].strip() if answers else "NONE")


def test_extract_then_compare() -> None:
    trace = str(ROOT / "traces" / "research-team.json")
    spec = "llm-judge:openai:extract?mode=extract&expected=8402611"
    with LoopbackServer({"extract": _extractor}) as server, configure(base_url=server.url):
        report = car.blame(trace, scorer=spec, seed=0, samples=12, method="contrastive")
    assert report.factual.estimate == 1.0  # the recorded answer is the wrong figure
    # The extracted answer fails exactly when the simulation's own scorer says the figure is wrong:
    # on the same seed every rollout scores the same, so every step's rescue count agrees.
    builtin = car.blame(trace, seed=0, samples=12, method="contrastive")
    counts = [(s.rescue.estimate, s.rescue.n) for s in report.steps if s.rescue is not None]
    assert counts == [(s.rescue.estimate, s.rescue.n) for s in builtin.steps if s.rescue is not None]
    assert len(counts) == 5 and any(0 < rate < 1 for rate, _ in counts)
    assert normalise_answer("8,402,611.") == normalise_answer("8402611")
    assert normalise_answer("Paris") != normalise_answer("9,100,000")


@pytest.mark.parametrize("mode", ["extract", "rubric"])
def test_a_judge_that_refuses_scores_nothing(mode: str) -> None:
    """In extract mode a judge's refusal ("I'm sorry, but I can't help with that.") was compared
    with the expected answer as if the agent had said it, so every refusal scored the run a
    failure: it says nothing about the run, so it scores nothing, as a rubric judge's does."""
    trace = str(ROOT / "traces" / "research-team.json")
    spec = f"llm-judge:openai:extract?mode={mode}&expected=8402611"
    faults = Faults(script=["ok"] * 6, rates={"refusal": 1.0})  # the probe gets plain answers
    with LoopbackServer({"extract": _extractor}, faults=faults) as server:
        with configure(base_url=server.url):
            report = car.blame(trace, scorer=spec, seed=0, samples=4, method="contrastive")
        judged = server.count("chat/completions") - 6
    assert judged > 0 and report.budget.unscorable == report.budget.rollouts
    assert all(s.rescue is None or s.rescue.n == 0 for s in report.steps)
    line = f"{spec}: {judged} of {judged} answers were refusals (not scored)"
    assert line in report.notes


def test_a_judge_and_a_simulated_environment_may_name_their_own_server() -> None:
    """They took the policy's --base-url (and key, temperature, max_tokens) with no way out: a
    hosted judge beside a local policy sent its requests to the local server."""
    from car.sim import scenario_for
    from car.testing import ScenarioModel

    policy_models = {"support-refund": ScenarioModel(scenario_for("support-refund"))}
    with (
        LoopbackServer(policy_models) as local,
        LoopbackServer({"judge": _rubric_judge, "toolsim": _tool_sim}) as hosted,
        configure(base_url=local.url),
    ):
        report = car.blame(
            TRACE,
            policy="openai:support-refund",
            scorer=f"llm-judge:openai:judge?base_url={hosted.url}&temperature=0&max_tokens=64",
            env=f"llm-sim:openai:toolsim?base_url={hosted.url}",
            seed=2,
            samples=8,
            match_samples=0,
            method="contrastive",
        )
        local_models = {b["model"] for _, b in local.requests}
        hosted_bodies = [b for _, b in hosted.requests]
    assert report.budget.errored == 0 and report.factual.estimate == 1.0
    assert local_models == {"support-refund"}
    judged = [b for b in hosted_bodies if b["model"] == "judge" and len(b["messages"]) == 2]
    assert judged and all(b["temperature"] == 0 and b["max_tokens"] == 64 for b in judged)


def test_judge_spec_errors() -> None:
    trace = car.load_trace(TRACE)
    from car.specs import make_scorer

    with configure(base_url="http://127.0.0.1:9/v1"):
        with pytest.raises(SpecError, match="unknown option 'mdoe'"):
            make_scorer("llm-judge:openai:m?mdoe=extract", trace)
        with pytest.raises(SpecError, match="needs the expected answer"):
            make_scorer("llm-judge:openai:m?mode=extract", trace)
        with pytest.raises(SpecError, match="name a model"):
            make_scorer("llm-judge:openai:", trace)
        with pytest.raises(SpecError, match="base_url 'ftp://x' is not an http"):
            make_scorer("llm-judge:openai:m?base_url=ftp://x", trace)
        with pytest.raises(SpecError, match="temperature must be a number from 0 to 2, got 'hot'"):
            make_scorer("llm-judge:openai:m?temperature=hot", trace)
        from car.specs import make_env

        with pytest.raises(SpecError, match=r"environment 'llm-sim:openai:m\?x=1': unknown option 'x'"):
            make_env("llm-sim:openai:m?x=1", trace)
        with pytest.raises(SpecError, match="max_tokens must be a whole number >= 1, got '0'"):
            make_env("llm-sim:openai:m?max_tokens=0", trace)
        # An unset variable is named with the spec that named it (the key's lookup blamed a flag,
        # "--api-key-env NO_SUCH_KEY", that the user never gave).
        with pytest.raises(
            SpecError,
            match=r"scorer 'llm-judge:openai:m\?api_key_env=NO_SUCH_KEY': api_key_env=NO_SUCH_KEY: "
            "that environment variable is not set or empty",
        ):
            make_scorer("llm-judge:openai:m?api_key_env=NO_SUCH_KEY", trace)


# -- configuration -----------------------------------------------------------------------------------
def test_precedence_cli_over_env_over_file(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.car]\nsamples = 5\nseed = 7\nbase_url = "http://file/v1"\nconcurrency = 3\n'
    )
    cli = {"samples": 32, "seed": 0, "concurrency": 8, "base_url": None, "level": 0.95}
    env = {"CAR_SEED": "9", "CAR_CONCURRENCY": "4", "CAR_UNRELATED": "x"}
    out = resolve({**cli, "concurrency": 2}, {"concurrency"}, env, tmp_path)
    assert out["samples"] == 5  # file over default
    assert out["seed"] == 9  # environment over file
    assert out["concurrency"] == 2  # command line over everything
    assert out["base_url"] == "http://file/v1"
    assert out["level"] == 0.95  # nothing set it: the default


def test_car_toml_is_found_from_a_subfolder(tmp_path: Path) -> None:
    (tmp_path / "car.toml").write_text("samples = 11\n")
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    assert resolve({"samples": 32}, set(), {}, sub)["samples"] == 11


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[tool.car]\nsample = 3\n", "unknown key 'sample'; did you mean 'samples'?"),
        ("[tool.car]\nsamples = 0\n", "samples: expected at least 1; got 0"),
        ("[tool.car]\ntemperature = inf\n", "temperature: expected a finite number; got inf"),
        ("[tool.car]\nscorer = ''\n", "scorer: expected a non-empty string; got ''"),
        ("[tool.car]\nsamples = 'many'\n", "samples"),
        ("[tool.car\n", "invalid TOML"),
    ],
)
def test_bad_configuration_is_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(InputError, match=r"pyproject\.toml") as info:
        resolve({}, set(), {}, tmp_path)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("CAR_SAMPLES", "lots", "expected an integer"),
        ("CAR_CONCURRENCY", "0", "expected at least 1"),
        ("CAR_Min_Effect", "2", "expected less than 1"),  # named as the user spelled it
        # float() reads these: inf would be sent as `Infinity` or waited for
        ("CAR_TEMPERATURE", "inf", "expected a finite number"),
        ("CAR_BACKOFF_BASE", "inf", "expected a finite number"),
        ("CAR_TIMEOUT", "nan", "expected a finite number"),
        # the spec's own check said "empty policy spec", naming neither variable nor file
        ("CAR_POLICY", "", "expected a non-empty string"),
        ("CAR_API_KEY_ENV", "", "expected a non-empty string"),
    ],
)
def test_bad_environment_value_names_the_variable(variable: str, value: str, message: str) -> None:
    """The error named the key (`concurrency`), not the variable the user set (`CAR_CONCURRENCY`)."""
    with pytest.raises(InputError) as info:
        resolve({}, set(), {variable: value}, Path("/"))
    assert str(info.value) == f"environment variable {variable}: {message}; got {value!r}", info.value


def test_bad_environment_value_is_one_line_naming_the_variable_on_the_command_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CAR_CONCURRENCY", "0")
    with pytest.raises(SystemExit) as info:
        main(["blame", TRACE, "--no-store"])
    assert info.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("car: error: environment variable CAR_CONCURRENCY: ") and "'0'" in line


def test_cli_reads_config_and_exits_2_on_unknown_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = Path(TRACE).resolve()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "car.toml").write_text("samples = 3\nmatch_samples = 1\n")
    main(["blame", str(trace), "--format", "json"])
    assert json.loads(capsys.readouterr().out)["samples"] == 3
    (tmp_path / "car.toml").write_text("smaples = 3\n")
    with pytest.raises(SystemExit) as info:
        main(["blame", str(trace)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "car.toml: unknown key 'smaples'" in err


def test_an_unset_key_variable_from_the_config_is_named_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The policy's origin was added after the line that already named where `api_key_env` was set:
    "... api_key_env = 'NOPE_KEY': ... not set or empty (from ... [tool.car], key policy)"."""
    trace = Path(TRACE).resolve()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NOPE_KEY", raising=False)
    (tmp_path / "car.toml").write_text('api_key_env = "NOPE_KEY"\npolicy = "openai:gpt-4o-mini"\n')
    with pytest.raises(SystemExit) as info:
        main(["blame", str(trace), "--no-store"])
    assert info.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith(
        f"{tmp_path / 'car.toml'}: api_key_env = 'NOPE_KEY': "
        "that environment variable is not set or empty"
    )


# -- plugins ------------------------------------------------------------------------------------------
def test_plugins_lists_builtins_and_entry_points(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from importlib.metadata import EntryPoint

    import car.plugins as plugins

    fake = EntryPoint(name="mypolicy", value="my_pkg.policies:make", group="car.policies")

    def entry_points(group: str) -> list[EntryPoint]:
        return [fake] if group == "car.policies" else []

    monkeypatch.setattr(plugins, "entry_points", entry_points)
    main(["plugins"])
    out = capsys.readouterr().out
    assert "openai:MODEL" in out and "built-in (car.backends.openai)" in out
    assert "anthropic:MODEL" in out and "llm-sim:" in out and "llm-judge:" in out
    assert "mypolicy[:ARG]" in out and "entry point car.policies" in out
    assert "my_pkg.policies:make" in out


def test_plugins_spell_the_backend_specs_as_the_guide_does(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/backends.md's table: llm-sim takes the same `?OPTIONS` as llm-judge (its own server)."""
    guide = (ROOT / "docs" / "backends.md").read_text(encoding="utf-8").replace("\\|", "|")
    main(["plugins"])
    listed = capsys.readouterr().out
    for spec in ("openai:MODEL", "anthropic:MODEL"):
        assert f"`{spec}`" in guide and f"  {spec} " in listed
    for spec in (
        "llm-sim:[openai:|anthropic:]MODEL[?OPTIONS]",
        "llm-judge:[openai:|anthropic:]MODEL[?OPTIONS]",
    ):
        assert f"`{spec}`" in guide and f"  {spec} " in listed


def test_unknown_backend_name_suggests_the_right_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["blame", TRACE, "--policy", "opnai:gpt-4o"])
    assert info.value.code == 2
    assert "did you mean 'openai:gpt-4o'?" in capsys.readouterr().err


def test_python_policy_plugin_example_runs(tmp_path: Path) -> None:
    # The documented example in docs/backends.md: a policy and a stateful environment in a file.
    example = ROOT / "docs" / "examples" / "plugins.py"
    report = car.blame(
        TRACE,
        policy=f"{example}@policy",
        env=f"{example}@make_env",
        scorer="tool-called:issue_refund",
        seed=1,
        samples=16,
    )
    assert report.locus == 1
    assert report.budget.errored == 0


def test_judge_rubric_may_come_from_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `rubric=@file.txt` is documented; the `@` must not make the spec a Python plugin file.
    from car.specs import make_scorer
    from car.trace import load_trace

    monkeypatch.chdir(tmp_path)
    Path("rubric.txt").write_text("FAIL if the refund was issued.", encoding="utf-8")
    with configure(base_url="http://127.0.0.1:9/v1"):  # built only, never called
        judge = make_scorer("llm-judge:openai:M?rubric=@rubric.txt", load_trace(TRACE))
    assert judge.rubric == "FAIL if the refund was issued."  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("where", "named"),
    [
        ("option", "--base-url"),
        ("CAR_BASE_URL", "environment variable CAR_BASE_URL:"),
        ("OPENAI_BASE_URL", "OPENAI_BASE_URL 'notaurl'"),
    ],
)
def test_malformed_base_url_is_a_usage_error(
    where: str, named: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["blame", TRACE, "--policy", "openai:m", "--no-store"]
    if where == "option":
        args += ["--base-url", "notaurl"]
    else:
        monkeypatch.setenv(where, "notaurl")
    monkeypatch.setenv("CAR_MAX_ATTEMPTS", "1")  # were it tried, fail quickly (exit 3)
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0] and "'notaurl'" in err[0]
    assert "not an http:// or https:// URL" in err[0]


@pytest.mark.parametrize(
    "url", ["http://[::1/v1", "http://[::1]x/v1", "http://[zz]/v1", "http://a]b/v1"]
)
@pytest.mark.parametrize(
    ("where", "named"),
    [
        ("option", "--base-url"),
        ("CAR_BASE_URL", "environment variable CAR_BASE_URL:"),
        ("OPENAI_BASE_URL", "OPENAI_BASE_URL"),
        ("pyproject", "pyproject.toml: [tool.car]: base_url"),
    ],
)
def test_unparsable_base_url_is_a_usage_error_naming_its_source(
    url: str,
    where: str,
    named: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # urlsplit raises on broken [IPv6] brackets; that used to escape as "ValueError: Invalid IPv6 URL"
    # (exit 3) or "Value error, Invalid IPv6 URL".
    monkeypatch.chdir(tmp_path)
    args = ["blame", TRACE, "--policy", "openai:m", "--no-store"]
    if where == "option":
        args += ["--base-url", url]
    elif where == "pyproject":
        (tmp_path / "pyproject.toml").write_text(f"[tool.car]\nbase_url = {json.dumps(url)}\n")
    else:
        monkeypatch.setenv(where, url)
    monkeypatch.setenv("CAR_MAX_ATTEMPTS", "1")  # were it tried, fail quickly (exit 3)
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0] and repr(url) in err[0], err
    assert "not an http:// or https:// URL with a host" in err[0]
    assert "Traceback" not in err[0] and "rror," not in err[0]


def test_a_chat_log_s_first_user_turn_is_the_task_a_judge_and_a_simulator_see(
    tmp_path: Path,
) -> None:
    """A chat log records no task (its first user message is a step, replayed as recorded): the
    judge and the simulated environment were shown `Task: ""`."""
    import asyncio

    from car.importers import load_any
    from car.protocols import Trajectory, Turn
    from car.rng import EventKey
    from car.specs import make_env, make_scorer

    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2}'}}
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "4"},
        {"role": "assistant", "content": "ANSWER: 4"},
    ]
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"model": "m", "messages": messages}), encoding="utf-8")
    trace = load_any(path)
    assert trace.task == ""  # the trace keeps the record: the question is step 0
    turns = tuple(
        Turn(index=s.index, actor=s.actor, action=s.action, observations=s.observations, mode="hold")
        for s in trace.steps
    )
    unseen = trace.steps[1].action.tool_calls[0].model_copy(update={"arguments": {"a": 3}})

    async def judge_and_simulate() -> None:
        scorer = make_scorer("llm-judge:openai:extract?mode=extract&expected=4", trace)
        env = make_env("llm-sim:openai:toolsim", trace)
        try:
            assert await scorer.score(Trajectory(trace, turns), EventKey(0, 0, 0, "score")) == 0.0
            await env.unseen(unseen, 0, 1, EventKey(0, 0, 1, "env"))  # type: ignore[attr-defined]
        finally:
            await scorer.aclose()  # type: ignore[attr-defined]
            await env.aclose()  # type: ignore[attr-defined]

    with LoopbackServer({"extract": _extractor, "toolsim": _tool_sim}) as server:
        with configure(base_url=server.url):
            asyncio.run(judge_and_simulate())
        prompts = [b["messages"][-1]["content"] for _, b in server.requests]
    assert any(p.startswith('Task: "What is 2+2?"\n') for p in prompts)
    assert any(p.startswith("Task of the run: What is 2+2?\n") for p in prompts)
