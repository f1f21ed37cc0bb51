"""A DB pool's series (``db_active``, ``db_pending``, ``db_max``, ``db_timeouts``), end to end
from a metrics frame: the presets map HikariCP's names, the catalogue's figures are computed,
gated and shown, and a build that exposes no pool says so instead of reading ``-``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.analysis.figures import analyse
from harness.analysis.model import Report
from harness.analysis.presets import PRESETS
from harness.analysis.series import map_canonical
from harness.core.catalogue import NOT_EXPOSED
from harness.core.selectors import Selector
from harness.gates.evaluate import evaluate
from harness.report.charts import draw_charts, scenario_charts
from harness.report.tables import headline_rows, markdown
from harness.results.io import METRICS_COLUMNS
from harness.results.model import BuildResult, RunResult
from harness.scenario.gates import check_gate, parse_gate
from harness.scenario.loader import load_scenario_text
from harness.scenario.schema import Scenario
from tests.analysis.frames import sample_frame

T0 = 1_800_000_000.0
SCENARIO = """\
name: pool
seed: 1
warmup: 2s
duration: 20s
traffic:
  products: {method: GET, path: /api/products/1, rate: 10}
pg:
  phases:
    - {name: baseline, start: 0s, duration: 10s, fault: {type: healthy}}
    - {name: outage, start: 10s, duration: 10s, fault: {type: timeout}}
builds:
  before: {profile: retry-only}
  after: {profile: retry-only, db-pool: {maximum-pool-size: 10}}
