"""Unit tests for both bulkheads: permits and waits, and the thread pool's Java rules.

Waits here are real (a permit or a queued task is woken by another thread), so each
test controls its calls with events and keeps its waits short.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from targets.shop.resilience import (
    Bulkhead,
    BulkheadConfig,
    BulkheadFullError,
    ThreadPoolBulkhead,
    ThreadPoolBulkheadConfig,
)

WAIT_S = 5.0
"""Upper bound on any wait for another thread (a deadlock fails instead of hanging)."""


class Gate:
    """Calls that block until released, and tell when they have started."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Semaphore(0)

    def call(self, value: Any = None) -> Callable[[], Any]:
        def blocked() -> Any:
            self.started.release()
            assert self.release.wait(WAIT_S)
            return value

        return blocked

    def wait_started(self, n: int) -> None:
        for _ in range(n):
            assert self.started.acquire(timeout=WAIT_S)


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # handed to the test
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


# --- semaphore -----------------------------------------------------------------------


def test_semaphore_defaults_are_resilience4j_defaults() -> None:
    cfg = BulkheadConfig()
    assert (cfg.max_concurrent_calls, cfg.max_wait_duration_s) == (25, 0.0)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"max_concurrent_calls": -1}, "max_concurrent_calls"),
        ({"max_concurrent_calls": 1.5}, "max_concurrent_calls"),
        ({"max_wait_duration_s": -0.1}, "max_wait_duration_s"),
        ({"max_wait_duration_s": float("nan")}, "max_wait_duration_s"),
    ],
)
def test_semaphore_config_validation(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BulkheadConfig(**overrides)


def test_semaphore_permits_up_to_max_then_refuses_at_once() -> None:
    bulkhead = Bulkhead("pg", BulkheadConfig(max_concurrent_calls=2))
    gate = Gate()
    threads = [in_thread(lambda: bulkhead.call(gate.call("ok")))[0] for _ in range(2)]
    gate.wait_started(2)
    assert bulkhead.metrics().available_concurrent_calls == 0
    started = time.monotonic()
    with pytest.raises(BulkheadFullError, match="Bulkhead 'pg' is full"):
        bulkhead.call(lambda: "never")
    assert time.monotonic() - started < 0.5  # max-wait-duration 0: no wait
    gate.release.set()
    for thread in threads:
        thread.join(WAIT_S)
    metrics = bulkhead.metrics()
    assert (metrics.available_concurrent_calls, metrics.max_allowed_concurrent_calls) == (2, 2)
    assert metrics.rejected_calls == 1


def test_semaphore_waits_up_to_max_wait_for_a_freed_permit() -> None:
    bulkhead = Bulkhead("pg", BulkheadConfig(max_concurrent_calls=1, max_wait_duration_s=WAIT_S))
    gate = Gate()
    first, _ = in_thread(lambda: bulkhead.call(gate.call()))
    gate.wait_started(1)
    second, out = in_thread(lambda: bulkhead.call(lambda: "second"))
    time.sleep(0.05)
    assert not out  # still waiting for the permit
    gate.release.set()
    for thread in (first, second):
        thread.join(WAIT_S)
    assert out == ["second"]
    assert bulkhead.metrics().rejected_calls == 0


def test_semaphore_gives_up_after_max_wait() -> None:
    bulkhead = Bulkhead("pg", BulkheadConfig(max_concurrent_calls=1, max_wait_duration_s=0.05))
    gate = Gate()
    holder, _ = in_thread(lambda: bulkhead.call(gate.call()))
    gate.wait_started(1)
    started = time.monotonic()
    with pytest.raises(BulkheadFullError):
        bulkhead.acquire_permission()
    assert 0.04 <= time.monotonic() - started < 1.0
    gate.release.set()
    holder.join(WAIT_S)


def test_semaphore_returns_the_permit_when_the_call_raises() -> None:
    bulkhead = Bulkhead("pg", BulkheadConfig(max_concurrent_calls=1))

    def boom() -> None:
        raise ValueError("boom")

    for _ in range(3):
        with pytest.raises(ValueError):
            bulkhead.call(boom)
    assert bulkhead.metrics().available_concurrent_calls == 1


def test_zero_permits_refuse_everything() -> None:
    bulkhead = Bulkhead("pg", BulkheadConfig(max_concurrent_calls=0))
    with pytest.raises(BulkheadFullError):
        bulkhead.call(lambda: None)


# --- thread pool ---------------------------------------------------------------------


@pytest.fixture
def pools() -> Iterator[list[ThreadPoolBulkhead]]:
    made: list[ThreadPoolBulkhead] = []
    yield made
    for pool in made:
        pool.shutdown()


def pool_of(made: list[ThreadPoolBulkhead], **settings: Any) -> ThreadPoolBulkhead:
    pool = ThreadPoolBulkhead("pg", ThreadPoolBulkheadConfig(**settings))
    made.append(pool)
    return pool


def test_thread_pool_defaults_follow_the_processors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    cfg = ThreadPoolBulkheadConfig()
    assert (cfg.core_thread_pool_size, cfg.max_thread_pool_size) == (7, 8)
    assert (cfg.queue_capacity, cfg.keep_alive_duration_s) == (100, 0.02)
    # A default core never exceeds an explicit max (Resilience4j would refuse the pair).
    assert ThreadPoolBulkheadConfig(max_thread_pool_size=2).core_thread_pool_size == 2
    monkeypatch.setattr("os.cpu_count", lambda: 1)
    assert ThreadPoolBulkheadConfig().core_thread_pool_size == 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"core_thread_pool_size": 0}, "core_thread_pool_size"),
        ({"max_thread_pool_size": 0}, "max_thread_pool_size"),
        ({"core_thread_pool_size": 3, "max_thread_pool_size": 2}, "must be >= core"),
        ({"queue_capacity": 0}, "queue_capacity"),
        ({"keep_alive_duration_s": -1.0}, "keep_alive_duration_s"),
    ],
)
def test_thread_pool_config_validation(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ThreadPoolBulkheadConfig(**overrides)


def test_thread_pool_core_then_queue_then_max_then_refuse(pools: list[ThreadPoolBulkhead]) -> None:
    """Java's ThreadPoolExecutor order: core threads, the queue, extra threads, refusal."""
    pool = pool_of(pools, core_thread_pool_size=1, max_thread_pool_size=2, queue_capacity=2)
    gate = Gate()
    futures: list[Future[Any]] = [pool.submit(gate.call(0))]  # core thread
    gate.wait_started(1)
    futures += [pool.submit(gate.call(i)) for i in (1, 2)]  # queued, not a new thread
    m = pool.metrics()
    assert (m.thread_pool_size, m.queue_depth, m.active_thread_count) == (1, 2, 1)
    futures.append(pool.submit(gate.call(3)))  # queue full: an extra thread
    gate.wait_started(1)
    assert pool.metrics().thread_pool_size == 2
    with pytest.raises(BulkheadFullError):
        pool.submit(gate.call(4))  # everything full: refused in the caller's thread
    gate.release.set()
    assert sorted(f.result(WAIT_S) for f in futures) == [0, 1, 2, 3]
    m = pool.metrics()
    assert (m.rejected_calls, m.queue_capacity, m.max_thread_pool_size) == (1, 2, 2)


def test_thread_pool_call_runs_elsewhere_and_returns_or_raises(
    pools: list[ThreadPoolBulkhead],
) -> None:
    pool = pool_of(pools, core_thread_pool_size=1, max_thread_pool_size=1)
    caller = threading.current_thread().name
    assert pool.call(lambda: threading.current_thread().name) != caller

    def boom() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        pool.call(boom)


def test_extra_threads_leave_after_keep_alive(pools: list[ThreadPoolBulkhead]) -> None:
    pool = pool_of(
        pools,
        core_thread_pool_size=1,
        max_thread_pool_size=2,
        queue_capacity=1,
        keep_alive_duration_s=0.01,
    )
    gate = Gate()
    futures = [pool.submit(gate.call(i)) for i in range(3)]  # core, queue, extra
    gate.wait_started(2)
    assert pool.metrics().thread_pool_size == 2
    gate.release.set()
    for f in futures:
        f.result(WAIT_S)
    deadline = time.monotonic() + WAIT_S
    while pool.metrics().thread_pool_size > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool.metrics().thread_pool_size == 1  # the core thread stays


def test_a_cancelled_queued_call_never_runs(pools: list[ThreadPoolBulkhead]) -> None:
    pool = pool_of(pools, core_thread_pool_size=1, max_thread_pool_size=1, queue_capacity=5)
    gate = Gate()
    ran: list[str] = []
    first = pool.submit(gate.call())
    gate.wait_started(1)
    queued = pool.submit(lambda: ran.append("queued"))
    assert queued.cancel()
    gate.release.set()
    first.result(WAIT_S)
    assert pool.call(lambda: "after") == "after"
    assert ran == []


def test_shut_down_pool_refuses_new_calls(pools: list[ThreadPoolBulkhead]) -> None:
    pool = pool_of(pools, core_thread_pool_size=1, max_thread_pool_size=1)
    pool.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(lambda: None)
