"""On a real run: gateway calls in report.json are the ledger's arrivals in the window, exactly.

Uses the shared short run (real gateway, target under gunicorn, Locust; see
``tests/conftest.py``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.analysis.model import read_report
from harness.results.model import load

pytestmark = pytest.mark.integration


def _arrivals_in(arrivals: np.ndarray, start: float, end: float) -> int:
    return int(((arrivals >= start) & (arrivals < end)).sum())


def test_pg_calls_are_the_ledger_arrivals_in_the_window(short_run: Path) -> None:
    run = load(short_run)
    scenario = run.scenario
    report = read_report(short_run / "report.json")
    assert set(report["builds"]) == {"before", "after"}
    for name, build in run.builds.items():
        figures = report["builds"][name]
        arrivals = build.ledger["arrival"].to_numpy(dtype=float)
        t0, end = build.t0, build.t0 + scenario.duration
        # The ledger saw calls on both sides of the window: warmup and drain are really excluded.
        assert len(arrivals) and arrivals.min() < t0, name
        pg = figures["pg"]
        assert pg.get("source") == "ledger", name
        assert pg["calls"] == _arrivals_in(arrivals, t0, end), name
        assert pg["amplification"] == round(_arrivals_in(arrivals, t0, end) / pg["payments"], 3)
        for phase in scenario.pg.phases:
            window = figures["phases"][phase.name]["pg"]
            count = _arrivals_in(arrivals, t0 + phase.start, t0 + phase.end)
            assert window["calls"] == count, (name, phase.name)


def test_every_source_was_scraped_after_the_load_finished(short_run: Path) -> None:
    run = load(short_run)
    for name, build in run.builds.items():
        last_answer = float(build.samples["end"].max())
        metrics = build.metrics
        for source in ("target", "pg"):
            last_scrape = float(metrics.loc[metrics["source"] == source, "t"].max())
            assert last_scrape > last_answer, (name, source)
