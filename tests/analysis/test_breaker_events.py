"""A breaker that opens twice in a row: opossum-prometheus missing its halfOpen events.

opossum-prometheus 0.3.0 with opossum 9 counts only events that already have a
listener, and opossum has none for ``halfOpen``: on a stock service every failed
probe reads as the breaker staying open. targets/node-gateway registers its own
listener first, so its captures (tests/data/opossum_sequence_*) count halfOpen;
``opossum_stock_*`` are captures of a stock breaker (``capture_opossum_stock.js``).
"""

from __future__ import annotations

import pandas as pd
import pytest

from harness.analysis.breaker_events import reopens_without_half_open
from harness.analysis.presets import BREAKER_STATES, PRESETS
from harness.analysis.replicas import target_series
from harness.analysis.series import map_canonical, parse_text
from harness.results.io import METRICS_COLUMNS
from harness.results.manifest import build_record
from tests.analysis.test_presets import SEQUENCE, _scrapes


@pytest.mark.parametrize(
    ("counts", "reopens"),
    [
        ([(0, 0, 0)], 0),
        ([(1, 0, 0), (1, 1, 0), (2, 1, 0), (2, 2, 0), (2, 2, 1)], 0),  # probes counted
        ([(1, 0, 0), (2, 0, 0), (3, 0, 0), (3, 0, 1)], 2),  # halfOpen never counted
        ([(3, 0, 0)], 2),  # three opens within one interval
        ([(1, 0, 0), (1, 0, 1), (2, 0, 1)], 0),  # closed by hand between: no claim
        ([(1, 1, 0), (2, 1, 1)], 0),  # an interval with a close: order unknown, no claim
        ([(2, 0, 0), (0, 0, 0), (1, 0, 0)], 1),  # restarted: counts start again
    ],
)
def test_reopens_without_half_open(counts: list[tuple[int, int, int]], reopens: int) -> None:
    frame = pd.DataFrame(counts, columns=["open", "half_open", "close"], dtype=float)
    assert reopens_without_half_open(frame) == reopens


def _stock_service(opens: list[int], closes: list[int], source: str = "target") -> pd.DataFrame:
    """Scrapes of a stock opossum-prometheus: open and close count, halfOpen never does."""
    rows = []
    for t, (opened, closed) in enumerate(zip(opens, closes, strict=True)):
        text = (
            "# TYPE circuit counter\n"
            f'circuit{{name="vendor",event="fire"}} {10 * (t + 1)}\n'
            f'circuit{{name="vendor",event="open"}} {opened}\n'
            f'circuit{{name="vendor",event="close"}} {closed}\n'
        )
        rows += parse_text(text, float(t), source)
    return pd.DataFrame(rows, columns=METRICS_COLUMNS)


def test_a_stock_opossum_service_gets_a_warning_naming_the_cause() -> None:
    canon = map_canonical(_stock_service([0, 1, 2, 3, 3], [0, 0, 0, 0, 1]), PRESETS["opossum"])
    assert len(canon.warnings) == 1
    warning = canon.warnings[0]
    assert "opened again 2 time(s) with no 'halfOpen' event counted" in warning
    assert "opossum-prometheus 0.3.0 with opossum 9" in warning
    assert "breaker.on('halfOpen', ...)" in warning


def test_a_real_stock_breaker_reads_open_throughout_and_gets_the_warning() -> None:
    stock = _scrapes(*(f"opossum_stock_{i}" for i in range(1, 5)))
    canon = map_canonical(stock, PRESETS["opossum"])
    states = canon.frame.loc[canon.frame["series"] == "breaker_state", "value"].tolist()
    assert states == [float(BREAKER_STATES["open"])] * 4  # its three probes never show
    assert len(canon.warnings) == 1
    assert "opened again 3 time(s) with no 'halfOpen' event counted" in canon.warnings[0]


def test_node_gateway_which_registers_the_listener_gets_none() -> None:
    assert map_canonical(_scrapes(*SEQUENCE), PRESETS["opossum"]).warnings == []


def test_a_replica_s_warning_names_the_replica() -> None:
    metrics = pd.concat(
        [
            _stock_service([0, 1, 2], [0, 0, 0], "target.0"),
            _stock_service([0, 1, 1], [0, 0, 1], "target.1"),
        ],
        ignore_index=True,
    )
    warnings = target_series(
        metrics, build_record("b", {"preset": "opossum", "replicas": 2})
    ).warnings
    assert len(warnings) == 1 and warnings[0].startswith("target.0: the breaker opened again 1")
