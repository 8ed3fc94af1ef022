"""Render a `Report` as a terminal table or as JSON.

Text that comes from a trace is shown literally: it is wrapped in `rich.text.Text` (never parsed as
markup) and control characters, escape sequences included, and bidirectional controls are shown as
visible escapes (`visible`, which the CI formats use too).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence

from rich import box
from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from car.errors import LINE_LIMIT, one_line
from car.jsonfile import json_text, utf8_text
from car.report import Estimate, Report, label_line, many, percent, samples_per_step, short

__all__ = [
    "Layout",
    "as_blocks",
    "bar",
    "error_line",
    "figure",
    "fit_columns",
    "fit_layouts",
    "literal",
    "no_commands",
    "render_json",
    "render_table",
    "rollouts_served",
    "sparkline",
    "visible",
]

# C0/C1 controls (escape sequences, carriage returns) would restyle a terminal or a CI log;
# bidirectional overrides and marks would let text disguise itself (as in the HTML page, car.charts).
_CONTROL = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


def visible(text: str) -> str:
    """`text` with its control and bidirectional characters shown as `\\xNN` escapes; tabs and line
    breaks are kept. So is the `[` of `##[`: a GitHub Actions runner takes `##[error]`,
    `##[stop-commands]` and the like for a command anywhere in a log line, so a trace could raise
    annotations in a CI job or silence car's own."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text).replace("##[", "##\\x5b")


# A GitHub Actions runner takes a log line for a workflow command when it starts with `::` after
# any leading whitespace (`::error::`, `::stop-commands::`); `##[` it finds anywhere (`visible`).
_COMMAND_START = re.compile(r"^([^\S\n]*):(?=:)", re.M)


def no_commands(text: str, colon: str = "\\x3a") -> str:
    """`text` (a whole rendered output) with no line a CI runner reads as a workflow command: the
    first colon of a line that starts with `::` is written `colon`. Trace text lands at a line's
    start where a table or a sentence wraps it, so this is done once the output is laid out."""
    return _COMMAND_START.sub(lambda m: m.group(1) + colon, text)


def literal(text: str) -> Text:
    """Trace text as an inert rich Text: no markup, no escape codes, one line, and text UTF-8 can
    encode (a file name byte that is not UTF-8 is shown escaped)."""
    return Text(visible(utf8_text(text).replace("\n", " ")).replace("\t", " "))


def error_line(text: str, limit: int = LINE_LIMIT) -> str:
    """A message for one line of stderr: inert (`literal`) and `one_line`."""
    return one_line(str(literal(" ".join(text.split()))), limit)


def _pct(e: Estimate | None, signed: bool = False, sep: str = " ") -> str:
    """Percent with interval, compactly: "53% [35, 71]"."""
    if e is None or e.estimate is None or e.low is None or e.high is None:
        return "-"
    f = "{:+.0f}" if signed else "{:.0f}"
    return f"{f.format(100 * e.estimate)}%{sep}[{f.format(100 * e.low)}, {f.format(100 * e.high)}]"


_EIGHTHS = " ▏▎▍▌▋▊▉"


def bar(fraction: float | None, width: int = 6) -> str:
    """A fixed-width text bar for a value in [0, 1], in eighths of a cell; "·" marks the empty track.

    Made of characters, not colour, so the shape survives NO_COLOR, pipes and files.
    """
    if fraction is None or math.isnan(fraction):
        return " " * width
    eighths = round(min(max(fraction, 0.0), 1.0) * width * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (_EIGHTHS[part] if part else "")
    return text + "·" * (width - len(text))


_LEVELS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float | None]) -> str:
    """One character per value in [0, 1], lowest to highest block; "·" where there is no value."""
    out = []
    for v in values:
        if v is None or math.isnan(v):
            out.append("·")
        else:
            out.append(_LEVELS[round(min(max(v, 0.0), 1.0) * (len(_LEVELS) - 1))])
    return "".join(out)


