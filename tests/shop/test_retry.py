"""Unit tests for targets.shop.resilience's retry, with a fake sleep (nothing really sleeps)."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from targets.shop.resilience import (
    CallNotPermittedError,
    CircuitBreaker,
    CircuitBreakerConfig,
    Retry,
    RetryConfig,
    RetryMetrics,
    State,
)


class Transient(Exception):
    """Retryable (5xx / timeout-like)."""


class Permanent(Exception):
    """Not retryable (4xx-like)."""


def retryable(error: BaseException) -> bool:
    return isinstance(error, Transient)


class FakeSleep:
    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def make(sleep: FakeSleep | None = None, **overrides: Any) -> Retry:
    return Retry(
        "pg",
        RetryConfig(**overrides),
        should_retry=retryable,
        sleep=sleep if sleep is not None else FakeSleep(),
        rng=random.Random(1234),
    )


def scripted(*outcomes: BaseException | str) -> tuple[list[int], Any]:
    """fn that raises or returns the given outcomes in order and logs attempt numbers."""
    attempts: list[int] = []
    queue = list(outcomes)

    def fn(attempt: int) -> str:
        attempts.append(attempt)
        outcome = queue.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return attempts, fn


def counters(metrics: RetryMetrics) -> tuple[int, int, int, int, int]:
    return (
        metrics.successful_without_retry,
        metrics.successful_with_retry,
        metrics.failed_without_retry,
        metrics.failed_with_retry,
        metrics.retries,
    )


# --- configuration -------------------------------------------------------------------


def test_defaults_are_resilience4j_defaults() -> None:
    cfg = RetryConfig()
    assert cfg.max_attempts == 3
    assert cfg.wait_duration_s == 0.5
    assert cfg.enable_exponential_backoff is False
    assert cfg.enable_randomized_wait is False
    assert cfg.exponential_max_wait_duration_s is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": 1.5}, "max_attempts"),
        ({"wait_duration_s": -0.1}, "wait_duration_s"),
        ({"wait_duration_s": float("nan")}, "wait_duration_s"),
        ({"exponential_backoff_multiplier": 0.5}, "exponential_backoff_multiplier"),
        ({"exponential_max_wait_duration_s": 0.1}, "exponential_max_wait_duration_s"),
        ({"randomized_wait_factor": -0.1}, "randomized_wait_factor"),
        ({"randomized_wait_factor": 1.5}, "randomized_wait_factor"),
    ],
)
def test_config_validation(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RetryConfig(**overrides)


# --- call() --------------------------------------------------------------------------


def test_success_on_first_attempt() -> None:
    sleep = FakeSleep()
    retry = make(sleep)
    attempts, fn = scripted("ok")
    assert retry.call(fn) == "ok"
    assert attempts == [1]
    assert sleep.calls == []
    assert counters(retry.metrics()) == (1, 0, 0, 0, 0)


def test_success_after_retries_passes_attempt_numbers_and_sleeps() -> None:
    sleep = FakeSleep()
    retry = make(sleep)
    attempts, fn = scripted(Transient("503"), Transient("timeout"), "ok")
    assert retry.call(fn) == "ok"
    assert attempts == [1, 2, 3]
    assert sleep.calls == [0.5, 0.5]
    assert counters(retry.metrics()) == (0, 1, 0, 0, 2)


def test_exhausted_attempts_reraise_the_last_exception() -> None:
    sleep = FakeSleep()
    retry = make(sleep)
    last = Transient("third")
    attempts, fn = scripted(Transient("first"), Transient("second"), last)
    with pytest.raises(Transient) as info:
        retry.call(fn)
    assert info.value is last
    assert attempts == [1, 2, 3]
    assert sleep.calls == [0.5, 0.5]
    assert counters(retry.metrics()) == (0, 0, 0, 1, 2)


def test_non_retryable_exception_stops_at_once() -> None:
    sleep = FakeSleep()
    retry = make(sleep)
    attempts, fn = scripted(Permanent("400"), "never reached")
    with pytest.raises(Permanent):
        retry.call(fn)
    assert attempts == [1]
    assert sleep.calls == []
    assert counters(retry.metrics()) == (0, 0, 1, 0, 0)


def test_non_retryable_exception_after_a_retry_counts_as_failed_with_retry() -> None:
    sleep = FakeSleep()
    retry = make(sleep, max_attempts=5)
    attempts, fn = scripted(Transient("503"), Permanent("409"), "never reached")
    with pytest.raises(Permanent):
        retry.call(fn)
    assert attempts == [1, 2]
    assert sleep.calls == [0.5]
    assert counters(retry.metrics()) == (0, 0, 0, 1, 1)


def test_single_attempt_never_retries() -> None:
    sleep = FakeSleep()
    retry = make(sleep, max_attempts=1)
    attempts, fn = scripted(Transient("503"), "never reached")
    with pytest.raises(Transient):
        retry.call(fn)
    assert attempts == [1]
    assert sleep.calls == []
    assert counters(retry.metrics()) == (0, 0, 1, 0, 0)


def test_interrupts_are_neither_retried_nor_counted() -> None:
    retry = make()
    attempts, fn = scripted(KeyboardInterrupt(), "never reached")
    with pytest.raises(KeyboardInterrupt):
        retry.call(fn)
    assert attempts == [1]
    assert counters(retry.metrics()) == (0, 0, 0, 0, 0)


def test_counters_accumulate_over_calls_and_threads() -> None:
    retry = make(max_attempts=2)

    def worker() -> None:
        for _ in range(200):
            retry.call(scripted("ok")[1])
            retry.call(scripted(Transient("x"), "ok")[1])
            with pytest.raises(Permanent):
                retry.call(scripted(Permanent("x"))[1])
            with pytest.raises(Transient):
                retry.call(scripted(Transient("x"), Transient("y"))[1])

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10.0)
    assert counters(retry.metrics()) == (800, 800, 800, 800, 1600)


# --- wait_for() ----------------------------------------------------------------------


def test_fixed_wait() -> None:
    retry = make(wait_duration_s=0.2)
    assert [retry.wait_for(n) for n in (1, 2, 3, 10)] == [0.2, 0.2, 0.2, 0.2]


def test_exponential_wait() -> None:
    retry = make(enable_exponential_backoff=True, wait_duration_s=0.5)
    assert [retry.wait_for(n) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]


def test_exponential_wait_with_custom_multiplier_and_cap() -> None:
    retry = make(
        enable_exponential_backoff=True,
        wait_duration_s=0.1,
        exponential_backoff_multiplier=3.0,
        exponential_max_wait_duration_s=1.0,
    )
    waits = [retry.wait_for(n) for n in (1, 2, 3, 4, 50)]
    assert waits == pytest.approx([0.1, 0.3, 0.9, 1.0, 1.0])
    assert retry.wait_for(100_000) == 1.0  # no overflow for absurd attempt numbers


def test_exponential_waits_are_what_call_sleeps() -> None:
    sleep = FakeSleep()
    retry = make(sleep, max_attempts=4, enable_exponential_backoff=True, wait_duration_s=0.5)
    _, fn = scripted(Transient("a"), Transient("b"), Transient("c"), "ok")
    assert retry.call(fn) == "ok"
    assert sleep.calls == [0.5, 1.0, 2.0]


def test_randomized_wait_stays_within_factor_and_is_reproducible() -> None:
    retry = make(enable_randomized_wait=True, wait_duration_s=1.0, randomized_wait_factor=0.5)
    waits = [retry.wait_for(1) for _ in range(1000)]
    assert all(0.5 <= w <= 1.5 for w in waits)
    assert min(waits) < 0.6 and max(waits) > 1.4  # actually spread over the range
    reference = random.Random(1234)
    expected = [0.5 + reference.random() * 1.0 for _ in range(1000)]
    assert waits == pytest.approx(expected)


def test_exponential_randomized_wait_is_randomized_around_the_backoff_then_capped() -> None:
    retry = make(
        enable_exponential_backoff=True,
        enable_randomized_wait=True,
        wait_duration_s=1.0,
        randomized_wait_factor=0.5,
        exponential_max_wait_duration_s=5.0,
    )
    for _ in range(200):
        assert 0.5 <= retry.wait_for(1) <= 1.5
        assert 1.0 <= retry.wait_for(2) <= 3.0
        assert 2.0 <= retry.wait_for(3) <= 5.0
        assert retry.wait_for(6) == 5.0  # 32 +- 16, capped


def test_wait_for_rejects_attempt_zero() -> None:
    with pytest.raises(ValueError, match="1-based"):
        make().wait_for(0)


# --- composition with the breaker: Retry(CircuitBreaker(call)) --------------------------


def test_retry_around_breaker_does_not_retry_refused_calls() -> None:
    now = [0.0]
    breaker = CircuitBreaker(
        "pg",
        CircuitBreakerConfig(sliding_window_size=2, minimum_number_of_calls=2),
        clock=lambda: now[0],
    )
    sleep = FakeSleep()
    retry = Retry(
        "pg",
        RetryConfig(max_attempts=3),
        should_retry=lambda e: isinstance(e, Transient),  # CallNotPermittedError is not
        sleep=sleep,
    )
    pg_calls: list[int] = []

    def pg(attempt: int) -> str:
        def request() -> str:
            pg_calls.append(attempt)
            raise Transient("503")

        return breaker.call(request)

    with pytest.raises(CallNotPermittedError):
        retry.call(pg)  # attempts 1 and 2 fail and trip the breaker; attempt 3 is refused
    assert pg_calls == [1, 2]
    assert breaker.state is State.OPEN
    with pytest.raises(CallNotPermittedError):
        retry.call(pg)  # refused at once, no sleeping
    assert sleep.calls == [0.5, 0.5]
    assert counters(retry.metrics()) == (0, 0, 1, 1, 2)
    assert breaker.metrics().not_permitted_calls == 2
