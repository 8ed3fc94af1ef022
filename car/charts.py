"""Inline SVG charts for the HTML report: the rescue curve with its adjacent drops, and Shapley credit.

The charts are plain SVG strings built from the report's numbers: no plotting library, no script, no
external font. Every piece of text placed in them goes through `esc`, because step actors and player
ids come from the trace. Colours are set with classes so the page's stylesheet (and print) owns them.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass

from car.report import Estimate, Report, ShapleyReport

__all__ = ["esc", "rescue_curve_svg", "shapley_svg"]

# C0/C1 controls and bidirectional overrides and marks would let trace text disguise itself; show them
# as escapes.
_CONTROL = re.compile(
    r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


def esc(text: object) -> str:
    """Text from a trace or a report as inert HTML/SVG text (quotes escaped too: safe in attributes)."""
    cleaned = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))
    return html.escape(cleaned, quote=True)


def _f(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


@dataclass(frozen=True)
class _Box:
    left: float
    top: float
    width: float
    height: float
    lo: float
    hi: float

    def y(self, value: float) -> float:
        span = self.hi - self.lo or 1.0
        clamped = min(max(value, self.lo), self.hi)
        return self.top + self.height * (1 - (clamped - self.lo) / span)


def _text_width(*texts: str) -> float:
    """About how wide the labels are side by side, in user units (a digit of the ticks is 6 to 7)."""
    return 7.0 * sum(len(t) for t in texts)


def _complete(e: Estimate | None) -> tuple[float, float, float] | None:
    if e is None or e.estimate is None or e.low is None or e.high is None:
        return None
    return e.estimate, e.low, e.high


def _whisker(x: float, y_lo: float, y_hi: float, cls: str, cap: float = 4.0) -> str:
    return (
        f'<path class="{cls}" d="M{_f(x - cap)} {_f(y_lo)}H{_f(x + cap)}M{_f(x)} {_f(y_lo)}'
        f'V{_f(y_hi)}M{_f(x - cap)} {_f(y_hi)}H{_f(x + cap)}"/>'
    )


def rescue_curve_svg(report: Report) -> str:
    """The rescue rate per step with intervals (top) and the adjacent drops (bottom), locus marked.

    The last column is the record itself (every decision held): its rescue rate is `1 - v(N)`, which is
    where the drops telescope to.
    """
    steps = report.steps
    n = len(steps)
    width, left, right = 760.0, 52.0, 16.0
    plot_w = width - left - right
    slot = plot_w / (n + 1)  # one slot per step plus the record
    top = _Box(left, 28.0, plot_w, 190.0, 0.0, 1.0)

    drops = [_complete(s.drop) for s in steps]
    d_lo = min([0.0, *(d[1] for d in drops if d)])
    d_hi = max([0.1, *(d[2] for d in drops if d)])
    # Headroom above the tallest whisker for its value label.
    bottom = _Box(left, top.top + top.height + 70.0, plot_w, 96.0, d_lo, d_hi + 0.15 * (d_hi - d_lo))
    height = bottom.top + bottom.height + 40.0
    zero_y = bottom.y(0.0)

    def x(i: float) -> float:
        return left + slot * (i + 0.5)

    # Every 1, 2, 5, 10, 20, 50... steps: the most labels that leave the widest one room.
    room = _text_width(str(n - 1)) + 4
    label_every = next(k * 10**e for e in range(9) for k in (1, 2, 5) if k * 10**e * slot >= room)
    out: list[str] = [
        f'<svg class="chart rescue" viewBox="0 0 {_f(width)} {_f(height)}" role="img" '
        f'aria-labelledby="curve-title" xmlns="http://www.w3.org/2000/svg">',
        '<title id="curve-title">Rescue rate per step, with adjacent drops</title>',
    ]
    # Locus band first so everything else draws over it.
    if report.locus is not None:
        lx = x(report.locus) - slot / 2
        out.append(
            f'<rect class="locus-band" x="{_f(lx)}" y="{_f(top.top - 18)}" width="{_f(slot)}" '
            f'height="{_f(bottom.top + bottom.height - top.top + 18)}"/>'
        )
        out.append(
            f'<text class="locus-label" x="{_f(x(report.locus))}" y="{_f(top.top - 6)}" '
            f'text-anchor="middle">locus · step {report.locus}</text>'
        )
    # Axes and grid.
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = top.y(frac)
        out.append(f'<path class="grid" d="M{_f(left)} {_f(y)}H{_f(left + plot_w)}"/>')
        out.append(
            f'<text class="tick" x="{_f(left - 6)}" y="{_f(y + 4)}" text-anchor="end">{frac:.0%}</text>'
        )
    out.append(
        f'<text class="axis-title" x="12" y="{_f(top.top + top.height / 2)}" text-anchor="middle" '
        f'transform="rotate(-90 12 {_f(top.top + top.height / 2)})">rescued</text>'
    )
    for d in sorted({d_lo, 0.0, d_hi}):
        y = bottom.y(d)
        if d != 0.0 and abs(y - zero_y) < 14:  # too close to the zero label to read
            continue
        cls = "zero" if d == 0.0 else "grid"
        out.append(f'<path class="{cls}" d="M{_f(left)} {_f(y)}H{_f(left + plot_w)}"/>')
        out.append(
            f'<text class="tick" x="{_f(left - 6)}" y="{_f(y + 4)}" text-anchor="end">'
            f"{100 * d:+.0f}%</text>"
        )
    out.append(
        f'<text class="axis-title" x="12" y="{_f(bottom.top + bottom.height / 2)}" '
        f'text-anchor="middle" transform="rotate(-90 12 {_f(bottom.top + bottom.height / 2)})">'
        "drop</text>"
    )
    out.append(
        f'<text class="panel-title" x="{_f(left)}" y="{_f(bottom.top - 22)}">adjacent drop '
        "p(k+1) &#8722; p(k): what holding step k adds</text>"
    )
    # Step labels along the bottom: the locus's, the record's, then every label_every-th step's.
    # Many steps make the slots narrow: a label that would run into one already placed is left out.
    base = bottom.top + bottom.height
    wanted = (
        [] if report.locus is None else [(float(report.locus), str(report.locus), "tick locus-tick")]
    )
    wanted.append((float(n), "record", "tick"))
    wanted += [(s.index, str(s.index), "tick") for s in steps if s.index % label_every == 0]
    placed: list[tuple[float, str]] = []
    for i, text, cls in wanted:
        if any(abs(x(i) - x(j)) < _text_width(text, other) / 2 + 4 for j, other in placed):
            continue
        placed.append((i, text))
        out.append(
            f'<text class="{cls}" x="{_f(x(i))}" y="{_f(base + 16)}" text-anchor="middle">{text}</text>'
        )
    out.append(
        f'<text class="axis-title" x="{_f(left + plot_w / 2)}" y="{_f(base + 34)}" '
        'text-anchor="middle">step (re-decided from here on; earlier decisions held)</text>'
    )

    # Rescue points, intervals and the connecting line (decision steps only, then the record).
    points: list[tuple[float, float]] = []
    marks: list[str] = []
    for s in steps:
        cx = x(s.index)
        r = _complete(s.rescue)
        if not s.decision or r is None:
            marks.append(
                f'<circle class="nodata" cx="{_f(cx)}" cy="{_f(top.y(0.0))}" r="2.5">'
                f"<title>step {s.index}: {'no data' if s.decision else 'not a decision'}</title>"
                "</circle>"
            )
            continue
        est, lo, hi = r
        cls = "locus" if s.index == report.locus else (s.verdict or "").replace(" ", "-")
        points.append((cx, top.y(est)))
        marks.append(_whisker(cx, top.y(lo), top.y(hi), f"ci {cls}"))
        marks.append(
            f'<circle class="pt {cls}" data-step="{s.index}" cx="{_f(cx)}" cy="{_f(top.y(est))}" '
            f'r="{5 if s.index == report.locus else 3.5}"><title>step {s.index} ({esc(s.actor)}): '
            f"rescued {est:.0%} [{lo:.0%}, {hi:.0%}]</title></circle>"
        )
    fact = _complete(report.factual)
    if fact is not None:
        rec_y = top.y(1 - fact[0])
        marks.append(_whisker(x(n), top.y(1 - fact[2]), top.y(1 - fact[1]), "ci record"))
        marks.append(
            f'<circle class="pt record" cx="{_f(x(n))}" cy="{_f(rec_y)}" r="3.5"><title>the record '
            f"(all decisions held) is rescued {1 - fact[0]:.0%}</title></circle>"
        )
        points.append((x(n), rec_y))
    if len(points) > 1:
        path = "M" + "L".join(f"{_f(px)} {_f(py)}" for px, py in points)
        out.append(f'<path class="curve" d="{path}"/>')
    out.extend(marks)

    # Drop bars.
    bar_w = max(2.0, min(22.0, slot * 0.6))
    zero = bottom.y(0.0)
    for s, dr in zip(steps, drops, strict=True):
        if dr is None:
            continue
        est, lo, hi = dr
        cx = x(s.index)
        y = bottom.y(est)
        significant = s.index == report.locus or s.index in report.shared
        cls = "locus" if s.index == report.locus else ("shared" if significant else "plain")
        out.append(
            f'<rect class="bar {cls}" data-step="{s.index}" x="{_f(cx - bar_w / 2)}" '
            f'y="{_f(min(y, zero))}" width="{_f(bar_w)}" height="{_f(max(abs(zero - y), 0.8))}">'
            f"<title>step {s.index}: drop {100 * est:+.0f}% [{100 * lo:+.0f}, {100 * hi:+.0f}]"
            "</title></rect>"
        )
        out.append(_whisker(cx, bottom.y(lo), bottom.y(hi), "ci", cap=3.0))
        if significant and slot >= 28:
            out.append(
                f'<text class="bar-label" x="{_f(cx)}" y="{_f(bottom.y(hi) - 5)}" '
                f'text-anchor="middle">{100 * est:+.0f}%</text>'
            )
    out.append("</svg>")
    return "\n".join(out)


def _num(x: float) -> str:
    return f"{x:.2f}".replace("-0.00", "0.00")


def shapley_svg(sh: ShapleyReport, labels: Sequence[str]) -> str:
    """Horizontal bars per player (value and interval), then Σφ beside v(N) - v(∅) on the same scale."""
    rows: list[tuple[str, float, float, float, str, str]] = []
    for p, label in zip(sh.players, labels, strict=True):
        share = f" · {p.share:.0%}" if p.share is not None else ""
        rows.append(
            (
                label,
                p.value,
                p.low,
                p.high,
                "player",
                f"{_num(p.value)} [{_num(p.low)}, {_num(p.high)}]{share}",
            )
        )
    gap_index = len(rows)
    rows.append(("Σφ", sh.total, sh.total, sh.total, "total", f"{_num(sh.total)}"))
    va, vn = _complete(sh.v_all), _complete(sh.v_none)
    if va is not None and vn is not None:
        diff = va[0] - vn[0]
        # Conservative bounds for the difference from the two marginal intervals.
        rows.append(
            (
                "v(N) \u2212 v(\u2205)",
                diff,
                va[1] - vn[2],
                va[2] - vn[1],
                "effect",
                f"{_num(diff)} [{_num(va[1] - vn[2])}, {_num(va[2] - vn[1])}]",
            )
        )
    lo = min([0.0, *(r[2] for r in rows)])
    hi = max([0.05, *(r[3] for r in rows)])
    width, label_w, text_w = 760.0, 150.0, 200.0
    plot_l, plot_w = label_w, width - label_w - text_w - 10
    row_h, top = 24.0, 10.0
    height = top + row_h * len(rows) + 14 + 24

    def sx(v: float) -> float:
        return plot_l + plot_w * (min(max(v, lo), hi) - lo) / (hi - lo)

    out = [
        f'<svg class="chart shapley" viewBox="0 0 {_f(width)} {_f(height)}" role="img" '
        f'aria-labelledby="shapley-title" xmlns="http://www.w3.org/2000/svg">',
        '<title id="shapley-title">Shapley credit per player with intervals</title>',
    ]
    y = top
    for i, (label, value, low, high, cls, text) in enumerate(rows):
        if i == gap_index:
            y += 14
            out.append(f'<path class="grid" d="M0 {_f(y - 7)}H{_f(width)}"/>')
        mid = y + row_h / 2
        x0, x1 = sx(0.0), sx(value)
        out.append(
            f'<text class="row-label" x="{_f(label_w - 8)}" y="{_f(mid + 4)}" text-anchor="end">'
            f"{esc(label)}</text>"
        )
        out.append(
            f'<rect class="hbar {cls}" x="{_f(min(x0, x1))}" y="{_f(mid - 7)}" '
            f'width="{_f(max(abs(x1 - x0), 0.8))}" height="14"><title>{esc(label)}: {esc(text)}'
            "</title></rect>"
        )
        if high > low:
            out.append(
                f'<path class="ci" d="M{_f(sx(low))} {_f(mid - 5)}V{_f(mid + 5)}M{_f(sx(low))} '
                f'{_f(mid)}H{_f(sx(high))}M{_f(sx(high))} {_f(mid - 5)}V{_f(mid + 5)}"/>'
            )
        tx = _f(plot_l + plot_w + 10)
        out.append(f'<text class="row-value" x="{tx}" y="{_f(mid + 4)}">{esc(text)}</text>')
        y += row_h
    out.append(f'<path class="zero" d="M{_f(sx(0.0))} {_f(top - 4)}V{_f(y + 2)}"/>')
    for tick in (lo, 0.0, hi):
        # Skip a tick that would sit on top of the zero label.
        if tick == 0.0 or abs(sx(tick) - sx(0.0)) > 40:
            out.append(
                f'<text class="tick" x="{_f(sx(tick))}" y="{_f(y + 18)}" text-anchor="middle">'
                f"{_num(tick)}</text>"
            )
    out.append("</svg>")
    return "\n".join(out)
