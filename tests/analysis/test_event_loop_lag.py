"""Node's event-loop lag as a canonical series (issue 30, item 3): a server without a worker
pool has no busy workers, and a loop held by work slows every request at once. The opossum
preset reads prom-client's default ``nodejs_eventloop_lag_p99_seconds`` from the real captures
of targets/node-gateway (tests/data); a service that does not expose it has no such figures."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.analysis.cuts import Reader, Windows, cut
from harness.analysis.presets import PRESETS
from harness.analysis.series import map_canonical, parse_text
from harness.core.catalogue import GATED
from harness.results.io import METRICS_COLUMNS

DATA = Path(__file__).parents[1] / "data"
CAPTURES = ["opossum_metrics_closed", "opossum_metrics_open", "opossum_metrics_recovered"]


def _scrapes(*names: str) -> pd.DataFrame:
    rows = []
    for t, name in enumerate(names):
        rows += parse_text((DATA / f"{name}.txt").read_text(), float(t), "target")
    return pd.DataFrame(rows, columns=METRICS_COLUMNS)


def _p99(name: str) -> float:
    """The capture's own ``nodejs_eventloop_lag_p99_seconds``, read line by line."""
    for line in (DATA / f"{name}.txt").read_text().splitlines():
        if line.startswith("nodejs_eventloop_lag_p99_seconds "):
            return float(line.split()[1])
    raise AssertionError(name)


def test_the_opossum_preset_reads_the_event_loop_lag_and_its_figures_follow() -> None:
    canon = map_canonical(_scrapes(*CAPTURES), PRESETS["opossum"])
    frame = canon.frame[canon.frame["series"] == "event_loop_lag"]
    assert list(frame["value"]) == [_p99(n) for n in CAPTURES]
    series = {"event_loop_lag": pd.Series(frame["value"].to_numpy(), index=frame["t"].to_numpy())}
    reader = Reader(series, [], lambda n, a, b: None)
    figures = cut(reader, "build", Windows((0.0, 3.0), (0.0, 3.0), 0.0))["series"]
    # Kept to 0.1 ms: 12.1 ms is 0.0121 s, not a gauge's 2 decimals (0.01).
    assert figures["event_loop_lag"]["max_fault"] == round(max(_p99(n) for n in CAPTURES), 4)
    assert figures["event_loop_lag"]["p50_fault"] == round(_p99(CAPTURES[1]), 4)
    assert GATED["event_loop_lag.max"].unit == "s"  # gated, shown in ms/s


def test_a_service_without_it_has_no_such_figure() -> None:
    metrics = _scrapes(*CAPTURES)
    metrics = metrics[~metrics["series"].str.startswith("nodejs_")]
    canon = map_canonical(metrics, PRESETS["opossum"])
    assert "event_loop_lag" not in set(canon.frame["series"])
    assert "event_loop_lag" in canon.missing  # optional: its figures are absent, not None
