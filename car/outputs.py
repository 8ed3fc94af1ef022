"""CI-native renderings of one report or a batch of results.

    table     the ranked table (one trace) or the batch summary table
    json      `car.report/v1` (one trace) or `car.batch/v1` (records of every trace)
    jsonl     one `car.record/v1` per line (what `car blame` streams in batch mode)
    markdown  a readable summary: summary table, locus sentences, ranked steps, match rates
    github    `::error` / `::warning` workflow commands (a few, escaped) plus the Markdown summary,
              which goes to `$GITHUB_STEP_SUMMARY` when that is set (capped below GitHub's 1 MiB)
    junit     JUnit XML: one testcase per trace; a tripped gate is a failure, an input or backend
              problem is an error, a trace an interrupted run did not finish is skipped
    html      the self-contained HTML page of one trace's report (`car.html`)

`read_results` reads them back for `car report`: a store, a `car.report/v1` or `car.batch/v1` JSON file,
or `car.record/v1` lines, failed traces included.

Trace text is untrusted: every format but JSON shows its control and bidirectional characters as
`\\xNN` escapes (`car.render.visible`); JSON and JSONL keep the text exact but write C1 and
bidirectional controls, and the `[` of `##[`, as `\\uXXXX` escapes (`car.jsonfile.json_text`),
as they write C0 ones; Markdown escapes table and HTML syntax, workflow commands
percent-encode their data and properties, XML goes through ElementTree. The table, JUnit XML and
the HTML page, which wrap trace text or keep its line breaks, start no line with a runner's `::`
(`car.render.no_commands`).
"""

from __future__ import annotations

import io
import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from rich import box
from rich.console import Console, RenderableType
from rich.table import Table

from car.batch import RECORD_VERSION, Status, TraceResult, report_status
from car.errors import InputError
from car.formats import OutputFormat
from car.gates import worst
from car.jsonfile import (
    describe_validation_error,
    json_text,
    kind_of,
    loads,
    os_reason,
    read_bytes,
)
from car.render import (
    Layout,
    as_blocks,
    figure,
    fit_layouts,
    literal,
    no_commands,
    render_json,
    render_table,
    rollouts_served,
    visible,
)
from car.report import (
    NEVER_REPRODUCES,
    REPORT_VERSION,
    Estimate,
    Report,
    ShapleyPlayer,
    label_agreement,
    label_line,
    many,
    percent,
    shared_credit,
    short,
)
from car.shapley import credited_players
from car.stdout import keep
from car.tracefiles import is_folder, natural_key

__all__ = [
    "BATCH_VERSION",
    "GITHUB_SUMMARY_LIMIT",
    "credit_text",
    "error_text",
    "escape_data",
    "escape_property",
    "fit_bytes",
    "fitted_summary",
    "github_annotations",
    "read_results",
    "render_output",
    "summary_rows",
    "write_github_summary",
]

BATCH_VERSION = "car.batch/v1"
GITHUB_SUMMARY_LIMIT = 1024 * 1024  # GitHub rejects a step summary above 1 MiB
MAX_ANNOTATIONS = 10  # GitHub shows at most 10 of each kind per step


# -- shared pieces ------------------------------------------------------------------------------
def _pct(e: Estimate | None, signed: bool = False) -> str:
    if e is None or e.estimate is None or e.low is None or e.high is None:
        return "-"
    f = "{:+.0%}" if signed else "{:.0%}"
    return f"{f.format(e.estimate)} [{f.format(e.low)}, {f.format(e.high)}]"


def _credited(r: Report) -> list[ShapleyPlayer]:
    return credited_players(r.shapley.players) if r.shapley is not None else []


def _by_players(r: Report, credited: list[ShapleyPlayer]) -> bool:
    """Whether Shapley shared the credit (`credited`, its players that carry some) over agents or
    groups: then the report shares it among those players, not among steps."""
    return r.shapley is not None and r.shapley.players_kind != "steps" and bool(credited)


