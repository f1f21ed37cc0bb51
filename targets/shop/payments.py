"""The payment flow: record the payment, call the gateway through Retry(CircuitBreaker(call)).

Composition follows Resilience4j's default aspect order, Retry outside the
breaker: every attempt passes through the breaker and fills a slot of its
window, and a refused attempt (not permitted) is not retried.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from targets.shop.breaker import CallNotPermittedError, CircuitBreaker
from targets.shop.config import ShopConfig
from targets.shop.db import Store
from targets.shop.pg_client import (
    PgClient,
    PgConnectionError,
    PgRejected,
    PgServerError,
    PgTimeout,
    is_recorded_failure,
    is_retryable,
)
from targets.shop.retry import Retry

BREAKER_NAME = "pgClient"


@dataclass(frozen=True)
class PaymentResult:
    """What the shop answers: APPROVED, FAILED (gateway refused) or TIMEOUT_UNKNOWN."""

    payment_id: str
    status: str
    reason: str | None
    attempts: int


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
        self.retry = Retry(BREAKER_NAME, config.retry, should_retry=is_retryable)
        self.breaker: CircuitBreaker | None = None
        if config.profile == "retry-circuit-breaker" and config.circuitbreaker is not None:
            self.breaker = CircuitBreaker(
                BREAKER_NAME, config.circuitbreaker, clock=clock, is_recorded=is_recorded_failure
            )
        self._lock = threading.Lock()
        self.pg_calls: dict[str, int] = {}
        self.payments: dict[str, int] = {}
        self.call_seconds: dict[str, list[float]] = {}

    def _count(self, table: dict[str, int], key: str) -> None:
        with self._lock:
            table[key] = table.get(key, 0) + 1

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
            kind = "successful" if error is None else "failed"
            if error is not None and not is_recorded_failure(error):
                kind = "ignored"
            with self._lock:
                outcome = _outcome_of(error)
                self.pg_calls[outcome] = self.pg_calls.get(outcome, 0) + 1
                count_sum = self.call_seconds.setdefault(kind, [0.0, 0.0])
                count_sum[0] += 1
                count_sum[1] += elapsed

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
        self._count(self.payments, status)
        return PaymentResult(payment_id, status, reason, attempts)