def _curve_line(report: Report, width: int) -> Text | None:
    """The rescue rates in step order (the table is ranked), so the curve's shape reads left to right.

    One mark per step while the line fits in `width`; beyond that each mark stands for k consecutive
    steps and shows their highest rescue rate (the bin holding the locus is the one marked red).
    """
    if not any(s.rescue is not None for s in report.steps):
        return None
    n = len(report.steps)
    tail = f"  (locus: step {report.locus})" if report.locus is not None else ""
    head = f"rescue by step 0-{n - 1}: "
    per = math.ceil(n / max(width - len(head) - len(tail) - 20, 10))  # steps per mark
    if per > 1:
        head = f"rescue by step 0-{n - 1}, {per} steps per mark: "
    line = Text(head)
    for start in range(0, n, per):
        chunk = report.steps[start : start + per]
        rates = [
            s.rescue.estimate
            for s in chunk
            if s.rescue is not None
            and s.rescue.estimate is not None
            and not math.isnan(s.rescue.estimate)
        ]
        locus = any(s.index == report.locus for s in chunk)
        line.append(sparkline([max(rates) if rates else None]), style="bold red" if locus else "cyan")
    line.append(tail)
    return line


def figure(cell: Text | str) -> Text:
    """A table cell holding figures: never wrapped inside the table (see `fit_columns`)."""
    text = cell.copy() if isinstance(cell, Text) else Text(cell)
    text.no_wrap = True
    return text


def fit_columns(
    table: Table, console: Console, narrowest: Mapping[int, int], wrap: Collection[int] = ()
) -> bool:
    """Fit `table` to the console; whether it fits. The columns in `narrowest` (index -> the fewest
    characters each keeps; their text ends in "…") narrow first, widest first; then the columns in
    `wrap` wrap between words, header included, widest first. No column gets narrower than the
    longest word of its header, nor a `wrap` column than a word of its cells or a whole `figure`.
    Every other column keeps its width: a table that still does not fit is the caller's to lay out
    another way (rich would fit it by folding words and figures mid-way).
    """
    unbounded = console.options.update_width(10_000)

    def measure(renderable: RenderableType) -> Measurement:
        return Measurement.get(console, unbounded, renderable)

    widths, floors = {}, {}
    for i in [*narrowest, *wrap]:
        column = table.columns[i]
        header, cells = measure(column.header), [(c, measure(c)) for c in column.cells]
        natural = max([header.maximum, *(m.maximum for _, m in cells)])
        widths[i] = min(natural, column.max_width or natural)
        if i in narrowest:
            floors[i] = max(narrowest[i], header.minimum)
        else:  # a figure keeps its lines whole, other text breaks between words
            unbroken = (m.maximum if isinstance(c, Text) and c.no_wrap else m.minimum for c, m in cells)
            floors[i] = max(header.minimum, *unbroken)
    excess = measure(table).maximum - console.width
    for group in (narrowest, wrap):
        while excess > 0:
            room = {i: widths[i] - floors[i] for i in group if widths[i] > floors[i]}
            if not room:
                break
            widest = max(room, key=lambda i: (room[i], -i))
            widths[widest] -= 1
            excess -= 1
    for i, w in widths.items():
        table.columns[i].max_width = w
        if i in wrap:
            table.columns[i].no_wrap = False
    return excess <= 0


Layout = tuple[bool, Mapping[int, int], Collection[int]]  # split, narrowest, wrap


def fit_layouts(
    build: Callable[[bool], Table], console: Console, layouts: Sequence[Layout]
) -> Table | None:
    """`build(split)` fitted to the console by the first of `layouts` (split, narrowest, wrap; see
    `fit_columns`) under which it fits, each going on from the one before while `split` is the same;
    None when none does."""
    table, built = None, False
    for split, narrowest, wrap in layouts:
        if table is None or split != built:
            table, built = build(split), split
        if fit_columns(table, console, narrowest, wrap):
            return table
    return None


