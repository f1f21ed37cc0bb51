"""``recovery.png``: drawn only for a scenario with ``recovery:``, one row per build."""

from __future__ import annotations

from pathlib import Path

from harness.report.chart_style import BUILD_COLOURS
from harness.report.charts import draw_charts, scenario_charts
from harness.results.model import BuildResult, RunResult
from harness.scenario.loader import load_scenario_text
from tests.analysis.test_recovery import SCENARIO, T0, _samples, _scenario
from tests.report.test_charts import NO_METRICS, _assert_not_blank, _has_colour


def _run(tmp_path: Path) -> RunResult:
    builds = {
        name: BuildResult(name, samples, NO_METRICS, {"t0": T0})  # type: ignore[typeddict-item]
        for name, samples in (("before", _samples(None)), ("after", _samples(23.0)))
    }
    return RunResult(tmp_path, {"status": "ok"}, builds)  # type: ignore[typeddict-item]


def test_the_recovery_chart_shows_each_build(tmp_path: Path) -> None:
    text = SCENARIO.replace("RECOVERY", "{}").replace(
        "  b: {profile: retry-only}",
        "  before: {profile: retry-only}\n  after: {profile: retry-only}",
    )
    scenario = load_scenario_text(text).scenario
    paths = draw_charts(_run(tmp_path), scenario, tmp_path / "charts")
    assert list(paths) == scenario_charts(scenario)
    assert paths and list(paths)[-1] == "recovery"
    pixels = _assert_not_blank(paths["recovery"])
    assert _has_colour(pixels, BUILD_COLOURS[0]) and _has_colour(pixels, BUILD_COLOURS[1])


def test_no_recovery_chart_without_recovery(tmp_path: Path) -> None:
    scenario = _scenario()
    plain = scenario.model_copy(update={"recovery": None})
    run = RunResult(tmp_path, {}, {"b": BuildResult("b", _samples(20.0), NO_METRICS, {"t0": T0})})  # type: ignore[typeddict-item]
    assert "recovery" not in draw_charts(run, plain, tmp_path / "c")
