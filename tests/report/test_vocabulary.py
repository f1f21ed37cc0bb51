"""Labels come from the scenario's own names (issue 30, item 2).

On a stranger's service (endpoints ``owners`` and ``vets``, dependencies ``customers``
and ``visits``, no ``pg``) the report speaks of owners, vets, customers and visits, never
of the reference shop's payments, products, approvals or its ``X-Outcome`` header: in
report.md, the terminal table, report.html and the charts' titles and legends. And no
module that writes a label (the analysis, the report, the CLI, the live lines) holds a
label with the shop's words outside the one declared table of them
(``harness.report.vocabulary``, shown only where the run played ``pg``) and the shop's
presets (``harness.analysis.presets``).
"""

from __future__ import annotations

import ast
import html
import re
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.text import Text as ChartText
from rich.console import Console

from harness.analysis.figures import analyse
from harness.analysis.model import Report
from harness.report.charts import CHART_TABLE, _prepare, _span, draw_charts
from harness.report.page import render_html
from harness.report.tables import markdown, terminal_table
from harness.results.model import BuildResult, RunResult
from harness.scenario.loader import load_scenario_text
from harness.scenario.schema import Scenario
from tests.analysis.frames import dependency_ledger, sample_frame

ROOT = Path(__file__).parents[2]
LABELLED = [
    *sorted((ROOT / "harness" / "analysis").glob("*.py")),
    *sorted((ROOT / "harness" / "report").glob("*.py")),
    *sorted((ROOT / "harness" / "cli").glob("*.py")),
    ROOT / "harness" / "run" / "watch.py",
    ROOT / "harness" / "run" / "events.py",
]
"""Every module that writes a label, a title, a warning or a live line."""
PRESET_TABLES = {
    ROOT / "harness" / "report" / "vocabulary.py",  # pg's words, shown only when pg is played
    ROOT / "harness" / "analysis" / "presets.py",  # the shop's series, a preset among others
}
SHOP_WORDS = re.compile(
    r"[Pp]ayment|PAYMENT|\bPG\b|\bpg\b(?![._])|[Pp]roducts?\b|[Aa]pprove|[Xx]-[Oo]utcome|gateway"
)
"""The reference shop's words in a report: its endpoints, its gateway, its header (a
report key such as ``pg.retries``, the service's retries, is a key, not a word)."""
SHOP_WORDS_AS_WRITTEN = re.compile(r"[Pp]ayment|\bPG\b|\bproducts?\b|approve|X-Outcome")


def shop_labels(source: str) -> list[tuple[int, str]]:
    """(line, text) of each string of ``source`` that reads as words (it has a space) and
    says a shop word; docstrings and string statements (attribute docs) are not labels."""
    tree = ast.parse(source)
    docs = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            continue
        if id(node) in docs or " " not in node.value.strip():
            continue  # a docstring, or a key, a column, a path: not words
        if SHOP_WORDS_AS_WRITTEN.search(node.value):
            found.append((node.lineno, node.value))
    return found


def test_no_label_says_the_shop_s_words_outside_its_declared_table() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text!r}"
        for path in LABELLED
        if path not in PRESET_TABLES
        for line, text in shop_labels(path.read_text(encoding="utf-8"))
    ]
    assert not found, "labels with the shop's words:\n" + "\n".join(found)


def test_the_grep_sees_a_label_in_an_f_string_and_passes_docstrings_and_keys() -> None:
    source = '''\
"""A module about payments."""
TITLE = "Payments offered"
KEY = "payments_recorded"
def f(ep: str) -> str:
    """Approve calls."""
    return f"{ep} payments offered/s"
'''
    assert [line for line, _ in shop_labels(source)] == [2, 6]


SCENARIO = """\
name: clinic
duration: 20s
warmup: 2s
traffic:
  owners: {path: /owners/1, rate: 10, calls-gateway: true}
  vets: {path: /vets, rate: 5}
dependencies:
  customers:
    routes:
      - request: {method: GET, path: "/api/customers/{id}"}
        response: {body: {id: "{{request.path.id}}"}}
    phases:
      - {name: calm, start: 0s, duration: 8s, fault: {type: healthy}}
      - {name: storm, start: 8s, duration: 6s, fault: {type: error}}
  visits:
    routes:
      - request: {method: GET, path: /api/visits}
        response: {body: []}
builds:
  plain:
    command: [svc, "{port}"]
    env: {CUSTOMERS_URL: "{dep.customers.url}", VISITS_URL: "{dep.visits.url}"}
  guarded:
    command: [svc, "{port}"]
    env: {CUSTOMERS_URL: "{dep.customers.url}", VISITS_URL: "{dep.visits.url}"}
"""
T0 = 1_800_000_000.0
NO_METRICS = pd.DataFrame(columns=["t", "source", "series", "labels", "value"])


