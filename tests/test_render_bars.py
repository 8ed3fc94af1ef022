"""Text bars in the terminal table: shape visible, within 120 columns, no colour under NO_COLOR."""

from __future__ import annotations

import io
import re
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

import car
from car.render import bar, render_table, sparkline
from car.report import Budget, Estimate, ShapleyPlayer, ShapleyReport

ROOT = Path(__file__).resolve().parent.parent
TRACES = sorted((ROOT / "traces").glob("*.json"))
SGR = re.compile(r"\x1b\[([0-9;]*)m")


def _colours(text: str) -> set[str]:
    """Colour parameters (foreground or background) in the SGR escapes of `text`; bold/dim are not."""
    params = {p for m in SGR.finditer(text) for p in m.group(1).split(";")}
    return {p for p in params if p.isdigit() and (30 <= int(p) <= 49 or 90 <= int(p) <= 107)}


def test_bar_is_fixed_width_and_monotone() -> None:
    assert bar(0.0) == "······"
    assert bar(1.0) == "██████"
    assert bar(0.5) == "███···"
    assert bar(1 / 48) == "▏·····"
    assert bar(None) == "      " and bar(float("nan")) == "      "
    assert bar(-1.0) == bar(0.0) and bar(2.0) == bar(1.0)
    fills = [sum(8 if ch == "█" else 0 for ch in bar(i / 48)) for i in range(49)]
    assert all(len(bar(i / 48)) == 6 for i in range(49))
    assert fills == sorted(fills)
    assert len({bar(i / 48) for i in range(49)}) == 49  # every eighth of a cell is distinct
    assert len(bar(0.3, width=10)) == 10


def _plain(report: car.Report) -> str:
    console = Console(record=True, width=120, file=io.StringIO(), no_color=True)
    render_table(report, console)
    return console.export_text(styles=False)


@pytest.mark.parametrize("path", TRACES, ids=[p.stem for p in TRACES])
def test_bundled_tables_fit_120_columns_and_show_the_rescue_bars(path: Path) -> None:
    report = car.blame(path, samples=8, match_samples=2, seed=0)
    text = _plain(report)
    assert max(len(line) for line in text.splitlines()) <= 120
    for s in report.steps:
        if s.decision and s.rescue is not None and s.rescue.estimate is not None:
            row = next(line for line in text.splitlines() if re.match(rf"\s*\d+\s+{s.index} ", line))
            assert bar(s.rescue.estimate) in row


def test_no_color_keeps_the_bars_and_drops_the_escapes() -> None:
    report = car.blame(ROOT / "traces" / "support-refund.json", samples=8, match_samples=2, seed=0)
    out = io.StringIO()
    render_table(report, Console(file=out, force_terminal=True, no_color=True, width=120))
    assert _colours(out.getvalue()) == set()
    assert "█" in out.getvalue()
    coloured = io.StringIO()
    render_table(report, Console(file=coloured, force_terminal=True, width=120, color_system="standard"))
    assert _colours(coloured.getvalue())  # and colour when it is allowed


def test_shapley_players_get_phi_bars_and_the_efficiency_line() -> None:
    report = car.blame(ROOT / "traces" / "and.json", samples=8, match_samples=2, seed=0)
    sh = ShapleyReport(
        method="exact",
        players_kind="agents",
        players=[
            ShapleyPlayer(id="agent", steps=[0, 1, 2], value=0.8, low=0.7, high=0.9, share=0.8),
            ShapleyPlayer(id="user", steps=[3], value=0.2, low=-0.1, high=0.4, share=0.2),
        ],
        total=1.0,
        v_all=Estimate(estimate=1.0, low=1.0, high=1.0, n=1),
        v_none=Estimate(estimate=0.0, low=0.0, high=0.05, n=64),
        budget=Budget(rollouts=64, policy_calls=64),
    )
    text = _plain(report.model_copy(update={"shapley": sh}))
    assert "sum phi 1.000 vs v(N) - v(empty) 1.000" in text
    agent = next(line for line in text.splitlines() if " agent " in line and "0,1,2" in line)
    assert bar(0.8, width=4) in agent and "+80% [+70, +90]" in agent and agent.rstrip().endswith("80%")
    user = next(line for line in text.splitlines() if " user " in line)
    assert bar(0.2, width=4) in user and "+20% [-10, +40]" in user
    assert max(len(line) for line in text.splitlines()) <= 120


def test_sparkline_levels() -> None:
    assert sparkline([0.0, 1.0, None, 0.5, float("nan")]) == "▁█·▅·"
    assert sparkline([]) == ""


def test_the_curve_line_follows_step_order_even_though_rows_are_ranked() -> None:
    report = car.blame(ROOT / "traces" / "research-team.json", samples=8, match_samples=2, seed=0)
    text = _plain(report)
    expected = sparkline([s.rescue.estimate if s.rescue else None for s in report.steps])
    assert f"rescue by step 0-4: {expected}" in text
    assert f"(locus: step {report.locus})" in text