def as_blocks(table: Table, heading: int, truncate: Collection[int]) -> Group:
    """`table` for a console too narrow for it: its title, then a block per row: a heading of the first
    `heading` columns ("# 1  step 4"), then a line per other column, header then value. The `truncate`
    columns (trace text) keep one line ending in "…"; a value of several lines is joined into one that
    wraps between words (a word wider than the console folds), so a figure is never cut."""

    def one_line(cell: RenderableType) -> Text:
        return Text(" ").join(cell.split()) if isinstance(cell, Text) else Text(str(cell))

    columns = [(str(column.header), list(column.cells)) for column in table.columns]
    parts: list[RenderableType] = []
    if table.title is not None:
        parts.append(Text.assemble(table.title, style="table.title"))
    for row in range(table.row_count):
        head = Text("  ", style="table.header", no_wrap=True, overflow="ellipsis").join(
            Text(f"{header} ") + one_line(cells[row]) for header, cells in columns[:heading]
        )
        grid = Table.grid(padding=(0, 1, 0, 0))
        grid.add_column(style="table.header", no_wrap=True)
        grid.add_column()
        for i, (header, cells) in enumerate(columns[heading:], heading):
            value = one_line(cells[row])
            value.no_wrap, value.overflow = (True, "ellipsis") if i in truncate else (False, "fold")
            grid.add_row(header, value)
        parts += [head, Padding(grid, (0, 0, 0, 2), expand=False)]
    return Group(*parts)


def _bar_cell(e: Estimate | None, text: str, style: str) -> Text:
    cell = Text(bar(e.estimate if e is not None else None), style=style or "cyan")
    return cell + Text(" " + text)


def rollouts_served(rollouts: int, stored: int | None) -> str:
    """ "50 rollouts (50 stored)": how many the store served, as the batch summary says it; plain
    "50 rollouts" when all were computed now."""
    return many(rollouts, "rollout") + (f" ({stored} stored)" if stored else "")


def render_json(report: Report) -> str:
    return json_text(report.model_dump(mode="json"), indent=2)


_STYLE = {"locus": "bold red", "contributing": "yellow", "not significant": "dim"}
TABLE_TOP = 20  # rows of the ranked table for a long run (significant steps are always shown)
# How the ranked table gives way on a narrow console (see fit_layouts): the actor and action columns
# narrow to 5 and 8 characters; each interval moves under its estimate; action narrows to its header
# word, then the verdicts and the headers of the figures (columns 4 on) wrap between words. Below that
# each step is a block of its own.
_GIVE_WAY = {2: 5, 3: 8}
_LAST_WAY = {2: 5, 3: 6}


def _ranked_table(report: Report, rows: list[tuple[int, int]], *, split: bool) -> Table:
    """The ranked steps, (rank, step index) in order; `split` puts each interval on a line under its
    estimate (narrow consoles)."""
    from car.render_shapley import phi_cell, share_cell, step_players

    title = Text("car blame: ")
    title.append_text(literal(short(report.trace_id)))
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 0),
        collapse_padding=True,
    )
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("step", justify="right", no_wrap=True)
    actor_width = min(14, max(5, *(len(s.actor) for s in report.steps)))
    table.add_column("actor", min_width=actor_width, max_width=14, no_wrap=True)
    table.add_column("action", max_width=36, overflow="ellipsis", no_wrap=True)
    table.add_column(f"rescue [{percent(report.level)} CI]", no_wrap=True)
    table.add_column("drop", no_wrap=True)
    table.add_column("match", no_wrap=True, justify="right")
    table.add_column("verdict", no_wrap=True)
    phi = step_players(report)
    if phi:
        table.add_column(f"phi [{percent(report.level)} CI]", no_wrap=True)
        table.add_column("share", no_wrap=True, justify="right")
    sep = "\n" if split else " "
    for rank, index in rows:
        s = report.steps[index]
        match = (
            "-"
            if s.match_rate is None or s.match_rate.estimate is None
            else (f"{s.match_rate.estimate:.0%}" + (" !" if s.never_reproduced else ""))
        )
        verdict = s.verdict or "-"
        table.add_row(
            str(rank),
            str(s.index),
            literal(s.actor),
            literal(s.action),
            figure(_bar_cell(s.rescue, _pct(s.rescue, sep=sep), _STYLE.get(verdict, ""))),
            figure(_pct(s.drop, signed=True, sep=sep)),
            figure(match),
            Text(verdict, style=_STYLE.get(verdict, "")),
            *(
                (figure(phi_cell(phi.get(index), split=split)), figure(share_cell(phi.get(index))))
                if phi
                else ()
            ),
        )
    return table


