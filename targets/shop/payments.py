"""The payment flow, and the composition of its resilience, as data (product-detail reads,
``targets.shop.catalogue``, pass the same layers).

The layers around each gateway call are the build's ``resilience`` list,
outermost first, or Resilience4j's default aspect order over the configured
layers: ``Retry ( CircuitBreaker ( TimeLimiter ( Bulkhead ( call ) ) ) )``.
So the two profiles keep their composition: ``retry-only`` is Retry(call),
``retry-circuit-breaker`` Retry(CircuitBreaker(call)), where every attempt
passes through the breaker and fills a slot of its window, and a refused
attempt (not permitted) is not retried. A fallback sits right outside the
layer it is attached to; the top-level one outside everything.

This module is also where the shop says what its gateway errors mean, in the
configs, as a Spring Boot service would in ``application.yml``: Retry retries
what a second attempt could change (timeouts, the time limiter's included,
broken connections, 5xx), never a 4xx, whose answer will not change, nor a
refusal of a breaker or a bulkhead; the breakers count every error as a
failure except a 4xx, which says the request was bad, not that the gateway is
sick; a fallback answers for every error except a 4xx, which is an answer
already (the payment was declined).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

from targets.shop.config import OUTERMOST, BreakerConfig, ShopConfig
from targets.shop.db import Store
from targets.shop.pg_client import (
    PgClient,
    PgConnectionError,
    PgRejected,
    PgServerError,
    PgTimeout,
)
from targets.shop.resilience import (
    Bulkhead,
    BulkheadFullError,
    CallKind,
    CallNotPermittedError,
    CircuitBreaker,
    CircuitBreakerConfig,
    DecorateSupplier,
    Decorators,
    Fallback,
    FallbackAnswer,
    FallbackConfig,
    NaiveCircuitBreaker,
    Retry,
    RetryConfig,
    ThreadPoolBulkhead,
    TimeLimiter,
    TimeLimitExceededError,
    make_budget,
)
from targets.shop.resilience.decorators import (
    BULKHEAD,
    CIRCUIT_BREAKER,
    RETRY,
    THREAD_POOL_BULKHEAD,
    TIME_LIMITER,
)

# Resilience4j keeps one registry per pattern, so a Spring service names every instance
# after the client (`resilience4j.retry.instances.pgClient`, `...circuitbreaker.instances
# .pgClient`); the metric labels follow, as the presets expect.
BREAKER_NAME = "pgClient"
RETRY_NAME = "pgClient"
BULKHEAD_NAME = "pgClient"
TIME_LIMITER_NAME = "pgClient"

B = TypeVar("B", bound=BreakerConfig)
R = TypeVar("R")


REFUSALS: dict[str, type[Exception]] = {
    "io.github.resilience4j.circuitbreaker.CallNotPermittedException": CallNotPermittedError,
    "io.github.resilience4j.bulkhead.BulkheadFullException": BulkheadFullError,
}
"""The shop's refusals by Resilience4j's names (``retry.ignore-exceptions``)."""


def pg_retry_config(settings: RetryConfig, ignores: tuple[str, ...] | None = None) -> RetryConfig:
    """The scenario's retry settings plus what the shop retries: the gateway's timeouts,
    broken connections and 5xx, and the refusals not in ``ignores`` (None: neither refusal
    is retried, as seed 000's configuration says; ``()``: both are, as Resilience4j's
    defaults, which retry every exception, do)."""
    names = tuple(REFUSALS) if ignores is None else ignores
    ignored = tuple(REFUSALS[name] for name in names)
    retried = tuple(error for name, error in REFUSALS.items() if name not in names)
    return dataclasses.replace(
        settings,
        retry_exceptions=(
            PgTimeout,
            PgConnectionError,
            PgServerError,
            TimeLimitExceededError,
            *retried,
        ),
        ignore_exceptions=ignored,
    )


def pg_breaker_config(settings: B) -> B:
    """The scenario's breaker settings (either kind) plus what the shop does not count as
    a failure."""
    return dataclasses.replace(settings, ignore_exceptions=(PgRejected,))


def pg_fallback_config(settings: FallbackConfig) -> FallbackConfig:
    """The scenario's fallback plus what it never answers for: a decline is an answer."""
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
    """What the shop answers: APPROVED, FAILED (gateway refused) or TIMEOUT_UNKNOWN.

    A fallback's answer says which kind answered: ``error`` leaves the payment
    TIMEOUT_UNKNOWN, ``value`` (the seed's ``PaymentResult.circuitOpen``) records it
    FAILED and answers the fixed ``value``, ``cached`` answers the gateway's last
    approval of the same idempotency key (APPROVED). ``reason`` stays the error the
    fallback answered for (``not_permitted``, ``timeout``, ...).
    """

    payment_id: str
    status: str
    reason: str | None
    attempts: int
    fallback: str | None = None
    """The kind of fallback that answered, if one did."""
    value: Any = None
    """The fallback's value (kind ``value``) or cached answer (kind ``cached``)."""