def test_a_long_curve_bins_steps_to_fit_the_terminal() -> None:
    from car.sim import scenario_for

    trace = scenario_for("long", None, n=150).recorded_trace(0)
    report = car.blame(trace, samples=4, match_samples=1, seed=0, method="contrastive")
    text = _plain(report)
    line = next(ln for ln in text.splitlines() if ln.startswith("rescue by step 0-149"))
    assert len(line.rstrip()) <= 120
    per = int(re.search(r"0-149, (\d+) steps per mark: ", line).group(1))  # type: ignore[union-attr]
    marks = line.split("steps per mark: ")[1].split("  (")[0]
    rates = [s.rescue.estimate if s.rescue else None for s in report.steps]
    # Each mark is the highest rescue rate of its `per` consecutive steps.
    assert marks == "".join(
        sparkline([max(r for r in rates[i : i + per] if r is not None)]) for i in range(0, 150, per)
    )
    # The ranked table keeps its top and every significant step; the rest is counted, not printed.
    from car.render import TABLE_TOP

    significant = sum(1 for s in report.steps if s.verdict in ("locus", "contributing"))
    rows = [ln for ln in text.splitlines() if re.match(r"\s*\d+\s+\d+ agent ", ln)]
    assert TABLE_TOP <= len(rows) <= TABLE_TOP + significant
    assert f"… {150 - len(rows)} more decision steps ranked lower, none significant" in text


def _numbers(text: str) -> Counter[str]:
    return Counter(re.findall(r"[-+]?\d+%?", text))


# Words of the table's headers and verdicts: each is printed whole or not at all.
_WORDS = {"#", "step", "actor", "action", "rescue", "[95%", "CI]", "drop", "match", "verdict", "phi"}
_WORDS |= {"share", "player", "steps", "actions", "locus", "contributing", "not", "significant"}


def _words(text: str) -> Counter[str]:
    return Counter(w for w in text.split() if w in _WORDS)


def _render(report: car.Report, width: int) -> str:
    console = Console(record=True, width=width, file=io.StringIO(), no_color=True)
    render_table(report, console)
    return console.export_text(styles=False)


@pytest.mark.parametrize("width", [120, 100, 80, 60, 40])
@pytest.mark.parametrize("kind", ["steps", "agents"])
def test_no_number_is_cut_at_any_width(width: int, kind: str) -> None:
    """Numbers were cut to fit ("+48% [+44, +…", "10…") when the columns were wider than the
    terminal, and then folded ("+4" over "8%", "contributin" over "g", "re" over "sc" over "ue"
    in a header); the text columns give way instead, then each interval moves under its estimate,
    then verdicts and headers wrap between words, and below that each step is a block of its own."""
    from car.render_shapley import phi_cell, share_cell

    report = car.blame(ROOT / "traces" / "and.json", samples=8, match_samples=2, seed=0)
    wide = Estimate(estimate=-0.55, low=-1.0, high=1.0, n=8)
    full = Estimate(estimate=1.0, low=1.0, high=1.0, n=8)
    verdicts = ["contributing", "locus", "not significant"]
    steps = [  # actions without table words ("step 0: choose BAD"): they are cut short with "…"
        s.model_copy(
            update={
                "actor": "orchestrator-14",
                "action": "fetch(url='https://example.org/page')",
                "rescue": full,
                "drop": wide,
                "verdict": verdicts[s.index],
            }
        )
        for s in report.steps
    ]
    players = [
        ShapleyPlayer(
            id=f"orchestrator-{i}" if kind == "agents" else str(i),
            steps=[i, 10 + i, 100 + i] if kind == "agents" else [i],
            value=-0.55,
            low=-1.25,
            high=1.0,
            share=-1.0,
        )
        for i in range(3)
    ]
    sh = ShapleyReport(
        method="permutation",
        players_kind=kind,  # type: ignore[arg-type]
        players=players,
        total=-1.65,
        v_all=Estimate(estimate=1.0, low=1.0, high=1.0, n=1),
        v_none=Estimate(estimate=0.0, low=0.0, high=0.05, n=64),
        budget=Budget(rollouts=1000, policy_calls=1000),
    )
    report = report.model_copy(update={"steps": steps, "shapley": sh})
    text = _render(report, width)
    assert max(len(line) for line in text.splitlines()) <= width
    assert not re.search(r"[\d%\[,]…", text), text  # nothing numeric ends in an ellipsis
    expected = Counter[str]()
    for s in report.steps:
        if s.decision:
            expected += _numbers("100% [100, 100] -55% [-100, +100]")
    for p in players:
        expected += _numbers(f"{phi_cell(p)} {share_cell(p)}")
        if kind == "agents":
            expected += _numbers(",".join(map(str, p.steps)))
    assert _numbers(text) >= expected, text
    # Every header and verdict word printed on a console wide enough for all of them is printed
    # whole at this width too (a word broken across lines loses its count).
    assert _words(text) >= _words(_render(report, 400)), text
    if width == 120:  # room enough: every figure whole on its row
        assert text.count("-55% [-125, +100]") == 3 and text.count("-55% [-100, +100]") == 3
