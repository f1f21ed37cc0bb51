"""Unit tests for the TimeLimiter: success, failure and timeout, and what cancel does."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import pytest

from targets.shop.resilience import (
    ThreadPoolBulkhead,
    ThreadPoolBulkheadConfig,
    TimeLimiter,
    TimeLimiterConfig,
    TimeLimitExceededError,
)
from targets.shop.resilience.timelimiter import thread_per_call

T = TypeVar("T")


def never_done(fn: Callable[[], T]) -> Future[T]:
    """An executor whose calls never start: every wait times out, at once."""
    return Future()


def limiter(timeout_s: float = 0.01, **settings: Any) -> TimeLimiter:
    return TimeLimiter("pg", TimeLimiterConfig(timeout_duration_s=timeout_s, **settings))


def test_defaults_are_resilience4j_defaults() -> None:
    cfg = TimeLimiterConfig()
    assert (cfg.timeout_duration_s, cfg.cancel_running_future) == (1.0, True)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"timeout_duration_s": 0.0}, "timeout_duration_s"),
        ({"timeout_duration_s": float("nan")}, "timeout_duration_s"),
        ({"cancel_running_future": "yes"}, "cancel_running_future"),
    ],
)
def test_config_validation(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TimeLimiterConfig(**overrides)


def test_a_call_within_the_limit_returns_its_result_from_another_thread() -> None:
    tl = limiter(timeout_s=5.0)
    caller = threading.current_thread().name
    assert tl.call(lambda: threading.current_thread().name) != caller
    assert tl.metrics().successful == 1


def test_the_calls_own_error_is_reraised_and_counted_failed() -> None:
    tl = limiter(timeout_s=5.0)

    def boom() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        tl.call(boom)

    def own_timeout() -> None:
        raise TimeoutError("the call's own")

    with pytest.raises(TimeoutError, match="the call's own"):
        tl.call(own_timeout)
    assert tl.metrics().failed == 2
    assert tl.metrics().timeout == 0


def test_the_caller_stops_waiting_after_the_duration() -> None:
    release = threading.Event()
    tl = limiter(timeout_s=0.05)
    started = time.monotonic()
    with pytest.raises(TimeLimitExceededError, match="TimeLimiter 'pg' recorded a timeout"):
        tl.call(lambda: release.wait(5.0))
    assert 0.04 <= time.monotonic() - started < 1.0
    release.set()  # the call itself goes on in its thread until it ends
    assert tl.metrics().timeout == 1


def test_a_timeout_cancels_a_call_not_yet_started() -> None:
    futures: list[Future[Any]] = []

    def keep(fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = never_done(fn)
        futures.append(future)
        return future

    tl = TimeLimiter("pg", TimeLimiterConfig(timeout_duration_s=0.01), executor=keep)
    with pytest.raises(TimeLimitExceededError):
        tl.call(lambda: None)
    assert futures[0].cancelled()


def test_without_cancel_running_future_the_call_is_left_alone() -> None:
    futures: list[Future[Any]] = []

    def keep(fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = never_done(fn)
        futures.append(future)
        return future

    config = TimeLimiterConfig(timeout_duration_s=0.01, cancel_running_future=False)
    tl = TimeLimiter("pg", config, executor=keep)
    with pytest.raises(TimeLimitExceededError):
        tl.call(lambda: None)
    assert not futures[0].cancelled()


def test_waits_on_a_thread_pool_bulkheads_future_and_cancels_it_while_queued() -> None:
    pool = ThreadPoolBulkhead(
        "pg", ThreadPoolBulkheadConfig(core_thread_pool_size=1, max_thread_pool_size=1)
    )
    release = threading.Event()
    ran: list[str] = []
    try:
        busy = pool.submit(lambda: release.wait(5.0))
        queued = pool.submit(lambda: ran.append("queued"))
        with pytest.raises(TimeLimitExceededError):
            limiter().wait_for(queued)
        assert queued.cancelled()
        release.set()
        busy.result(5.0)
        assert pool.call(lambda: "next") == "next"
        assert ran == []  # the cancelled call never ran
    finally:
        pool.shutdown()


def test_thread_per_call_hands_back_results_and_errors() -> None:
    assert thread_per_call(lambda: 7).result(5.0) == 7

    def boom() -> None:
        raise KeyError("k")

    with pytest.raises(KeyError):
        thread_per_call(boom).result(5.0)
