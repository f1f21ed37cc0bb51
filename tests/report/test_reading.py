"""Reports a newcomer reads right (issue 18, frictions 1, 2, 4, 5 and 10).

Each test is one friction met by a user of a Node/opossum service the harness
did not write: what the terminal, report.md and report.html showed, or left out.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import cast

import pytest
from rich.console import Console
from typer.testing import CliRunner

from harness.analysis.model import Report, read_report
from harness.cli import app
from harness.report.compare import compare_runs, rich_tables
from harness.report.page import render_html
from harness.report.tables import headline_rows, markdown, not_measured_lines, terminal_table
from tests.report.runfolders import RUN, repeated, stock_opossum

V1 = read_report(RUN / "report.json")


def _terminal(*renderables: object) -> str:
    console = Console(width=200, record=True)
    for r in renderables:
        console.print(r)
    return console.export_text()


def _invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def repeated_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The quickstart as ``--repeat 2``, rendered by ``harness report``."""
    run_dir = repeated(tmp_path_factory.mktemp("repeat") / "run")
    _invoke("report", str(run_dir))
    return run_dir


# ---------------------------------------------------------------- 1: compare in the terminal


def test_compare_in_the_terminal_keeps_the_phase_of_each_figure() -> None:
    labels, groups = compare_runs(V1, None, ["before", "after"])
    text = _terminal(*rich_tables(labels, groups))
    for phase in ("baseline", "outage", "recovery"):
        assert f"payments.latency_s.p50[{phase}]" in text
    assert text.count("payments.latency_s.p50") == 4


def test_compare_of_a_repeated_run_shows_the_intervals(repeated_run: Path) -> None:
    report = read_report(repeated_run / "report.json")
    low, high = report["builds"]["before"]["ci95"]["payments.latency_s.p95[outage]"]
    assert low is not None and high is not None and low < high
    out = _invoke("compare", str(repeated_run), "--build", "before", "--build", "after")
    row = next(line for line in out.splitlines() if "payments.latency_s.p95[outage]" in line)
    assert f"[{low:.4g}, {high:.4g}]" in row


def test_a_terminal_table_prints_brackets_as_written() -> None:
    report = copy.deepcopy(V1)
    report["scenario"] = "[bold]quickstart"
    report["builds"] = {f"[{k}]": v for k, v in report["builds"].items()}
    report["baseline"] = "[before]"
    text = _terminal(terminal_table(report))
    assert "[bold]quickstart" in text and "[after] vs [before]" in text


# ---------------------------------------------------------------- 2: intervals, counts in report.md


def test_report_md_of_a_repeated_run_shows_intervals_and_whole_counts(repeated_run: Path) -> None:
    md = (repeated_run / "report.md").read_text()
    assert "mean of 2 repetitions, [low, high] its bootstrap 95% interval" in md
    p95 = next(line for line in md.splitlines() if line.startswith("| payments p95 ("))
    assert p95.count("[") == 2  # before and after, each with its interval
    assert "| payments | 600 | 10 |" in md and "timeout: 352" in md
    assert "600.0" not in md and ": 352.0" not in md
    html = (repeated_run / "report.html").read_text()
    assert "mean of 2 repetitions" in html and "timeout: 352<" in html


# ---------------------------------------------------------------- 4: windows and refusals


def test_every_headline_row_names_its_window() -> None:
    rows = {r[0]: r[1:] for r in headline_rows(V1)}
    assert rows["PG calls received (all phases)"][:2] == ["963", "173"]
    assert rows["PG calls received (outage)"][:2] == ["715", "27"]
    assert rows["busy workers max (outage)"][:2] == ["20", "11"]
    unlabelled = [label for label in rows if "(" not in label]
    # The pool's size and the breaker's reaction times: not figures over a window.
    assert unlabelled == [
        "max workers",
        "time to open",
        "time to recover",
        "gateway calls answered again",
    ]
    assert "## Gateway ledger (whole run: warmup and drain included" in markdown(V1)