def render_table(report: Report, console: Console, *, stored: int | None = 0) -> None:
    """Print the ranked blame table and the summary lines; `stored`: how many of the report's
    rollouts this run was served from the store (`TraceResult.stored_rollouts`)."""
    from car.render_shapley import shapley_lines, shapley_table, step_players

    phi = step_players(report)
    decisions = [s for s in report.steps if s.decision]

    def rank_key(index: int) -> tuple[int, float, int]:
        s = report.steps[index]
        if phi:  # Shapley ran over steps: rank by credit
            p = phi.get(s.index)
            return (0, -(p.value if p is not None else -2.0), s.index)
        first = 0 if s.index == report.locus else 1
        drop = s.drop.estimate if s.drop and s.drop.estimate is not None else -2.0
        return (first, -drop, s.index)

    order = sorted((s.index for s in decisions), key=rank_key)
    shown = set(order)
    if len(order) > TABLE_TOP + 5:  # a long run: the top of the ranking and every significant step
        significant = {i for i in order if report.steps[i].verdict in ("locus", "contributing")}
        shown = set(order[:TABLE_TOP]) | significant
    rows = [(rank, i) for rank, i in enumerate(order, 1) if i in shown]  # ranks count hidden rows

    def build(split: bool) -> Table:
        return _ranked_table(report, rows, split=split)

    wrap = range(4, 10 if phi else 8)  # rescue to verdict, and phi and share
    layouts = [(False, _GIVE_WAY, ()), (True, _GIVE_WAY, ()), (True, _LAST_WAY, wrap)]
    table = fit_layouts(build, console, layouts) or as_blocks(build(True), 2, truncate=(2, 3))
    extra = shapley_table(report, console)
    lines: list[RenderableType] = [extra] if extra is not None else []
    if len(shown) < len(order):
        lines.insert(
            0,
            Text(
                f"… {many(len(order) - len(shown), 'more decision step')} ranked lower, "
                "none significant "
                "(all of them: --format json or html)",
                style="dim",
            ),
        )
    lines.append(Text(""))
    curve = _curve_line(report, console.width)
    if curve is not None:
        lines.append(curve)
    lines += [literal(report.headline), *shapley_lines(report)]
    labelled = label_line(report)
    if labelled is not None:
        lines.append(literal(labelled))
    for note in report.notes:
        lines.append(Text("note: ") + literal(note))
    m = report.match_rate
    match_line = (
        f"action-match rate {_pct(m)} over {many(m.n, 'draw')}"
        if m.estimate is not None
        else "action-match rate: not measured"
    )
    fact = report.factual
    fact_line = (
        f"replay of the record fails {fact.estimate:.0%}"
        + (" (exact)" if report.factual_exact else f" [{fact.low:.0%}, {fact.high:.0%}]")
        if fact.estimate is not None and fact.low is not None and fact.high is not None
        else "replay of the record: not scored"
    )
    b = report.budget
    lines.append(Text(f"{match_line}; {fact_line}; divergence {report.divergence_rate:.0%}"))
    lines.append(
        Text(
            f"budget: {rollouts_served(b.rollouts, stored)}, {many(b.policy_calls, 'policy call')}"
            f"{f', {b.errored} errored' if b.errored else ''}; seed {report.seed}; "
            f"{samples_per_step(report)}; min effect {percent(report.min_effect)}; "
            f"verdicts Bonferroni-adjusted over {many(len(decisions), 'step')}"
        )
    )
    spec_line = Text("specs: ") + literal(
        f"policy={report.specs.policy} env={report.specs.env} scorer={report.specs.scorer}"
    )
    lines.append(spec_line)
    if report.fidelity is not None:
        lines.append(Text(fidelity_line(report.fidelity)))
    console.print(Group(table, *lines))


def fidelity_line(fidelity: str) -> str:
    """What the trace's fidelity class means for this report, in one line."""
    from car.trace import FIDELITY_CLASSES

    line = f"trace fidelity: class {fidelity} ({FIDELITY_CLASSES.get(fidelity, 'unknown')})"
    if fidelity == "C":
        line += "; counterfactual replay needs a backend that can role-play each agent from its prompt"
    return line
