"""The Shapley part of the `car blame` table: phi columns per step, a players table, a summary line."""

from __future__ import annotations

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from car.render import as_blocks, figure, fit_layouts, literal
from car.report import Report, ShapleyPlayer, ShapleyReport, percent, spent_text

__all__ = ["phi_cell", "shapley_lines", "shapley_table", "share_cell", "step_players"]


def step_players(report: Report) -> dict[int, ShapleyPlayer]:
    """Step index -> its player, when the players are single steps (else empty)."""
    sh = report.shapley
    if sh is None or sh.players_kind != "steps":
        return {}
    return {p.steps[0]: p for p in sh.players if len(p.steps) == 1}


def phi_cell(p: ShapleyPlayer | None, *, split: bool = False) -> Text | str:
    """phi with its interval, behind a bar of |phi| (red when phi is negative); `split` puts the
    interval on a line of its own."""
    from car.render import bar

    if p is None:
        return "-"
    sep = "\n" if split else " "
    return Text(bar(abs(p.value), width=4), style="red" if p.value < 0 else "cyan") + Text(
        f" {100 * p.value:+.0f}%{sep}[{100 * p.low:+.0f}, {100 * p.high:+.0f}]"
    )


def share_cell(p: ShapleyPlayer | None) -> str:
    return "-" if p is None or p.share is None else f"{p.share:.0%}"


def shapley_table(report: Report, console: Console | None = None) -> RenderableType | None:
    """A ranked table of agent or group players (step players sit in the main table instead), fitted
    to `console` when given: player names and actions give way, then intervals move under their
    estimates, then step lists and headers wrap, and below that each player is a block; figures and
    words are never cut."""
    sh = report.shapley
    if sh is None or sh.players_kind == "steps":
        return None
    if console is None:
        return _players_table(report, sh, split=False)

    def build(split: bool) -> Table:
        return _players_table(report, sh, split=split)

    layouts = [(False, _GIVE_WAY, ()), (True, _GIVE_WAY, ()), (True, _LAST_WAY, (2, 4, 5))]
    return fit_layouts(build, console, layouts) or as_blocks(build(True), 2, truncate=(3,))


# The player and actions columns narrow to 8 and 12 characters before anything else, and to their
# header words before the step lists and headers wrap (see render._GIVE_WAY).
_GIVE_WAY = {1: 8, 3: 12}
_LAST_WAY = {1: 6, 3: 7}


def _players_table(report: Report, sh: ShapleyReport, *, split: bool) -> Table:
    table = Table(
        title=Text(f"Shapley credit by {'agent' if sh.players_kind == 'agents' else 'group'}"),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 1, 0, 0),
    )
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("player", max_width=20, no_wrap=True)
    table.add_column("steps", no_wrap=True)
    table.add_column("actions", max_width=48, overflow="ellipsis", no_wrap=True)
    table.add_column(f"phi [{percent(report.level)} CI]", no_wrap=True)
    table.add_column("share", justify="right", no_wrap=True)
    for rank, p in enumerate(sorted(sh.players, key=lambda p: -p.value), 1):
        actions = " | ".join(report.steps[s].action for s in p.steps if s < len(report.steps))
        table.add_row(
            str(rank),
            literal(p.id),
            (", " if split else ",").join(map(str, p.steps)),  # split: a long list wraps
            literal(actions),
            figure(phi_cell(p, split=split)),
            figure(share_cell(p)),
        )
    return table


def shapley_lines(report: Report) -> list[Text]:
    """Why Shapley ran, efficiency (sum of phi beside v(N) - v(empty)) and what it cost."""
    sh: ShapleyReport | None = report.shapley
    if sh is None:
        return []
    gap = None
    if sh.v_all.estimate is not None and sh.v_none.estimate is not None:
        gap = sh.v_all.estimate - sh.v_none.estimate
    eff = f"sum phi {sh.total:.3f}" + (f" vs v(N) - v(empty) {gap:.3f}" if gap is not None else "")
    return [
        Text(f"Shapley ({sh.method}, players: {sh.players_kind}) because ")
        + literal(report.method_reason or "requested"),
        Text(f"  {eff}; {spent_text(sh)}"),
    ]
