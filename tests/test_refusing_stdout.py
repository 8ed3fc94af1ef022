"""Every command whose stdout refuses its output (a full disk, a closed pipe, a closed descriptor)
ends with one error line and exit 2: no traceback, and no "Exception ignored" from Python's flush at
exit. Run as the user runs car: a process of its own, its stdout buffered."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import TRACES

CHEAP = "it is quick to make again, so it was not saved"


def _car(
    args: list[str], stdout: int, env: dict[str, str] | None = None, close_stdout: bool = False
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "car", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=env or _buffered(),
        preexec_fn=(lambda: os.close(1)) if close_stdout else None,
        check=False,
    )


def _buffered() -> dict[str, str]:
    # pytest's runs may set PYTHONUNBUFFERED; a user's shell seldom does, and buffered output fails
    # only when Python flushes it, at exit if nobody did before
    return {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


@pytest.fixture
def full_disk() -> Iterator[int]:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    fd = os.open("/dev/full", os.O_WRONLY)
    yield fd
    os.close(fd)


@pytest.fixture
def closed_pipe() -> Iterator[int]:
    read, write = os.pipe()
    os.close(read)  # as `car schema | head -1` once head has gone
    yield write
    os.close(write)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store.sqlite"
    done = _car(["blame", str(TRACES / "pivot.json"), "--samples", "4", "--store", str(path)], -1)
    assert done.returncode == 0, done.stderr
    return path


COMMANDS = [
    ["schema"],
    ["schema", "report"],
    ["plugins"],
    ["--help"],
    ["blame", "--help"],
    ["--version"],
    ["blame", str(TRACES / "pivot.json"), "--dry-run"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda args: " ".join(Path(a).name for a in args))
@pytest.mark.parametrize(
    ("sink", "reason"), [("full_disk", "No space left on device"), ("closed_pipe", "Broken pipe")]
)
def test_cheap_output_refused_by_stdout_is_one_line(
    args: list[str], sink: str, reason: str, request: pytest.FixtureRequest
) -> None:
    done = _car(args, request.getfixturevalue(sink))
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"car: error: stdout: cannot write the output ({reason}); {CHEAP}\n"


@pytest.mark.parametrize("args", [["cache", "info"], ["merge", "merged.sqlite"]], ids=" ".join)
def test_store_summaries_refused_by_stdout_are_one_line(
    args: list[str], store: Path, full_disk: int, tmp_path: Path
) -> None:
    args = [*args, "--store", str(store)] if args[0] == "cache" else [*args, str(store)]
    done = subprocess.run(
        [sys.executable, "-m", "car", *args],
        stdout=full_disk,
        stderr=subprocess.PIPE,
        text=True,
        env=_buffered(),
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    # merge says what it added on stderr first, as always
    assert done.stderr.splitlines()[-1] == (
        f"car: error: stdout: cannot write the output (No space left on device); {CHEAP}"
    )
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


def test_a_re_rendered_report_refused_by_stdout_is_one_line(tmp_path: Path, full_disk: int) -> None:
    saved = tmp_path / "r.json"
    args = ["blame", str(TRACES / "pivot.json"), "--samples", "4", "--no-store", "--format", "json"]
    assert _car([*args, "-o", str(saved)], -1).returncode == 0
    done = _car(["report", str(saved)], full_disk)
    assert done.returncode == 2, done.stderr
    assert (
        done.stderr
        == f"car: error: stdout: cannot write the output (No space left on device); {CHEAP}\n"
    )


def test_unbuffered_and_closed_stdout_too(full_disk: int) -> None:
    unbuffered = {**os.environ, "PYTHONUNBUFFERED": "1"}
    done = _car(["schema"], full_disk, env=unbuffered)
    assert (done.returncode, done.stderr) == (
        2,
        f"car: error: stdout: cannot write the output (No space left on device); {CHEAP}\n",
    )
    done = _car(["schema"], -1, close_stdout=True)  # `car schema >&-`: Python has no stdout at all
    assert (done.returncode, done.stderr) == (
        2,
        f"car: error: stdout: cannot write the output (Bad file descriptor); {CHEAP}\n",
    )


@pytest.mark.parametrize("sink", ["full_disk", "closed_pipe"])
def test_a_report_refused_by_buffered_stdout_is_kept_without_noise(
    sink: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """`car blame` saved the report, then Python's flush at exit failed again: "Exception ignored"
    and exit 120."""
    env = {**_buffered(), "TMPDIR": str(tmp_path)}
    args = ["blame", str(TRACES / "pivot.json"), "--samples", "4", "--no-store", "-q"]
    done = _car(args, request.getfixturevalue(sink), env=env)
    assert done.returncode == 2, done.stderr
    (saved,) = tmp_path.glob("car-report-*.txt")
    reason = "No space left on device" if sink == "full_disk" else "Broken pipe"
    assert done.stderr == (
        f"car: error: stdout: cannot write the report ({reason}); saved it to {saved} instead\n"
    )
    assert "pivot-0" in saved.read_text()