@dataclass(frozen=True)
class PaymentStats:
    """A consistent copy of the service's counters, for the metrics exporter."""

    pg_calls: dict[str, int]
    """Gateway calls by outcome (success, timeout, server_error, rejected, ...)."""
    payments: dict[str, int]
    """Payments by final status."""
    call_seconds: dict[CallKind, tuple[int, float]]
    """(count, seconds) of the calls the breaker let through, by how it recorded them
    (Resilience4j's ``resilience4j_circuitbreaker_calls_seconds``): one per attempt with
    Retry outside the breaker, one per payment with the breaker outside; none without a
    breaker."""


def outcome_of(error: BaseException | None) -> str:
    """Name a gateway call's outcome for the ``shop_pg_calls_total`` counter (and the
    ``X-Outcome`` of an answer that stands in for it)."""
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
    if isinstance(error, CallNotPermittedError):
        return "not_permitted"
    if isinstance(error, BulkheadFullError):
        return "bulkhead_full"
    if isinstance(error, TimeLimitExceededError):
        return "time_limit"
    return "other"


def _noting_end(call: Callable[[], R], note: Callable[[BaseException | None], None]) -> R:
    """``call``'s result, after ``note`` is told how it ended (the error it raised, or None)."""
    error: BaseException | None = None
    try:
        return call()
    except BaseException as exc:
        error = exc
        raise
    finally:
        note(error)


