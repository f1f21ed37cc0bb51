"""Bulkheads with Resilience4j's two types: a semaphore and a thread pool.

* :class:`Bulkhead` (Resilience4j's ``SemaphoreBulkhead``): at most
  ``max_concurrent_calls`` calls run at once, in the caller's own thread; a call that
  finds no permit waits up to ``max_wait_duration_s`` for one, then is refused with
  :class:`BulkheadFullError`.
* :class:`ThreadPoolBulkhead` (Resilience4j's ``FixedThreadPoolBulkhead``): calls run in
  the bulkhead's own threads, with Java's ``ThreadPoolExecutor`` rules: up to
  ``core_thread_pool_size`` threads, then a queue of ``queue_capacity``, then extra
  threads up to ``max_thread_pool_size`` (idle extras leave after
  ``keep_alive_duration_s``), then :class:`BulkheadFullError`. :meth:`submit` returns the
  call's future (Resilience4j's ``CompletionStage``), so a TimeLimiter can wait on it;
  :meth:`ThreadPoolBulkhead.call` waits for it in the caller's thread.

Waits are real waits on a condition (a permit or a task cannot be had from a fake
clock), so the tests use short real waits and threads they control.
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

from targets.shop.resilience._checks import require_int_at_least, require_seconds

__all__ = [
    "Bulkhead",
    "BulkheadConfig",
    "BulkheadFullError",
    "BulkheadMetrics",
    "ThreadPoolBulkhead",
    "ThreadPoolBulkheadConfig",
    "ThreadPoolBulkheadMetrics",
]

T = TypeVar("T")


class BulkheadFullError(Exception):
    """The bulkhead refused a call (Resilience4j's BulkheadFullException)."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"Bulkhead '{name}' is full and does not permit further calls")


# ---------------------------------------------------------------- semaphore


@dataclass(frozen=True)
class BulkheadConfig:
    """Resilience4j's BulkheadConfig, with its defaults, durations in seconds."""

    max_concurrent_calls: int = 25
    max_wait_duration_s: float = 0.0

    def __post_init__(self) -> None:
        require_int_at_least("max_concurrent_calls", self.max_concurrent_calls, 0)
        require_seconds("max_wait_duration_s", self.max_wait_duration_s)


@dataclass(frozen=True)
class BulkheadMetrics:
    """Micrometer's two bulkhead gauges, plus the refusals counted since creation."""

    available_concurrent_calls: int
    max_allowed_concurrent_calls: int
    rejected_calls: int


class Bulkhead:
    """A counting semaphore with a bounded wait; thread-safe.

    Waiting callers are woken in arrival order by :meth:`on_complete` (a newcomer may
    still take a freed permit first: Python's condition is not strictly fair).
    """

    def __init__(self, name: str, config: BulkheadConfig) -> None:
        self.name = name
        self.config = config
        self._cond = threading.Condition()
        self._available = config.max_concurrent_calls
        self._rejected = 0

    def __repr__(self) -> str:
        return (
            f"Bulkhead(name={self.name!r}, max_concurrent_calls={self.config.max_concurrent_calls})"
        )

    def acquire_permission(self) -> None:
        """Take a permit, waiting up to ``max_wait_duration_s``; else :class:`BulkheadFullError`."""
        with self._cond:
            wait = self.config.max_wait_duration_s
            if self._available <= 0 and wait > 0.0:
                self._cond.wait_for(lambda: self._available > 0, timeout=wait)
            if self._available > 0:
                self._available -= 1
                return
            self._rejected += 1
        raise BulkheadFullError(self.name)

    def on_complete(self) -> None:
        """Give back the permit of a finished call."""
        with self._cond:
            self._available += 1
            self._cond.notify()

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in this thread holding a permit."""
        self.acquire_permission()
        try:
            return fn()
        finally:
            self.on_complete()

    def metrics(self) -> BulkheadMetrics:
        with self._cond:
            return BulkheadMetrics(
                available_concurrent_calls=self._available,
                max_allowed_concurrent_calls=self.config.max_concurrent_calls,
                rejected_calls=self._rejected,
            )


# ---------------------------------------------------------------- thread pool


def _default_max_threads() -> int:
    return os.cpu_count() or 1


@dataclass(frozen=True)
class ThreadPoolBulkheadConfig:
    """Resilience4j's ThreadPoolBulkheadConfig, durations in seconds.

    As in Resilience4j, the pool sizes default to the machine's processors (max: all of
    them, core: one fewer, at least 1); ``None`` asks for that default. A core size left
    to its default never exceeds a max size given explicitly (Resilience4j would refuse
    the pair on a machine with more processors than that max).
    """

    core_thread_pool_size: int | None = None
    max_thread_pool_size: int | None = None
    queue_capacity: int = 100
    keep_alive_duration_s: float = 0.02

    def __post_init__(self) -> None:
        max_size = self.max_thread_pool_size
        if max_size is None:
            max_size = _default_max_threads()
        require_int_at_least("max_thread_pool_size", max_size, 1)
        core = self.core_thread_pool_size
        if core is None:
            core = min(max(_default_max_threads() - 1, 1), max_size)
        require_int_at_least("core_thread_pool_size", core, 1)
        if max_size < core:
            raise ValueError(
                f"max_thread_pool_size ({max_size}) must be >= core_thread_pool_size ({core})"
            )
        require_int_at_least("queue_capacity", self.queue_capacity, 1)
        require_seconds("keep_alive_duration_s", self.keep_alive_duration_s)
        object.__setattr__(self, "max_thread_pool_size", max_size)
        object.__setattr__(self, "core_thread_pool_size", core)

    @property
    def core(self) -> int:
        assert self.core_thread_pool_size is not None  # resolved in __post_init__
        return self.core_thread_pool_size

    @property
    def max(self) -> int:
        assert self.max_thread_pool_size is not None  # resolved in __post_init__
        return self.max_thread_pool_size


@dataclass(frozen=True)
class ThreadPoolBulkheadMetrics:
    """Micrometer's thread-pool bulkhead gauges, plus the refusals counted since creation."""

    thread_pool_size: int
    core_thread_pool_size: int
    max_thread_pool_size: int
    active_thread_count: int
    queue_depth: int
    queue_capacity: int
    rejected_calls: int