"""
POOL = '{"pool":"HikariPool-1"}'


def _scenario() -> Scenario:
    return load_scenario_text(SCENARIO).scenario


def _samples() -> pd.DataFrame:
    start = T0 + np.arange(200) / 10
    return sample_frame("products", start, np.full(200, 0.01), np.full(200, 200))


def _metrics(pool: bool) -> pd.DataFrame:
    """Scrapes every second, half a second off the phase edges. With ``pool``, HikariCP's
    series as the shop exports them: 2 connections in use while healthy, all 10 and 4
    waiting in the outage, 3 timeouts a second from its first scrape on (28.5 by the
    window's end, read between two scrapes)."""
    rows = []
    for t in T0 - 1.5 + np.arange(24.0):  # between the phase edges
        outage = t >= T0 + 10.0
        rows.append((t, "target", "shop_workers_busy", "{}", 5.0))
        if pool:
            rows.append((t, "target", "hikaricp_connections_active", POOL, 10.0 if outage else 2.0))
            rows.append((t, "target", "hikaricp_connections_pending", POOL, 4.0 if outage else 0.0))
            rows.append((t, "target", "hikaricp_connections_max", POOL, 10.0))
            timeouts = 3.0 * max(0.0, t - (T0 + 10.5))
            rows.append((t, "target", "hikaricp_connections_timeout_total", POOL, timeouts))
    return pd.DataFrame(rows, columns=METRICS_COLUMNS)


def _report(tmp_path: Path, pooled: tuple[str, ...] = ("after",)) -> Report:
    builds = {
        name: BuildResult(name, _samples(), _metrics(name in pooled), {"t0": T0, "preset": "shop"})
        for name in ("before", "after")
    }
    return analyse(RunResult(tmp_path, {"run_id": "r", "status": "completed"}, builds), _scenario())


def test_the_shop_and_spring_boot_presets_read_hikaricps_series() -> None:
    for name in ("shop", "spring-boot"):
        preset = PRESETS[name]
        assert preset.source("db_pending") == Selector("hikaricp_connections_pending")
        assert preset.source("db_timeouts") == Selector("hikaricp_connections_timeout_total")
    assert PRESETS["opossum"].source("db_active") is None
    mapped = map_canonical(_metrics(pool=True), PRESETS["shop"])
    assert {"db_active", "db_pending", "db_max", "db_timeouts"} <= set(mapped.frame["series"])


def test_the_pools_figures_land_under_series_per_window_and_phase(tmp_path: Path) -> None:
    report = _report(tmp_path)
    after, before = report["builds"]["after"], report["builds"]["before"]
    assert after["series"] == {
        "db_active": {"max_fault": 10.0, "mean_fault": 10.0, "p50_fault": 10.0},
        "db_pending": {"max_fault": 4.0, "mean_fault": 4.0, "p50_fault": 4.0},
        "db_max": {"max": 10.0},
        "db_timeouts": {"total": 28.0},
    }
    assert after["phases"]["baseline"]["series"]["db_active"]["max"] == 2.0
    assert after["phases"]["outage"]["series"]["db_timeouts"]["total"] == 28.0
    assert after["phases"]["baseline"]["series"]["db_timeouts"]["total"] == 0.0
    # A build without a pool has no such figures at all: not None, not "not measured".
    assert "series" not in before and "series" not in before["phases"]["outage"]
    assert not any(k.startswith("series.") for k in before.get("not_measured", {}))
    both = _report(tmp_path, pooled=("before", "after"))["comparison"]["after"]
    assert both["series.db_pending.max_fault"]["value"] == 4.0  # compared when the baseline has it
    assert both["series.db_pending.max[outage]"]["change_pct"] == 0.0


@pytest.mark.parametrize(
    ("gate", "verdict"),
    [
        ("after.db_pending.max[outage] <= 5", "pass"),
        ("after.db_pending.max[outage] <= 3", "fail"),
        ("after.db_active.p50[baseline] == 2", "pass"),
        ("after.db_timeouts[outage] == after.db_timeouts", "pass"),
        ("after.db_max == 10", "pass"),
    ],
)
def test_the_catalogue_drives_the_gates_lookup(tmp_path: Path, gate: str, verdict: str) -> None:
    parsed = parse_gate(gate)
    assert check_gate(parsed, _scenario()) == []
    assert evaluate(parsed, _report(tmp_path)).verdict == verdict


def test_a_gate_on_a_pool_the_build_never_exposed_says_so(tmp_path: Path) -> None:
    result = evaluate(parse_gate("before.db_pending.max <= 5"), _report(tmp_path))
    assert result.verdict == "error"
    assert result.detail == "before.db_pending.max was not measured: not exposed"
    problems = check_gate(parse_gate("after.db_max[outage] <= 10"), _scenario())
    assert problems == ["figure 'db_max' is not cut by phase; drop [outage]"]


def test_the_report_shows_the_pools_rows_and_not_exposed(tmp_path: Path) -> None:
    report = _report(tmp_path)
    rows = {r[0]: r[1:] for r in headline_rows(report)}
    assert rows["DB connections pending max (outage)"] == [NOT_EXPOSED, "4", "-"]
    assert rows["DB pool size"] == [NOT_EXPOSED, "10", "-"]
    assert rows["DB connection timeouts (all phases)"] == [NOT_EXPOSED, "28", "-"]
    assert "| DB connections active max (outage) | not exposed | 10 | - |" in markdown(report)
    # No build with a pool: no pool rows at all.
    plain = headline_rows(_report(tmp_path, pooled=()))
    assert not [r for r in plain if r[0].startswith("DB ")]


def test_the_pool_chart_is_drawn_only_when_a_build_has_a_pool(tmp_path: Path) -> None:
    def run(pooled: tuple[str, ...]) -> RunResult:
        builds = {
            name: BuildResult(name, _samples(), _metrics(name in pooled), {"t0": T0})
            for name in ("before", "after")
        }
        return RunResult(tmp_path, {}, builds)

    with_pool = draw_charts(run(("after",)), _scenario(), tmp_path / "pool")
    assert list(with_pool) == [*scenario_charts(_scenario()), "db_pool"]
    assert with_pool["db_pool"].stat().st_size > 10_000
    plain = draw_charts(run(()), _scenario(), tmp_path / "plain")
    assert list(plain) == list(scenario_charts(_scenario()))
