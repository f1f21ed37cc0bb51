"""Prometheus exposition of the shop: worker pool, gateway calls, breaker and retry.

Breaker and retry series use the Resilience4j Micrometer names so the harness
reads a Spring Boot service and this shop through the same presets. Values are
read from the live objects at scrape time, so there is no second bookkeeping.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from targets.shop.payments import BREAKER_NAME, PaymentService
from targets.shop.resilience import CallKind, State


class WorkerGauge:
    """Counts request threads currently inside the application (busy workers)."""

    def __init__(self, max_workers: int) -> None:
        self.max_workers = max_workers
        self._busy = 0
        self._lock = threading.Lock()

    def enter(self) -> None:
        with self._lock:
            self._busy += 1

    def leave(self) -> None:
        with self._lock:
            self._busy -= 1

    @property
    def busy(self) -> int:
        return self._busy


class ShopCollector(Collector):
    """Builds every shop series from the service's counters on each scrape."""

    def __init__(self, service: PaymentService, workers: WorkerGauge) -> None:
        self.service = service
        self.workers = workers

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "shop_workers_busy", "Request threads handling a request", value=self.workers.busy
        )
        yield GaugeMetricFamily(
            "shop_workers_max", "Request thread pool size", value=self.workers.max_workers
        )
        svc = self.service
        stats = svc.stats()
        calls = CounterMetricFamily(
            "shop_pg_calls", "Calls sent to the payment gateway, by outcome", labels=["outcome"]
        )
        for outcome, n in sorted(stats.pg_calls.items()):
            calls.add_metric([outcome], n)
        yield calls
        pays = CounterMetricFamily("shop_payments", "Payments by final status", labels=["status"])
        for status, n in sorted(stats.payments.items()):
            pays.add_metric([status], n)
        yield pays

        retry = svc.retry.metrics()
        yield CounterMetricFamily(
            "shop_pg_retries", "Extra gateway attempts made by Retry", value=retry.retries
        )
        retry_calls = CounterMetricFamily(
            "resilience4j_retry_calls", "Retry outcomes", labels=["name", "kind"]
        )
        for kind in (
            "successful_without_retry",
            "successful_with_retry",
            "failed_without_retry",
            "failed_with_retry",
        ):
            retry_calls.add_metric([svc.retry.name, kind], getattr(retry, kind))
        yield retry_calls

        timed = SummaryMetricFamily(
            "resilience4j_circuitbreaker_calls_seconds",
            "Gateway calls by kind (successful, failed, ignored)",
            labels=["name", "kind"],
        )
        # Named after the breaker even in the retry-only profile, as Spring's series are.
        kinds: tuple[CallKind, ...] = ("successful", "failed", "ignored")
        for kind in kinds:
            count, total = stats.call_seconds.get(kind, (0, 0.0))
            timed.add_metric([BREAKER_NAME, kind], count_value=count, sum_value=total)
        yield timed

        breaker = svc.breaker
        if breaker is None:
            return
        snapshot = breaker.metrics()
        state = GaugeMetricFamily(
            "resilience4j_circuitbreaker_state",
            "1 for the breaker's current state",
            labels=["name", "state"],
        )
        for s in State:
            state.add_metric([breaker.name, s.value], 1.0 if snapshot.state is s else 0.0)
        yield state
        refused = CounterMetricFamily(
            "resilience4j_circuitbreaker_not_permitted_calls",
            "Calls refused by the breaker",
            labels=["name", "kind"],
        )
        refused.add_metric([breaker.name, "not_permitted"], snapshot.not_permitted_calls)
        yield refused
        rate = GaugeMetricFamily(
            "resilience4j_circuitbreaker_failure_rate",
            "Failure rate of the window, percent (-1 until minimum calls)",
            labels=["name"],
        )
        rate.add_metric([breaker.name], snapshot.failure_rate)
        yield rate


def make_registry(service: PaymentService, workers: WorkerGauge) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ShopCollector(service, workers))
    return registry
