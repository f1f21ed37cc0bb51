"""A run made before the report model was typed: the same tables, and re-rendered to the byte."""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path

from rich.console import Console

from harness.analysis.model import read_report
from harness.report.charts import scenario_charts
from harness.report.page import render_html
from harness.report.tables import headline_rows, markdown, table_header, terminal_table
from harness.scenario.loader import load_scenario
from tests.conftest import ROOT, harness_cmd

RUN = Path(__file__).parents[1] / "data" / "run-quickstart-v1"
"""A quickstart run folder (raw parquet and report) made before the report model was typed."""
V1 = read_report(RUN / "report.json")


def test_markdown_of_an_old_report_is_unchanged() -> None:
    assert markdown(V1) == (RUN / "report.md").read_text(encoding="utf-8")


def test_headline_table() -> None:
    assert table_header(V1) == ["figure", "before", "after", "after vs before"]
    rows = {r[0]: r[1:] for r in headline_rows(V1)}
    # protected endpoint first
    assert list(rows)[:2] == ["products p95 (all phases)", "products p99 (all phases)"]
    assert rows["products p95 (all phases)"] == ["3.46 s", "5 ms", "-99.9%"]
    # retry-only has no breaker series
    assert rows["blocked calls (all phases)"] == ["-", "451", "-"]
    console = Console(width=120, record=True)
    console.print(terminal_table(V1))
    assert "PG amplification (outage)" in console.export_text()


def test_page_of_an_old_report() -> None:
    text = render_html(V1, {})
    assert '<th scope="row">products p95 (all phases)</th>' in text
    assert "No charts." in text


def test_report_command_rerenders_an_old_run_to_the_byte(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    done = subprocess.run(
        harness_cmd("report", str(run)), cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("report.json", "report.md"):
        assert (run / name).read_bytes() == (RUN / name).read_bytes(), name
    assert sorted(p.name for p in (run / "charts").iterdir()) == sorted(
        f"{key}.png" for key in scenario_charts(load_scenario(RUN / "scenario.yaml").scenario)
    )
    assert (run / "report.html").stat().st_size > 100_000


def test_dropped_requests_get_a_row_and_a_mention_only_when_there_are_some() -> None:
    assert not [r for r in headline_rows(V1) if "dropped" in r[0]]
    report = copy.deepcopy(V1)
    report["builds"]["before"]["endpoints"]["payments"]["dropped"] = 1234
    rows = {r[0]: r[1:] for r in headline_rows(report)}
    assert rows["payments dropped by max-in-flight (all phases)"] == ["1234", "0", "-100.0%"]
    assert "dropped (max-in-flight): 1234" in markdown(report)