def credit_text(r: Report) -> str:
    """Who is blamed, in a few words: the locus (and shared steps), or the Shapley split, or "-"."""
    shared = shared_credit(r)
    credited = _credited(r)
    shares = [f"{short(p.id)} {p.share:.0%}" for p in credited[:3] if p.share is not None]
    split = "Shapley: " + ", ".join(shares) + (", ..." if len(credited) > 3 else "")
    by_players = _by_players(r, credited)
    if r.locus is not None:
        extra = [s for s in shared if s != r.locus]
        base = f"step {r.locus} ({short(r.locus_actor or '')})"
        if by_players:
            return f"{base}; {split}"
        if not extra:
            return base
        return base + f"; shared with step{'s' if len(extra) > 1 else ''} {', '.join(map(str, extra))}"
    if shared and not by_players:
        return "shared: steps " + ", ".join(map(str, shared))
    if credited:  # the contrastive estimator abstained and Shapley split the credit
        return split
    if r.abstained_reason == NEVER_REPRODUCES:  # a refusal: more samples would not name a step
        return NEVER_REPRODUCES
    return "-"


def error_text(res: TraceResult) -> str:
    """Why a trace failed, without its path in front (errors about a file start with it): shown
    beside the trace's name, the path is said once."""
    error = res.error or res.status
    return error.removeprefix(f"{res.path}: ") if res.path else error


def _failed(res: TraceResult) -> bool:
    # A trace whose backend failed keeps the partial report of the rollouts that ran; it names no
    # step because the trace failed, not because car found none.
    return res.report is None or res.status in ("input-error", "backend-error")


def _outcome(res: TraceResult) -> str:
    r = res.report
    if res.status == "interrupted":  # not an error of the trace's: the run stopped first
        return "-"
    if r is None or _failed(res):
        return "error"
    credited = _credited(r)
    if _by_players(r, credited):
        return "shared" if len(credited) >= 2 else "blamed"
    if r.locus is None:
        if shared_credit(r):
            return "shared"
        return "abstained" if not credited else ("shared" if len(credited) >= 2 else "blamed")
    return "shared" if shared_credit(r) else "blamed"


def summary_rows(results: Sequence[TraceResult]) -> list[dict[str, str]]:
    """One row per trace: trace, outcome, credit, confidence, match rate, status, rollouts."""
    rows = []
    for res in results:
        r = res.report
        conf = "-"
        if r is not None and r.locus is not None:
            conf = _pct(r.steps[r.locus].effect)
        rows.append(
            {
                "trace": res.label,
                "outcome": _outcome(res),
                "credit": credit_text(r) if r is not None and not _failed(res) else error_text(res),
                "confidence": conf,
                "match": _pct(r.match_rate) if r is not None else "-",
                "status": res.status,
                "rollouts": _rollouts_cell(res),
            }
        )
    return rows


def _rollouts_cell(res: TraceResult) -> str:
    """The summary's rollouts: the report's, or, for a trace an interrupt stopped, those it ran."""
    if res.report is not None:
        return f"{res.report.budget.rollouts}{stored_part(res)}"
    ran = _ran_before_stop(res)
    return "-" if ran is None else f"{ran}{stored_part(res)}"


def _ran_before_stop(res: TraceResult) -> int | None:
    """The rollouts an `interrupted` trace ran (fresh and stored), when its executor could tell:
    work a rerun resumes from, which a reader of the summary wants to see; None otherwise."""
    if res.status != "interrupted" or res.fresh_rollouts is None or res.stored_rollouts is None:
        return None
    return res.fresh_rollouts + res.stored_rollouts


_HEADERS = {
    "trace": "trace",
    "outcome": "outcome",
    "credit": "locus or shared credit",
    "confidence": "effect [CI]",
    "match": "match rate",
    "status": "status",
    "rollouts": "rollouts",
}