def test_a_breaker_build_lower_in_success_says_its_breaker_refused(tmp_path: Path) -> None:
    note = (
        "after: payments success 24.3% against 41.3% for before (all phases): "
        "refused by the breaker: 451."
    )
    assert f"Note: {note}" in markdown(V1)
    assert note in render_html(V1, {})
    shutil.copytree(RUN, tmp_path / "run")
    out = _invoke("report", str(tmp_path / "run"))
    assert f"note: {note}" in " ".join(out.split())
    # Without refusals there is nothing to explain.
    report: Report = copy.deepcopy(V1)
    report["builds"]["after"]["breaker"]["blocked_total"] = None
    assert "refused by the breaker" not in markdown(report)


# ---------------------------------------------------------------- 5: opossum without halfOpen


def test_a_stock_opossum_breaker_gets_a_warning_everywhere(tmp_path: Path) -> None:
    run_dir = stock_opossum(tmp_path / "run")
    out = " ".join(_invoke("report", str(run_dir)).split())
    assert "warning: after: the breaker opened again 2 time(s) with no 'halfOpen'" in out
    report = read_report(run_dir / "report.json")
    (warning,) = report["builds"]["after"]["warnings"]
    assert "opossum-prometheus 0.3.0 with opossum 9" in warning
    assert "**Warning**: after: the breaker opened again" in (run_dir / "report.md").read_text()
    html = (run_dir / "report.html").read_text()
    assert '<p class="warning">Warning: after: the breaker opened again' in html
    assert "warnings" not in report["builds"]["before"]


# ---------------------------------------------------------------- 10: the files written


def test_a_run_without_samples_lists_the_files_it_wrote(tmp_path: Path) -> None:
    """Both builds failed before their load (the manifest counts no samples)."""
    run_dir = tmp_path / "run"
    shutil.copytree(RUN, run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    for build in ("before", "after"):
        (run_dir / build / "samples.parquet").unlink()
        manifest["builds"][build].update(status="failed", samples=0)
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    out = _invoke("report", str(run_dir))
    assert "(report.json, report.md)" in out
    assert not (run_dir / "report.html").exists()


# ---------------------------------------------------------------- 3: why a cell reads "-"


def test_the_terminal_says_why_a_figure_was_not_measured(tmp_path: Path) -> None:
    """The retry-only build exposes no breaker series: the terminal names the figures, the
    series it looked for and how many it saw (report.md lists them), not only report.md."""
    run_dir = tmp_path / "run"
    shutil.copytree(RUN, run_dir)
    out = " ".join(_invoke("report", str(run_dir)).split())
    assert (
        "not measured: before: breaker.blocked_total, breaker.blocked_fault, "
        "breaker.blocked_per_s_fault: blocked_calls: no series "
        "resilience4j_circuitbreaker_not_permitted_calls_total" in out
    )
    assert "(8 series seen: report.md lists them)" in out
    assert "not measured: after" not in out  # the breaker build measured every figure
    html = (run_dir / "report.html").read_text()
    assert '<p class="note">Not measured: before: breaker.blocked_total' in html


def test_the_terminal_keeps_the_preset_s_note_on_what_to_set() -> None:
    """A spring-boot service without Tomcat's MBean registry: the terminal's line keeps the
    preset's hint (after the series seen, which it cuts to a count) and counts them all."""
    why = (
        "busy_workers: no series tomcat_threads_busy_threads in 13 scrape(s) of the target; "
        "series seen: tomcat_sessions_active_current_sessions, jvm_threads_live_threads and 92 "
        "more (Spring Boot exposes tomcat_threads_* only with "
        "server.tomcat.mbeanregistry.enabled=true)"
    )
    report = cast(Report, {"builds": {"pool": {"not_measured": {"workers.busy_max_fault": why}}}})
    assert not_measured_lines(report) == [
        "pool: workers.busy_max_fault: busy_workers: no series tomcat_threads_busy_threads in "
        "13 scrape(s) of the target (94 series seen: report.md lists them) (Spring Boot exposes "
        "tomcat_threads_* only with server.tomcat.mbeanregistry.enabled=true)"
    ]
