"""The composition as Resilience4j's Decorators: order, and where a fallback sits."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from targets.shop.resilience import (
    DEFAULT_ORDER,
    CallNotPermittedError,
    CircuitBreaker,
    CircuitBreakerConfig,
    Decorators,
    Fallback,
    FallbackAnswer,
    FallbackConfig,
    Retry,
    RetryConfig,
    State,
    ThreadPoolBulkhead,
    ThreadPoolBulkheadConfig,
    TimeLimiter,
    TimeLimiterConfig,
    TimeLimitExceededError,
    resolve_order,
)
from tests.shop.test_breaker import FakeClock

T = TypeVar("T")


class Sick(Exception):
    """The gateway failed."""


# --- order as data -------------------------------------------------------------------


def test_default_order_is_spring_boots_aspect_order() -> None:
    assert DEFAULT_ORDER == (
        "retry",
        "circuit-breaker",
        "time-limiter",
        "bulkhead",
        "thread-pool-bulkhead",
    )
    assert resolve_order(None, {"bulkhead", "retry", "circuit-breaker"}) == (
        "retry",
        "circuit-breaker",
        "bulkhead",
    )


def test_an_explicit_order_is_kept() -> None:
    assert resolve_order(["circuit-breaker", "retry"], {"retry", "circuit-breaker"}) == (
        "circuit-breaker",
        "retry",
    )


@pytest.mark.parametrize(
    ("order", "message"),
    [
        (["retry", "rate-limiter"], "unknown layer 'rate-limiter'"),
        (["retry", "retry"], "listed twice"),
        (["retry", "bulkhead"], "'bulkhead' is listed but not configured"),
        ([], "retry configured but not in the composition"),
    ],
)
def test_bad_orders(order: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve_order(order, {"retry"})


# --- wrapping ------------------------------------------------------------------------


class Recorder:
    """A layer that records when calls enter and leave it."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def call(self, fn: Callable[[], T]) -> T:
        self.log.append(f"{self.name}>")
        try:
            return fn()
        finally:
            self.log.append(f"<{self.name}")


def test_each_with_wraps_what_is_built_so_the_last_is_outermost() -> None:
    log: list[str] = []
    chain = (
        Decorators.of_supplier(lambda: log.append("call") or "done")
        .with_circuit_breaker(Recorder("inner", log))
        .with_circuit_breaker(Recorder("outer", log))
    )
    assert chain.get() == "done"
    assert log == ["outer>", "inner>", "call", "<inner", "<outer"]


def seed_002_layers(clock: FakeClock) -> tuple[Retry, CircuitBreaker]:
    # As the shop's policy: a refusal is not retried.
    config = RetryConfig(
        max_attempts=3, wait_duration_s=0.0, ignore_exceptions=(CallNotPermittedError,)
    )
    retry = Retry("pg", config)
    breaker = CircuitBreaker(
        "pg",
        CircuitBreakerConfig(sliding_window_size=5, minimum_number_of_calls=5),
        clock=clock,
    )
    return retry, breaker


def test_cb_wrong_the_breakers_fallback_leaves_retry_nothing_to_retry() -> None:
    """Retry(Fallback(CircuitBreaker(call))): the failure is a value before Retry sees it."""
    clock = FakeClock()
    retry, breaker = seed_002_layers(clock)
    fallback = Fallback("circuit-breaker", FallbackConfig(kind="value", value="circuitOpen"))
    calls: list[int] = []

    def gateway() -> Any:
        calls.append(1)
        raise Sick("503")

    answers = [
        Decorators.of_supplier(gateway)
        .with_circuit_breaker(breaker)
        .with_fallback(fallback)
        .with_retry(retry)
        .get()
        for _ in range(8)
    ]
    assert all(isinstance(a, FallbackAnswer) and a.value == "circuitOpen" for a in answers)
    assert len(calls) == 5  # one call a payment until the breaker opened; none after
    assert retry.metrics().retries == 0
    assert retry.metrics().successful_without_retry == 8  # Retry saw only successes
    assert breaker.metrics().not_permitted_calls == 3


def test_cb_correct_the_outermost_fallback_lets_retry_and_breaker_work() -> None:
    """Fallback(Retry(CircuitBreaker(call))): Retry retries until the breaker opens."""
    clock = FakeClock()
    retry, breaker = seed_002_layers(clock)
    fallback = Fallback("outermost", FallbackConfig(kind="value", value="circuitOpen"))
    calls: list[int] = []

    def gateway() -> Any:
        calls.append(1)
        raise Sick("503")

    answers = [
        Decorators.of_supplier(gateway)
        .with_circuit_breaker(breaker)
        .with_retry(retry)
        .with_fallback(fallback)
        .get()
        for _ in range(3)
    ]
    assert all(isinstance(a, FallbackAnswer) for a in answers)
    # 3 attempts, then 2 that opened the breaker; the refusals are not retried.
    assert len(calls) == 5
    assert retry.metrics().retries == 4
    assert breaker.state is State.OPEN
    assert isinstance(answers[-1], FallbackAnswer)
    assert isinstance(answers[-1].error, CallNotPermittedError)


def test_retry_tells_each_attempts_number() -> None:
    seen: list[int] = []
    retry = Retry("pg", RetryConfig(max_attempts=3, wait_duration_s=0.0))

    def gateway() -> None:
        raise Sick("503")

    with pytest.raises(Sick):
        Decorators.of_supplier(gateway).with_retry(retry, seen.append).get()
    assert seen == [1, 2, 3]


def test_time_limiter_right_outside_a_thread_pool_bulkhead_uses_its_future() -> None:
    pool = ThreadPoolBulkhead(
        "pg", ThreadPoolBulkheadConfig(core_thread_pool_size=1, max_thread_pool_size=1)
    )
    limiter = TimeLimiter("pg", TimeLimiterConfig(timeout_duration_s=0.05))
    release = threading.Event()
    ran: list[str] = []
    try:
        busy = pool.submit(lambda: release.wait(5.0))
        chain = (
            Decorators.of_supplier(lambda: ran.append("call"))
            .with_thread_pool_bulkhead(pool)
            .with_time_limiter(limiter)
        )
        with pytest.raises(TimeLimitExceededError):
            chain.get()
        release.set()
        busy.result(5.0)
        assert pool.call(lambda: "drained") == "drained"
        assert ran == []  # cancelled while queued: it never reached the gateway
    finally:
        pool.shutdown()


def test_decorate_returns_the_composed_call() -> None:
    call = Decorators.of_supplier(lambda: 3).with_circuit_breaker(Recorder("x", [])).decorate()
    assert call() == 3
