"""report.html: self-contained, escaped, tolerant of partial reports, and renders in Chromium."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from harness.report.charts import draw_charts
from harness.report.page import render_html, write_html
from harness.results.model import load
from harness.scenario.loader import load_scenario

pytestmark = pytest.mark.integration

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TIMEOUT_MS = 120_000
"""Generous: a 2-core machine may be busy with other tests."""


@pytest.fixture(scope="module")
def report_html(short_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """report.html of the shared short run, written into a scratch folder (charts included)."""
    out = tmp_path_factory.mktemp("html")
    report = json.loads((short_run / "report.json").read_text())
    scenario = load_scenario(short_run / "scenario.yaml").scenario
    charts = draw_charts(load(short_run), scenario, out / "charts")
    return write_html(out, report, charts)


def _charts_of(report_html: Path) -> int:
    """How many charts the page must hold: those drawn beside it (its scenario's)."""
    return len(list((report_html.parent / "charts").glob("*.png")))


def test_report_html_is_self_contained(report_html: Path) -> None:
    text = report_html.read_text(encoding="utf-8")

    assert report_html.name == "report.html"
    assert not list(report_html.parent.glob(".*.tmp"))
    assert not re.search(r"https?://", text), "references an external resource"
    assert "<script" not in text.lower()
    assert re.search(r"<link\b", text) is None
    srcs = re.findall(r'<img src="([^"]*)"', text)
    assert len(srcs) == _charts_of(report_html)
    assert all(s.startswith("data:image/png;base64,") for s in srcs)
    assert text.count("<thead>") == text.count("<table>") >= 4
    labels = ("products p95 (all phases)", "payments p95 (all phases)", "busy workers max (outage)")
    for label in labels:
        assert f'<th scope="row">{label}</th>' in text


def _report(short_run: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((short_run / "report.json").read_text())
    return data


def test_text_is_escaped(short_run: Path) -> None:
    report = _report(short_run)
    report["scenario"] = "<script>alert(1)</script>"
    report["builds"]["before"]["endpoints"]["payments"]["errors"] = {"<b>boom</b>": 3}

    text = render_html(report, {})

    assert "<script>" not in text and "<b>boom</b>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&lt;b&gt;boom&lt;/b&gt;: 3" in text


def test_unknown_sections_and_missing_keys_are_tolerated(short_run: Path, tmp_path: Path) -> None:
    report = _report(short_run)
    extended = copy.deepcopy(report)
    extended["gates"] = [{"name": "x", "passed": False, "detail": {"deep": [1, 2]}}]
    for build in extended["builds"].values():
        build["phases"] = {"outage": {"products": {"latency_s": {"p95": 1.0}}}}
    assert "products p95" in render_html(extended, {})

    partial = copy.deepcopy(report)
    for key in ("phases", "fault_window_s", "seed", "endpoints", "schema"):
        partial.pop(key)
    del partial["builds"]["after"]["workers"]
    partial["builds"]["before"]["endpoints"]["products"].pop("latency_s")
    missing_chart = {"busy_workers": tmp_path / "nowhere.png"}
    text = render_html(partial, missing_chart)
    assert "No headline table" in text
    assert "Chart busy_workers is missing" in text

    assert "No build produced samples" in render_html({}, {})


def _need_chromium() -> None:
    """Chromium is part of the CI image: its absence fails there and skips elsewhere."""
    reason = None
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} is not installed"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            reason = "playwright (python) is not installed"
    if reason and os.environ.get("CI"):
        pytest.fail(reason)
    if reason:
        pytest.skip(reason)


JS_INSPECT = """() => {
  const headline = document.querySelector('#headline table');
  return {
    tables: document.querySelectorAll('table').length,
    tablesWithHead: document.querySelectorAll('table > thead').length,
    headlineRows: headline
      ? [...headline.querySelectorAll('tbody > tr > th')].map(th => th.textContent) : [],
    images: [...document.images].map(img => ({
      complete: img.complete, width: img.naturalWidth, height: img.naturalHeight})),
  };
}"""


def test_report_html_renders_in_chromium(report_html: Path, tmp_path: Path) -> None:
    _need_chromium()
    from playwright.sync_api import Route, sync_playwright

    fetched: list[str] = []

    def refuse_network(route: Route) -> None:
        fetched.append(route.request.url)
        route.abort()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, timeout=TIMEOUT_MS
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(TIMEOUT_MS)
            page.route(re.compile(r"^(https?|wss?|ftp)://"), refuse_network)
            page.goto(report_html.as_uri(), wait_until="load")
            found = page.evaluate(JS_INSPECT)
            shot = tmp_path / "report.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()

    assert fetched == []
    assert found["tables"] >= 4 and found["tablesWithHead"] == found["tables"]
    for label in ("products p95", "products p99", "products max", "payments p95"):
        assert f"{label} (all phases)" in found["headlineRows"]
    assert len(found["images"]) == _charts_of(report_html)
    for img in found["images"]:
        assert img["complete"] and img["width"] > 0 and img["height"] > 0, img
    assert shot.stat().st_size > 100_000
