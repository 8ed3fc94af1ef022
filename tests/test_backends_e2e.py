"""`car blame` end to end against the loopback server: planted locus, faults, errors, secrets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

import pytest

import car
from car.backends import http as http_backend
from car.backends import openai as openai_backend
from car.backends.options import configure
from car.cli import main
from car.sim import scenario_for
from car.testing import Faults, LoopbackServer, ScenarioModel, TextModel
from car.trace import Action
from tests.conftest import ROOT

TRACE = str(ROOT / "traces" / "support-refund.json")
KEY = "sk-loopback-7f3a9c1e5d2b-SECRET"
POLICY = "openai:support-refund"
ANTHROPIC = "anthropic:support-refund"


def _server(**kw: Any) -> LoopbackServer:
    return LoopbackServer({"support-refund": ScenarioModel(scenario_for("support-refund"))}, **kw)


@pytest.fixture(autouse=True)
def _fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAR_BACKOFF_BASE", "0.005")  # keeps fault tests quick; see config.py
    # Capabilities and limits are cached per base URL for the process; a later test's server may
    # get a port an earlier one used, with other switches.
    openai_backend._CAPS.clear()
    http_backend._LIMITERS.clear()
    http_backend._NOTICED.clear()  # notices print once per process; tests read them from stderr


def _blame(policy: str, url: str, *extra: str) -> list[str]:
    """`car blame` on the support-refund trace with a policy served at `url`."""
    return ["blame", TRACE, "--policy", policy, "--base-url", url, *extra]


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    openai_backend._CAPS.clear()
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_blame_finds_the_planted_locus_over_openai(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with _server(api_key=KEY) as server:
        code, out, err = _cli(
            _blame(POLICY, server.url, "--format", "json"),
            capsys,
        )
    assert code == 0, err
    report = json.loads(out)
    assert report["locus"] == 1
    assert report["specs"]["policy"] == "openai:support-refund"
    assert report["budget"]["errored"] == 0
    assert any("seeded per sample" in n for n in report["notes"])
    assert KEY not in out + err


def test_same_seed_same_report_over_http(monkeypatch: pytest.MonkeyPatch) -> None:
    # A seeded server plus event-keyed seeds: the report does not depend on timing or concurrency.
    with _server() as server, configure(base_url=server.url):
        a = car.blame(TRACE, policy=POLICY, seed=4, samples=12, concurrency=2)
        b = car.blame(TRACE, policy=POLICY, seed=4, samples=12, concurrency=12)
    strip = {"notes"}
    assert a.model_dump(exclude=strip) == b.model_dump(exclude=strip)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_locus_found_across_seeds_despite_faults(seed: int) -> None:
    faults = Faults(
        rates={"429": 0.08, "500": 0.04, "drop": 0.03, "malformed": 0.03},
        retry_after="0",
        retry_after_ms="5",
        seed=seed,
    )
    # 18% of requests fail; 10 attempts make a request that never gets through (0.18**10 per
    # request) practically impossible, so any errored rollout would be a bug.
    opts = {"base_url": None, "backoff_base": 0.005, "max_attempts": 10}
    with _server(faults=faults) as server, configure(**{**opts, "base_url": server.url}):
        report = car.blame(TRACE, policy=POLICY, seed=seed)
    assert report.locus == 1
    assert report.budget.errored == 0  # every fault was absorbed by retries
    assert any("retried" in n for n in report.notes)


def test_rate_limits_cut_the_shared_limit_and_are_reported() -> None:
    faults = Faults(script=["429"] * 6, retry_after="0", retry_after_ms="5")
    with _server(faults=faults) as server, configure(base_url=server.url, backoff_base=0.005):
        report = car.blame(TRACE, policy=POLICY, samples=8, match_samples=2)
    assert report.locus in (1, None)
    note = next(n for n in report.notes if "retried" in n)
    assert "429 x6" in note and "concurrency limit cut" in note
    assert " cut 0 times" not in note


def test_blame_over_the_anthropic_wire_format(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    faults = Faults(rates={"429": 0.05, "500": 0.05}, retry_after="0", retry_after_ms="5")
    with _server(api_key=KEY, faults=faults) as server:
        code, out, err = _cli(
            _blame("anthropic:support-refund", server.anthropic_url, "--format", "json"),
            capsys,
        )
        assert all("seed" not in b for _, b in server.requests)
    assert code == 0, err
    report = json.loads(out)
    assert report["locus"] == 1
    assert any("no coupling" in n for n in report["notes"])
    assert "common random numbers unavailable" in err
    assert KEY not in out + err


@pytest.mark.parametrize(
    ("policy", "coupling"), [(POLICY, "seeded per sample"), (ANTHROPIC, "no coupling")]
)
def test_a_rerun_served_from_the_store_says_what_the_first_run_said_of_the_backend(
    capsys: pytest.CaptureFixture[str], policy: str, coupling: str
) -> None:
    """A rerun served entirely from the store dropped the OpenAI policy's line on the server's
    capabilities and how samples were coupled (it learns them only when it asks the server): the
    figures agreed and the notes did not. The rerun runs with the server gone, so a request it sent
    would error a rollout or lose the match rate, and the reports would differ."""
    args = ["--samples", "4", "--match-samples", "2", "--format", "json", "--store", "s.sqlite"]
    with _server() as server:
        url = server.url if policy == POLICY else server.anthropic_url
        code, first, err = _cli(_blame(policy, url, *args), capsys)
        assert code == 0, err
    code, again, err = _cli(_blame(policy, url, *args), capsys)
    assert code == 0, err
    first_report, rerun = json.loads(first), json.loads(again)
    assert any(coupling in n for n in first_report["notes"])
    assert rerun == first_report


def test_errored_rollouts_are_counted_shown_and_exit_3_keeps_the_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_file = tmp_path / "report.json"
    with _server(faults=Faults(rates={"500": 1.0})) as server:
        code, _out, err = _cli(
            _blame(
                POLICY,
                server.url,
                "--samples",
                "3",
                "--match-samples",
                "1",
                "--format",
                "json",
                "-o",
                str(out_file),
            ),
            capsys,
        )
    assert code == 3
    assert "too many rollouts errored" in err and "HTTP 500" in err
    report = json.loads(out_file.read_text())
    assert report["status"] == "backend-errors"
    assert report["budget"]["errored"] == report["budget"]["rollouts"] - 1  # the copied record
    assert any("rollouts errored and are excluded" in n for n in report["notes"])


def test_some_errored_rollouts_are_excluded_but_the_run_succeeds() -> None:
    # Each failure costs one rollout; fewer than the threshold: still a result, with the count shown.
    faults = Faults(script=["ok"] * 6, rates={"500": 0.2}, seed=3)  # the probe gets through
    with _server(faults=faults) as server, configure(base_url=server.url, max_attempts=1):
        report = car.blame(TRACE, policy=POLICY, seed=2)
    assert report.status == "ok"
    assert 0 < report.budget.errored < report.budget.rollouts / 2
    assert any(f"{report.budget.errored} of" in n for n in report.notes)


@pytest.mark.parametrize("fault", ["quota", "drop"])
def test_a_judge_whose_server_fails_is_a_backend_failure(
    fault: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A judge out of credit, or one whose server never answers, exited 2 (an input error, as for a
    scorer that raised) where the policy's own server failing the same way exits 3."""
    with _server() as server, LoopbackServer(faults=Faults(rates={fault: 1.0})) as judge_server:
        judge = f"llm-judge:openai:judge?base_url={judge_server.url}"
        args = _blame(POLICY, server.url, "--samples", "3", "--match-samples", "1", "--scorer", judge)
        code, _out, err = _cli([*args, "--no-progress"], capsys)
    assert code == 3, err
    assert "too many rollouts errored (" in err and f"first: scoring: {judge}: " in err


