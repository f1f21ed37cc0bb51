"""A simulated build's frames, laid out as a real run's: samples, ledger and scrapes.

The scrapes are the rows ``harness.analysis.series.parse_text`` would make of the
shop's ``/metrics`` (``targets/shop/metrics.py``: the series the ``shop`` preset
reads, under the same names and labels) and of the gateway's
``pg_calls_received_total``, taken every ``metrics.interval`` and at the edges the
real scraper adds (the window's start, each phase's start and end, the load's stop),
so every figure is cut by the analysis as it cuts a real run's.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable

import pandas as pd

from harness.results.io import (
    LEDGER_DTYPES,
    METRICS_COLUMNS,
    SAMPLE_DTYPES,
    WORKER_COLUMN,
    with_ledger_defaults,
)
from harness.simulate.gateway import Gateway
from harness.simulate.node import NodeService
from harness.simulate.opossum import STATES
from harness.simulate.shop import Server, Shop
from targets.shop.dbpool import POOL_NAME
from targets.shop.payments import BREAKER_NAME, BULKHEAD_NAME, RETRY_NAME, TIME_LIMITER_NAME

Row = tuple[float, str, str, str, float]


def _labels(**labels: str) -> str:
    return json.dumps(dict(sorted(labels.items())), separators=(",", ":"))


class Scraper:
    """Reads the simulated shop and gateway as the harness's scraper reads the real ones."""

    def __init__(self, server: Shop | NodeService, gateway: Gateway, base: float) -> None:
        self.server = server
        self.gateway = gateway
        self.base = base
        self.rows: list[Row] = []
        self._seen = 0
        self._received: Counter[str] = Counter()

    def scrape(self) -> None:
        """One scrape of both sources at the clock's now."""
        t = self.base + self.server.clock.now
        rows = self.rows

        def add(series: str, value: float, labels: str = "{}", source: str = "target") -> None:
            rows.append((t, source, series, labels, float(value)))

        if isinstance(self.server, NodeService):
            _node(self.server, add)
        else:
            _shop(self.server, add)
        ledger = self.gateway.ledger
        for row in ledger[self._seen :]:
            self._received[row.phase] += 1
        self._seen = len(ledger)
        for phase, n in sorted(self._received.items()):
            add("pg_calls_received_total", n, _labels(phase=phase), source="pg")

    def frame(self) -> pd.DataFrame:
        frame = pd.DataFrame(self.rows, columns=METRICS_COLUMNS)
        return frame.astype({"t": "float64", "value": "float64"})


Add = Callable[..., None]


def _node(node: NodeService, add: Add) -> None:
    """The Node target's state in the shop preset's names (what the analysis reads)."""
    add("shop_workers_busy", sum(p.busy for p in node.pools))
    add("shop_workers_max", sum(p.size for p in node.pools))
    for outcome, n in sorted(node.vendor_calls.items()):
        add("shop_pg_calls_total", n, _labels(outcome=outcome))
    add("shop_pg_retries_total", node.retries)
    breaker = node.breaker
    if breaker is None:
        return
    state = breaker.current()
    for name in STATES:
        add("resilience4j_circuitbreaker_state", 1.0 if state == name else 0.0,
            _labels(name=BREAKER_NAME, state=name))  # fmt: skip
    add("resilience4j_circuitbreaker_not_permitted_calls_total", breaker.events["reject"],
        _labels(kind="not_permitted", name=BREAKER_NAME))  # fmt: skip
    let_through = breaker.events["fire"] - breaker.events["reject"]
    failed = breaker.events["failure"]
    for kind, n in (("successful", let_through - failed), ("failed", failed), ("ignored", 0)):
        labels = _labels(kind=kind, name=BREAKER_NAME)
        add("resilience4j_circuitbreaker_calls_seconds_count", max(n, 0), labels)
        add("resilience4j_circuitbreaker_calls_seconds_sum", 0.0, labels)


