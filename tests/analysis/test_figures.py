"""Figures from raw samples: latency counts from the intended start; warmup is excluded."""

import numpy as np
import pandas as pd
import pytest

from harness.analysis.cuts import REDUCERS, replica_reader
from harness.analysis.endpoints import endpoint_stats
from harness.analysis.series import counter_delta


def _samples(intended: list[float], late: float, service: float, status: int = 200) -> pd.DataFrame:
    n = len(intended)
    start = np.array(intended) + late
    return pd.DataFrame(
        {
            "endpoint": ["p"] * n,
            "index": range(n),
            "intended_start": intended,
            "actual_start": start,
            "end": start + service,
            "status": [status] * n,
            "error": [""] * n,
            "outcome": [""] * n,
        }
    )


def test_latency_includes_the_time_a_request_waited_to_be_sent() -> None:
    frame = _samples([100.0 + i * 0.1 for i in range(100)], late=0.5, service=0.25)
    stats = endpoint_stats(frame, start=100.0, end=110.0, offered_rps=10)
    assert stats["requests"] == 100
    assert stats["latency_s"]["p95"] == pytest.approx(0.75)
    assert stats["service_time_s"]["p95"] == pytest.approx(0.25)
    assert stats["max_lateness_s"] == pytest.approx(0.5)
    assert stats["achieved_rps"] == pytest.approx(10.0)


def test_warmup_and_after_window_are_excluded() -> None:
    warm = _samples([95.0 + i * 0.1 for i in range(50)], late=0, service=9.0)
    measured = _samples([100.0 + i * 0.1 for i in range(100)], late=0, service=0.01)
    after = _samples([110.0 + i * 0.1 for i in range(10)], late=0, service=9.0)
    frame = pd.concat([warm, measured, after], ignore_index=True)
    stats = endpoint_stats(frame, start=100.0, end=110.0, offered_rps=10)
    assert stats["requests"] == 100
    assert stats["latency_s"]["max"] == pytest.approx(0.01)


def test_percentiles_and_errors() -> None:
    ok = _samples([100.0 + i * 0.01 for i in range(90)], late=0, service=0.1)
    bad = _samples([101.0 + i * 0.01 for i in range(10)], late=0, service=3.0, status=503)
    bad["outcome"] = "not_permitted"
    frame = pd.concat([ok, bad], ignore_index=True)
    stats = endpoint_stats(frame, start=100.0, end=110.0, offered_rps=10)
    assert stats["success_pct"] == 90.0
    assert stats["errors"] == {"not_permitted": 10}
    assert stats["latency_s"]["p50"] == pytest.approx(0.1)
    assert stats["latency_s"]["p99"] == pytest.approx(3.0)


def test_unfinished_requests_are_counted() -> None:
    frame = _samples([100.0, 100.1], late=0, service=0.1)
    frame.loc[1, "end"] = np.nan
    frame.loc[1, "status"] = 0
    stats = endpoint_stats(frame, start=100.0, end=110.0, offered_rps=10)
    assert stats["unfinished"] == 1 and stats["requests"] == 2


def test_counter_delta_and_a_gauges_reducers() -> None:
    counter = pd.Series([0.0, 5.0, 9.0, 20.0], index=[1.0, 2.0, 3.0, 4.0])
    assert counter_delta(counter, 2.0, 4.0) == 15.0
    # Read at each edge between the scrapes around it: 14.5 at 3.5 s, 0 before the first.
    assert counter_delta(counter, 0.5, 3.5) == 14.5
    assert counter_delta(counter, 1.5, 3.5) == 12.0
    assert counter_delta(pd.Series(dtype=float), 0, 1) is None
    gauge = pd.Series([1.0, 200.0, 200.0, 3.0], index=[1.0, 2.0, 3.0, 4.0])
    gauges = replica_reader({"gauge": gauge})
    read = {
        stat: REDUCERS[stat](gauges, "gauge", 2.0, 3.0, None) for stat in ("max", "mean", "p50")
    }
    assert read == {"max": 200.0, "mean": 200.0, "p50": 200.0}
