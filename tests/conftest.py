from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "traces"
# A policy that reports token usage, as a model backend does (see the file).
METERED = f"{ROOT / 'tests' / 'fixtures' / 'metered.py'}@policy"
SHARED = ROOT.parent / "shared"

# A shell that starts the tests in the background (`pytest &` in a script, some CI runners) leaves
# SIGINT ignored, and every `car` process a test starts inherits that: the tests that press Ctrl-C
# on one would wait on it forever. The tests want the Ctrl-C of an interactive run.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """car keeps its rollout store under ./.car: give every test its own working directory, so no
    test reads another's stored rollouts and nothing is written into the repository."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture(autouse=True)
def _servers_start_reachable() -> None:
    """A test server may reuse the port of one an earlier test stopped: forget what the process
    concluded about servers it could not reach."""
    import sys

    http = sys.modules.get("car.backends.http")
    if http is not None:
        http._REACHABILITY.clear()


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """Run the `car` command in-process; return exit code, stdout and stderr."""
    from car.cli import main

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = 0
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        cap = capsys.readouterr()
        return Result(code, cap.out, cap.err)

    return run


def interrupt_after(
    argv: list[str], cwd: Path, line_starts: str, how: signal.Signals, wait: float = 60
) -> tuple[int, list[str]]:
    """Run `car` with stderr a pipe, send `how` once a stderr line starts with `line_starts`; its exit
    code and stderr lines."""
    with subprocess.Popen(
        [sys.executable, "-m", "car", *argv],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stderr is not None
        # Should the line never come, a stuck run is ended rather than waited for forever.
        guard = threading.Timer(120, proc.kill)
        guard.start()
        lines = []
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if line.startswith(line_starts):
                proc.send_signal(how)
                break
        lines += proc.stderr.read().splitlines()
        code = proc.wait(timeout=wait)
        guard.cancel()
    assert any(line.startswith(line_starts) for line in lines), lines
    return code, lines
