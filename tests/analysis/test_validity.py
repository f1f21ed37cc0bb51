"""Whether a build measured what it meant to: a stalled orchestrator's scrape gaps and a
stalled load generator's lateness are figures (``validity.*``), said as warnings, gated, and
a gap makes the scrape figures of the windows it falls in "not measured" (issue 22)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from harness.analysis.figures import analyse
from harness.analysis.model import Report
from harness.gates.evaluate import evaluate
from harness.results.io import METRICS_COLUMNS
from harness.results.model import BuildResult, RunResult
from harness.scenario.gates import parse_gate
from harness.scenario.loader import load_scenario_text
from tests.analysis.frames import sample_frame
from tests.analysis.test_db_pool import SCENARIO, T0

# The DB pool test's scenario (a scrape a second; baseline 0-10 s, outage 10-20 s): its
# build "before" has no pool, which is all these tests need.
B = "before"


def _samples(late_s: float = 0.0) -> pd.DataFrame:
    start = T0 + np.arange(200) / 10
    frame = sample_frame("products", start, np.full(200, 0.01), np.full(200, 200))
    # What a load generator stopped for late_s at +12 s sends: everything due meanwhile, late.
    held = (start >= T0 + 12) & (start < T0 + 12 + late_s)
    frame.loc[held, "actual_start"] = T0 + 12 + late_s
    frame.loc[held, "end"] = T0 + 12 + late_s + 0.01
    return frame


def _metrics(gap: tuple[float, float] | None = None) -> pd.DataFrame:
    """A scrape a second (the scenario's interval), 20 busy workers in the outage, 2 before;
    none in ``gap`` (seconds after t0): the orchestrator was stopped then."""
    rows = []
    for t in T0 - 1.5 + np.arange(24.0):
        if gap is not None and T0 + gap[0] < t < T0 + gap[1]:
            continue
        busy = 20.0 if t >= T0 + 10 else 2.0
        rows.append((t, "target", "shop_workers_busy", "{}", busy))
        rows.append((t, "target", "shop_workers_max", "{}", 64.0))
    return pd.DataFrame(rows, columns=METRICS_COLUMNS)


def _report(tmp_path: Path, samples: pd.DataFrame, metrics: pd.DataFrame) -> Report:
    build = BuildResult(B, samples, metrics, {"t0": T0, "preset": "shop"})
    run = RunResult(tmp_path, {"run_id": "r", "status": "completed"}, {B: build})
    return analyse(run, load_scenario_text(SCENARIO).scenario)


def _gate(text: str, report: Report) -> str:
    return evaluate(parse_gate(text), report).verdict


def test_a_scrape_gap_is_a_figure_a_warning_and_makes_its_windows_not_measured(
    tmp_path: Path,
) -> None:
    report = _report(tmp_path, _samples(), _metrics(gap=(11.0, 19.0)))
    b = report["builds"][B]
    assert b["validity"]["scrape_gap_max_s"] == 9.0
    assert b["validity"]["scrape_gaps"] == [[10.5, 19.5]]
    # The outage's busy workers would read from its two scrapes outside the gap: not measured.
    assert b["workers"]["busy_max_fault"] is None and b["workers"]["busy_p50_fault"] is None
    assert "scrape gap" in b["not_measured"]["workers.busy_max_fault"]
    assert b["phases"]["outage"]["workers"]["busy_max"] is None
    assert b["phases"]["baseline"]["workers"]["busy_max"] == 2.0  # untouched by the gap
    assert b["workers"]["max_workers"] == 64.0
    assert any("no scrape of the target for 9.0 s" in w for w in b["warnings"]), b["warnings"]
    assert _gate("before.busy_workers.max[outage] >= 10", report) == "error"  # not a silent pass
    assert _gate("before.scrape.gap_max_s <= 3", report) == "fail"


def test_regular_scrapes_leave_every_figure_measured(tmp_path: Path) -> None:
    b = _report(tmp_path, _samples(), _metrics())["builds"][B]
    assert b["validity"]["scrape_gap_max_s"] == 1.0 and b["validity"]["scrape_gaps"] == []
    assert b["workers"]["busy_max_fault"] == 20.0
    assert "warnings" not in b
    assert not any("gap" in why for why in b.get("not_measured", {}).values())
    assert b["validity"]["generator_max_lateness_s"] == 0.0


def test_a_stalled_load_generator_is_said_and_gated_not_blamed_on_the_service(
    tmp_path: Path,
) -> None:
    report = _report(tmp_path, _samples(late_s=5.0), _metrics())
    b = report["builds"][B]
    assert b["validity"]["generator_max_lateness_s"] == 5.0
    (warning,) = b["warnings"]
    assert "load generator" in warning and "5.00 s late" in warning
    assert _gate("before.generator.max_lateness_s <= 0.5", report) == "fail"
    calm = _report(tmp_path, _samples(late_s=0.2), _metrics())
    assert "warnings" not in calm["builds"][B]
    assert _gate("before.generator.max_lateness_s <= 0.5", calm) == "pass"


def test_an_interrupted_build_is_looked_at_for_gaps_only_as_far_as_it_ran(
    tmp_path: Path,
) -> None:
    """Interrupted at +14 s of 20 (Ctrl-C): no scrape after it, no request sent after it.
    The 6 s it never ran are no scrape gap; a gap in what it ran still is (issue 32,
    item 12)."""
    samples = _samples()
    ran = samples[samples["actual_start"] < T0 + 14]
    metrics = _metrics()
    cut = metrics[metrics["t"] < T0 + 14]
    info = {"t0": T0, "preset": "shop", "status": "interrupted"}
    build = BuildResult(B, ran, cut, info)
    run = RunResult(tmp_path, {"run_id": "r", "status": "interrupted"}, {B: build})
    b = analyse(run, load_scenario_text(SCENARIO).scenario)["builds"][B]
    assert b["validity"]["scrape_gaps"] == [], b["validity"]
    assert b["validity"]["scrape_gap_max_s"] == 1.0
    assert not any("scrape gap" in w for w in b.get("warnings", [])), b["warnings"]
    assert b["workers"]["busy_max_fault"] == 20.0
    # A stall inside what it ran is still one.
    stalled = _metrics(gap=(4.0, 9.0))
    build = BuildResult(B, ran, stalled[stalled["t"] < T0 + 14], info)
    run = RunResult(tmp_path, {"run_id": "r", "status": "interrupted"}, {B: build})
    b = analyse(run, load_scenario_text(SCENARIO).scenario)["builds"][B]
    assert b["validity"]["scrape_gaps"] == [[3.5, 9.5]], b["validity"]


def _build_info(failed: list[list[float | str]], metrics_url: str) -> dict[str, object]:
    return {
        "t0": T0,
        "preset": "shop",
        "target_url": "http://127.0.0.1:8001",
        "target_metrics_url": metrics_url,
        "scrape_failed": failed,
    }


def _report_with(tmp_path: Path, info: dict[str, object]) -> Report:
    build = BuildResult(B, _samples(), _metrics(gap=(11.0, 19.0)), info)
    run = RunResult(tmp_path, {"run_id": "r", "status": "completed"}, {B: build})
    return analyse(run, load_scenario_text(SCENARIO).scenario)


def test_a_gap_whose_scrapes_timed_out_is_the_target_s_and_names_a_port_of_its_own(
    tmp_path: Path,
) -> None:
    """Scrapes tried in the gap and not answered in time: the target did not answer, not a
    stalled harness; on the app's own port the advice is a port for the metrics."""
    timed_out: list[list[float | str]] = [
        [T0 + t, T0 + t + 1, "target", "timeout"] for t in (11.5, 13.5, 15.5, 17.5)
    ]
    same_port = _report_with(tmp_path, _build_info(timed_out, "http://127.0.0.1:8001/metrics"))
    b = same_port["builds"][B]
    (warning,) = b["warnings"]
    assert "the target did not answer" in warning and "orchestrator" not in warning
    assert "4 not answered in time" in warning
    assert "management.server.port" in warning
    assert "4 not answered in time" in b["not_measured"]["workers.busy_max_fault"]
    own_port = _report_with(tmp_path, _build_info(timed_out, "http://127.0.0.1:8002/metrics"))
    (warning,) = own_port["builds"][B]["warnings"]
    assert "the target did not answer" in warning and "management.server.port" not in warning
    assert "metrics.timeout" in warning
    # Failures outside the gap, or of the gateway's scrapes, say nothing of it.
    elsewhere: list[list[float | str]] = [
        [T0 + 2, T0 + 3, "target", "timeout"],
        [T0 + 12, T0 + 13, "pg", "timeout"],
    ]
    stalled = _report_with(tmp_path, _build_info(elsewhere, "http://127.0.0.1:8001/metrics"))
    (warning,) = stalled["builds"][B]["warnings"]
    assert "the orchestrator was stalled" in warning


def test_a_gap_does_not_say_figures_of_series_the_service_never_had(tmp_path: Path) -> None:
    """The target shows busy and max workers, no database pool: a gap blanks the workers'
    figures, and the pool's read not measured only for the pool's own reason."""
    b = _report_with(tmp_path, _build_info([], "http://127.0.0.1:8002/metrics"))["builds"][B]
    gap_said = {key for key, why in b["not_measured"].items() if "scrape gap" in why}
    assert "workers.busy_max_fault" in gap_said
    assert not [key for key in gap_said if "db_" in key], gap_said
