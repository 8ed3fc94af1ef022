"""The output the documentation quotes is the output car prints: a change to the report's wording or
figures fails here until the quoted block is updated with it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT, TRACES


def quoted_block(doc: Path, first_line: str) -> str:
    """The one fenced block of `doc` that starts with `first_line`."""
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```$", doc.read_text(encoding="utf-8"), re.M | re.S)
    found = [b for b in blocks if b.startswith(first_line)]
    assert len(found) == 1, f"{doc.name}: {len(found)} blocks start with {first_line!r}"
    return str(found[0])


@pytest.mark.parametrize("name", ["support-refund", "and"])
def test_readme_quotes_the_report_byte_for_byte(run_cli, name: str) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("blame", TRACES / f"{name}.json", "--no-store")
    assert res.code == 0, res.err
    assert res.out == quoted_block(ROOT / "README.md", f"car blame: {name}-0")


def test_html_guide_quotes_the_table_rows(run_cli) -> None:  # type: ignore[no-untyped-def]
    """docs/html-report.md quotes the ranked rows of `--samples 16`, without trailing spaces."""
    res = run_cli("blame", TRACES / "support-refund.json", "--samples", "16", "--no-store")
    assert res.code == 0, res.err
    out = [line.rstrip() for line in res.out.splitlines()]
    quoted = quoted_block(ROOT / "docs" / "html-report.md", "# step actor").splitlines()
    assert quoted == [line for line in out if line.startswith(("# step", "1 ", "2 ", "3 ", "4 "))]
    assert "rescue by step 0-3: ▅▅▁▁  (locus: step 1)" in out


def test_batch_guide_quotes_the_summary(run_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """docs/batch.md quotes `car blame traces/` run from the repository root: the estimate, the
    summary table (without trailing spaces) and the counts line."""
    monkeypatch.chdir(ROOT)
    res = run_cli("blame", "traces/", "--no-store")
    assert res.code == 0, res.err
    quoted = quoted_block(ROOT / "docs" / "batch.md", "$ car blame traces/\n").splitlines()
    err = res.err.splitlines()
    assert quoted[1] == err[0]
    assert quoted[quoted.index("car blame: summary") : -1] == [
        line.rstrip() for line in res.out.splitlines()
    ]
    assert quoted[-1] == err[-1]


def _emitted_warning_codes() -> set[str]:
    """The fidelity warning codes car's importers can emit: the code given to `Builder.warn` or to
    a post-build rewrite (`_rewritten`), read from the source."""
    import ast

    codes: set[str] = set()
    for path in (ROOT / "car").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "attr", getattr(node.func, "id", None))
            at = {"warn": 0, "_rewritten": 2}.get(name or "")
            if at is not None and len(node.args) > at:
                arg = node.args[at]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    codes.add(arg.value)
    return codes


def test_the_importers_guide_lists_every_warning_code_the_importers_emit() -> None:
    doc = (ROOT / "docs" / "importers.md").read_text(encoding="utf-8")
    start = doc.index("Warnings (`fidelity.warnings[].code`)")
    listed = set(re.findall(r"`([a-z][a-z0-9-]*)`", doc[start : doc.index("\n\n", start)]))
    emitted = _emitted_warning_codes()
    assert len(emitted) > 20  # the reading finds them at all
    assert emitted - listed == set(), "emitted but not listed in docs/importers.md"
    assert listed - emitted == set(), "listed in docs/importers.md but never emitted"


def test_batch_guide_quotes_the_phase_lines_of_one_trace(
    run_cli, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """docs/batch.md quotes the plain progress lines of `car blame traces/research-team.json --budget
    2000 2> log`; each quoted line (`...` aside) is a line of that log, in order."""
    monkeypatch.chdir(ROOT)
    doc = (ROOT / "docs" / "batch.md").read_text(encoding="utf-8")
    # The block sits in a list item: its fences are indented.
    found = re.search(
        r"^ *```console\n( *\$ car blame traces/research-team\.json.*?)^ *```$", doc, re.M | re.S
    )
    assert found is not None
    lines = [line.strip() for line in found.group(1).splitlines()]
    command = lines[0].removeprefix("$ car ").removesuffix(" 2> log").split()
    assert lines[1] == "$ cat log"
    res = run_cli(*command, "--no-store")
    assert res.code == 0, res.err
    log = res.err.splitlines()
    quoted = [line for line in lines[2:] if line != "..."]
    assert [line for line in log if line in quoted] == quoted


def test_shapley_guide_prints_what_its_python_example_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python example of docs/shapley.md runs, and its last line prints the summary its comment
    quotes."""
    import contextlib
    import io

    monkeypatch.chdir(ROOT)
    code = quoted_block(ROOT / "docs" / "shapley.md", "import car\n")
    said = re.search(r'print\(report\.shapley\.summary\)\s+# "(.*)"', code)
    assert said is not None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/shapley.md", "exec"), {})
    assert out.getvalue().splitlines()[-1] == said.group(1)


def test_the_backends_guide_lists_every_configuration_key() -> None:
    """docs/backends.md lists the keys `[tool.car]`, `car.toml` and `CAR_*` take: every one car
    reads, and no other."""
    from car.config import KEYS

    doc = (ROOT / "docs" / "backends.md").read_text(encoding="utf-8")
    start = doc.index("\nKeys: ")
    listed = re.findall(r"`([a-z_]+)`", doc[start : doc.index("\n\n", start)])
    assert listed == list(KEYS)


def test_the_readme_performance_table_counts_what_car_blame_runs() -> None:
    """README's performance table gives each bundled trace's rollouts, policy calls and environment
    steps at the default settings, seed 0: the counts of `car.blame` (the times are the machine's)."""
    import car

    doc = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| ([a-z-]+) \| (\d+) \| (\d+) \| (\d+) \|", doc, re.M)
    assert len(rows) == len(list(TRACES.glob("*.json")))
    for name, rollouts, calls, env in rows:
        b = car.blame(TRACES / f"{name}.json").budget
        assert (b.rollouts, b.policy_calls, b.env_calls) == (int(rollouts), int(calls), int(env)), name
