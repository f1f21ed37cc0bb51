"""Every chart of ``CHART_TABLE`` is handled: drawn for a run that has its data, named once,
captioned, and shown on ``report.html`` with its caption, in the table's order."""

from __future__ import annotations

import html
from pathlib import Path

from harness.report.charts import CHART_TABLE, draw_charts
from harness.report.page import _charts
from harness.results.model import BuildResult, RunResult
from tests.analysis.test_db_pool import _metrics
from tests.analysis.test_recovery import T0, _samples, _scenario
from tests.report.test_charts import PNG_MAGIC


def test_every_chart_is_declared_once_with_a_caption() -> None:
    keys = [chart.key for chart in CHART_TABLE]
    assert len(keys) == len(set(keys))
    assert all(chart.caption.strip() for chart in CHART_TABLE)


def test_every_chart_is_drawn_for_a_run_with_its_data_and_shown_on_the_page(
    tmp_path: Path,
) -> None:
    """A build with a DB pool in a scenario with ``recovery:``: every chart applies."""
    build = BuildResult("b", _samples(23.0), _metrics(pool=True), {"t0": T0})  # type: ignore[typeddict-item]
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
