"""The HTML report: parsed with the stdlib parser, for every bundled trace and for hostile input."""

from __future__ import annotations

import itertools
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

import car
from car.html import render_html
from car.report import Budget, Estimate, Report, ShapleyPlayer, ShapleyReport, StepReport
from car.trace import Trace, parse_trace

ROOT = Path(__file__).resolve().parent.parent
TRACES = sorted((ROOT / "traces").glob("*.json"))
PAYLOAD = '<script>alert("pwned")</script><img src=x onerror=alert(1)>'


class Node:
    def __init__(self, tag: str, attrs: dict[str, str | None], parent: Node | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node] = []
        self.text_parts: list[str] = []

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())

    def text(self) -> str:
        return "".join(self.text_parts) + "".join(c.text() for c in self.children)

    def walk(self) -> list[Node]:
        out = [self]
        for c in self.children:
            out += c.walk()
        return out


_VOID = {"meta", "br", "img", "input", "link", "hr"}


class Tree(HTMLParser):
    """Just enough of a DOM to query tags, attributes and text (SVG shapes written self-closing)."""

    def __init__(self, doc: str) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {}, None)
        self.cur = self.root
        self.feed(doc)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, dict(attrs), self.cur)
        self.cur.children.append(node)
        if tag not in _VOID:
            self.cur = node

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.cur.children.append(Node(tag, dict(attrs), self.cur))

    def handle_endtag(self, tag: str) -> None:
        node: Node | None = self.cur
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.cur = node.parent

    def handle_data(self, data: str) -> None:
        self.cur.text_parts.append(data)

    def all(self, tag: str | None = None, cls: str | None = None) -> list[Node]:
        return [
            n
            for n in self.root.walk()
            if (tag is None or n.tag == tag) and (cls is None or cls in n.classes)
        ]


def _blame(path: Path, **kw: object) -> Report:
    options: dict[str, object] = {"samples": 8, "match_samples": 2, "seed": 0, **kw}
    return car.blame(path, **options)


def _assert_inert(tree: Tree) -> None:
    """No script, no event handler, nothing fetched from anywhere."""
    assert tree.all("script") == []
    assert tree.all("iframe") == [] and tree.all("object") == [] and tree.all("link") == []
    for node in tree.root.walk():
        for name, value in node.attrs.items():
            assert not name.startswith("on"), (node.tag, name)
            if name in ("src", "href", "xlink:href") and value:
                assert value.startswith("#"), (node.tag, name, value)
    (csp,) = [m for m in tree.all("meta") if m.attrs.get("http-equiv") == "Content-Security-Policy"]
    assert "default-src 'none'" in (csp.attrs["content"] or "")
    assert "script-src" not in (csp.attrs["content"] or "")


@pytest.mark.parametrize("path", TRACES, ids=[p.stem for p in TRACES])
def test_every_bundled_trace_renders_with_every_step_and_the_locus_marked(path: Path) -> None:
    trace = car.load_trace(path)
    report = _blame(path)
    doc = render_html(report, trace)
    tree = Tree(doc)
    _assert_inert(tree)

    steps = tree.all("li", "step")
    assert [n.attrs["id"] for n in steps] == [f"step-{s.index}" for s in trace.steps]
    for node, step in zip(steps, trace.steps, strict=True):
        assert step.actor in node.text()
    locus = [n for n in steps if "locus" in n.classes]
    if report.locus is None:
        assert locus == []
        assert tree.all("section", "headline")[0].attrs["class"] == "headline none"
    else:
        (node,) = locus
        assert node.attrs["id"] == f"step-{report.locus}"
        assert node.attrs.get("aria-current") == "step"
        (details,) = [c for c in node.children if c.tag == "details"]
        assert "open" in details.attrs
        assert "LOCUS" in node.text()
        (point,) = tree.all("circle", "locus")
        assert point.attrs["data-step"] == str(report.locus)
        assert f"step {report.locus}" in tree.all("section", "headline")[0].text()
    # Only the locus step starts open.
    opened = [n for n in steps if any("open" in c.attrs for c in n.children if c.tag == "details")]
    assert opened == locus
    # One rescue point per decision step with data, plus the record.
    points = [c for c in tree.all("circle", "pt") if "record" not in c.classes]
    assert len(points) == sum(1 for s in report.steps if s.decision and s.rescue is not None)
    assert len(doc.encode()) < 100_000


