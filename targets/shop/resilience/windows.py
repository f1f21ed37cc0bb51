"""The breaker's sliding windows, as Resilience4j's ``core/metrics``.

* :class:`FixedSizeSlidingWindowMetrics` (COUNT_BASED): a ring of the last N outcomes.
* :class:`SlidingTimeWindowMetrics` (TIME_BASED): N one-second buckets (Resilience4j's
  partial aggregation), keyed by whole clock seconds.

Both keep running totals, so recording and reading are O(1) (amortised for the time
window). They are not thread-safe: the breaker calls them under its lock.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "FixedSizeSlidingWindowMetrics",
    "SlidingTimeWindowMetrics",
    "SlidingWindow",
    "WindowTotals",
]


@dataclass
class WindowTotals:
    """Calls, failed calls and slow calls in a window (or in one bucket of it)."""

    calls: int = 0
    failed: int = 0
    slow: int = 0

    def add(self, failed: bool, slow: bool, sign: int = 1) -> None:
        self.calls += sign
        self.failed += sign * failed
        self.slow += sign * slow

    def rates(self, minimum_calls: int) -> tuple[float, float]:
        """(failure %, slow %), each -1.0 below ``minimum_calls`` (as Resilience4j reports)."""
        if self.calls == 0 or self.calls < minimum_calls:
            return -1.0, -1.0
        return self.failed * 100.0 / self.calls, self.slow * 100.0 / self.calls


class SlidingWindow(Protocol):
    """What the breaker's states need from a window; ``now`` is the breaker's clock."""

    @property
    def minimum_calls(self) -> int:
        """Calls needed before the window's rates count."""
        ...

    def record(self, failed: bool, slow: bool, now: float) -> WindowTotals: ...

    def snapshot(self, now: float) -> WindowTotals: ...


class FixedSizeSlidingWindowMetrics:
    """Ring of the last ``size`` outcomes with running totals (COUNT_BASED)."""

    def __init__(self, size: int, minimum_calls: int) -> None:
        self.minimum_calls = minimum_calls
        self._ring: list[tuple[bool, bool] | None] = [None] * size
        self._next = 0
        self._totals = WindowTotals()

    def record(self, failed: bool, slow: bool, now: float) -> WindowTotals:
        evicted = self._ring[self._next]
        if evicted is not None:
            self._totals.add(*evicted, sign=-1)
        self._ring[self._next] = (failed, slow)
        self._next = (self._next + 1) % len(self._ring)
        self._totals.add(failed, slow)
        return self._totals

    def snapshot(self, now: float) -> WindowTotals:
        return self._totals


class SlidingTimeWindowMetrics:
    """``size`` one-second buckets (TIME_BASED); buckets older than ``size`` seconds drop
    out whenever the window is touched."""

    def __init__(self, size: int, minimum_calls: int) -> None:
        self.minimum_calls = minimum_calls
        self._size = size
        self._buckets: collections.deque[tuple[int, WindowTotals]] = collections.deque()
        self._totals = WindowTotals()

    def _evict(self, now: float) -> int:
        second = math.floor(now)
        while self._buckets and self._buckets[0][0] <= second - self._size:
            _, old = self._buckets.popleft()
            self._totals.calls -= old.calls
            self._totals.failed -= old.failed
            self._totals.slow -= old.slow
        return second

    def record(self, failed: bool, slow: bool, now: float) -> WindowTotals:
        second = self._evict(now)
        if not self._buckets or self._buckets[-1][0] < second:
            self._buckets.append((second, WindowTotals()))
        # A clock that stepped back lands in the newest bucket rather than reordering.
        self._buckets[-1][1].add(failed, slow)
        self._totals.add(failed, slow)
        return self._totals

    def snapshot(self, now: float) -> WindowTotals:
        self._evict(now)
        return self._totals
