"""report.html carries every section report.md has (issue 30, item 9): gate verdicts (Seed
claims, gates skipped), the per-phase table and the time line (recovery per endpoint), per
replica, service kept, the gateway ledger and the not-measured reasons, in report.md's order
and with the same rows."""

from __future__ import annotations

import copy
import html
import re
import shutil
from pathlib import Path

from harness.analysis.model import Report
from harness.report.make import make_report
from harness.report.page import render_html
from harness.report.tables import markdown

RUN = Path(__file__).parents[1] / "data" / "run-quickstart-v1"
"""A real quickstart run: two shop builds, a timeout outage, the gateway's ledger."""

GATES = """\
  - name: product reads kept fast
    expr: "after.products.p95[outage] <= 0.5 * before.products.p95[outage]"
    seed: "p95 7.12 s -> 2.43 s"
  - name: a build this run did not run
    expr: "third.products.p95 <= 1"
"""


def _report(tmp_path: Path) -> Report:
    """The run's report as ``harness report`` makes it, its scenario given a gate with
    ``seed:`` and one on a build it did not run; the ``after`` build given two replicas."""
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    scenario = (run / "scenario.yaml").read_text(encoding="utf-8")
    scenario = scenario.replace("builds:\n", "builds:\n  third: {profile: retry-only}\n", 1)
    (run / "scenario.yaml").write_text(scenario + GATES, encoding="utf-8")
    report = make_report(run, write=False)
    after = report["builds"]["after"]
    replica = {
        "workers": copy.deepcopy(after["workers"]),
        "breaker": {k: v for k, v in after["breaker"].items() if k != "present"},
        "pg": {"retries": 12.0},
        "payments_recorded": 300,
        "phases": {},
    }
    replica["breaker"]["time_to_open_s"] = 2.5
    after["replicas"] = {"0": copy.deepcopy(replica), "1": replica}  # type: ignore[typeddict-item]
    return report


def _headings(page: str) -> list[str]:
    return [html.unescape(h) for h in re.findall(r"<h[23][^>]*>(.*?)</h[23]>", page)]


def _md_rows(body: str) -> list[list[str]]:
    """The rows of report.md's tables under ``body`` (header rows too), each cell as shown."""
    rows = []
    for line in body.splitlines():
        if line.startswith("|") and not set(line) <= set("|-"):
            cells = re.split(r"(?<!\\)\|", line.strip()[1:-1])
            rows.append([c.strip().replace("\\|", "|") for c in cells])
    return rows


def _page_rows(page: str) -> list[list[str]]:
    rows = []
    for row in re.findall(r"<tr>(.*?)</tr>", page, flags=re.S):
        cells = re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, flags=re.S)
        rows.append([html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in cells])
    return rows


def _sections(md: str) -> list[tuple[str, str]]:
    parts = re.split(r"^## (.*)$", md, flags=re.M)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def test_the_page_has_every_section_of_report_md_in_its_order(tmp_path: Path) -> None:
    report = _report(tmp_path)
    md, page = markdown(report), render_html(report, {})
    titles = [title for title, _ in _sections(md)]
    assert {"Seed claims", "Gates skipped", "By phase", "Per replica", "Not measured"} <= set(
        titles
    )
    assert any(t.startswith("Gateway ledger") for t in titles)
    headings = _headings(page)
    assert [h for h in headings if h in titles] == titles
    # Each section's tables, row for row (the per-build tables: the page's add offered rps).
    builds = {f"{name} ({b['profile']})" for name, b in report["builds"].items()}
    shown = _page_rows(page)
    for title, body in _sections(md):
        if title in builds:
            continue
        for row in _md_rows(body):
            assert row in shown, (title, row)
    # The headline table too, and what is said under it.
    for row in _md_rows(md.split("\n## ", 1)[0]):
        assert row in shown, row
    for line in md.splitlines():
        if line.startswith(("**Warning**: ", "Note: ")):
            said = line.split(": ", 1)[1].replace("\\|", "|")
            assert html.escape(said) in page, said


def test_the_time_line_has_each_endpoints_recovery(tmp_path: Path) -> None:
    report = _report(tmp_path)
    page = render_html(report, {})
    [by_phase] = [body for title, body in _sections(markdown(report)) if title == "By phase"]
    header = [row for row in _md_rows(by_phase) if row[0] == "build"][0]
    assert "products back to healthy" in header and "payments back to healthy" in header
    assert header in _page_rows(page)