def test_a_judge_whose_server_fails_on_the_recorded_run_alone_is_a_backend_failure(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The judge's server failing on every judgement of the recorded run leaves nothing to compare
    against, however few other rollouts errored: that exited 2, an input error, as if the scorer
    were what to fix, where the same server failing on more rollouts exits 3."""

    def judge(messages: Any, tools: Any, u: float) -> Action:
        if "I have refunded order A-1042" in messages[-1].content:  # the recorded run's ending
            raise RuntimeError("overloaded")  # the server answers HTTP 500
        return Action(text="FAIL")

    # The policy answers with a random word, so only the record copied ends as the record does.
    with LoopbackServer({"judge": judge, "*": TextModel()}) as server:
        args = _blame("openai:words", server.url, "--scorer", "llm-judge:openai:judge")
        args += ["--samples", "8", "--method", "contrastive", "--max-attempts", "1"]
        code, out, err = _cli([*args, "--no-progress"], capsys)
    assert code == 3, err
    assert "the scorer failed on the recorded run (scoring: " in err and "HTTP 500" in err
    assert "too many rollouts errored" not in err  # fewer than half did: the record is the cause
    assert "car cannot name a decisive step" in out  # the report is still printed


@pytest.mark.parametrize(
    ("policy", "suffix", "advice"),
    [
        (POLICY, "", "An OpenAI-compatible API is served under /v1: try {base}/v1"),
        (ANTHROPIC, "/v1", "The API's path adds /v1 to it: try {base}"),
    ],
)
def test_a_base_url_without_v1_or_with_one_too_many_says_so(
    policy: str, suffix: str, advice: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server's 404 for an endpoint it does not have (vLLM and Ollama serve the OpenAI API under
    /v1 only) was quoted as it came (`HTTP 404: {"detail":"Not Found"}`), with nothing of the URL."""
    with _server() as server:
        base = server.anthropic_url  # http://127.0.0.1:PORT
        code, _out, err = _cli([*_blame(policy, base + suffix, "--no-progress")], capsys)
    assert code == 3, err
    assert "HTTP 404: no route /v1/v1/messages" in err or "HTTP 404: no route /chat/completions" in err
    assert f": is the base URL right? {advice.format(base=base)}\n" in err


def test_a_model_the_server_does_not_know_is_not_blamed_on_the_base_url(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with _server() as server:
        code, _out, err = _cli(_blame("openai:gpt-nope", server.url, "--no-progress"), capsys)
    assert code == 3, err
    assert err.rstrip().endswith("HTTP 404: model 'gpt-nope' not found"), err


def test_a_refused_key_says_which_variable_it_came_from_or_that_none_was_sent(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 401 said only "HTTP 401: invalid API key": not that car sent none (the key was in another
    variable), nor which variable the refused one came from."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("PROXY_KEY", "sk-wrong-0000")
    with _server(api_key=KEY) as server:
        args = [*_blame(POLICY, server.url, "--samples", "2", "--match-samples", "1"), "--no-progress"]
        code, _out, none_sent = _cli(args, capsys)
        assert code == 3
        code, _out, wrong = _cli([*args, "--api-key-env", "PROXY_KEY"], capsys)
    assert code == 3
    assert none_sent.rstrip().endswith(
        "HTTP 401: invalid API key; no API key was sent: set OPENAI_API_KEY (or name another "
        "variable with --api-key-env)"
    )
    assert wrong.rstrip().endswith(
        "HTTP 401: invalid API key; is the key in PROXY_KEY the one this server takes?"
    )
    assert "sk-wrong-0000" not in wrong


def test_timeout_and_max_attempts_are_command_line_options(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """They were settings only (car.toml, CAR_TIMEOUT): `car blame --timeout 5` was "No such
    option", while the line about a slow server told the user to raise the timeout."""
    faults = Faults(rates={"slow": 1.0}, slow_seconds=1.0)
    with _server(faults=faults) as server:
        args = [*_blame(POLICY, server.url, "--timeout", "0.2", "--max-attempts", "2"), "--no-store"]
        code, _out, err = _cli([*args, "--no-progress"], capsys)
    assert code == 3, err
    assert "no answer in 2 attempts (last: timed out after 0.2s (ReadTimeout))" in err
    assert err.rstrip().endswith(
        "does it need a longer timeout (--timeout SECONDS, or the `timeout` setting)?"
    )
    code, _out, err = _cli(["blame", TRACE, "--timeout", "0", "--no-progress"], capsys)
    assert (code, err.strip()) == (2, "car: error: --timeout must be more than 0, got 0.0")


# -- secrets ---------------------------------------------------------------------------------------


def test_a_password_in_a_judge_or_sim_spec_is_not_shown(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A spec is shown as given (the report's specs, notes, the HTML's command): a `base_url=` with
    basic-auth credentials printed its password everywhere, though the HTTP layer hid it."""
    secret = "pw-SECRET-4411"
    with _server() as server, LoopbackServer(faults=Faults(rates={"refusal": 1.0})) as other:
        hidden = other.url.replace("http://", "http://user:***@")
        url = other.url.replace("http://", f"http://user:{secret}@")
        args = _blame(
            POLICY,
            server.url,
            "--samples",
            "2",
            "--match-samples",
            "1",
            "--scorer",
            f"llm-judge:openai:judge?base_url={url}",
            "--env",
            f"llm-sim:openai:sim?base_url={url}",
            "--format",
            "json",
            "--report",
            f"html={tmp_path / 'r.html'}",
            "--no-progress",
        )
        code, out, err = _cli(args, capsys)
    assert code == 2, err  # a judge that only refuses leaves the record unscored
    assert "the scorer 'llm-judge:openai:judge?base_url=http://user:***@" in err
    shown = out + err + (tmp_path / "r.html").read_text()
    assert secret not in shown
    report = json.loads(out)
    assert report["specs"]["scorer"] == f"llm-judge:openai:judge?base_url={hidden}"
    assert report["specs"]["env"].startswith("llm-sim:openai:sim?base_url=http://user:***@")


def _scan(*texts: str) -> None:
    for t in texts:
        assert KEY not in t
        assert KEY[:16] not in t


def test_key_never_leaks_from_echoing_server(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    out_file = tmp_path / "r.json"
    # Every error body repeats the credentials the server received.
    faults = Faults(script=["echo"] * 3, rates={"500": 0.5, "429": 0.2}, retry_after="0")
    with _server(api_key=KEY, echo_auth=True, faults=faults) as server:
        for fmt in ("json", "table"):
            _code, out, err = _cli(
                _blame(POLICY, server.url, "--samples", "4", "--format", fmt, "-o", str(out_file)),
                capsys,
            )
            _scan(out, err, out_file.read_text())
            if fmt == "json":  # the echo happened (the first requests) and was redacted
                assert "***" in json.loads(out_file.read_text())["first_error"]


def test_backend_errors_carry_no_key_in_message_or_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    from car.backends.openai import openai_backend as make_http
    from car.backends.options import BackendOptions
    from car.errors import BackendError

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for fault in ("echo", "500", "drop", "malformed"):
        with LoopbackServer(echo_auth=True, faults=Faults(rates={fault: 1.0})) as server:
            http = make_http(BackendOptions(base_url=server.url, max_attempts=2, backoff_base=0.001))
            assert KEY not in repr(http)

            async def call(h: Any = http) -> None:
                try:
                    await h.post_json("chat/completions", {"model": "m", "messages": []})
                finally:
                    await h.aclose()

            with pytest.raises(BackendError) as info:
                asyncio.run(call())
        exc = info.value
        assert exc.__cause__ is None and exc.__suppress_context__
        _scan(str(exc), "".join(traceback.format_exception(exc)), repr(exc))


def test_debug_run_in_a_subprocess_prints_no_key(tmp_path: Path) -> None:
    faults = Faults(script=["echo"] * 2, rates={"500": 1.0})
    with _server(api_key=KEY, echo_auth=True, faults=faults) as server:
        env = {**os.environ, "OPENAI_API_KEY": KEY, "CAR_MAX_ATTEMPTS": "2", "CAR_BACKOFF_BASE": "0"}
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "car",
                *_blame(POLICY, server.url, "--samples", "2", "--match-samples", "1"),
                "--debug",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    assert proc.returncode == 3, proc.stderr
    assert "too many rollouts errored" in proc.stderr
    _scan(proc.stdout, proc.stderr)


@pytest.mark.parametrize(
    ("seed_mode", "n_mode", "how"),
    [
        ("reject", "ok", "merged into n-requests"),  # OpenAI-like without seed
        ("reject", "reject", "independent"),  # neither seed nor n
        ("ignore", "ignore", "seeded per sample"),  # Ollama-like: both accepted, neither works
    ],
)
def test_locus_found_whatever_the_server_supports(seed_mode: str, n_mode: str, how: str) -> None:
    with _server(seed=seed_mode, n=n_mode) as server, configure(base_url=server.url):
        report = car.blame(TRACE, policy=POLICY, seed=5)
        sent_n = [b.get("n", 1) for _, b in server.requests if "random word" not in json.dumps(b)]
    assert report.locus == 1
    assert report.budget.errored == 0
    assert any(how in n for n in report.notes)
    assert (max(sent_n) > 1) == (how.startswith("merged"))


def test_multi_agent_trace_each_actor_sees_its_own_view() -> None:
    # research-team: four actors; exact answer: locus 3 with shared credit at steps 1 and 3.
    model = {"research-team": ScenarioModel(scenario_for("research-team"))}
    with LoopbackServer(model) as server, configure(base_url=server.url):
        report = car.blame(
            str(ROOT / "traces" / "research-team.json"), policy="openai:research-team", seed=0
        )
        bodies = [b for _, b in server.requests if "random word" not in json.dumps(b)]
    assert report.locus == 3 and report.shared == [1, 3]
    systems = {b["messages"][0]["content"] for b in bodies}
    assert len(systems) == 4  # one system prompt per deciding actor
    final_answers = [
        b
        for b in bodies
        if "coordinate" in b["messages"][0]["content"] and len(b["messages"]) > 2  # not step 0
    ]
    assert final_answers
    for body in final_answers:  # the orchestrator's final turn sees the other agents by name
        named = {m["name"] for m in body["messages"] if m.get("name")}
        assert {"searcher", "extractor", "verifier"} <= named


def test_token_usage_and_cost_come_from_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """The built-in backend sums the `usage` of every answer (1 + 1 tokens each from the loopback
    server), so `--price` gives a cost per trace."""
    from car.batch import BatchOptions, blame_many

    opts = BatchOptions(
        policy=POLICY, samples=4, match_samples=2, prices={"input_tokens": 2.0, "output_tokens": 10.0}
    )
    with _server() as server, configure(base_url=server.url):
        [result] = blame_many([TRACE], options=opts)
        answered = server.count("chat/completions")
    assert result.status == "ok", result.error
    assert answered > 0 and result.usage == {"input_tokens": answered, "output_tokens": answered}
    assert result.cost == pytest.approx(answered * 12.0 / 1e6)


def test_a_server_that_drops_every_connection_is_not_said_to_be_down(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Something that takes the connection and closes it without an answer (another protocol on
    that port, http:// to an https:// one) was asked "is the server running?": it is."""
    with _server(faults=Faults(rates={"drop": 1.0})) as server:
        args = _blame(POLICY, server.url, "--max-attempts", "2", "--no-progress")
        code, _out, err = _cli(args, capsys)
    assert code == 3, err
    assert "Server disconnected without sending a response" in err
    assert "is the server running" not in err
    assert (
        "something there takes connections but closes them without an answer: is the base URL "
        "right (its port, http:// or https://)?\n"
    ) in err


def test_unreachable_server_ends_the_run_with_one_line() -> None:
    with LoopbackServer() as server:
        dead = server.url  # nothing listens there once the server has stopped
    env = {**os.environ, "CAR_MAX_ATTEMPTS": "3", "CAR_BACKOFF_BASE": "0.005"}
    env.pop("OPENAI_BASE_URL", None)
    proc = subprocess.run(
        [sys.executable, "-m", "car", *_blame("openai:x", dead, "--no-store", "--no-progress")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 3
    [line] = proc.stderr.strip().splitlines()  # one line: no "Task exception was never retrieved"
    assert line.startswith("car: error:") and f"cannot reach {dead}" in line
    assert ": 3 requests," in proc.stdout  # the probe's three attempts, then nothing was sent


def test_a_judge_whose_rubric_file_or_server_settings_change_is_not_served_its_old_verdicts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The text of a `rubric=@FILE` judge, and the server settings the judge or an `llm-sim:`
    environment draws with (`--temperature`, `--base-url`), were not part of the store key: edit the
    rubric and rerun, and every judgement of the old rubric came back from the store, with the old
    report."""
    monkeypatch.chdir(tmp_path)

    def judge(messages: Any, tools: Any, u: float) -> Action:
        text = messages[-1].content
        return Action(text="FAIL" if "always" in text or "issue_refund" in text else "PASS")

    Path("rubric.txt").write_text("FAIL if the refund was issued.", encoding="utf-8")
    with LoopbackServer({"judge": judge, "*": TextModel()}) as server:
        args = ["blame", TRACE, "--samples", "8", "--match-samples", "2", "--format", "json"]
        args += ["--method", "contrastive", "--no-progress"]
        judged = [*args, "--scorer", f"llm-judge:openai:judge?base_url={server.url}&rubric=@rubric.txt"]
        code, first, err = _cli([*judged, "--store", "s.sqlite"], capsys)
        assert code == 0, err
        Path("rubric.txt").write_text("FAIL always.", encoding="utf-8")
        code, again, err = _cli([*judged, "--store", "s.sqlite"], capsys)
        assert code == 0, err
        code, fresh, err = _cli([*judged, "--no-store"], capsys)
        assert code == 0, err
        assert json.loads(again) == json.loads(fresh) != json.loads(first)

        simulated = [*args, "--env", "llm-sim:openai:sim", "--base-url", server.url, "-q"]
        simulated += ["--policy", "sim:support-refund", "--store", "s.sqlite"]
        code, _, err = _cli(simulated, capsys)
        assert code == 0, err
        code, out, err = _cli([*simulated, "--format", "table", "--temperature", "0.5"], capsys)
        assert code == 0, err
        assert "budget: 14 rollouts, " in out  # none served from the store (no "(14 stored)")
