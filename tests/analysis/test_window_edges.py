"""Counts at the edges of a window: the ledger where there is one, counters read at the edges.

A synthetic build shaped like the run in issue 12: scrapes 0.59 s before the
measured window starts (so the last scrape before ``t0`` is early), gateway
calls that keep arriving after the window ends (retries of the last payments),
and a rate that doubles at the outage's start.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from harness.analysis.figures import build_figures, counter_delta
from harness.analysis.series import PRESETS, canonical, counter, counter_at
from harness.analysis.series import Selector as Sel
from harness.results.io import (
    LEDGER_DTYPES,
    METRICS_COLUMNS,
    SAMPLE_DTYPES,
    empty_frame,
    with_ledger_defaults,
)
from harness.results.model import BuildResult
from harness.scenario.loader import load_scenario_text
from harness.scenario.schema import Scenario

T0 = 1_800_000_000.0
RATE = 35
RETRIES_PER_S = 10.0
SCENARIO = f"""\
name: edges
seed: 1
warmup: 5s
duration: 20s
traffic:
  payments: {{method: POST, path: /api/payments, rate: {RATE}, calls-gateway: true}}
pg:
  phases:
    - {{name: baseline, start: 0s, duration: 10s, fault: {{type: healthy}}}}
    - {{name: outage, start: 10s, duration: 10s, fault: {{type: timeout}}}}
builds:
  b: {{profile: retry-only, workers: 4}}