def test_support_refund_shows_the_injected_context_at_the_locus() -> None:
    path = ROOT / "traces" / "support-refund.json"
    report = _blame(path, samples=16)
    assert report.locus == 1
    tree = Tree(render_html(report, car.load_trace(path)))
    (locus,) = tree.all("li", "locus")
    (context,) = [n for n in locus.walk() if "context" in n.classes]
    assert "SYSTEM NOTICE TO SUPPORT AGENTS" in context.text()
    assert "PLAN: refund the order" in locus.text()
    headline = tree.all("section", "headline")[0].text()
    assert "support" in headline and "PLAN: refund the order" in headline
    assert "action-match rate" in headline
    prov = tree.all("section")[-1].text()
    for part in ("sim:support-refund", "seed", "16 samples per step", report.car_version):
        assert part in prov


def _hostile(trace: Trace) -> Trace:
    doc = json.loads(trace.to_json())
    doc["id"] = PAYLOAD
    doc["task"] = PAYLOAD
    doc["outcome"]["detail"] = PAYLOAD
    doc["actors"][0]["system_prompt"] = PAYLOAD
    doc["steps"][0]["observations"][0]["content"] = PAYLOAD + "\u202e\x1b[31m\u200f\u061c"
    doc["steps"][1]["action"]["text"] = PAYLOAD
    doc["steps"][2]["action"]["tool_calls"][0]["raw_arguments"] = PAYLOAD
    return parse_trace(doc)


def test_html_and_script_in_a_trace_render_as_text() -> None:
    path = ROOT / "traces" / "support-refund.json"
    report = _blame(path, samples=16)
    assert report.locus == 1
    hostile = report.model_copy(
        update={
            "trace_id": PAYLOAD,
            "headline": PAYLOAD,
            "notes": [PAYLOAD],
            "abstained_reason": PAYLOAD,
            "trace_path": PAYLOAD,
            "steps": [s.model_copy(update={"action": PAYLOAD}) for s in report.steps],
        }
    )
    doc = render_html(hostile, _hostile(car.load_trace(path)))
    tree = Tree(doc)
    _assert_inert(tree)
    assert tree.all("img") == []
    text = tree.root.text()
    assert text.count('<script>alert("pwned")</script>') >= 8
    # Bidi overrides and terminal escapes cannot disguise the text either.
    for mark in ("\u202e", "\x1b", "\u200f", "\u061c"):
        assert mark not in doc
    assert "\\x202e" in text and "\\x1b" in text and "\\x200f" in text
    assert "&lt;script&gt;" in doc


def _report(n: int, locus: int | None, **kw: object) -> Report:
    steps = [
        StepReport(
            index=i,
            actor="agent",
            decision=True,
            action=f"step {i}",
            rescue=Estimate(estimate=0.5 if i <= (locus or 0) else 0.0, low=0.0, high=0.9, n=8),
            effect=Estimate(estimate=0.5 if i <= (locus or 0) else 0.0, low=0.0, high=0.9, n=8),
            drop=Estimate(estimate=0.5 if i == locus else 0.0, low=-0.1, high=0.8, n=8),
            match_rate=Estimate(estimate=1.0, low=0.6, high=1.0, n=8),
            verdict="locus" if i == locus else "not significant",
        )
        for i in range(n)
    ]
    base: dict[str, object] = {
        "car_version": "0.1.0",
        "trace_id": "t",
        "trace_hash": "0" * 64,
        "headline": "h",
        "locus": locus,
        "factual": Estimate(estimate=1.0, low=1.0, high=1.0, n=1),
        "factual_exact": True,
        "steps": steps,
        "match_rate": Estimate(estimate=0.9, low=0.8, high=1.0, n=64),
        "divergence_rate": 0.0,
        "budget": Budget(rollouts=10, policy_calls=10),
        "seed": 0,
        "level": 0.95,
        "min_effect": 0.1,
        "samples": 8,
        "match_samples": 8,
        "specs": {"policy": "p", "env": "e", "scorer": "s"},
    }
    base.update(kw)
    return Report.model_validate(base)


