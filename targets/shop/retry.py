"""Retry with Resilience4j's configuration model and outcome counters.

The shop wraps payment-gateway calls as ``Retry(CircuitBreaker(call))`` (Resilience4j's
default aspect order), so every attempt passes through the breaker and a refused attempt
(CallNotPermittedError) is just another exception for ``should_retry`` to judge.

Waits follow Resilience4j's IntervalFunction: fixed ``wait_duration_s``; exponential
``wait_duration_s * multiplier ** (attempt - 1)`` capped at
``exponential_max_wait_duration_s``; randomized uniformly within
``+- randomized_wait_factor`` of that value (for exponential-random the cap is applied
after randomizing, as Resilience4j does). Sleep and randomness are injectable so tests
never really sleep.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Retry", "RetryConfig", "RetryMetrics"]

T = TypeVar("T")


@dataclass(frozen=True)
class RetryConfig:
    """Resilience4j retry properties in snake_case, durations in seconds."""

    max_attempts: int = 3
    wait_duration_s: float = 0.5
    enable_exponential_backoff: bool = False
    exponential_backoff_multiplier: float = 2.0
    exponential_max_wait_duration_s: float | None = None
    enable_randomized_wait: bool = False
    randomized_wait_factor: float = 0.5

    def __post_init__(self) -> None:
        """Reject nonsensical settings so a bad scenario file fails at load time."""
        if (
            isinstance(self.max_attempts, bool)
            or not isinstance(self.max_attempts, int)
            or self.max_attempts < 1
        ):
            raise ValueError(
                "max_attempts must be an integer >= 1 (the first call included), "
                f"got {self.max_attempts!r}"
            )
        if not self.wait_duration_s >= 0.0:
            raise ValueError(f"wait_duration_s must be >= 0 seconds, got {self.wait_duration_s!r}")
        if not self.exponential_backoff_multiplier >= 1.0:
            raise ValueError(
                "exponential_backoff_multiplier must be >= 1.0, "
                f"got {self.exponential_backoff_multiplier!r}"
            )
        cap = self.exponential_max_wait_duration_s
        if cap is not None and not cap >= self.wait_duration_s:
            raise ValueError(
                "exponential_max_wait_duration_s must be >= wait_duration_s "
                f"({self.wait_duration_s!r}), got {cap!r}"
            )
        if not 0.0 <= self.randomized_wait_factor <= 1.0:
            raise ValueError(
                f"randomized_wait_factor must be in [0, 1], got {self.randomized_wait_factor!r}"
            )


@dataclass(frozen=True)
class RetryMetrics:
    """Cumulative counters: Resilience4j's four call outcomes plus extra attempts made."""

    successful_without_retry: int
    successful_with_retry: int
    failed_without_retry: int
    failed_with_retry: int
    retries: int


class Retry:
    """Re-runs a call on retryable exceptions, sleeping between attempts; thread-safe."""

    def __init__(
        self,
        name: str,
        config: RetryConfig,
        *,
        should_retry: Callable[[BaseException], bool],
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self._should_retry = should_retry
        self._sleep = sleep
        self._rng = rng if rng is not None else random.Random()
        self._lock = threading.Lock()
        self._successful_without_retry = 0
        self._successful_with_retry = 0
        self._failed_without_retry = 0
        self._failed_with_retry = 0
        self._retries = 0

    def __repr__(self) -> str:
        return f"Retry(name={self.name!r}, max_attempts={self.config.max_attempts})"

    def wait_for(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        if attempt < 1:
            raise ValueError(f"attempt is 1-based, got {attempt!r}")
        cfg = self.config
        wait = cfg.wait_duration_s
        if cfg.enable_exponential_backoff:
            try:
                wait = cfg.wait_duration_s * cfg.exponential_backoff_multiplier ** (attempt - 1)
            except OverflowError:
                wait = float("inf")
        if cfg.enable_randomized_wait and math.isfinite(wait):
            with self._lock:  # random.Random is not documented as thread-safe
                unit = self._rng.random()
            delta = cfg.randomized_wait_factor * wait
            wait = (wait - delta) + unit * (2.0 * delta)
        if cfg.enable_exponential_backoff and cfg.exponential_max_wait_duration_s is not None:
            wait = min(wait, cfg.exponential_max_wait_duration_s)
        return wait

    def call(self, fn: Callable[[int], T]) -> T:
        """Call ``fn(attempt)`` until it succeeds, a non-retryable exception is raised, or
        ``max_attempts`` is used up; then return its result or re-raise the last exception.

        Only ``Exception`` subclasses are retried or counted; interrupts such as
        KeyboardInterrupt propagate at once.
        """
        attempt = 1
        while True:
            try:
                result = fn(attempt)
            except Exception as exc:
                if attempt < self.config.max_attempts and self._should_retry(exc):
                    wait = self.wait_for(attempt)
                    with self._lock:
                        self._retries += 1
                    self._sleep(wait)
                    attempt += 1
                    continue
                with self._lock:
                    if attempt == 1:
                        self._failed_without_retry += 1
                    else:
                        self._failed_with_retry += 1
                raise
            with self._lock:
                if attempt == 1:
                    self._successful_without_retry += 1
                else:
                    self._successful_with_retry += 1
            return result

    def metrics(self) -> RetryMetrics:
        """Consistent snapshot of the cumulative counters."""
        with self._lock:
            return RetryMetrics(
                successful_without_retry=self._successful_without_retry,
                successful_with_retry=self._successful_with_retry,
                failed_without_retry=self._failed_without_retry,
                failed_with_retry=self._failed_with_retry,
                retries=self._retries,
            )