class PaymentService:
    """Owns the gateway client and the layers of the composition (``config.layers``)."""

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
        self.layers = config.layers
        # Always there, so its series are exported even when the composition leaves it out.
        budget = config.retry_budget
        self.retry = Retry(
            RETRY_NAME,
            pg_retry_config(config.retry, config.retry_ignores),
            budget=None if budget is None else make_budget(budget, clock),
        )
        self.breaker_config = pg_breaker_config(config.circuitbreaker or CircuitBreakerConfig())
        self.breaker: CircuitBreaker | NaiveCircuitBreaker | None = None
        if CIRCUIT_BREAKER in self.layers:
            if isinstance(self.breaker_config, CircuitBreakerConfig):
                self.breaker = CircuitBreaker(BREAKER_NAME, self.breaker_config, clock=clock)
            else:
                self.breaker = NaiveCircuitBreaker(BREAKER_NAME, self.breaker_config, clock=clock)
        self.bulkhead: Bulkhead | None = None
        if config.bulkhead is not None and BULKHEAD in self.layers:
            self.bulkhead = Bulkhead(BULKHEAD_NAME, config.bulkhead)
        self.thread_pool_bulkhead: ThreadPoolBulkhead | None = None
        if config.thread_pool_bulkhead is not None and THREAD_POOL_BULKHEAD in self.layers:
            self.thread_pool_bulkhead = ThreadPoolBulkhead(
                BULKHEAD_NAME, config.thread_pool_bulkhead
            )
        self.time_limiter: TimeLimiter | None = None
        if config.timelimiter is not None and TIME_LIMITER in self.layers:
            self.time_limiter = TimeLimiter(TIME_LIMITER_NAME, config.timelimiter)
        self.fallbacks = {
            layer: Fallback(layer, pg_fallback_config(settings), clock=clock)
            for layer, settings in config.fallbacks.items()
        }
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
        return self.counted(lambda: self.client.approve(key, amount, order))

    def counted(self, call: Callable[[], R]) -> R:
        """One attempt of any call to the gateway (an approval, a catalogue read), counted
        in ``shop_pg_calls_total``."""
        return _noting_end(call, self._count_outcome)

    def _count_outcome(self, error: BaseException | None) -> None:
        outcome = outcome_of(error)
        with self._lock:
            self._pg_calls[outcome] = self._pg_calls.get(outcome, 0) + 1

    def _timed_by_breaker(self, call: Callable[[], R]) -> R:
        """``call`` as the breaker runs it (what it let through: it is never run for a
        refused one), timed and counted by how the breaker records its end, as
        Resilience4j's calls timer is: with Retry inside, one call however many attempts."""
        started = time.monotonic()

        def timed(error: BaseException | None) -> None:
            elapsed = time.monotonic() - started
            kind: CallKind = "successful" if error is None else self.breaker_config.classify(error)
            with self._lock:
                count, total = self._call_seconds.get(kind, (0, 0.0))
                self._call_seconds[kind] = (count + 1, total + elapsed)

        return _noting_end(call, timed)

    def compose(
        self,
        call: Callable[[], dict[str, Any]],
        key: Hashable,
        on_attempt: Callable[[int], None] | None = None,
    ) -> DecorateSupplier[dict[str, Any] | FallbackAnswer]:
        """``call`` inside the layers, innermost first; each fallback right outside its layer.

        Every call to the gateway passes the same instances (one breaker, one retry...
        per dependency, as Resilience4j's are per name); ``key`` is the fallbacks' cache
        key (a payment's idempotency key, a product read's own key)."""
        chain: DecorateSupplier[Any] = Decorators.of_supplier(call)
        for layer in reversed(self.layers):
            if layer == RETRY:
                chain = chain.with_retry(self.retry, on_attempt)
            elif layer == CIRCUIT_BREAKER and self.breaker is not None:
                timed = functools.partial(self._timed_by_breaker, chain.decorate())
                chain = Decorators.of_supplier(timed).with_circuit_breaker(self.breaker)
            elif layer == TIME_LIMITER and self.time_limiter is not None:
                chain = chain.with_time_limiter(self.time_limiter)
            elif layer == BULKHEAD and self.bulkhead is not None:
                chain = chain.with_bulkhead(self.bulkhead)
            elif layer == THREAD_POOL_BULKHEAD and self.thread_pool_bulkhead is not None:
                chain = chain.with_thread_pool_bulkhead(self.thread_pool_bulkhead)
            if layer in self.fallbacks:
                chain = chain.with_fallback(self.fallbacks[layer], key)
        if OUTERMOST in self.fallbacks:
            chain = chain.with_fallback(self.fallbacks[OUTERMOST], key)
        return chain

    def pay(self, key: str, amount: int) -> PaymentResult:
        """Create the payment, ask the gateway through the layers, record the final status.

        ``attempts`` is the Retry's count; 0 when an outer layer refused before the Retry
        ran, 1 when the composition has no Retry.
        """
        payment_id = self.store.create_payment(key, amount)
        attempts = 0 if RETRY in self.layers else 1

        def on_attempt(n: int) -> None:
            nonlocal attempts
            attempts = n

        chain = self.compose(lambda: self._call_gateway(key, amount, payment_id), key, on_attempt)
        status, reason = "APPROVED", None
        fallback: FallbackAnswer | None = None
        try:
            answer = chain.get()
            if isinstance(answer, FallbackAnswer):
                fallback = answer
                status, reason = _fallback_status(answer), outcome_of(answer.error)
        except PgRejected as exc:
            status, reason = "FAILED", f"pg_{exc.status}"
        except Exception as exc:  # noqa: BLE001 - every other failure leaves the outcome unknown
            status, reason = "TIMEOUT_UNKNOWN", outcome_of(exc)
        self.store.finish_payment(payment_id, status, reason)
        with self._lock:
            self._payments[status] = self._payments.get(status, 0) + 1
        if fallback is None:
            return PaymentResult(payment_id, status, reason, attempts)
        return PaymentResult(
            payment_id, status, reason, attempts, fallback=fallback.kind, value=fallback.value
        )


def _fallback_status(answer: FallbackAnswer) -> str:
    """The payment's status when a fallback answered (see :class:`PaymentResult`)."""
    if answer.kind == "cached":
        return "APPROVED"  # the gateway approved this very key before
    if answer.kind == "value":
        return "FAILED"  # the seed's circuitOpen answer: the order is compensated
    return "TIMEOUT_UNKNOWN"