def test_shapley_section_has_a_bar_per_player_with_shares_and_the_efficiency_check() -> None:
    players = [
        ShapleyPlayer(id="step-0", steps=[0], value=0.455, low=0.40, high=0.51, share=0.5),
        ShapleyPlayer(id="step-1", steps=[1], value=0.455, low=0.39, high=0.52, share=0.5),
        ShapleyPlayer(id="step-2", steps=[2], value=-0.01, low=-0.05, high=0.03, share=None),
    ]
    sh = ShapleyReport(
        method="exact",
        players=players,
        total=0.90,
        v_all=Estimate(estimate=1.0, low=1.0, high=1.0, n=1),
        v_none=Estimate(estimate=0.09, low=0.05, high=0.14, n=200),
        budget=Budget(rollouts=800, policy_calls=1600),
    )
    report = _report(3, 1, shapley=sh, method="shapley", method_reason="two steps carry drops")
    tree = Tree(render_html(report, None))
    (section,) = [n for n in tree.all("section") if n.attrs.get("id") == "shapley"]
    bars = [n for n in section.walk() if n.tag == "rect" and "player" in n.classes]
    assert len(bars) == 3
    text = section.text()
    assert "step 0 · agent" in text and "50%" in text and "-0.01 [-0.05, 0.03]" in text
    assert "Σφ = 0.90" in text and "v(N) \u2212 v(∅) = 1.00 \u2212 0.09 [0.05, 0.14] = 0.91" in text
    assert "Why: two steps carry drops." in text
    # Σφ and v(N) - v(∅) drawn on the same axis as the players.
    assert len([n for n in section.walk() if n.tag == "rect"]) == 5


def test_shapley_over_agents_labels_players_by_id() -> None:
    sh = ShapleyReport(
        method="permutation",
        players_kind="agents",
        players=[ShapleyPlayer(id=PAYLOAD, steps=[0, 2], value=0.6, low=0.5, high=0.7, share=1.0)],
        total=0.6,
        v_all=Estimate(estimate=1.0, low=1.0, high=1.0, n=1),
        v_none=Estimate(estimate=0.4, low=0.3, high=0.5, n=50),
        budget=Budget(rollouts=50, policy_calls=50),
        budget_reached=True,
    )
    tree = Tree(render_html(_report(3, 1, shapley=sh), None))
    _assert_inert(tree)
    (section,) = [n for n in tree.all("section") if n.attrs.get("id") == "shapley"]
    assert PAYLOAD in section.text() and "budget reached" in section.text()


def test_no_shapley_section_without_shapley() -> None:
    tree = Tree(render_html(_report(3, 1), None))
    assert [n for n in tree.all("section") if n.attrs.get("id") == "shapley"] == []


def test_warnings_for_abstention_low_fidelity_and_low_match() -> None:
    report = _report(
        3,
        None,
        abstained_reason="no step's effect is significantly above 10%",
        rollouts_needed_per_step=120,
        fidelity="C",
        match_rate=Estimate(estimate=0.2, low=0.1, high=0.35, n=24),
        never_reproduced=[2],
    )
    tree = Tree(render_html(report, None))
    (warn,) = tree.all("div", "warnings")
    text = warn.text()
    assert "abstained" in text and "About 120 samples per step" in text
    assert "class C" in text and "Low action-match rate (20%)" in text and "step(s) 2" in text
    assert "cannot name a decisive step" in tree.all("section", "headline")[0].text()


def test_no_warning_block_when_all_is_well() -> None:
    assert Tree(render_html(_report(3, 1), None)).all("div", "warnings") == []


def test_without_the_trace_the_page_says_why_and_keeps_the_rest() -> None:
    tree = Tree(render_html(_report(3, 1), None, trace_missing="the recorded trace was not found"))
    (timeline,) = [n for n in tree.all("section") if n.attrs.get("id") == "timeline"]
    assert "not shown: the recorded trace was not found" in timeline.text()
    assert tree.all("li", "step") == []
    assert len(tree.all("svg")) == 1 and len(tree.all("tr")) == 4  # the numbers table has every step


