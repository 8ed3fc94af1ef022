"""A real browser opens the HTML report from disk with no network: no console errors, key parts visible.

Skips only when Chromium or chromedriver is missing AND the CI variable is unset; under CI it must run
(`.ci/chromium.sh` installs both).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import car
from car.html import render_html
from tests.chromium_driver import Browser, find_browser

ROOT = Path(__file__).resolve().parent.parent
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    found = find_browser()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but chromium/chromedriver are missing: run .ci/chromium.sh")
        pytest.skip("chromium and chromedriver are not installed (.ci/chromium.sh installs them)")
    with Browser(*found) as b:
        yield b


def _errors(entries: list[dict[str, object]]) -> list[str]:
    return [str(e["message"]) for e in entries if e.get("level") in ("SEVERE", "WARNING")]


def test_the_log_check_sees_console_errors_and_blocked_fetches(browser: Browser, tmp_path: Path) -> None:
    # The control for the real test: a page that logs an error and fetches from the network.
    page = tmp_path / "noisy.html"
    page.write_text(
        "<!DOCTYPE html><title>x</title><script>console.error('boom')</script>"
        "<img src='https://example.com/x.png'>",
        encoding="utf-8",
    )
    browser.logs()
    browser.open(page.as_uri())
    errors = _errors(browser.logs())
    assert any("boom" in e for e in errors)
    assert any("example.com" in e for e in errors)


def test_support_refund_report_renders_cleanly(browser: Browser, tmp_path: Path) -> None:
    trace_path = ROOT / "traces" / "support-refund.json"
    report = car.blame(trace_path, samples=16, match_samples=4, seed=0)
    assert report.locus == 1
    page = tmp_path / "report.html"
    page.write_text(render_html(report, car.load_trace(trace_path)), encoding="utf-8")

    browser.logs()
    browser.open(page.as_uri())
    assert _errors(browser.logs()) == []

    (headline,) = browser.find("#headline")
    assert browser.displayed(headline)
    assert "step 1" in browser.text(headline)
    box = browser.rect(headline)
    assert box["width"] > 300 and box["height"] > 50 and box["y"] < 400  # above the fold

    (curve,) = browser.find("svg.chart.rescue")
    assert browser.displayed(curve)
    assert browser.rect(curve)["height"] > 150
    (point,) = browser.find("svg.rescue circle.pt.locus")
    assert browser.displayed(point)
    assert len(browser.find("svg.rescue rect.bar")) == 4

    # The locus step is open with its context (the injected note) showing; other steps are folded.
    (locus,) = browser.find("li.step.locus")
    assert browser.displayed(locus)
    assert "SYSTEM NOTICE TO SUPPORT AGENTS" in browser.text(locus)
    (other_body,) = browser.find("#step-2 .body")
    assert not browser.displayed(other_body)

    # Printed, every step is unfolded: step 2's body now pushes step 3 down.
    def gap() -> float:
        (two,) = browser.find("#step-2")
        (three,) = browser.find("#step-3")
        return browser.rect(three)["y"] - browser.rect(two)["y"]

    folded = gap()
    browser.emulate_media("print")
    try:
        assert gap() > folded + 100
    finally:
        browser.emulate_media("screen")
    assert _errors(browser.logs()) == []

    shot = browser.screenshot()
    assert shot.startswith(PNG) and len(shot) > 10_000
    (tmp_path / "report.png").write_bytes(shot)


def test_long_words_stay_inside_the_window(browser: Browser, tmp_path: Path) -> None:
    """A trace id or an action with nowhere to break (a run's path, a URL) made the page wider than
    the window (1419 pixels in 1100 for a 131-character id): the title, the headline's action and the
    Numbers table did not wrap them."""
    trace_path = ROOT / "traces" / "support-refund.json"
    report = car.blame(trace_path, samples=8, match_samples=2, seed=0)
    assert report.locus == 1
    trace = car.load_trace(trace_path)
    url = "https://shop.example.org/orders/A-1042/refund?reason=late&token=" + "f" * 60
    run_id = "eval-2024-06-01T12:00:00Z/web-shop/" + "a3f9c2e1b7d4" * 8
    steps = list(trace.steps)
    steps[1] = steps[1].model_copy(update={"action": steps[1].action.model_copy(update={"text": url})})
    trace = trace.model_copy(update={"id": run_id, "steps": steps})
    rows = list(report.steps)
    rows[1] = rows[1].model_copy(update={"action": steps[1].action.summary()})
    report = report.model_copy(update={"trace_id": run_id, "steps": rows})
    page = tmp_path / "report.html"
    page.write_text(render_html(report, trace), encoding="utf-8")

    browser.open(page.as_uri())
    width, window = browser.script("return [document.documentElement.scrollWidth, window.innerWidth]")
    assert width <= window
    (title,) = browser.find("h1")
    assert run_id in browser.text(title).replace("\n", "")
