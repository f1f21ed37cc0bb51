"""Retry budgets: retries capped at a share of the calls, so a failing gateway is not sent
three times its load by the Retry meant to protect the service from it.

Two published models, under their own names (a scenario picks one with ``model:``):

- ``grpc-throttling``: gRPC's retry throttling (gRFC A6, ``retryThrottling`` in the service
  config: ``maxTokens``, ``tokenRatio``). A token count starts at ``max_tokens``; every
  attempt that fails with a retryable error takes 1 token (not below 0), every successful
  attempt gives ``token_ratio`` back (not above ``max_tokens``); a retry is allowed only while
  the count is above ``max_tokens / 2``. No clock: it follows the ratio of failures to
  successes, and shuts retries off altogether while most calls fail. The default model.
- ``finagle-budget``: Finagle's ``RetryBudget(ttl, minRetriesPerSec, percentCanRetry)``.
  Every call (a first attempt) deposits; every retry withdraws. Retries are allowed up to
  ``percent_can_retry`` of the calls deposited over the last ``ttl``, on top of a reserve of
  ``min_retries_per_second`` (``ttl`` x that many retries, renewed as withdrawals expire).
  Deposits and withdrawals expire after ``ttl``. As Finagle's ``TokenRetryBudget``: a
  deposit is 1000 tokens, a withdrawal ``int(1000 / percent_can_retry)`` (1 without a
  percentage), the balance is whole retries.

Both are thread-safe; the clock is injectable so tests never sleep.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

__all__ = [
    "BudgetModel",
    "FinagleRetryBudget",
    "GrpcRetryThrottle",
    "RetryBudget",
    "RetryBudgetConfig",
    "make_budget",
]

BudgetModel = Literal["grpc-throttling", "finagle-budget"]
MODELS: tuple[BudgetModel, ...] = ("grpc-throttling", "finagle-budget")

SCALE = 1000
"""Finagle's ``TokenRetryBudget.ScaleFactor``: tokens per deposit."""


class RetryBudget(Protocol):
    """What a Retry tells its budget, and asks it."""

    def on_call(self) -> None:
        """A call began (its first attempt)."""

    def on_success(self) -> None:
        """An attempt succeeded."""

    def on_failure(self) -> None:
        """An attempt failed with an error the Retry retries."""

    def try_retry(self) -> bool:
        """Whether one more attempt may be made now (and, if so, it is spent)."""


@dataclass(frozen=True)
class RetryBudgetConfig:
    """A retry budget's settings (kebab case in a scenario, ``retry.budget``)."""

    model: BudgetModel = "grpc-throttling"
    max_tokens: float = 10.0
    """gRPC: the token bucket's size, in (0, 1000] (gRFC A6's example: 10)."""
    token_ratio: float = 0.1
    """gRPC: tokens a success gives back, in (0, 1] (gRFC A6's example: 0.1)."""
    ttl_s: float = 10.0
    """Finagle: how long a deposit lasts, in [1 s, 60 s] (Finagle's default: 10 s)."""
    min_retries_per_second: int = 10
    """Finagle: the reserve, retries per second allowed however few calls (default: 10)."""
    percent_can_retry: float = 0.2
    """Finagle: retries per call deposited, a fraction in [0, 1000] (default: 0.2)."""

    def __post_init__(self) -> None:
        """Finagle's and gRPC's own bounds, so a bad scenario fails at load time."""
        if self.model not in MODELS:
            raise ValueError(
                f"unknown retry budget model {self.model!r}; models: {', '.join(MODELS)}"
            )
        if not 0 < self.max_tokens <= 1000:
            raise ValueError(f"max_tokens must be in (0, 1000], got {self.max_tokens!r}")
        if not 0 < self.token_ratio <= 1:
            raise ValueError(f"token_ratio must be in (0, 1], got {self.token_ratio!r}")
        if not 1 <= self.ttl_s <= 60:
            raise ValueError(f"ttl_s must be in [1, 60] seconds, got {self.ttl_s!r}")
        if isinstance(self.min_retries_per_second, bool) or self.min_retries_per_second < 0:
            raise ValueError(
                f"min_retries_per_second must be >= 0, got {self.min_retries_per_second!r}"
            )
        if not 0 <= self.percent_can_retry <= 1000:
            raise ValueError(
                f"percent_can_retry must be in [0, 1000], got {self.percent_can_retry!r}"
            )


class GrpcRetryThrottle:
    """gRPC's retry throttling (gRFC A6): tokens taken by failures, given back by successes."""

    def __init__(self, max_tokens: float, token_ratio: float) -> None:
        # gRPC keeps milli-tokens (integers): the same arithmetic, exactly.
        self._max = round(max_tokens * 1000)
        self._ratio = round(token_ratio * 1000)
        self._tokens = self._max
        self._lock = threading.Lock()

    @property
    def tokens(self) -> float:
        return self._tokens / 1000

    def on_call(self) -> None:
        return None

    def on_success(self) -> None:
        with self._lock:
            self._tokens = min(self._max, self._tokens + self._ratio)

    def on_failure(self) -> None:
        with self._lock:
            self._tokens = max(0, self._tokens - 1000)

    def try_retry(self) -> bool:
        with self._lock:
            return self._tokens > self._max // 2


class FinagleRetryBudget:
    """Finagle's ``RetryBudget``: a leaky bucket of deposits per call, withdrawals per retry."""

    def __init__(
        self,
        ttl_s: float,
        min_retries_per_second: int,
        percent_can_retry: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl_s
        self._empty = percent_can_retry == 0 and min_retries_per_second == 0
        self._deposit = 0 if percent_can_retry == 0 else SCALE
        self._withdrawal = 1 if percent_can_retry == 0 else int(SCALE / percent_can_retry)
        self._reserve = min_retries_per_second * math.floor(ttl_s) * self._withdrawal
        self._entries: deque[tuple[float, int]] = deque()
        self._sum = 0
        self._clock = clock
        self._lock = threading.Lock()

    def _count(self) -> int:
        """Tokens now: the reserve plus the deposits and withdrawals of the last ttl."""
        horizon = self._clock() - self._ttl
        while self._entries and self._entries[0][0] <= horizon:
            self._sum -= self._entries.popleft()[1]
        return self._reserve + self._sum

    def _put(self, amount: int) -> None:
        self._entries.append((self._clock(), amount))
        self._sum += amount

    @property
    def balance(self) -> int:
        """Retries allowed now (Finagle's ``balance``)."""
        if self._empty:
            return 0
        with self._lock:
            return self._count() // self._withdrawal

    def on_call(self) -> None:
        if self._empty or not self._deposit:
            return
        with self._lock:
            self._count()
            self._put(self._deposit)

    def on_success(self) -> None:
        return None

    def on_failure(self) -> None:
        return None

    def try_retry(self) -> bool:
        if self._empty:
            return False
        with self._lock:
            if self._count() < self._withdrawal:
                return False
            self._put(-self._withdrawal)
            return True


def make_budget(
    config: RetryBudgetConfig, clock: Callable[[], float] = time.monotonic
) -> RetryBudget:
    """The budget ``config`` describes."""
    if config.model == "grpc-throttling":
        return GrpcRetryThrottle(config.max_tokens, config.token_ratio)
    return FinagleRetryBudget(
        config.ttl_s, config.min_retries_per_second, config.percent_can_retry, clock
    )