def test_a_trace_of_another_shape_is_not_drawn_as_this_reports_timeline() -> None:
    trace = car.load_trace(ROOT / "traces" / "research-team.json")  # 5 steps
    tree = Tree(render_html(_report(3, 1), trace))
    assert tree.all("li", "step") == []
    assert "it is not the trace this report was computed from" in tree.root.text()


def _long_trace(n: int, obs_chars: int) -> Trace:
    steps = [
        {
            "index": i,
            "actor": "agent",
            "action": {
                "text": f"thinking about step {i} " * 40,
                "tool_calls": [{"id": f"c{i}", "name": "search", "arguments": {"q": "x" * 200}}],
            },
            "observations": [{"call_id": f"c{i}", "content": "result " * (obs_chars // 7)}],
        }
        for i in range(n)
    ]
    return parse_trace(
        {"version": "car.trace/v1", "id": "long", "actors": [{"id": "agent"}], "steps": steps}
    )


def test_a_50_step_trace_with_large_observations_stays_well_under_a_megabyte() -> None:
    trace = _long_trace(50, obs_chars=200_000)
    doc = render_html(_report(50, 30), trace)
    size = len(doc.encode())
    assert size < 600_000, size
    tree = Tree(doc)
    assert len(tree.all("li", "step")) == 50
    assert "more characters not shown" in doc


def test_steps_that_are_not_decisions_show_as_such() -> None:
    report = _report(3, 1)
    steps = list(report.steps)
    steps[2] = StepReport(index=2, actor="tool", decision=False, action="observation")
    report = report.model_copy(update={"steps": steps})
    trace = parse_trace(
        {
            "version": "car.trace/v1",
            "id": "t",
            "actors": [{"id": "agent"}, {"id": "tool", "kind": "tool"}],
            "steps": [
                {"index": 0, "actor": "agent", "action": {"text": "a"}},
                {"index": 1, "actor": "agent", "action": {"text": "b"}},
                {"index": 2, "actor": "tool", "action": {"text": "c"}},
            ],
        }
    )
    tree = Tree(render_html(report, trace))
    (node,) = [n for n in tree.all("li", "step") if n.attrs["id"] == "step-2"]
    assert "observer" in node.classes and "not a decision" in node.text()
    (gap,) = tree.all("circle", "nodata")
    assert "not a decision" in gap.text()
    assert len([c for c in tree.all("circle", "pt") if "record" not in c.classes]) == 2


def test_the_timeline_of_an_imported_trace_is_found(tmp_path: Path) -> None:
    """A report on a foreign-format file (an OpenAI chat log) finds its trace as `car blame` read it."""
    from car.html import locate_trace
    from car.importers import load_any

    chat = ROOT / "tests" / "fixtures" / "importers" / "openai_chat.json"
    imported = load_any(chat)
    report = _blame(ROOT / "traces" / "pivot.json", samples=4).model_copy(
        update={"trace_path": str(chat), "trace_hash": imported.content_hash()}
    )
    trace, missing = locate_trace(report)
    assert missing is None and trace is not None and trace.content_hash() == imported.content_hash()
    assert locate_trace(report, given=chat)[0] is not None


def test_an_adaptive_pages_confidence_line_says_how_the_run_stopped() -> None:
    """It described the fixed design ("significant ... after Bonferroni over 3 decision steps") for
    a run certified by anytime-valid intervals, or not certified at all."""
    import asyncio

    from car.adaptive import blame_adaptive_async
    from tests.conftest import TRACES

    report = asyncio.run(blame_adaptive_async(str(TRACES / "pivot.json"), budget=2000, seed=1))
    assert report.adaptive is not None
    page = render_html(report)
    assert f"Confidence: {report.adaptive.statement} (anytime-valid intervals" in page
    assert "Bonferroni" not in page.split('id="headline"')[1].split("</section>")[0]


def _task_line(page: str) -> tuple[str, str]:
    (line,) = [p for p in Tree(page).all("p") if p.children and p.children[0].text().startswith("Task")]
    return line.children[0].text(), "".join(line.text_parts).strip()


def test_a_chat_log_without_a_task_shows_its_first_user_turn_as_the_task() -> None:
    """An imported chat records no task: the page showed none, though the judge and `llm-sim:` are
    told the first user turn is the task (`task_of`). It shows that turn, marked as such."""
    from car.importers import load_any

    chat = load_any(ROOT / "tests" / "fixtures" / "importers" / "openai_chat.json")
    assert chat.task == ""
    assert _task_line(render_html(_report(4, 2), chat)) == (
        "Task (from the first user turn):",
        "Order A7 and B2 never arrived, please refund both.",
    )
    given = chat.model_copy(update={"task": "Refund what was never delivered."})
    assert _task_line(render_html(_report(4, 2), given)) == (
        "Task:",
        "Refund what was never delivered.",
    )


def test_an_abstention_with_shapley_credit_says_it_at_the_top() -> None:
    """The terminal and Markdown headline go on to the Shapley credit ("Shapley: the Shapley credit
    goes to step 16") and a batch calls the trace `blamed`; the page said only "car cannot name a
    decisive step", the credit far below."""
    report = car.blame(ROOT / "traces" / "and.json", samples=8, method="shapley", budget=200)
    assert report.shapley is not None and report.shapley.summary
    abstained = report.model_copy(update={"locus": None, "locus_actor": None})
    page = render_html(abstained)
    head = page[page.index('<section class="headline none"') :]
    head = head[: head.index("</section>")]
    assert f'<p class="what">Shapley: {report.shapley.summary}.</p>' in head


@pytest.mark.parametrize(("n", "locus"), [(130, 24), (130, 129), (500, 250), (12, 5), (4, None)])
def test_the_step_labels_under_the_curve_never_run_into_each_other(n: int, locus: int | None) -> None:
    """A 130-step Who&When log blamed at step 24 printed its locus label `24` on top of `25`, and
    `125` ran into `record`; with 500 steps every label touched the next."""
    from car.charts import rescue_curve_svg

    tree = Tree("<div>" + rescue_curve_svg(_report(n, locus)) + "</div>")
    base = max(float(t.attrs["y"] or 0) for t in tree.all("text", "tick"))
    labels = [t for t in tree.all("text", "tick") if float(t.attrs["y"] or 0) == base]
    # 6 units a character: a digit of the 11px ticks is about that wide in the usual sans fonts.
    spans = sorted((float(t.attrs["x"] or 0), 6.0 * len(t.text())) for t in labels)
    for (x0, w0), (x1, w1) in itertools.pairwise(spans):
        assert x1 - x0 >= (w0 + w1) / 2, (x0, x1, [t.text() for t in labels])
    texts = [t.text() for t in labels]
    assert locus is None or str(locus) in texts  # the locus's label always shows
    assert "record" in texts or locus == n - 1  # beside the locus's, the record's gives way
    assert len(texts) >= min(n, 8)


def test_a_huge_outcome_error_or_note_is_cut_like_any_long_text() -> None:
    """A trace's 100 KB outcome detail was printed whole twice, above the headline and under the
    timeline, pushing the verdict screens down; so were a plugin's 100 KB exception message (in
    the warning and in the note on errored rollouts) and an abstention quoting it."""
    huge = "D" * 100_000
    trace = _long_trace(4, obs_chars=100)
    trace = trace.model_copy(
        update={"outcome": trace.outcome.model_copy(update={"failed": True, "detail": huge})}
    )
    report = _report(4, None).model_copy(
        update={
            "status": "backend-errors",
            "first_error": "step 2: RuntimeError: " + "E" * 100_000,
            "notes": ["30 of 33 rollouts errored (first error: " + "E" * 100_000 + ")"],
            "abstained_reason": "the scorer failed on the recorded run (" + "E" * 100_000 + ")",
        }
    )
    doc = render_html(report, trace)
    assert len(doc.encode()) < 60_000, len(doc.encode())
    assert doc.count("more characters not shown") == 5
    assert "first: step 2: RuntimeError: EEEE" in doc and "<b>Outcome:</b> failure: DDDD" in doc


def test_the_subtitle_counts_one_rollout_as_one() -> None:
    """A run refused after scoring the record alone said "(contrastive method, 1 rollouts)"."""
    report = _report(2, None)
    one = report.model_copy(update={"budget": report.budget.model_copy(update={"rollouts": 1})})
    (sub,) = [p for p in Tree(render_html(one)).all("p", "sub") if "method" in p.text()]
    assert sub.text().endswith("(contrastive method, 1 rollout).")