def _build(name: str, storm_s: float, storm_status: int) -> BuildResult:
    """Owners 10/s, each calling customers once; vets 5/s, each calling visits once. In the
    storm (8-14 s) owners are answered ``storm_status`` after ``storm_s`` and customers
    answers 500 (``plain`` waits it out, ``guarded`` refuses at once)."""
    owners = T0 - 2.0 + np.arange(220) / 10
    vets = T0 - 2.0 + np.arange(110) / 5
    storm = (owners - T0 >= 8.0) & (owners - T0 < 14.0)
    samples = pd.concat(
        [
            sample_frame(
                "owners",
                owners,
                np.where(storm, storm_s, 0.02),
                np.where(storm, storm_status, 200),
            ),
            sample_frame("vets", vets, np.full(len(vets), 0.01), np.full(len(vets), 200)),
        ],
        ignore_index=True,
    )
    ledgers = {
        "customers": dependency_ledger(owners + 0.001, np.where(storm, 500, 200), "/api/c/1"),
        "visits": dependency_ledger(vets + 0.001, np.full(len(vets), 200), "/api/visits"),
    }
    info = {"t0": T0, "status": "completed"}
    return BuildResult(name, samples, NO_METRICS, info, dependencies=ledgers)  # type: ignore[arg-type]


def _clinic(tmp_path: Path) -> tuple[RunResult, Scenario, Report]:
    scenario = load_scenario_text(SCENARIO).scenario
    assert not scenario.has_pg
    builds = {"plain": _build("plain", 2.0, 200), "guarded": _build("guarded", 0.005, 503)}
    run = RunResult(tmp_path, {"status": "completed", "run_id": "r1"}, builds)  # type: ignore[typeddict-item]
    return run, scenario, analyse(run, scenario)


def _said(text: str) -> list[str]:
    return sorted({m.group(0) for m in SHOP_WORDS.finditer(text)})


def test_a_stranger_s_report_speaks_of_its_own_names(tmp_path: Path) -> None:
    run, scenario, report = _clinic(tmp_path)
    md = markdown(report)
    console = Console(width=200, record=True)
    console.print(terminal_table(report))
    terminal = console.export_text()
    page = html.unescape(render_html(report, draw_charts(run, scenario, tmp_path / "charts")))

    for name, text in (("report.md", md), ("terminal", terminal), ("report.html", page)):
        assert not _said(text), f"{name} says {_said(text)}"
        for own in ("owners", "vets", "customers", "visits", "plain", "guarded"):
            assert own in text, f"{name} never names {own}"
    assert "customers calls received (all phases)" in md
    assert "visits calls per request (storm)" in terminal
    # pg's rows, its ledger and its chart are the payment gateway's: not played, not shown.
    assert "PG" not in md and "amplification" not in md and "Gateway ledger" not in md
    assert "gateway calls answered again" not in md
    by_phase = next(line for line in md.splitlines() if line.startswith("| phase | build |"))
    assert "customers calls per request" in by_phase and "visits calls per request" in by_phase
    assert "chart-gateway_calls" not in page and "chart-dependency_calls" in page
    assert report["played"] == ["customers", "visits"]
    missed = {k for b in report["builds"].values() for k in b.get("not_measured", {})}
    assert not missed & {"pg.calls", "pg.amplification", "pg.target_calls"}, missed


def test_a_stranger_s_charts_are_titled_by_its_names(tmp_path: Path) -> None:
    run, scenario, _ = _clinic(tmp_path)
    builds = _prepare(run, scenario)
    span = _span(builds, scenario)
    texts: dict[str, str] = {}
    for chart in CHART_TABLE:
        if chart.applies(builds, scenario):
            figure = chart.draw(builds, scenario, span)
            said = [t.get_text() for t in figure.findobj(ChartText)]
            texts[chart.key] = " | ".join(said)
    assert "gateway_calls" not in texts and "dependency_calls" in texts
    for key, said in texts.items():
        assert not _said(said), f"{key} says {_said(said)}: {said}"
    calls = texts["dependency_calls"]
    assert "customers" in calls and "visits" in calls and "plain (command): calls/s" in calls
    assert "owners" in texts["latency_over_time"] and "vets" in texts["latency_over_time"]


def test_pg_s_rows_and_chart_stay_where_the_run_played_pg(tmp_path: Path) -> None:
    """The shop's scenario plays pg: its rows, its ledger and its chart are there, named."""
    from tests.report.test_reading import V1

    md = markdown(V1)
    assert "PG calls received (all phases)" in md and "## Gateway ledger" in md
    by_phase = next(line for line in md.splitlines() if line.startswith("| phase | build |"))
    assert by_phase.endswith("| blocked/s | amplification |")
