"""Breaker opens and each replica's figures per phase, on a real run whose breakers flap.

The run (``tests.report.flaprun``): one shop, and two behind nginx, against a
gateway that hangs. The report's opens are checked against a count made here
straight from the scraped state gauge in ``metrics.parquet``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.report.flaprun import flap_run, needs_nginx

pytestmark = pytest.mark.integration


def _report(run_dir: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((run_dir / "report.json").read_text())
    return report


def _opens_from_metrics(
    run_dir: Path, build: str, source: str, start: float, end: float, from_closed: bool = False
) -> int:
    """Opens counted here from the raw gauge (one row per state per scrape, 1 for the current):
    a scrape reading open after one that did not (from closed, or a failed half-open trial),
    or half-open after closed (the open fell between them); ``from_closed``: a scrape away
    from closed (open or half-open) after one that read closed."""
    metrics = pd.read_parquet(run_dir / build / "metrics.parquet")
    rows = metrics[
        (metrics["source"] == source)
        & (metrics["series"] == "resilience4j_circuitbreaker_state")
        & (metrics["value"] == 1.0)
    ].sort_values("t")
    state = [json.loads(labels)["state"] for labels in rows["labels"]]
    count, before = 0, "closed"
    for t, now in zip(rows["t"], state, strict=True):
        if from_closed:
            opened = now in ("open", "half_open") and before == "closed"
        else:
            opened = (now == "open" and before != "open") or (
                now == "half_open" and before == "closed"
            )
        if start <= t < end and opened:
            count += 1
        before = now
    return count


@needs_nginx
def test_a_real_flapping_breaker_has_its_opens_counted() -> None:
    run_dir = flap_run()
    report = _report(run_dir)
    for name, sources in (("one", ["target"]), ("scaled", ["target.0", "target.1"])):
        build = report["builds"][name]
        t0 = build["t0"]
        whole = [_opens_from_metrics(run_dir, name, s, t0, t0 + 14.0) for s in sources]
        outage = [_opens_from_metrics(run_dir, name, s, t0 + 3.0, t0 + 14.0) for s in sources]
        assert build["breaker"]["opens"] == sum(whole)
        assert build["phases"]["outage"]["breaker"]["opens"] == sum(outage)
        left = [
            _opens_from_metrics(run_dir, name, s, t0, t0 + 14.0, from_closed=True) for s in sources
        ]
        assert build["breaker"]["opens_from_closed"] == sum(left) <= sum(whole)
        assert build["phases"]["calm"]["breaker"]["opens"] == 0  # the gateway was healthy
        # It flapped: 11 s of blips, open in each, closed again by a probe after each.
        assert all(n >= 3 for n in outage), outage
        # More opens than the outage's one: what open_pct alone cannot tell apart.
        assert 15 < build["breaker"]["open_pct_fault"] < 90


@needs_nginx
def test_each_replica_has_its_figures_per_phase_and_they_add_up() -> None:
    run_dir = flap_run()
    build = _report(run_dir)["builds"]["scaled"]
    replicas = [build["replicas"][str(i)] for i in range(2)]
    t0 = build["t0"]
    for i, replica in enumerate(replicas):
        assert set(replica["phases"]) == {"calm", "outage"}
        outage = replica["phases"]["outage"]
        assert outage["breaker"]["opens"] == _opens_from_metrics(
            run_dir, "scaled", f"target.{i}", t0 + 3.0, t0 + 14.0
        )
        assert replica["breaker"]["opens"] == sum(
            p["breaker"]["opens"] for p in replica["phases"].values()
        )
        # The outage is the fault window: its figures are the replica's _fault ones.
        assert outage["breaker"]["blocked"] == replica["breaker"]["blocked_fault"]
        assert outage["breaker"]["open_pct"] == replica["breaker"]["open_pct_fault"]
        assert outage["workers"]["busy_max"] == replica["workers"]["busy_max_fault"]
        assert replica["phases"]["calm"]["breaker"]["blocked"] == 0
    for key in ("opens", "blocked"):
        assert build["phases"]["outage"]["breaker"][key] == sum(
            r["phases"]["outage"]["breaker"][key] for r in replicas
        )
    assert build["breaker"]["opens"] == sum(r["breaker"]["opens"] for r in replicas)
