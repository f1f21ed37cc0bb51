"""The payment flow, and the composition of its resilience: Retry(CircuitBreaker(call)).

Composition follows Resilience4j's default aspect order, Retry outside the
breaker: every attempt passes through the breaker and fills a slot of its
window, and a refused attempt (not permitted) is not retried.

This module is also where the shop says what its gateway errors mean, in the
two configs, as a Spring Boot service would in ``application.yml``:
Retry retries what a second attempt could change (timeouts, broken connections,
5xx), never a 4xx, whose answer will not change, nor a breaker refusal; the
breaker counts every error as a failure except a 4xx, which says the request
was bad, not that the gateway is sick.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from targets.shop.config import ShopConfig
from targets.shop.db import Store
from targets.shop.pg_client import (
    PgClient,
    PgConnectionError,
    PgRejected,
    PgServerError,
    PgTimeout,
)
from targets.shop.resilience import (
    CallKind,
    CallNotPermittedError,
    CircuitBreaker,
    CircuitBreakerConfig,
    Retry,
    RetryConfig,
)

# Resilience4j keeps one registry per pattern, so a Spring service names both instances
# after the client (`resilience4j.retry.instances.pgClient`, `...circuitbreaker.instances
# .pgClient`); the metric labels of both follow, as the presets expect.
BREAKER_NAME = "pgClient"
RETRY_NAME = "pgClient"


def pg_retry_config(settings: RetryConfig) -> RetryConfig:
    """The scenario's retry settings plus what the shop retries."""
    return dataclasses.replace(
        settings,
        retry_exceptions=(PgTimeout, PgConnectionError, PgServerError),
        ignore_exceptions=(CallNotPermittedError,),
    )


def pg_breaker_config(settings: CircuitBreakerConfig) -> CircuitBreakerConfig:
    """The scenario's breaker settings plus what the shop does not count as a failure."""
    return dataclasses.replace(settings, ignore_exceptions=(PgRejected,))


_RETRY_POLICY = pg_retry_config(RetryConfig())
_BREAKER_POLICY = pg_breaker_config(CircuitBreakerConfig())


def is_retryable(error: BaseException) -> bool:
    """Whether the shop's Retry retries ``error`` (:func:`pg_retry_config`'s lists)."""
    return _RETRY_POLICY.should_retry(error)


def is_recorded_failure(error: BaseException) -> bool:
    """Whether the shop's breaker counts ``error`` as a failure (:func:`pg_breaker_config`)."""
    return _BREAKER_POLICY.classify(error) == "failed"


@dataclass(frozen=True)
class PaymentResult:
    """What the shop answers: APPROVED, FAILED (gateway refused) or TIMEOUT_UNKNOWN."""

    payment_id: str
    status: str
    reason: str | None
    attempts: int


@dataclass(frozen=True)
class PaymentStats:
    """A consistent copy of the service's counters, for the metrics exporter."""

    pg_calls: dict[str, int]
    """Gateway calls by outcome (success, timeout, server_error, rejected, ...)."""
    payments: dict[str, int]
    """Payments by final status."""
    call_seconds: dict[CallKind, tuple[int, float]]
    """(count, seconds) of gateway calls by how the breaker counts them."""


def _outcome_of(error: BaseException | None) -> str:
    """Name a gateway call's outcome for the ``shop_pg_calls_total`` counter."""
    if error is None:
        return "success"
    if isinstance(error, PgTimeout):
        return "timeout"
    if isinstance(error, PgServerError):
        return "server_error"
    if isinstance(error, PgRejected):
        return "rejected"
    if isinstance(error, PgConnectionError):
        return "connection_error"
    return "other"


class PaymentService:
    """Owns the gateway client, the Retry and (in the breaker profile) the CircuitBreaker."""

    def __init__(
        self,
        config: ShopConfig,
        store: Store,
        client: PgClient,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.store = store
        self.client = client
        self.retry = Retry(RETRY_NAME, pg_retry_config(config.retry))
        # Also classifies calls for the timing series in the retry-only profile.
        self.breaker_config = pg_breaker_config(config.circuitbreaker or CircuitBreakerConfig())
        self.breaker: CircuitBreaker | None = None
        if config.profile == "retry-circuit-breaker" and config.circuitbreaker is not None:
            self.breaker = CircuitBreaker(BREAKER_NAME, self.breaker_config, clock=clock)
        self._lock = threading.Lock()
        self._pg_calls: dict[str, int] = {}
        self._payments: dict[str, int] = {}
        self._call_seconds: dict[CallKind, tuple[int, float]] = {}

    def stats(self) -> PaymentStats:
        """Copy the counters under the service's lock."""
        with self._lock:
            return PaymentStats(
                pg_calls=dict(self._pg_calls),
                payments=dict(self._payments),
                call_seconds=dict(self._call_seconds),
            )

    def _call_gateway(self, key: str, amount: int, order: str) -> dict[str, Any]:
        """One attempt: a real call to the gateway, counted and timed."""
        started = time.monotonic()
        error: BaseException | None = None
        try:
            return self.client.approve(key, amount, order)
        except BaseException as exc:
            error = exc
            raise
        finally:
            elapsed = time.monotonic() - started
            kind: CallKind = "successful" if error is None else self.breaker_config.classify(error)
            outcome = _outcome_of(error)
            with self._lock:
                self._pg_calls[outcome] = self._pg_calls.get(outcome, 0) + 1
                count, total = self._call_seconds.get(kind, (0, 0.0))
                self._call_seconds[kind] = (count + 1, total + elapsed)

    def pay(self, key: str, amount: int) -> PaymentResult:
        """Create the payment, ask the gateway, and record the final status."""
        payment_id = self.store.create_payment(key, amount)
        attempts = 0

        def attempt(n: int) -> dict[str, Any]:
            nonlocal attempts
            attempts = n
            if self.breaker is None:
                return self._call_gateway(key, amount, payment_id)
            breaker = self.breaker
            return breaker.call(lambda: self._call_gateway(key, amount, payment_id))

        status, reason = "APPROVED", None
        try:
            self.retry.call(attempt)
        except PgRejected as exc:
            status, reason = "FAILED", f"pg_{exc.status}"
        except CallNotPermittedError:
            status, reason = "TIMEOUT_UNKNOWN", "not_permitted"
        except Exception as exc:  # noqa: BLE001 - every other failure leaves the outcome unknown
            status, reason = "TIMEOUT_UNKNOWN", _outcome_of(exc)
        self.store.finish_payment(payment_id, status, reason)
        with self._lock:
            self._payments[status] = self._payments.get(status, 0) + 1
        return PaymentResult(payment_id, status, reason, attempts)
