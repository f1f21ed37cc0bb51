"""Resilience4j's TimeLimiter: the caller waits at most ``timeout_duration_s`` for a call.

The call runs in another thread (its own, or a thread-pool bulkhead's, whose future is
handed to :meth:`TimeLimiter.wait_for` as Resilience4j's ``executeFutureSupplier``
takes one); the caller gets :class:`TimeLimitExceededError` once the duration is over,
and its request thread is free again while the call goes on elsewhere.

``cancel_running_future``: Resilience4j cancels the future on a timeout. A Python thread
cannot be interrupted, so cancelling only removes a call that has not started yet (one
still queued in a thread-pool bulkhead); a call already running runs to its own end,
here the HTTP client's read timeout. (A Java thread blocked in a socket read ignores
its interrupt the same way.)

The counters are Micrometer's ``resilience4j_timelimiter_calls{kind=successful|failed|
timeout}``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from targets.shop.resilience._checks import require_seconds

__all__ = [
    "CallExecutor",
    "TimeLimitExceededError",
    "TimeLimiter",
    "TimeLimiterConfig",
    "TimeLimiterMetrics",
    "thread_per_call",
]

T = TypeVar("T")

TimeLimiterKind = Literal["successful", "failed", "timeout"]


class TimeLimitExceededError(Exception):
    """The call took longer than the time limiter allows (Resilience4j's TimeoutException)."""

    def __init__(self, name: str, timeout_s: float) -> None:
        self.name = name
        self.timeout_s = timeout_s
        super().__init__(f"TimeLimiter '{name}' recorded a timeout exception ({timeout_s:g}s)")


@dataclass(frozen=True)
class TimeLimiterConfig:
    """Resilience4j's TimeLimiterConfig, with its defaults, durations in seconds."""

    timeout_duration_s: float = 1.0
    cancel_running_future: bool = True

    def __post_init__(self) -> None:
        require_seconds("timeout_duration_s", self.timeout_duration_s, positive=True)
        if not isinstance(self.cancel_running_future, bool):
            raise ValueError(
                f"cancel_running_future must be true or false, got {self.cancel_running_future!r}"
            )


@dataclass(frozen=True)
class TimeLimiterMetrics:
    """Cumulative calls by how they ended."""

    successful: int
    failed: int
    timeout: int


class CallExecutor(Protocol):
    """Starts a call somewhere else and returns its future."""

    def __call__(self, fn: Callable[[], T], /) -> Future[T]: ...


def thread_per_call(fn: Callable[[], T]) -> Future[T]:
    """Run ``fn`` in a new daemon thread; its future.

    A thread per call, not a fixed pool: calls the limiter gave up on keep running until
    their own timeout, and a fixed pool would make the next calls queue behind them.
    """
    future: Future[T] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = fn()
        except BaseException as exc:  # handed to the waiting caller
            future.set_exception(exc)
        else:
            future.set_result(result)

    threading.Thread(target=run, name="timelimiter", daemon=True).start()
    return future


class TimeLimiter:
    """Bounds how long a caller waits for a call; thread-safe."""

    def __init__(
        self,
        name: str,
        config: TimeLimiterConfig,
        *,
        executor: CallExecutor = thread_per_call,
    ) -> None:
        self.name = name
        self.config = config
        self._executor = executor
        self._lock = threading.Lock()
        self._counts: dict[TimeLimiterKind, int] = {"successful": 0, "failed": 0, "timeout": 0}

    def __repr__(self) -> str:
        return f"TimeLimiter(name={self.name!r}, timeout={self.config.timeout_duration_s:g}s)"

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the executor (a thread of its own) and wait for it, bounded."""
        return self.wait_for(self._executor(fn))

    def wait_for(self, future: Future[T]) -> T:
        """Wait for ``future`` at most ``timeout_duration_s``; its result or its exception,
        else :class:`TimeLimitExceededError` (and the future cancelled, if configured)."""
        try:
            result = future.result(timeout=self.config.timeout_duration_s)
        except TimeoutError:
            if future.done():  # the call's own TimeoutError, not ours
                self._count("failed")
                raise
            if self.config.cancel_running_future:
                future.cancel()
            self._count("timeout")
            raise TimeLimitExceededError(self.name, self.config.timeout_duration_s) from None
        except Exception:
            self._count("failed")
            raise
        self._count("successful")
        return result

    def metrics(self) -> TimeLimiterMetrics:
        with self._lock:
            return TimeLimiterMetrics(**self._counts)

    def _count(self, kind: TimeLimiterKind) -> None:
        with self._lock:
            self._counts[kind] += 1
