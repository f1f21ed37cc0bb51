"""Prometheus exposition of the shop: worker pool, gateway calls and every resilience layer.

Breaker, retry, bulkhead and time limiter series use the Resilience4j Micrometer
names so the harness reads a Spring Boot service and this shop through the same
presets; a layer's series appear when the composition has the layer. The naive
breaker reports its state in the same ``resilience4j_circuitbreaker_state``
series (closed and open only: it has no half-open). Fallbacks have no
Micrometer series; theirs are ``shop_fallback_calls_total{layer,kind}``
(answers given; a cached fallback's are its cached answers) and
``shop_fallback_cache_misses_total{layer}`` (errors a cached fallback had no
fresh answer for). A build's ``db-pool`` has HikariCP's Micrometer series
(``hikaricp_connections_active/idle/pending/max``, ``..._timeout_total``,
``..._acquire_seconds``, ``..._usage_seconds``). Values are read from the live
objects at scrape time, so there is no second bookkeeping.
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

from targets.shop.dbpool import POOL_NAME, ConnectionPool
from targets.shop.payments import BREAKER_NAME, PaymentService
from targets.shop.resilience import CallKind


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

    def __init__(
        self, service: PaymentService, workers: WorkerGauge, pool: ConnectionPool | None = None
    ) -> None:
        self.service = service
        self.workers = workers
        self.pool = pool

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
        yield CounterMetricFamily(
            "shop_pg_retries_throttled",
            "Retries the retry budget refused (0 without retry.budget)",
            value=retry.throttled,
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
        # There even in the retry-only profile, all zero, as a Spring service's configured
        # breaker instance that no call passes is.
        kinds: tuple[CallKind, ...] = ("successful", "failed", "ignored")
        for kind in kinds:
            count, total = stats.call_seconds.get(kind, (0, 0.0))
            timed.add_metric([BREAKER_NAME, kind], count_value=count, sum_value=total)
        yield timed

        yield from self._layers()
        yield from self._pool()

    def _pool(self) -> Iterator[Metric]:
        """HikariCP's series, when the build has a DB pool."""
        if self.pool is None:
            return
        stats = self.pool.stats()
        yield from _gauges(
            "hikaricp_connections_",
            ("pool", POOL_NAME),
            ("active", stats.active, "Connections in use"),
            ("idle", stats.idle, "Connections free"),
            ("pending", stats.pending, "Threads waiting for a connection"),
            ("max", stats.max, "Connections in the pool"),
        )
        timeouts = CounterMetricFamily(
            "hikaricp_connections_timeout",
            "Threads that waited connection-timeout and got no connection",
            labels=["pool"],
        )
        timeouts.add_metric([POOL_NAME], stats.timeouts)
        yield timeouts
        for name, count, total, help_text in (
            ("acquire", stats.acquired, stats.acquire_seconds, "Waits for a connection"),
            ("usage", stats.released, stats.usage_seconds, "Holds of a connection"),
        ):
            summary = SummaryMetricFamily(
                f"hikaricp_connections_{name}_seconds", help_text, labels=["pool"]
            )
            summary.add_metric([POOL_NAME], count_value=count, sum_value=total)
            yield summary

    def _layers(self) -> Iterator[Metric]:
        """The series of the layers the composition has."""
        svc = self.service
        yield from self._breaker()
        if svc.bulkhead is not None:
            bulkhead = svc.bulkhead.metrics()
            yield from _gauges(
                "resilience4j_bulkhead_",
                ("name", svc.bulkhead.name),
                (
                    "available_concurrent_calls",
                    bulkhead.available_concurrent_calls,
                    "Permits the bulkhead has free",
                ),
                (
                    "max_allowed_concurrent_calls",
                    bulkhead.max_allowed_concurrent_calls,
                    "Permits the bulkhead has in all",
                ),
            )
        if svc.thread_pool_bulkhead is not None:
            pool = svc.thread_pool_bulkhead.metrics()
            yield from _gauges(
                "resilience4j_bulkhead_",
                ("name", svc.thread_pool_bulkhead.name),
                ("thread_pool_size", pool.thread_pool_size, "Threads in the bulkhead's pool"),
                ("core_thread_pool_size", pool.core_thread_pool_size, "Core threads of the pool"),
                ("max_thread_pool_size", pool.max_thread_pool_size, "Most threads of the pool"),
                ("active_thread_count", pool.active_thread_count, "Threads running a call"),
                ("queue_depth", pool.queue_depth, "Calls waiting in the bulkhead's queue"),
                ("queue_capacity", pool.queue_capacity, "Size of the bulkhead's queue"),
            )
        refused = [
            (layer.name, kind, layer.metrics().rejected_calls)
            for layer, kind in (
                (svc.bulkhead, "semaphore"),
                (svc.thread_pool_bulkhead, "threadpool"),
            )
            if layer is not None
        ]
        if refused:
            rejected = CounterMetricFamily(
                "shop_bulkhead_rejected_calls",
                "Calls a bulkhead refused (BulkheadFullException)",
                labels=["name", "type"],
            )
            for name, kind, n in refused:
                rejected.add_metric([name, kind], n)
            yield rejected
        if svc.time_limiter is not None:
            limited = svc.time_limiter.metrics()
            calls = CounterMetricFamily(
                "resilience4j_timelimiter_calls",
                "Calls by how the time limiter saw them end",
                labels=["name", "kind"],
            )
            for kind in ("successful", "failed", "timeout"):
                calls.add_metric([svc.time_limiter.name, kind], getattr(limited, kind))
            yield calls
        if svc.fallbacks:
            answers = CounterMetricFamily(
                "shop_fallback_calls",
                "Answers a fallback gave in place of an error, by its layer and kind",
                labels=["layer", "kind"],
            )
            misses = CounterMetricFamily(
                "shop_fallback_cache_misses",
                "Errors a cached fallback had no fresh answer for",
                labels=["layer"],
            )
            for layer, fallback in sorted(svc.fallbacks.items()):
                counts = fallback.metrics()
                answers.add_metric([layer, fallback.config.kind], counts.answers)
                if fallback.config.kind == "cached":
                    misses.add_metric([layer], counts.cache_misses)
            yield answers
            if any(f.config.kind == "cached" for f in svc.fallbacks.values()):
                yield misses

    def _breaker(self) -> Iterator[Metric]:
        breaker = self.service.breaker
        if breaker is None:
            return
        snapshot = breaker.metrics()
        state = GaugeMetricFamily(
            "resilience4j_circuitbreaker_state",
            "1 for the breaker's current state",
            labels=["name", "state"],
        )
        for s in breaker.states:
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


def _gauges(prefix: str, label: tuple[str, str], *rows: tuple[str, float, str]) -> Iterator[Metric]:
    """One gauge per (name, value, help) row, each with the one ``label`` (name, value)."""
    for name, value, help_text in rows:
        gauge = GaugeMetricFamily(f"{prefix}{name}", help_text, labels=[label[0]])
        gauge.add_metric([label[1]], value)
        yield gauge


def make_registry(
    service: PaymentService, workers: WorkerGauge, pool: ConnectionPool | None = None
) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ShopCollector(service, workers, pool))
    return registry