_Task = tuple["Future[Any]", Callable[[], Any]]


class ThreadPoolBulkhead:
    """Runs calls on its own bounded pool of daemon threads; thread-safe."""

    def __init__(self, name: str, config: ThreadPoolBulkheadConfig) -> None:
        self.name = name
        self.config = config
        self._cond = threading.Condition()
        self._queue: collections.deque[_Task] = collections.deque()
        self._threads = 0
        self._active = 0
        self._rejected = 0
        self._started = 0
        self._closed = False

    def __repr__(self) -> str:
        return (
            f"ThreadPoolBulkhead(name={self.name!r}, core={self.config.core}, "
            f"max={self.config.max}, queue_capacity={self.config.queue_capacity})"
        )

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        """Hand ``fn`` to the pool; its future, or :class:`BulkheadFullError` at once."""
        future: Future[T] = Future()
        task: _Task = (future, fn)
        with self._cond:
            if self._closed:
                raise RuntimeError(f"ThreadPoolBulkhead '{self.name}' is shut down")
            if self._threads < self.config.core:
                self._start(task)
            elif len(self._queue) < self.config.queue_capacity:
                self._queue.append(task)
                self._cond.notify()
            elif self._threads < self.config.max:
                self._start(task)
            else:
                self._rejected += 1
                raise BulkheadFullError(self.name)
        return future

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the pool and wait for it in this thread."""
        return self.submit(fn).result()

    def metrics(self) -> ThreadPoolBulkheadMetrics:
        with self._cond:
            return ThreadPoolBulkheadMetrics(
                thread_pool_size=self._threads,
                core_thread_pool_size=self.config.core,
                max_thread_pool_size=self.config.max,
                active_thread_count=self._active,
                queue_depth=len(self._queue),
                queue_capacity=self.config.queue_capacity,
                rejected_calls=self._rejected,
            )

    def shutdown(self) -> None:
        """Refuse new calls; idle threads leave, queued calls still run (tests, shutdown)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # -- internals -------------------------------------------------------------------------

    def _start(self, first: _Task) -> None:
        """Start a worker with its first task (called with the lock held)."""
        self._threads += 1
        self._started += 1
        thread = threading.Thread(
            target=self._work,
            args=(first,),
            name=f"bulkhead-{self.name}-{self._started}",
            daemon=True,
        )
        thread.start()

    def _work(self, task: _Task | None) -> None:
        while True:
            if task is not None:
                self._run(task)
            with self._cond:
                task = self._next_task()
                if task is None:
                    self._threads -= 1
                    return

    def _next_task(self) -> _Task | None:
        """The next queued task, or None when this worker should leave (lock held)."""
        timed_out = False
        while not self._queue:
            # An extra thread waits keep-alive for work, then leaves, as in Java; the count is
            # checked again after the wait, so two extras never both leave below the core.
            extra = self._threads > self.config.core
            if self._closed or (timed_out and extra):
                return None
            if extra:
                timed_out = not self._cond.wait(self.config.keep_alive_duration_s)
            else:
                timed_out = False
                self._cond.wait()
        return self._queue.popleft()

    def _run(self, task: _Task) -> None:
        future, fn = task
        if not future.set_running_or_notify_cancel():
            return  # cancelled while queued (a TimeLimiter gave up on it)
        with self._cond:
            self._active += 1
        try:
            result = fn()
        except BaseException as exc:  # handed to the waiting caller, as an executor does
            future.set_exception(exc)
        else:
            future.set_result(result)
        finally:
            with self._cond:
                self._active -= 1