def counts(results: Sequence[TraceResult]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in results:
        out[r.status] = out.get(r.status, 0) + 1
    return out


def counts_line(results: Sequence[TraceResult]) -> str:
    c = counts(results)
    parts = [f"{n} {k}" for k, n in sorted(c.items())]
    what = many(len(results), "trace")
    traces = len({r.path or r.trace_id for r in results})
    if traces != len(results):  # `car report`: a trace analysed several ways has a report for each
        what = f"{many(len(results), 'report')} of {many(traces, 'trace')}"
    return f"{what}: " + (", ".join(parts) or "none") + _labels_part(results)


def _labels_part(results: Sequence[TraceResult]) -> str:
    """How often car's answer matches the dataset's labels, over the attributed traces with one."""
    # A trace whose backend failed keeps a partial report but was not attributed: no miss either.
    pairs = [label_agreement(r.report) for r in results if r.report is not None and not _failed(r)]
    steps = [s for s, _ in pairs if s is not None]
    agents = [a for _, a in pairs if a is not None]
    said = [
        f"{what} in {sum(hits)} of {len(hits)}"
        for what, hits in (("labelled step named", steps), ("labelled agent", agents))
        if hits
    ]
    return "; " + ", ".join(said) if said else ""


# -- table --------------------------------------------------------------------------------------
def _plain(render: object) -> str:
    console = Console(record=True, width=160, file=io.StringIO(), no_color=True)
    console.print(render)
    return console.export_text(styles=False)


def summary_table(results: Sequence[TraceResult]) -> Table:
    rows = summary_rows(results)
    table = Table(title="car blame: summary", title_justify="left", box=box.SIMPLE_HEAD)
    for key, head in _HEADERS.items():
        longest = max((len(r[key]) for r in rows), default=len(head))
        if key in ("trace", "credit"):
            table.add_column(head, overflow="fold", min_width=min(longest, 40))
        else:
            table.add_column(head, no_wrap=True)
    for row in rows:
        table.add_row(*(literal(row[k]) for k in _HEADERS))
    return table


_FIGURES = ("confidence", "match", "rollouts")  # never broken inside the table


def fitted_summary(results: Sequence[TraceResult], console: Console) -> RenderableType:
    """The summary table fitted to a terminal (`summary_table` is for files and pipes), as the
    ranked table is (`car.render.fit_layouts`): the credit (or error) wraps between words, then each
    interval and stored count moves under its figure, then the headers wrap, then the trace's path
    and the credit's longer words fold; below that each trace is a block of its own. Nothing is
    cut."""
    rows = summary_rows(results)

    def build(split: bool) -> Table:
        table = Table(
            title="car blame: summary",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            padding=(0, 0),
            collapse_padding=True,
        )
        for key, head in _HEADERS.items():  # text folds a word too long (a path) rather than cut it
            table.add_column(head, overflow="fold", no_wrap=key not in ("trace", "credit"))
        for row in rows:
            table.add_row(
                *(
                    figure(row[k].replace(" ", "\n", 1) if split else row[k])
                    if k in _FIGURES
                    else literal(row[k])
                    for k in _HEADERS
                )
            )
        return table

    layouts: list[Layout] = [
        (False, {}, (2,)),
        (True, {}, (2,)),
        (True, {}, range(1, 7)),
        (True, {0: 16, 2: 12}, range(1, 7)),
    ]
    return fit_layouts(build, console, layouts) or as_blocks(build(True), 0, truncate=())


def _table(results: Sequence[TraceResult], batch: bool) -> str:
    if not batch and results and results[0].report is not None:
        console = Console(record=True, width=120, file=io.StringIO(), no_color=True)
        render_table(results[0].report, console, stored=results[0].stored_rollouts)
        return no_commands(console.export_text(styles=False))
    return no_commands(_plain(summary_table(results)))


# -- json ---------------------------------------------------------------------------------------
def _json(results: Sequence[TraceResult], batch: bool) -> str:
    if not batch and results and results[0].report is not None:
        return render_json(results[0].report)
    body = {
        "version": BATCH_VERSION,
        "exit_code": worst(r.exit_code for r in results),
        "counts": counts(results),
        "records": [r.to_record() for r in results],
    }
    return json_text(body, indent=2)


def jsonl_line(result: TraceResult) -> str:
    return json_text(result.to_record())


# -- markdown -----------------------------------------------------------------------------------
_MD_SPECIAL = str.maketrans(
    {
        "|": "\\|",
        "\\": "\\\\",
        "`": "\\`",
        "*": "\\*",
        "_": "\\_",
        "[": "\\[",
        "]": "\\]",
        "<": "&lt;",
        ">": "&gt;",
        "&": "&amp;",
        "#": "\\#",
        "\n": " ",
        "\r": " ",
    }
)


def md(text: str) -> str:
    """Trace text made inert in Markdown (no tables broken, no HTML, no links)."""
    return str(literal(text)).translate(_MD_SPECIAL)


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def _md_report(res: TraceResult, *, top: int = 10) -> list[str]:
    lines = [f"### {md(res.label)}", ""]
    r = res.report
    if r is None:
        ran = _ran_before_stop(res)  # a trace that never started ran none: its error says so
        before = f"; {rollouts_served(ran, res.stored_rollouts)} ran first" if ran else ""
        return [*lines, f"**{res.status}**: {md(error_text(res))}{before}", ""]
    lines += [md(r.headline), ""]
    for g in res.gates:
        lines.append(f"- **gate tripped:** {md(g)}")
    for n in r.notes:
        lines.append(f"- note: {md(n)}")
    if res.gates or r.notes:
        lines.append("")
    decisions = [s for s in r.steps if s.decision]

    def rank(s: object) -> tuple[int, float, int]:
        from car.report import StepReport

        assert isinstance(s, StepReport)
        d = s.drop.estimate if s.drop and s.drop.estimate is not None else -2.0
        return (0 if s.index == r.locus else 1, -d, s.index)

    ordered = sorted(decisions, key=rank)
    rows = [
        [
            str(i),
            str(s.index),
            md(short(s.actor)),
            md(s.action),
            _pct(s.rescue),
            _pct(s.drop, signed=True),
            _pct(s.match_rate),
            s.verdict or "-",
        ]
        for i, s in enumerate(ordered[:top], 1)
    ]
    rescue = f"rescue [{percent(r.level)} CI]"
    lines += _md_table(
        ["#", "step", "actor", "action", rescue, "drop", "match", "verdict"],
        rows,
    )
    if len(ordered) > top:
        more = many(len(ordered) - top, "more decision step")
        lines.append(f"\n… {more} (see the JSON report)")
    lines += _md_shapley(r)
    labelled = label_line(r)
    if labelled is not None:
        lines += ["", md(labelled)]
    b = r.budget
    lines += [
        "",
        f"Action-match rate {_pct(r.match_rate)} over {many(r.match_rate.n, 'draw')}; "
        f"{rollouts_served(b.rollouts, res.stored_rollouts)}, {many(b.policy_calls, 'policy call')}; "
        f"seed {r.seed}.",
        "",
    ]
    return lines


def _md_shapley(r: Report) -> list[str]:
    """The Shapley credit, when it ran: each player's phi with its interval and share, ranked, then
    why it ran and what it used, as the table's lines say it."""
    from car.render_shapley import shapley_lines

    sh = r.shapley
    if sh is None:
        return []
    rows = [
        [
            str(i),
            md(short(p.id)),
            ", ".join(map(str, p.steps)),
            f"{p.value:+.0%} [{p.low:+.0%}, {p.high:+.0%}]",
            "-" if p.share is None else f"{p.share:.0%}",
        ]
        for i, p in enumerate(sorted(sh.players, key=lambda p: -p.value), 1)
    ]
    why, spent = (md(line.plain.strip()) for line in shapley_lines(r))
    phi = f"phi [{percent(sh.level or r.level)} CI]"
    return ["", f"{why}:", "", *_md_table(["#", "player", "steps", phi, "share"], rows), "", spent]


def _markdown(results: Sequence[TraceResult], batch: bool) -> str:
    lines = ["## car blame", ""]
    if batch:
        lines += [counts_line(results), ""]
        rows = [[md(row[k]) for k in _HEADERS] for row in summary_rows(results)]
        lines += [*_md_table(list(_HEADERS.values()), rows), ""]
    for res in results:
        lines += _md_report(res)
    return "\n".join(lines).rstrip() + "\n"


def fit_bytes(text: str, limit: int) -> str:
    """`text` cut at a line boundary so that it, with a truncation notice, fits in `limit` bytes."""
    data = text.encode()
    if len(data) <= limit:
        return text
    notice = (
        "\n\n> **Truncated:** this summary exceeded GitHub's size limit; "
        "the full report is in the JSON or JSONL output.\n"
    )
    room = limit - len(notice.encode())
    if room < 0:  # not even the notice fits: appending it would push the file over the limit
        return ""
    cut = data[:room].decode("utf-8", errors="ignore")
    if "\n" in cut:
        cut = cut[: cut.rindex("\n")]
    return cut + notice


def write_github_summary(markdown: str, path: str | Path) -> None:
    """Append the summary to the step summary file, within what is left of the 1 MiB cap."""
    p = Path(path)
    used = p.stat().st_size if p.exists() else 0
    with p.open("a", encoding="utf-8") as fh:
        fh.write(fit_bytes(markdown, max(0, GITHUB_SUMMARY_LIMIT - used - 1)))


# -- github workflow commands ---------------------------------------------------------------------
def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _command(kind: str, title: str, message: str, file: str | None = None) -> str:
    props = [f"title={escape_property(visible(title))}"]
    if file:
        props.insert(0, f"file={escape_property(visible(file))}")
    return f"::{kind} {','.join(props)}::{escape_data(visible(message))}"


def github_annotations(results: Sequence[TraceResult], limit: int = MAX_ANNOTATIONS) -> list[str]:
    """At most `limit` errors and `limit` warnings: failures first, then the top blamed steps."""
    errors: list[str] = []
    warnings: list[str] = []
    for res in results:
        # Each names its trace: the file, for GitHub, and the trace (and analysis) in the message.
        if res.status in ("input-error", "backend-error", "budget", "interrupted"):
            errors.append(
                _command("error", f"car: {res.status}", f"{res.label}: {error_text(res)}", res.path)
            )
        elif res.status == "gate":
            gates = "; ".join(res.gates)
            errors.append(_command("error", "car: gate tripped", f"{res.label}: {gates}", res.path))
        r = res.report
        if r is None or _outcome(res) not in ("blamed", "shared"):
            continue
        # No locus, but shared drops or a Shapley split credit steps: the summary's credit.
        title = (
            f"car blames step {r.locus} ({short(r.locus_actor or '')})" if r.locus is not None else None
        )
        title = title or f"car: {credit_text(r)}"
        warnings.append(_command("warning", title, f"{res.label}: {r.headline}", res.path))
    out: list[str] = []
    for kind, items in (("error", errors), ("warning", warnings)):
        out += items[:limit]
        if len(items) > limit:
            out.append(f"::notice::{many(len(items) - limit, f'more car {kind}')} in the job summary")
    return out


def _github(results: Sequence[TraceResult], batch: bool) -> str:
    lines = github_annotations(results)
    body = "\n".join(lines) + ("\n" if lines else "")
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        return body  # the summary goes to the job's summary, once a run (`write_step_summary`)
    return body + fit_bytes(_markdown(results, batch), GITHUB_SUMMARY_LIMIT)


def write_step_summary(results: Sequence[TraceResult], *, batch: bool) -> str | None:
    """Append the Markdown summary to `$GITHUB_STEP_SUMMARY` when that is set: the github format's
    summary, written once however many github outputs a run renders. Returns the error line when
    the file cannot be written; the summary is then kept in a file of its own."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return None
    markdown = _markdown(results, batch)
    try:
        write_github_summary(markdown, path)
    except OSError as exc:
        return (
            f"{path} ($GITHUB_STEP_SUMMARY): cannot write the job summary ({os_reason(exc)}); "
            f"{keep(markdown, '.md', 'car-summary-')}"
        )
    return None


# -- junit --------------------------------------------------------------------------------------
def _junit(results: Sequence[TraceResult], batch: bool) -> str:
    c = counts(results)
    failures = c.get("gate", 0) + c.get("budget", 0)
    errors = c.get("input-error", 0) + c.get("backend-error", 0)
    suites = ET.Element("testsuites", name="car", tests=str(len(results)))
    suites.set("failures", str(failures))
    suites.set("errors", str(errors))
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="car blame",
        tests=str(len(results)),
        failures=str(failures),
        errors=str(errors),
        skipped=str(c.get("interrupted", 0)),
    )
    for res in results:
        case = ET.SubElement(suite, "testcase", classname="car.blame", name=_xml_safe(res.label))
        r = res.report
        if res.status == "gate":
            ET.SubElement(
                case, "failure", message=_xml_safe("; ".join(res.gates)), type="gate"
            ).text = _xml_safe("\n".join(res.gates))
        elif res.status == "budget":
            ET.SubElement(case, "failure", message=_xml_safe(res.error or ""), type="budget")
        elif res.status == "interrupted":
            ET.SubElement(case, "skipped", message=_xml_safe(res.error or ""))
            ran = _ran_before_stop(res)
            if ran:  # a trace that never started ran none: its message says so
                done = f"{rollouts_served(ran, res.stored_rollouts)} ran before the interrupt"
                ET.SubElement(case, "system-out").text = done
        elif res.status in ("input-error", "backend-error"):
            ET.SubElement(
                case, "error", message=_xml_safe(error_text(res)), type=res.status
            ).text = _xml_safe(res.error or "")
        if r is not None:
            ET.SubElement(case, "system-out").text = _xml_safe(
                f"{r.headline}\nmatch rate {_pct(r.match_rate)}; {many(r.budget.rollouts, 'rollout')}"
            )
    ET.indent(suites)
    xml = ET.tostring(suites, encoding="unicode")  # a headline keeps an actor id's line breaks
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + no_commands(xml, colon="&#58;") + "\n"


def _xml_safe(text: str) -> str:
    # XML 1.0 cannot carry most control characters, even escaped, nor U+FFFE and U+FFFF.
    return "".join(f"\\x{ord(ch):02x}" if ch in "\ufffe\uffff" else ch for ch in visible(text))


def _html(results: Sequence[TraceResult], batch: bool) -> str:
    from car.errors import InputError
    from car.html import html_page

    if batch or len(results) != 1 or results[0].report is None:
        raise InputError(
            "--format html renders one trace's report; for a batch use markdown, junit or github"
        )
    return html_page(results[0].report, stored=results[0].stored_rollouts)


_RENDERERS = {
    OutputFormat.table: _table,
    OutputFormat.json: _json,
    OutputFormat.jsonl: lambda rs, batch: "".join(jsonl_line(r) for r in rs),
    OutputFormat.markdown: _markdown,
    OutputFormat.github: _github,
    OutputFormat.junit: _junit,
    OutputFormat.html: _html,
}


def render_output(fmt: OutputFormat | str, results: Sequence[TraceResult], *, batch: bool) -> str:
    """The text of one output format; `batch` selects the batch shape of table and json."""
    return _RENDERERS[OutputFormat(fmt)](results, batch)


# -- reading results back (`car report`) ----------------------------------------------------------
_NOT_OURS = "not a car store, report or results file"
_READS = "car report reads what car blame writes: its store, --format json, or --format jsonl"


class _Rollouts(BaseModel):
    model_config = ConfigDict(extra="ignore")
    fresh: int | None = 0
    stored: int | None = 0


class _Record(BaseModel):
    """A `car.record/v1` document read back (its `exit_code` follows from its status, as it did)."""

    model_config = ConfigDict(extra="ignore")
    trace: str | None = None
    trace_id: str | None = None
    status: Status
    error: str | None = None
    gates: list[str] = []
    # A record without them (written by hand or by another tool) does not say: unknown, not zero.
    rollouts: _Rollouts = _Rollouts(fresh=None, stored=None)
    usage: dict[str, int] | None = None
    cost_usd: float | None = None
    report: Report | None = None

    def result(self) -> TraceResult:
        r = self.report
        path = self.trace or (r.trace_path or r.trace_id if r is not None else self.trace_id) or ""
        return TraceResult(
            path,
            self.trace_id,
            self.status,
            r,
            error=self.error,
            gates=list(self.gates),
            fresh_rollouts=self.rollouts.fresh,
            stored_rollouts=self.rollouts.stored,
            usage=None if self.usage is None else dict(self.usage),
            cost=self.cost_usd,
        )


def _from_report(r: Report) -> TraceResult:
    """A report saved on its own (the store, `--format json` of one trace), with the status
    `car blame` gave it (`report_status`: a backend error when its rollouts errored too often, an
    input error when its scorer left nothing to attribute); gates are not saved with it, nor how
    many of its rollouts were computed and how many the store served (None, None), nor the tokens
    its model calls used (None; so no cost either)."""
    label = r.trace_path or r.trace_id
    status, error = report_status(r, label)
    return TraceResult(
        label,
        r.trace_id,
        status,
        r,
        error=error,
        fresh_rollouts=None,
        stored_rollouts=None,
        usage=None,
    )


def stored_part(result: TraceResult) -> str:
    """ " (5 stored)" after a rollout count: what the store served this run, zero included; nothing
    for a report read back on its own, which does not say."""
    stored = result.stored_rollouts
    return "" if stored is None else f" ({stored} stored)"


def _results_of(doc: Any, where: str, *, batch: bool) -> list[TraceResult]:
    """The results in one JSON document: a record, a report, or (`batch`: a whole file) a batch."""
    if not isinstance(doc, dict):
        raise InputError(
            f"{where}: $: expected a JSON object (a car record or report); got {kind_of(doc)}"
        )
    version = doc.get("version")
    try:
        if version == RECORD_VERSION:
            return [_Record.model_validate(doc).result()]
        if version == REPORT_VERSION:
            return [_from_report(Report.model_validate(doc))]
    except ValidationError as exc:
        raise InputError(describe_validation_error(exc, where)) from None
    if batch and version == BATCH_VERSION:
        records = doc.get("records")
        if not isinstance(records, list):
            raise InputError(f"{where}: $.records: expected an array; got {kind_of(records)}")
        return [
            r
            for i, rec in enumerate(records, 1)
            for r in _results_of(rec, f"{where}: record {i}", batch=False)
        ]
    what = "missing" if version is None else f"unknown version {version!r}"
    known = [REPORT_VERSION, *([BATCH_VERSION] if batch else []), RECORD_VERSION]
    hint = "; is this a trace? (`car blame` reads traces)" if version == "car.trace/v1" else ""
    expected = ", ".join(map(repr, known[:-1])) + f" or {known[-1]!r}"
    raise InputError(f"{where}: $.version: {what}; expected {expected}{hint}")


def _is_sqlite(p: Path) -> bool:
    try:
        with p.open("rb") as fh:
            return fh.read(16).startswith(b"SQLite format 3")
    except OSError:
        return False  # reading it again names the problem


def _no_reports(rollouts: int) -> str:
    """Why a store has nothing to show: never written to, or its runs stopped before any trace
    finished (their rollouts are there for a rerun to resume from)."""
    if not rollouts:
        return "no stored reports (run `car blame` with a store first)"
    what = "rollout or draw" if rollouts == 1 else "rollouts and draws"
    return (
        f"no stored reports: no trace finished in the runs that wrote it ({rollouts:,} {what} "
        "stored); rerun the same `car blame` command to finish them"
    )


def read_results(source: str | Path) -> list[TraceResult]:
    """Every result saved in a store (its reports), a JSON file (`car.report/v1` of one trace or
    `car.batch/v1` of a batch) or JSONL of `car.record/v1` lines, in the file's order (a store's in
    the natural order of their traces' paths, as `car blame DIR` lists them). Failed traces
    keep their status and error, so re-rendering them exits as `car blame` did."""
    from car.store import RolloutStore

    p = Path(source)
    if is_folder(p):
        raise InputError(f"{p}: is a directory, expected a car store, a JSON report or batch records")
    if _is_sqlite(p):
        with RolloutStore(p, create=False, ways=()) as store:  # it only reads: no other file to name
            stored = store.results()
            if not stored:
                raise InputError(f"{p}: {_no_reports(store.count())}")
        results = [
            r
            for n, s in enumerate(stored, 1)
            for r in _results_of(s.report, f"{p}: report {n}", batch=False)
        ]
        # In the order `car blame DIR` lists its traces (`2.json` before `10.json`), each trace's
        # analyses in the order they were made.
        return sorted(results, key=lambda r: natural_key(r.path))
    try:
        text = read_bytes(p, what="a car store, report or results").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{p}: {_NOT_OURS} (byte {exc.start} is not UTF-8 text); {_READS}") from None
    if not text.strip():  # a store, a report or JSONL records: whichever was meant, it holds none
        what = "an empty file" if not text else "a file of only white space"
        raise InputError(f"{p}: {what}, with no reports in it; {_READS}")
    try:
        doc = loads(text)
    except (ValueError, RecursionError) as whole:
        return _read_lines(p, text, whole)
    return _results_of(doc, str(p), batch=True)


def _read_lines(p: Path, text: str, whole: Exception) -> list[TraceResult]:
    """JSONL: one record (or report) a line. A first line that is not JSON means another kind of file."""
    out: list[TraceResult] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = loads(line)
        except (ValueError, RecursionError) as exc:
            if out:
                reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
                raise InputError(f"{p}: line {n}: invalid JSON: {reason}") from None
            if p.suffix == ".json" and isinstance(whole, json.JSONDecodeError):  # where its JSON breaks
                raise InputError(
                    f"{p}: line {whole.lineno} column {whole.colno}: invalid JSON: {whole.msg}"
                ) from None
            raise InputError(f"{p}: {_NOT_OURS} (line {n} is not JSON); {_READS}") from None
        out += _results_of(doc, f"{p}: line {n}", batch=False)
    return out