def _shop(shop: Shop, add: Add) -> None:
    """The shop's ``/metrics`` (``targets/shop/metrics.py``), as parsed."""
    layers = shop.layers
    add("shop_workers_busy", shop.busy)
    add("shop_workers_max", shop.workers)
    for outcome, n in sorted(layers.pg_calls.items()):
        add("shop_pg_calls_total", n, _labels(outcome=outcome))
    for status, n in sorted(shop.payments.items()):
        add("shop_payments_total", n, _labels(status=status))
    add("shop_pg_retries_total", layers.retries)
    for kind in ("successful_without_retry", "successful_with_retry",
                 "failed_without_retry", "failed_with_retry"):  # fmt: skip
        add("resilience4j_retry_calls_total", layers.retry_calls[kind],
            _labels(kind=kind, name=RETRY_NAME))  # fmt: skip
    for kind, (count, total) in layers.call_seconds.items():
        labels = _labels(kind=kind, name=BREAKER_NAME)
        add("resilience4j_circuitbreaker_calls_seconds_count", count, labels)
        add("resilience4j_circuitbreaker_calls_seconds_sum", total, labels)
    breaker = layers.breaker
    if breaker is not None:
        snapshot = breaker.metrics()
        for state in breaker.states:
            add("resilience4j_circuitbreaker_state", 1.0 if snapshot.state is state else 0.0,
                _labels(name=BREAKER_NAME, state=state.value))  # fmt: skip
        refused = _labels(kind="not_permitted", name=BREAKER_NAME)
        add("resilience4j_circuitbreaker_not_permitted_calls_total",
            snapshot.not_permitted_calls, refused)  # fmt: skip
        add("resilience4j_circuitbreaker_failure_rate", snapshot.failure_rate,
            _labels(name=BREAKER_NAME))  # fmt: skip
    db = shop.db
    if db is not None:
        pool = _labels(pool=POOL_NAME)
        add("hikaricp_connections_active", db.size - db.free, pool)
        add("hikaricp_connections_idle", db.free, pool)
        add("hikaricp_connections_pending", db.pending, pool)
        add("hikaricp_connections_max", db.size, pool)
        add("hikaricp_connections_timeout_total", db.timeouts, pool)
    bulkhead = layers.bulkhead
    if bulkhead is not None:
        name = _labels(name=BULKHEAD_NAME)
        add("resilience4j_bulkhead_available_concurrent_calls", bulkhead.free, name)
        add("resilience4j_bulkhead_max_allowed_concurrent_calls", bulkhead.size, name)
        add("shop_bulkhead_rejected_calls_total", bulkhead.refused,
            _labels(name=BULKHEAD_NAME, type="semaphore"))  # fmt: skip
    if layers.time_limit_s is not None:
        for kind in ("successful", "failed", "timeout"):
            add("resilience4j_timelimiter_calls_total", layers.time_limited[kind],
                _labels(kind=kind, name=TIME_LIMITER_NAME))  # fmt: skip


def samples_frame(shop: Server, base: float) -> pd.DataFrame:
    """One row per planned request, as the load generator writes them."""
    rows = shop.rows
    unfinished = [r.open for r in rows]
    frame = pd.DataFrame(
        {
            "endpoint": [r.endpoint for r in rows],
            "index": [r.index for r in rows],
            "intended_start": [base + r.intended for r in rows],
            "actual_start": [base + r.intended for r in rows],
            "end": [base + r.end if r.end is not None else float("nan") for r in rows],
            "status": [r.status for r in rows],
            "error": [
                "Unfinished" if u else r.error for r, u in zip(rows, unfinished, strict=True)
            ],
            "outcome": [r.outcome for r in rows],
        }
    ).astype(SAMPLE_DTYPES)
    frame = frame.sort_values("intended_start", kind="stable", ignore_index=True)
    frame[WORKER_COLUMN] = 0
    return frame.astype({WORKER_COLUMN: "int64"})


def ledger_frame(gateway: Gateway, base: float) -> pd.DataFrame:
    """Every call the simulated gateway received (``pg.parquet``)."""
    rows = gateway.ledger
    frame = pd.DataFrame(
        {
            "arrival": [base + r.arrival for r in rows],
            "key": [r.key for r in rows],
            "attempt": [r.attempt for r in rows],
            "phase": [r.phase for r in rows],
            "fault": [r.fault for r in rows],
            "status": [r.status for r in rows],
            "decision": [r.decision for r in rows],
            "duration_s": [r.duration_s for r in rows],
            "client_gone": [r.client_gone for r in rows],
            "path": [r.path for r in rows],
        }
    )
    return with_ledger_defaults(frame).astype(LEDGER_DTYPES)
