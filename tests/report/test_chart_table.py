"""Every chart of ``CHART_TABLE`` is handled: drawn for a run that has its data, named once,
captioned, and shown on ``report.html`` with its caption, in the table's order."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np

from harness.report.charts import CHART_TABLE, draw_charts
from harness.report.page import _charts
from harness.results.model import BuildResult, RunResult
from harness.scenario.loader import load_scenario_text
from harness.scenario.schema import Scenario
from tests.analysis.frames import dependency_ledger
from tests.analysis.test_db_pool import _metrics
from tests.analysis.test_recovery import SCENARIO, T0, _samples
from tests.report.test_charts import PNG_MAGIC


def _scenario() -> Scenario:
    """test_recovery's scenario, which plays pg, naming a dependency ``customers`` too."""
    text = SCENARIO.replace("RECOVERY", "{goodput: 90%, within: 30s, hold: 5s}")
    build = (
        '  b: {command: [svc, "{port}"], '
        'env: {CUSTOMERS_URL: "{dep.customers.url}", PG: "{pg_url}"}}\n'
    )
    text = text.replace("builds:\n  b: {profile: retry-only}\n", DEPENDENCY + "builds:\n" + build)
    return load_scenario_text(text).scenario


DEPENDENCY = """\
dependencies:
  customers:
    routes:
      - request: {method: GET, path: "/c/{id}"}
        response: {body: {id: "{{request.path.id}}"}}
"""


def test_every_chart_is_declared_once_with_a_caption() -> None:
    keys = [chart.key for chart in CHART_TABLE]
    assert len(keys) == len(set(keys))
    assert all(chart.caption.strip() for chart in CHART_TABLE)


def test_every_chart_is_drawn_for_a_run_with_its_data_and_shown_on_the_page(
    tmp_path: Path,
) -> None:
    """A build with a DB pool in a scenario with ``recovery:`` that plays pg and names a
    dependency: every chart applies."""
    customers = dependency_ledger(T0 + np.arange(100) / 5, np.full(100, 200), "/c/1")
    build = BuildResult(
        "b",
        _samples(23.0),
        _metrics(pool=True),
        {"t0": T0},  # type: ignore[typeddict-item]
        dependencies={"customers": customers},
    )
    run = RunResult(tmp_path, {"status": "completed"}, {"b": build})  # type: ignore[typeddict-item]

    paths = draw_charts(run, _scenario(), tmp_path / "charts")

    assert list(paths) == [chart.key for chart in CHART_TABLE]
    for chart in CHART_TABLE:
        assert paths[chart.key].name == f"{chart.key}.png"
        drawn = paths[chart.key].read_bytes()
        assert drawn.startswith(PNG_MAGIC) and len(drawn) > 10_000, chart.key
    page = _charts(paths)
    shown = [page.index(f'id="chart-{chart.key}"') for chart in CHART_TABLE]
    assert shown == sorted(shown)
    for chart in CHART_TABLE:
        assert f"<figcaption>{html.escape(chart.caption)}</figcaption>" in page, chart.key
