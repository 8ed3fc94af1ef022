"""Render a `Report` (and, when available, its trace) as one self-contained HTML page.

The page has five parts: the headline (outcome, locus in plain words, confidence, action-match rate,
warnings), the rescue curve, Shapley credit when it ran, the trace as a timeline with the locus step
opened and its context shown, and the provenance. It loads nothing: styles are inline, charts are
inline SVG (`car.charts`), and a Content-Security-Policy forbids scripts and every network fetch, so a
trace that carries HTML or `<script>` can only ever show up as text. All text from the trace or the
report passes through `esc`.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from car.charts import esc, rescue_curve_svg, shapley_svg
from car.errors import CarError, InputError
from car.render import no_commands
from car.report import (
    Estimate,
    Report,
    StepReport,
    label_line,
    many,
    percent,
    samples_per_step,
    spent_text,
)
from car.trace import Action, Message, Step, Trace, task_of

__all__ = ["render_html"]

# Long tool results are cut so a 50-step trace stays well under 1 MB; the locus step gets more room.
_DASH = "\u2013"  # shown where there is no estimate
_CLIP = 3000
_CLIP_LOCUS = 12000
_CONTEXT_ITEMS = 4
_LOW_MATCH = 0.5

_CSS = """
:root{--ink:#1f2328;--muted:#59636e;--line:#d0d7de;--soft:#f6f8fa;--locus:#c62828;
--locus-soft:#fdecea;--warn:#8a5a00;--warn-soft:#fff8e1;--accent:#37474f;--shared:#b26a00}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:var(--ink);background:#fff;overflow-wrap:anywhere}
main{max-width:980px;margin:0 auto;padding:24px 20px 48px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:17px;margin:32px 0 8px;padding-bottom:4px;
border-bottom:1px solid var(--line)}
.sub{color:var(--muted);margin:0 0 16px}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;
font-size:13px}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:var(--soft);border:1px solid var(--line);
border-radius:6px;padding:8px 10px;margin:4px 0 8px}
.headline{border:2px solid var(--locus);border-radius:10px;padding:14px 18px;
background:var(--locus-soft)}
.headline.none{border-color:var(--warn);background:var(--warn-soft)}
.verdict{font-size:19px;font-weight:650;margin:0 0 6px}
.what{margin:0 0 10px}.what code{background:#fff;border:1px solid var(--line);border-radius:4px;
padding:1px 5px}
.figures{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0 0}
.figure{background:#fff;border:1px solid var(--line);border-radius:8px;padding:6px 12px;min-width:150px}
.figure b{display:block;font-size:18px}.figure span{color:var(--muted);font-size:12.5px}
.warnings{border-left:5px solid var(--warn);background:var(--warn-soft);padding:8px 14px;margin:14px 0 0;
border-radius:4px}.warnings ul{margin:4px 0;padding-left:20px}
.notes{color:var(--muted);margin:10px 0 0;padding-left:20px}
.chart{width:100%;height:auto;display:block}
.chart text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif;fill:var(--ink)}
.chart .tick{font-size:11px;fill:var(--muted)}.chart .axis-title,.chart .panel-title{font-size:12px;
fill:var(--muted)}
.chart .grid{stroke:#e6e9ec;stroke-width:1}.chart .zero{stroke:#8c959f;stroke-width:1}
.chart .curve{fill:none;stroke:var(--accent);stroke-width:1.6}
.chart .ci{stroke:#8c959f;stroke-width:1.4;fill:none}.chart .ci.locus{stroke:var(--locus)}
.chart .pt{fill:var(--accent)}.chart .pt.locus{fill:var(--locus)}
.chart .pt.contributing{fill:var(--shared)}
.chart .pt.record{fill:#fff;stroke:var(--accent);stroke-width:1.6}
.chart .nodata{fill:#c4c9ce}
.chart .locus-band{fill:var(--locus-soft)}.chart .locus-label,.chart .locus-tick{fill:var(--locus);
font-weight:650;font-size:12px}
.chart .bar.plain{fill:#b0bec5}.chart .bar.shared{fill:var(--shared)}.chart .bar.locus{fill:var(--locus)}
.chart .bar-label{font-size:11px;font-weight:600}
.chart .hbar.player{fill:var(--accent)}.chart .hbar.total{fill:#78909c}.chart .hbar.effect{fill:#b0bec5}
.chart .row-label{font-size:12.5px}.chart .row-value{font-size:12px;font-family:ui-monospace,Menlo,
Consolas,monospace}
.caption{color:var(--muted);font-size:13px;margin:4px 0 0}
table{border-collapse:collapse;width:100%;font-size:13.5px}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;color:var(--muted)}td.num{font-variant-numeric:tabular-nums;white-space:nowrap}
tr.locus td{background:var(--locus-soft);font-weight:600}
.mini{display:inline-block;width:70px;height:8px;background:#e6e9ec;border-radius:4px;vertical-align:middle;
margin-right:6px;overflow:hidden}.mini>i{display:block;height:100%;background:var(--accent)}
tr.locus .mini>i,li.locus .mini>i{background:var(--locus)}
.mini-val{font-size:12px;color:var(--muted);min-width:80px;font-variant-numeric:tabular-nums}
ol.timeline{list-style:none;padding:0;margin:0}
ol.timeline>li{border:1px solid var(--line);border-radius:8px;margin:8px 0;background:#fff}
ol.timeline>li.locus{border:2px solid var(--locus);box-shadow:0 0 0 3px var(--locus-soft)}
ol.timeline>li.observer{background:var(--soft)}
summary{cursor:pointer;padding:7px 12px;display:flex;gap:10px;align-items:baseline;flex-wrap:wrap;
list-style:none}summary::-webkit-details-marker{display:none}
summary::before{content:"▸";color:var(--muted);width:10px}details[open]>summary::before{content:"▾"}
summary .idx{font-weight:650;min-width:52px}.actor{border-radius:10px;padding:0 8px;background:#eceff1;
font-size:12.5px}.summary-action{flex:1 1 300px;overflow-wrap:anywhere}
.badge{border-radius:4px;padding:0 6px;font-size:12px;font-weight:650;color:#fff;background:var(--locus)}
.badge.contributing{background:var(--shared)}.badge.quiet{background:#eceff1;color:var(--muted);
font-weight:500}
.body{padding:2px 14px 10px}.label{font-size:12px;font-weight:650;color:var(--muted);
text-transform:uppercase;letter-spacing:.04em;margin:8px 0 0}
.context{border-left:4px solid var(--locus);padding-left:10px;margin:6px 0 10px}
.ctx-from{font-size:12.5px;color:var(--muted)}
.err{color:var(--locus);font-weight:600}
dl.prov{display:grid;grid-template-columns:max-content 1fr;gap:3px 16px;margin:0}
dl.prov dt{color:var(--muted)}dl.prov dd{margin:0;overflow-wrap:anywhere}
footer{color:var(--muted);font-size:12.5px;margin-top:32px}
@media print{body{font-size:12px}main{max-width:none;padding:0}h2{break-after:avoid}
.headline,.chart,ol.timeline>li{break-inside:avoid}
details::details-content{content-visibility:visible;display:block}summary::before{content:""}
*{-webkit-print-color-adjust:exact;print-color-adjust:exact}}
"""

# No scripts, no fetches: the page is inert even if escaping were ever to miss something.
_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
)


def _pct(e: Estimate | None, signed: bool = False) -> str:
    if e is None or e.estimate is None or e.low is None or e.high is None:
        return "\u2013"
    f = "{:+.0f}" if signed else "{:.0f}"
    return f"{f.format(100 * e.estimate)}% [{f.format(100 * e.low)}, {f.format(100 * e.high)}]"


def _mini(e: Estimate | None, label: bool = False) -> str:
    if e is None or e.estimate is None:
        return ""
    bar = f'<span class="mini" aria-hidden="true"><i style="width:{100 * e.estimate:.0f}%"></i></span>'
    return bar + (f'<span class="mini-val">{e.estimate:.0%} rescued</span>' if label else "")


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return esc(text)
    return esc(text[:limit]) + f"\n… ({len(text) - limit:,} more characters not shown)"


def _pretty(content: str) -> str:
    """JSON tool results re-indented so each field (an injected note, say) sits on its own line."""
    stripped = content.strip()
    if stripped[:1] in "{[":
        try:
            return json.dumps(json.loads(stripped), indent=2, ensure_ascii=False)
        except ValueError:
            pass
    return content


def _plain_action(action: Action, width: int = 240) -> str:
    """What the actor did, as a phrase: "called issue_refund(...)", "wrote “...”"."""
    said = " ".join(action.text.split())
    if len(said) > width:
        said = said[: width - 1] + "…"
    if action.tool_calls:
        calls = ", ".join(f"{c.name}({_args(c.raw_arguments, c.arguments)})" for c in action.tool_calls)
        return f"called {calls}" + (f" after writing “{said}”" if said else "")
    return f"wrote “{said}”"


def _args(raw: str | None, parsed: dict[str, Any]) -> str:
    text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in parsed.items())
    if not parsed and raw:
        text = raw
    return text if len(text) <= 160 else text[:159] + "…"


def _warnings(report: Report) -> list[str]:
    """Reasons to distrust the attribution, each one sentence of HTML."""
    out: list[str] = []
    if report.abstained_reason:
        need = (
            f" About {many(report.rollouts_needed_per_step, 'sample')} per step would decide."
            if report.rollouts_needed_per_step and "samples per step" not in report.abstained_reason
            else ""
        )
        reason = report.abstained_reason.rstrip(".")
        out.append(f"<b>The estimator abstained:</b> {_clip(reason, _CLIP)}.{esc(need)}")
    if report.status == "backend-errors":
        out.append(
            f"<b>Backend errors:</b> {report.budget.errored} of "
            f"{many(report.budget.rollouts, 'rollout')} errored; "
            f"first: {_clip(report.first_error or 'unknown', _CLIP)}."
        )
    if report.fidelity in ("B", "C"):
        what = (
            "only the conversation was recorded; each step's input was rebuilt from the message prefix"
            if report.fidelity == "B"
            else "only speakers and text were recorded (no tools, parameters or per-agent view)"
        )
        out.append(f"<b>Low trace fidelity (class {report.fidelity}):</b> {what}.")
    m = report.match_rate
    if m.estimate is not None and m.estimate < _LOW_MATCH:
        out.append(
            f"<b>Low action-match rate ({m.estimate:.0%}):</b> the replay policy rarely reproduces the "
            "recorded actions, so rollouts may not resemble the recorded run."
        )
    if report.never_reproduced:
        steps = ", ".join(str(i) for i in report.never_reproduced)
        out.append(
            f"<b>Never reproduced:</b> the policy never drew the recorded action at step(s) {steps}."
        )
    if report.divergence_rate >= 0.2:
        out.append(
            f"<b>Held steps diverged</b> in {report.divergence_rate:.0%} of rollouts: their context "
            "differed from the record, so holding them was less literal."
        )
    return out


def _headline(report: Report, trace: Trace | None) -> str:
    parts: list[str] = []
    outcome = trace.outcome if trace is not None else None
    if outcome is not None and (outcome.label or outcome.detail):
        label = outcome.label or ("failure" if outcome.failed else "outcome")
        detail = f": {_clip(outcome.detail, _CLIP)}" if outcome.detail else ""
        parts.append(f'<p class="sub"><b>Outcome:</b> {esc(label)}{detail}</p>')
    elif report.factual.estimate is not None:
        parts.append(
            f'<p class="sub"><b>Outcome:</b> the replayed record fails {report.factual.estimate:.0%}</p>'
        )
    decisions = sum(1 for s in report.steps if s.decision)
    if report.locus is not None:
        s = report.steps[report.locus]
        did = (
            _plain_action(trace.steps[s.index].action)
            if trace is not None and s.index < len(trace.steps)
            else f"did “{s.action}”"
        )
        parts.append('<section class="headline" id="headline">')
        parts.append(
            f'<p class="verdict">The run was decided at <a href="#step-{s.index}">step {s.index}</a>, '
            f"by {esc(s.actor)}.</p>"
        )
        parts.append(f'<p class="what">{esc(s.actor)} <code>{esc(did)}</code></p>')
        conf = (
            f"significant at the {percent(report.level)} level after Bonferroni over {decisions} "
            f"decision steps, and above the {percent(report.min_effect)} minimum effect"
            if report.adaptive is None  # an adaptive run says how it stopped, in its own words
            else f"{report.adaptive.statement} (anytime-valid intervals, checked after every batch)"
        )
        parts.append(f'<p class="what">Confidence: {conf}.</p>')
        figures = [(_pct(s.effect), "of the failure removed by re-deciding here")]
        if _pct(s.rescue) != _pct(s.effect):
            figures.append((_pct(s.rescue), "of runs rescued when re-decided from here"))
        figures.append((_pct(s.drop, signed=True), "adjacent drop at this step"))
    else:
        parts.append('<section class="headline none" id="headline">')
        parts.append('<p class="verdict">car cannot name a decisive step.</p>')
        if report.shapley is not None and report.shapley.summary:  # as the headline goes on
            parts.append(f'<p class="what">Shapley: {esc(report.shapley.summary)}.</p>')
        figures = []
    m = report.match_rate
    figures.append(
        (_pct(m), f"action-match rate over {many(m.n, 'draw')}")
        if m.estimate is not None
        else ("\u2013", "no match rate")
    )
    fact = report.factual
    if fact.estimate is not None:
        figures.append(
            (
                f"{fact.estimate:.0%}" if report.factual_exact else _pct(fact),
                "replayed record fails" + (" (exact)" if report.factual_exact else ""),
            )
        )
    parts.append('<div class="figures">')
    for value, label in figures:
        parts.append(f'<div class="figure"><b>{esc(value)}</b><span>{esc(label)}</span></div>')
    parts.append("</div>")
    warnings = _warnings(report)
    if warnings:
        parts.append('<div class="warnings" role="note"><b>Read with care</b><ul>')
        parts.extend(f"<li>{w}</li>" for w in warnings)
        parts.append("</ul></div>")
    # The steps never reproduced are a warning above; the note saying why car refused is not.
    notes = [n for n in report.notes if not n.endswith("never reproduced the recorded action")]
    if notes:
        parts.append(
            '<ul class="notes">' + "".join(f"<li>{_clip(n, _CLIP)}</li>" for n in notes) + "</ul>"
        )
    if report.locus is not None:  # when abstaining, the warning above already says why
        parts.append(f'<p class="caption">{esc(report.headline)}</p>')
    parts.append("</section>")
    return "\n".join(parts)


def _curve_section(report: Report) -> str:
    if not any(s.rescue is not None for s in report.steps):
        return (
            '<section id="curve"><h2>Rescue curve</h2><p>No rescue rates were estimated '
            "(see the warnings above).</p></section>"
        )
    rows = []
    for s in report.steps:
        cls = ' class="locus"' if s.index == report.locus else ""
        match = "\u2013"
        if s.match_rate is not None and s.match_rate.estimate is not None:
            match = f"{s.match_rate.estimate:.0%}" + (" (never)" if s.never_reproduced else "")
        rows.append(
            f'<tr{cls} data-step="{s.index}"><td class="num">{s.index}</td><td>{esc(s.actor)}</td>'
            f"<td>{esc(s.action)}</td><td class='num'>{_mini(s.rescue)}{_pct(s.rescue)}</td>"
            f"<td class='num'>{_pct(s.drop, signed=True)}</td><td class='num'>{esc(match)}</td>"
            f"<td>{esc(s.verdict or ('not a decision' if not s.decision else _DASH))}</td></tr>"
        )
    return "\n".join(
        [
            '<section id="curve"><h2>Rescue curve</h2>',
            rescue_curve_svg(report),
            '<p class="caption">Top: the share of runs that avoid the failure when every decision '
            "before the step is held at its recorded action and the run is re-decided from the step "
            f"on, with {percent(report.level)} intervals. The locus is the latest step whose "
            "effect is significant (the point of commitment); after it, re-deciding no longer helps. "
            "Bottom: the adjacent drop at each step; the drops add up to the total effect.</p>",
            "<details><summary>Numbers</summary><table><thead><tr><th>step</th><th>actor</th>"
            f"<th>action</th><th>rescued [{percent(report.level)} CI]</th><th>drop</th><th>match</th>"
            "<th>verdict</th></tr></thead><tbody>",
            *rows,
            "</tbody></table></details></section>",
        ]
    )


def _shapley_section(report: Report) -> str:
    sh = report.shapley
    if sh is None:
        return ""
    labels = []
    for p in sh.players:
        if sh.players_kind == "steps" and len(p.steps) == 1:
            idx = p.steps[0]
            actor = report.steps[idx].actor if idx < len(report.steps) else ""
            labels.append(f"step {idx} · {actor}" if actor else f"step {idx}")
        else:
            labels.append(p.id)
    va, vn = sh.v_all, sh.v_none
    diff = (
        f"{va.estimate - vn.estimate:.2f}"
        if va.estimate is not None and vn.estimate is not None
        else "not estimated"
    )
    note = (
        f"Σφ = {sh.total:.2f} against v(N) \u2212 v(∅) = {_est(va)} \u2212 {_est(vn)} = {diff}. "
        f"Method: {sh.method}; {spent_text(sh)}."
    )
    why = f"<p>Why: {esc(report.method_reason)}.</p>" if report.method_reason else ""
    return "\n".join(
        [
            f'<section id="shapley"><h2>Shared credit (Shapley over {esc(sh.players_kind)})</h2>',
            why,
            shapley_svg(sh, labels),
            f'<p class="caption">Each bar is a player\'s average marginal contribution to the failure '
            f"probability over all orders, with its {percent(report.level)} interval and its share "
            f"of the total. {esc(note)}</p></section>",
        ]
    )


def _est(e: Estimate) -> str:
    if e.estimate is None:
        return "\u2013"
    if e.low is None or e.high is None or e.low == e.high:
        return f"{e.estimate:.2f}"
    return f"{e.estimate:.2f} [{e.low:.2f}, {e.high:.2f}]"


def _context_items(trace: Trace, step: Step) -> Iterator[tuple[str, str]]:
    """What the actor saw before deciding, newest last: (where it came from, text)."""
    if step.context != "prefix":
        for j, msg in enumerate(step.context):
            yield _message_item(j, msg)
        return
    if trace.task:
        task = trace.task if isinstance(trace.task, str) else json.dumps(trace.task, indent=2)
        yield ("the task", task)
    for prev in trace.steps[: step.index]:
        names = {c.id: c.name for c in prev.action.tool_calls}
        if prev.action.text.strip():
            yield (f"step {prev.index} · {prev.actor} wrote", prev.action.text)
        for c in prev.action.tool_calls:
            args = c.raw_arguments or json.dumps(c.arguments, ensure_ascii=False)
            yield (f"step {prev.index} · {prev.actor} called {c.name}", args)
        for obs in prev.observations:
            tool = names.get(obs.call_id or "", "")
            where = (
                f"step {prev.index} · result of {tool}" if tool else f"step {prev.index} · observation"
            )
            yield (where + (" (error)" if obs.is_error else ""), _pretty(obs.content))


def _message_item(j: int, msg: Message) -> tuple[str, str]:
    who = msg.role + (f" {msg.name}" if msg.name else "")
    text = msg.content
    if msg.tool_calls:
        text += ("\n" if text else "") + "\n".join(
            f"→ {c.name}({c.raw_arguments or json.dumps(c.arguments, ensure_ascii=False)})"
            for c in msg.tool_calls
        )
    return (f"message {j} · {who}", _pretty(text) if msg.role == "tool" else text)


def _step_body(trace: Trace, step: Step, sr: StepReport | None, is_locus: bool) -> list[str]:
    clip = _CLIP_LOCUS if is_locus else _CLIP
    out = ['<div class="body">']
    if is_locus:
        items = list(_context_items(trace, step))
        shown = items[-_CONTEXT_ITEMS:]
        out.append('<p class="label">What it saw just before deciding</p><div class="context">')
        if len(items) > len(shown):
            out.append(
                f'<p class="ctx-from">({len(items) - len(shown)} earlier item(s) of context not '
                "shown; see the steps above)</p>"
            )
        if not shown:
            out.append('<p class="ctx-from">(nothing but the system prompt: this is the first step)</p>')
        for where, text in shown:
            out.append(f'<p class="ctx-from">{esc(where)}</p><pre>{_clip(text, clip)}</pre>')
        out.append("</div>")
    elif step.context != "prefix":
        out.append(f'<p class="ctx-from">recorded context: {many(len(step.context), "message")}</p>')
    action = step.action
    out.append('<p class="label">Action</p>')
    if action.text:
        out.append(f"<pre>{_clip(action.text, clip)}</pre>")
    for c in action.tool_calls:
        args = c.raw_arguments if c.raw_arguments is not None else json.dumps(c.arguments)
        out.append(
            f'<pre class="call"><b>{esc(c.name)}</b>({_clip(_pretty(args) if args else "", clip)})</pre>'
        )
    if not action.text and not action.tool_calls:
        out.append('<p class="ctx-from">(empty action)</p>')
    if step.observations:
        names = {c.id: c.name for c in action.tool_calls}
        out.append('<p class="label">Observations</p>')
        for obs in step.observations:
            tool = names.get(obs.call_id or "", "")
            head = f"result of {tool}" if tool else "observation"
            err = ' <span class="err">error</span>' if obs.is_error else ""
            out.append(
                f'<p class="ctx-from">{esc(head)}{err}</p><pre>{_clip(_pretty(obs.content), clip)}</pre>'
            )
    if sr is not None and sr.decision:
        match = _pct(sr.match_rate)
        out.append(
            f'<p class="ctx-from">rescued {_pct(sr.rescue)} · effect {_pct(sr.effect, signed=True)} · '
            f"drop {_pct(sr.drop, signed=True)} · action-match {match}</p>"
        )
    out.append("</div>")
    return out


def _timeline_section(report: Report, trace: Trace | None, missing: str | None) -> str:
    if trace is None:
        why = esc(missing or "the trace file was not available")
        return (
            '<section id="timeline"><h2>Trace</h2><p class="warnings" role="note">The timeline is not '
            f"shown: {why}. The table above lists every step's recorded action.</p></section>"
        )
    deciders = set(trace.decision_steps)
    out = ['<section id="timeline"><h2>Trace</h2>']
    task = task_of(trace)  # what the judge and `llm-sim:` are told the run was asked
    if task:
        text = task if isinstance(task, str) else json.dumps(task, ensure_ascii=False)
        label = "Task" if trace.task else "Task (from the first user turn)"
        out.append(f"<p><b>{label}:</b> {_clip(text, _CLIP)}</p>")
    out.append('<details class="prompts"><summary>Actors and system prompts</summary><div class="body">')
    for a in trace.actors:
        prompt = f"<pre>{_clip(a.system_prompt, _CLIP)}</pre>" if a.system_prompt else ""
        tools = ", ".join(str(t.get("name", "?")) for t in a.tools)
        out.append(
            f'<p class="ctx-from"><b>{esc(a.id)}</b> ({esc(a.kind)}'
            f"{', tools: ' + esc(tools) if tools else ''})</p>{prompt}"
        )
    out.append("</div></details>")
    out.append('<ol class="timeline">')
    for step in trace.steps:
        sr = report.steps[step.index] if step.index < len(report.steps) else None
        is_locus = step.index == report.locus
        classes = [
            "step",
            "locus" if is_locus else "",
            "decision" if step.index in deciders else "observer",
        ]
        badge = ""
        if is_locus:
            badge = '<span class="badge">LOCUS</span>'
        elif sr is not None and sr.verdict == "contributing":
            badge = '<span class="badge contributing">contributing</span>'
        elif step.index not in deciders:
            badge = '<span class="badge quiet">not a decision</span>'
        bar = _mini(sr.rescue, label=True) if sr is not None else ""
        current = ' aria-current="step"' if is_locus else ""
        out.append(
            f'<li id="step-{step.index}" class="{" ".join(c for c in classes if c)}" '
            f'data-step="{step.index}"{current}>'
            f"<details{' open' if is_locus else ''}><summary>"
            f'<span class="idx">step {step.index}</span><span class="actor">{esc(step.actor)}</span>'
            f'<span class="summary-action">{esc(step.action.summary(110))}</span>{bar}{badge}</summary>'
        )
        out.extend(_step_body(trace, step, sr, is_locus))
        out.append("</details></li>")
    out.append("</ol>")
    outcome = trace.outcome
    if outcome.label or outcome.detail:
        out.append(
            f"<p><b>Outcome:</b> {esc(outcome.label or '')}"
            f"{': ' + _clip(outcome.detail, _CLIP) if outcome.detail else ''}</p>"
        )
    out.append("</section>")
    return "\n".join(out)


def _provenance(report: Report, trace_note: str | None, stored: int | None, item: int | None) -> str:
    from car import __version__
    from car.render import rollouts_served

    b = report.budget
    method = report.method + (f" — {report.method_reason}" if report.method_reason else "")
    if report.shapley is not None and report.method == "contrastive":
        method += f"; Shapley ({report.shapley.method}) for shared credit"
    rows: list[tuple[str, str]] = [
        ("trace", f"{report.trace_id}" + (f" ({report.trace_path})" if report.trace_path else "")),
        ("trace hash", report.trace_hash),
        ("policy", report.specs.policy),
        ("environment", report.specs.env),
        ("scorer", report.specs.scorer),
        ("method", method),
        ("seed", str(report.seed)),
        (
            "budget",
            f"{rollouts_served(b.rollouts, stored)}, {many(b.policy_calls, 'policy call')}, "
            f"{many(b.env_calls, 'environment call')}, "
            f"{b.reused} reused, {b.errored} errored, {b.unscorable} unscorable",
        ),
        (
            "settings",
            f"{samples_per_step(report)}, "
            f"{many(report.match_samples, 'match draw')} per step, "
            f"{percent(report.level)} intervals, minimum effect {percent(report.min_effect)}",
        ),
        (
            "divergence",
            f"{report.divergence_rate:.0%} of rollouts had a held step whose context differed",
        ),
        ("fidelity", report.fidelity or "native car trace"),
        ("car", f"computed by car {report.car_version}; rendered by car {__version__}"),
        ("format", report.version),
    ]
    labelled = label_line(report)
    if labelled is not None:
        rows.append(("label", labelled))
    if trace_note:
        rows.append(("timeline", trace_note))
    body = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in rows)
    rerun = ""
    if report.trace_path:
        rerun = (
            f'<p class="ctx-from">Reproduce (with the same backend settings): '
            f"<code>{esc(reproduce_command(report, item))}</code></p>"
        )
    return f'<section id="provenance"><h2>Provenance</h2><dl class="prov">{body}</dl>{rerun}</section>'


def reproduce_command(report: Report, item: int | None = None) -> str:
    """The `car blame` command line that runs this analysis again: the run (`--item`, when its file
    holds several), the components, the seed, and the options of the mode it ran in (an adaptive
    run's --confidence and --budget, not --samples, which that mode refuses); backend settings
    (server, key, temperature) are not in a report."""
    spec = report.specs
    args = [
        "car", "blame", report.trace_path or report.trace_id,
        *(["--item", str(item)] if item is not None else []),
        "--policy", spec.policy, "--env", spec.env, "--scorer", spec.scorer,
        "--seed", str(report.seed), "--match-samples", str(report.match_samples),
        "--min-effect", f"{report.min_effect:g}",
    ]  # fmt: skip
    if report.adaptive is not None:
        run = report.adaptive
        args += ["--adaptive", "--confidence", f"{run.confidence:g}", "--budget", str(run.budget)]
        if run.target_width is not None:
            args += ["--target-width", f"{run.target_width:g}"]
        return shlex.join(args)
    args += ["--samples", str(report.samples), "--level", f"{report.level:g}"]
    game = report.shapley
    if game is None and _contrastive_asked(report):
        args += ["--method", "contrastive"]
    if game is not None:
        if (report.method_reason or "").startswith("requested"):  # else --method auto ran it
            args += ["--method", "shapley"]
        if game.players_kind == "agents":
            args += ["--players", "agents"]
        elif game.players_kind == "groups":
            args += ["--players", ";".join(",".join(map(str, p.steps)) for p in game.players)]
        args += ["--shapley", game.method]
        if game.budget_limit is not None:
            args += ["--budget", str(game.budget_limit)]
        if game.budget_calls_limit is not None:
            args += ["--budget-calls", str(game.budget_calls_limit)]
        if game.target_width is not None:
            args += ["--target-width", f"{game.target_width:g}"]
    return shlex.join(args)


def _contrastive_asked(report: Report) -> bool:
    """Whether the run had `--method contrastive`: a rule of `--method auto` fires on this report,
    yet Shapley neither ran nor left a note saying why not (as `auto` does)."""
    from car.fallback import fallback_reason

    noted = any(n.startswith("Shapley (") for n in report.notes)
    return fallback_reason(report, "auto") is not None and not noted


def render_html(
    report: Report,
    trace: Trace | None = None,
    *,
    trace_missing: str | None = None,
    stored: int | None = 0,
    item: int | None = None,
) -> str:
    """The report as one self-contained HTML document.

    `trace` supplies the timeline (each step's action and observations, the locus step's context);
    without it the page says why (`trace_missing`) and shows the rest. `stored`: how many rollouts
    this run was served from the store; `item`: the run's index in a file of several (`--item`).
    Nothing on the page loads from the network and no script runs.
    """
    if trace is not None and len(trace.steps) != len(report.steps):
        trace_missing = (
            f"the trace has {many(len(trace.steps), 'step')} but the report {len(report.steps)}: "
            "it is not the trace this report was computed from"
        )
        trace = None
    title = f"car blame: {report.trace_id}"
    if report.locus is not None:
        title += f" — decided at step {report.locus}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="generator" content="car">',
        f"<title>{esc(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head><body><main>",
        f"<header><h1>car blame: {esc(report.trace_id)}</h1>",
        f'<p class="sub">Which step of this failed run decided it, found by replaying the run with '
        f"decisions held or re-decided ({esc(report.method)} method, "
        f"{many(report.budget.rollouts, 'rollout')}).</p></header>",
        _headline(report, trace),
        _curve_section(report),
        _shapley_section(report),
        _timeline_section(report, trace, trace_missing),
        _provenance(report, None if trace is not None else trace_missing, stored, item),
        f"<footer>Generated by car {esc(report.car_version)}. Self-contained: this file loads nothing "
        "and runs no script.</footer>",
        "</main></body></html>",
    ]
    return no_commands("\n".join(p for p in parts if p) + "\n", colon="&#58;")  # as in a CI log


def locate_trace(
    report: Report, *, near: Path | None = None, given: Path | None = None
) -> tuple[Trace | None, str | None]:
    """The trace for the timeline: `given` (must be valid), else the report's `trace_path`.

    The recorded path is tried as written, then relative to `near` (the folder of a saved report).
    Returns (trace, None), or (None, why it is missing) so the page can say so.
    """
    trace, missing, _ = _locate(report, near, given)
    return trace, missing


def _locate(
    report: Report, near: Path | None, given: Path | None
) -> tuple[Trace | None, str | None, int | None]:
    """`locate_trace`, and the run's `--item` when it was found at the recorded path in a file of
    several (the reproduce command needs it)."""
    from car.importers import import_file  # any format car imports, as `car blame` read it

    def the_run(path: Path) -> tuple[Trace | None, int | None]:
        # A file of several runs (`car blame FILE --item N`) holds the report's run among others:
        # it is the one with the report's hash (`car report` has no --item to pick it with).
        entries = import_file(path).entries  # every run, skipped ones too, as --item counts them
        for index, t in enumerate(entries):
            if isinstance(t, Trace) and t.content_hash() == report.trace_hash:
                return t, index if len(entries) > 1 else None
        return None, None

    if given is not None:
        trace, item = the_run(given)  # named explicitly: a bad file is an input error, not an omission
        if trace is None:
            raise InputError(
                f"{given}: this trace is not the one the report was computed from (hash differs)"
            )
        recorded = report.trace_path is not None and given.resolve() == Path(report.trace_path).resolve()
        return trace, None, item if recorded else None  # the command names the recorded path
    if not report.trace_path:
        return None, "the report records no trace path (pass --trace)", None
    candidates = [Path(report.trace_path)]
    if near is not None:
        candidates.append(near / report.trace_path)
    for candidate in candidates:
        if candidate.is_file():
            try:
                found, item = the_run(candidate)
            except CarError as exc:
                return None, f"the recorded trace is not readable ({exc})", None
            if found is None:
                changed = f"{candidate} has changed since the report was computed (hash differs)"
                return None, changed, None
            return found, None, item
    return None, f"the recorded trace {report.trace_path} was not found (pass --trace)", None


def html_page(
    report: Report, *, near: Path | None = None, given: Path | None = None, stored: int | None = 0
) -> str:
    """The HTML page of a report, with the trace's timeline when the trace can be found."""
    trace, missing, item = _locate(report, near, given)
    if missing:
        from car.render import literal  # the report's trace path, or a trace's error: untrusted

        print(f"car: note: {literal(missing)}; rendering without the timeline", file=sys.stderr)
    return render_html(report, trace, trace_missing=missing, stored=stored, item=item)
