"""Retry with Resilience4j's configuration model and outcome counters.

By default the shop wraps payment-gateway calls as ``Retry(CircuitBreaker(call))``
(Resilience4j's default aspect order, :mod:`.decorators`), so every attempt passes through
the breaker and a refused attempt (CallNotPermittedError) is just another exception for the
retry to judge.

What is retried is the config's ``retry_exceptions`` / ``ignore_exceptions`` (Resilience4j's
``retryExceptions`` / ``ignoreExceptions``). The waits are an
:class:`~targets.shop.resilience.interval.IntervalFunction` chosen from the config's
Spring-style switches (:meth:`RetryConfig.interval_function`). Sleep and randomness are
injectable so tests never really sleep. An optional retry budget (:mod:`.budget`: gRPC's
retry throttling or Finagle's ``RetryBudget``) is asked before each retry; a retry it
refuses is not made, the last error is raised, and ``throttled`` counts it.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from targets.shop.resilience._checks import ExceptionTypes, exception_types, require_seconds
from targets.shop.resilience.budget import RetryBudget
from targets.shop.resilience.interval import (
    ExponentialBackoff,
    ExponentialRandomBackoff,
    FixedInterval,
    IntervalFunction,
    RandomizedInterval,
)

__all__ = ["Retry", "RetryConfig", "RetryMetrics"]

T = TypeVar("T")


@dataclass(frozen=True)
class RetryConfig:
    """Resilience4j retry properties in snake_case, durations in seconds.

    Empty ``retry_exceptions`` means every exception is retried unless it is listed in
    ``ignore_exceptions``; see :meth:`should_retry`.
    """

    max_attempts: int = 3
    wait_duration_s: float = 0.5
    enable_exponential_backoff: bool = False
    exponential_backoff_multiplier: float = 2.0
    exponential_max_wait_duration_s: float | None = None
    enable_randomized_wait: bool = False
    randomized_wait_factor: float = 0.5
    retry_exceptions: ExceptionTypes = ()
    ignore_exceptions: ExceptionTypes = ()

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
        require_seconds("wait_duration_s", self.wait_duration_s)
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
        for field_name in ("retry_exceptions", "ignore_exceptions"):
            object.__setattr__(
                self, field_name, exception_types(field_name, getattr(self, field_name))
            )

    def should_retry(self, error: BaseException) -> bool:
        """Resilience4j's exception predicate: listed in ``retry_exceptions`` (or that list
        is empty) and not listed in ``ignore_exceptions``."""
        if isinstance(error, self.ignore_exceptions):
            return False
        return not self.retry_exceptions or isinstance(error, self.retry_exceptions)

    def interval_function(self, rng: random.Random | None = None) -> IntervalFunction:
        """The backoff these settings describe, as Spring Boot's Resilience4j properties
        pick it: exponential and/or randomized, else fixed. The cap applies only with
        exponential backoff."""
        wait, factor = self.wait_duration_s, self.randomized_wait_factor
        multiplier, cap = self.exponential_backoff_multiplier, self.exponential_max_wait_duration_s
        if self.enable_exponential_backoff and self.enable_randomized_wait:
            return ExponentialRandomBackoff(wait, multiplier, factor, cap, rng)
        if self.enable_exponential_backoff:
            return ExponentialBackoff(wait, multiplier, cap)
        if self.enable_randomized_wait:
            return RandomizedInterval(wait, factor, rng)
        return FixedInterval(wait)


@dataclass(frozen=True)
class RetryMetrics:
    """Cumulative counters: Resilience4j's four call outcomes plus extra attempts made."""

    successful_without_retry: int
    successful_with_retry: int
    failed_without_retry: int
    failed_with_retry: int
    retries: int
    throttled: int = 0
    """Retries the budget refused (0 without a budget)."""


class Retry:
    """Re-runs a call on retryable exceptions, sleeping between attempts; thread-safe.

    ``should_retry`` replaces the config's exception lists with one predicate.
    """

    def __init__(
        self,
        name: str,
        config: RetryConfig,
        *,
        should_retry: Callable[[BaseException], bool] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        budget: RetryBudget | None = None,
    ) -> None:
        self.name = name
        self.budget = budget
        self.config = config
        self.interval_function = config.interval_function(rng)
        self._should_retry = should_retry if should_retry is not None else config.should_retry
        self._sleep = sleep
        self._lock = threading.Lock()
        self._successful_without_retry = 0
        self._successful_with_retry = 0
        self._failed_without_retry = 0
        self._failed_with_retry = 0
        self._retries = 0
        self._throttled = 0

    def __repr__(self) -> str:
        return f"Retry(name={self.name!r}, max_attempts={self.config.max_attempts})"

    def wait_for(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        return self.interval_function(attempt)

    def call(self, fn: Callable[[int], T]) -> T:
        """Call ``fn(attempt)`` until it succeeds, a non-retryable exception is raised, or
        ``max_attempts`` is used up; then return its result or re-raise the last exception.

        Only ``Exception`` subclasses are retried or counted; interrupts such as
        KeyboardInterrupt propagate at once.
        """
        attempt = 1
        budget = self.budget
        if budget is not None:
            budget.on_call()
        while True:
            try:
                result = fn(attempt)
            except Exception as exc:
                retryable = self._should_retry(exc)
                if budget is not None and retryable:
                    budget.on_failure()
                if attempt < self.config.max_attempts and retryable:
                    if budget is None or budget.try_retry():
                        wait = self.wait_for(attempt)
                        with self._lock:
                            self._retries += 1
                        self._sleep(wait)
                        attempt += 1
                        continue
                    with self._lock:
                        self._throttled += 1
                with self._lock:
                    if attempt == 1:
                        self._failed_without_retry += 1
                    else:
                        self._failed_with_retry += 1
                raise
            if budget is not None:
                budget.on_success()
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
                throttled=self._throttled,
            )
