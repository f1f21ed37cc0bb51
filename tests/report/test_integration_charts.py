"""Charts of a real run: five PNGs, each build drawn in its own colour."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.report.chart_style import BUILD_COLOURS
from harness.report.charts import draw_charts, scenario_charts
from harness.results.model import load
from harness.scenario.loader import load_scenario
from tests.report.test_charts import _assert_not_blank, _has_colour

pytestmark = pytest.mark.integration


def test_charts_of_a_real_run(short_run: Path, tmp_path: Path) -> None:
    run = load(short_run)
    scenario = load_scenario(short_run / "scenario.yaml").scenario
    out = tmp_path / "charts"
    paths = draw_charts(run, scenario, out)

    assert list(paths) == scenario_charts(scenario)
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{k}.png" for k in paths)
    for key, path in paths.items():
        assert path == out / f"{key}.png"
        pixels = _assert_not_blank(path)
        if key in ("busy_workers", "gateway_calls", "latency_over_time"):
            # Both builds drew something, each in its own colour.
            assert _has_colour(pixels, BUILD_COLOURS[0]), key
            assert _has_colour(pixels, BUILD_COLOURS[1]), key