"""


def _scenario() -> Scenario:
    return load_scenario_text(SCENARIO).scenario


def _payments() -> pd.DataFrame:
    """35 payments/s intended from the warmup's start to the window's end."""
    start = T0 - 5.0 + np.arange(RATE * 25) / RATE
    n = len(start)
    return pd.DataFrame(
        {
            "endpoint": ["payments"] * n,
            "index": np.arange(n),
            "intended_start": start,
            "actual_start": start,
            "end": start + 0.9,
            "status": [200] * n,
            "error": [""] * n,
            "outcome": [""] * n,
        }
    ).astype(SAMPLE_DTYPES)


def _arrivals(payments: pd.DataFrame) -> np.ndarray:
    """Each payment reaches the gateway 0.3 s after it is sent; in the outage, again 0.5 s later."""
    sent = payments["intended_start"].to_numpy(dtype=float)
    first = sent + 0.3
    in_outage = (sent >= T0 + 10.0) & (sent < T0 + 20.0)
    return np.sort(np.concatenate([first, first[in_outage] + 0.5]))


def _ledger(arrivals: np.ndarray) -> pd.DataFrame:
    n = len(arrivals)
    return (
        pd.DataFrame(
            {
                "arrival": arrivals,
                "key": [f"k{i}" for i in range(n)],
                "attempt": [1] * n,
                "phase": ["baseline"] * n,
                "fault": ["healthy"] * n,
                "status": [200] * n,
                "decision": ["approved"] * n,
                "duration_s": [0.001] * n,
                "client_gone": [False] * n,
                "path": ["/v1/payments/approve"] * n,
            }
        )
        .pipe(with_ledger_defaults)
        .astype(LEDGER_DTYPES)
    )


def _metrics(arrivals: np.ndarray, scrapes: np.ndarray) -> pd.DataFrame:
    """The gateway's counter (calls arrived so far) and the target's retries (10/s from the load's
    start), scraped at ``scrapes``."""
    rows = []
    for t in scrapes:
        rows.append(
            (t, "pg", "pg_calls_received_total", '{"phase":"x"}', float((arrivals <= t).sum()))
        )
        retries = RETRIES_PER_S * max(0.0, t - (T0 - 5.0))
        rows.append((t, "target", "shop_pg_retries_total", "{}", retries))
    return pd.DataFrame(rows, columns=METRICS_COLUMNS)


# Every second, as in the issue: the last scrape before
# t0 is 0.59 s early, and scraping goes on into the drain until after the last call arrived.
SCRAPES = T0 - 5.59 + np.arange(28.0)


TRAILING = SCRAPES[SCRAPES < T0 + 19.5]
"""The same without a scrape after the last calls (no final scrape): the counters trail."""


def _build(ledger: bool = True, scrapes: np.ndarray = SCRAPES) -> tuple[BuildResult, np.ndarray]:
    payments = _payments()
    arrivals = _arrivals(payments)
    frame = _ledger(arrivals) if ledger else empty_frame(LEDGER_DTYPES)
    info = {"t0": T0, "preset": "shop"}
    return BuildResult("b", payments, _metrics(arrivals, scrapes), info, frame), arrivals


def _count(arrivals: np.ndarray, start_s: float, end_s: float) -> int:
    return int(((arrivals >= T0 + start_s) & (arrivals < T0 + end_s)).sum())


@pytest.mark.parametrize("scrapes", [SCRAPES, TRAILING], ids=["scraped-to-the-end", "trailing"])
def test_gateway_calls_come_from_the_ledger_exactly(scrapes: np.ndarray) -> None:
    build, arrivals = _build(scrapes=scrapes)
    fig = build_figures(_scenario(), build)
    pg = fig["pg"]
    assert pg["source"] == "ledger"
    # Arrivals in [t0, t0 + 20 s): first calls at 35/s (350 + 350), and the retries of
    # payments sent in [10, 19.2) s; not the 0.59 s before t0, not the drain.
    assert pg["calls"] == _count(arrivals, 0, 20) == 350 + 350 + 322
    assert pg["payments"] == 700
    assert pg["amplification"] == round(pg["calls"] / 700, 3)
    for phase, (start, end) in {"baseline": (0, 10), "outage": (10, 20)}.items():
        window = fig["phases"][phase]["pg"]
        assert window["calls"] == _count(arrivals, start, end), phase
        assert window["amplification"] == round(_count(arrivals, start, end) / 350, 3)
    assert pg["calls_fault"] == _count(arrivals, 10, 20)
    # The phases cover the window, so they add up to the build's total.
    assert sum(fig["phases"][p]["pg"]["calls"] or 0 for p in ("baseline", "outage")) == pg["calls"]


def test_without_a_ledger_the_counter_is_read_at_the_window_edges() -> None:
    build, arrivals = _build(ledger=False)
    assert arrivals.max() < SCRAPES.max()  # a final scrape after the last call
    fig = build_figures(_scenario(), build)
    assert fig["pg"]["source"] == "metrics"
    calls = fig["pg"]["calls"]
    assert calls is not None
    # Not exact (the counter is only known at scrapes) but within a call or two of the
    # ledger; the old rule (last scrape before t0 to the last scrape) added ~20 warmup
    # calls and the whole drain.
    assert abs(calls - _count(arrivals, 0, 20)) <= 2
    outage = fig["phases"]["outage"]["pg"]["calls"]
    assert outage is not None and abs(outage - _count(arrivals, 10, 20)) <= 12
    baseline = fig["phases"]["baseline"]["pg"]["calls"]
    assert baseline is not None and abs(baseline - _count(arrivals, 0, 10)) <= 12


def test_target_counters_count_the_window_only() -> None:
    build, _ = _build()
    fig = build_figures(_scenario(), build)
    # 10 retries/s all along: exactly 10/s x 20 s in the measured window, none of the
    # 0.59 s before t0 and none of the drain.
    assert fig["pg"]["retries"] == RETRIES_PER_S * 20


def test_a_report_without_pg_source_counts_as_before() -> None:
    build, _ = _build(ledger=False)
    build.metrics = build.metrics[build.metrics["source"] != "pg"]
    fig = build_figures(_scenario(), build)
    assert fig["pg"]["source"] is None and fig["pg"]["calls"] is None
    json.dumps(fig)  # the figures stay plain JSON


def test_counter_at_interpolates_and_never_extrapolates() -> None:
    series = pd.Series([10.0, 20.0, 40.0], index=[1.0, 2.0, 4.0])
    assert counter_at(series, 1.5) == 15.0
    assert counter_at(series, 3.0) == 30.0
    assert counter_at(series, 0.0) == 10.0  # before the first scrape: the first value
    assert counter_at(series, 9.0) == 40.0  # after the last: the last value
    assert counter_delta(series, 1.5, 3.0) == 15.0
    assert counter_delta(series, 3.0, 1.0) == 0.0
    assert counter_delta(pd.Series(dtype=float), 0.0, 1.0) is None


def test_a_counter_that_appears_late_reads_zero_before() -> None:
    # A labelled counter is exposed only once it first counts: at the scrapes before
    # it is absent, which means 0, not "the value it will have".
    metrics = pd.DataFrame(
        [
            (1.0, "target", "shop_workers_busy", "{}", 1.0),
            (2.0, "target", "shop_workers_busy", "{}", 1.0),
            (3.0, "target", "shop_workers_busy", "{}", 1.0),
            (
                3.0,
                "target",
                "resilience4j_circuitbreaker_not_permitted_calls_total",
                '{"name":"pg"}',
                4.0,
            ),
            (4.0, "target", "shop_workers_busy", "{}", 1.0),
            (
                4.0,
                "target",
                "resilience4j_circuitbreaker_not_permitted_calls_total",
                '{"name":"pg"}',
                6.0,
            ),
        ],
        columns=METRICS_COLUMNS,
    )
    selector = Sel("resilience4j_circuitbreaker_not_permitted_calls_total")
    blocked = counter(metrics, "target", selector)
    assert blocked.to_dict() == {1.0: 0.0, 2.0: 0.0, 3.0: 4.0, 4.0: 6.0}
    assert counter_delta(blocked, 2.5, 4.0) == 4.0
    canon = canonical(metrics, PRESETS["shop"])
    rows = canon[canon["series"] == "blocked_calls"]
    assert rows["value"].tolist() == [0.0, 0.0, 4.0, 6.0]
    # A counter that never appears stays absent (no made-up zeros).
    assert counter(metrics, "target", Sel("shop_pg_retries_total")).empty


@pytest.mark.parametrize("offset", [0.0, 0.25, 0.59, 0.99])
def test_a_steady_counter_gives_the_same_count_wherever_the_scrapes_fall(offset: float) -> None:
    scrapes = T0 - 3.0 - offset + np.arange(30.0)
    series = pd.Series(RETRIES_PER_S * (scrapes - (T0 - 5.0)), index=scrapes)
    assert counter_delta(series, T0, T0 + 20.0) == pytest.approx(200.0)
