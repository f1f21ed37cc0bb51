"""The discrete-event core: a clock that jumps from one event to the next.

Events are ``(time, order, callback, args)`` in a heap; ``order`` keeps events due at
the same instant in the order they were scheduled, so a run is the same every time.
Time is seconds from the load's start (the warmup's start), as the load plan counts it.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections import deque
from collections.abc import Callable
from typing import Any


class Clock:
    """The event heap and the current instant."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._order = itertools.count()

    def at(self, t: float, callback: Callable[..., None], *args: Any) -> None:
        """Call ``callback(*args)`` at instant ``t`` (never before now)."""
        heapq.heappush(self._heap, (max(t, self.now), next(self._order), callback, args))

    def after(self, delay: float, callback: Callable[..., None], *args: Any) -> None:
        self.at(self.now + delay, callback, *args)

    def run(self, until: float) -> None:
        """Fire every event due before ``until``; the clock ends at ``until``."""
        heap = self._heap
        while heap and heap[0][0] < until:
            t, _, callback, args = heapq.heappop(heap)
            self.now = t
            callback(*args)
        self.now = until

    def time(self) -> float:
        """The current instant (a clock function for the shop's breakers and fallbacks)."""
        return self.now


SERVICE_SIGMA = 0.5
"""The spread of a service time around its median (a lognormal's sigma): chosen once, so
that a 5 ms median has a p95 near 11 ms and a p99 near 16 ms, what a quiet machine's
product reads measured; with no spread at all, constant-rate arrivals fall into resonance
with a breaker's short open waits and half-open probes that a real service's jitter
breaks."""


class ServiceTimes:
    """Seeded service times: a median, spread lognormally by ``SERVICE_SIGMA``."""

    def __init__(self, seed: str) -> None:
        self._rng = random.Random(seed)

    def __call__(self, median_s: float) -> float:
        return self._rng.lognormvariate(math.log(median_s), SERVICE_SIGMA)


class Pool:
    """``size`` permits handed out first come, first served; a waiter may give up after
    ``timeout`` seconds (None: it waits as long as it takes).

    The shop's DB pool (Hikari's fair hand-off, ``targets.shop.dbpool``) and a semaphore
    bulkhead (Resilience4j's fair ``SemaphoreBulkhead``) are both this.
    """

    def __init__(self, clock: Clock, size: int, timeout: float | None) -> None:
        self.clock = clock
        self.size = size
        self.free = size
        self.timeout = timeout
        self.waiting: deque[list[Any]] = deque()
        self.pending = 0
        """Waiters still waiting."""
        self.timeouts = 0
        self.refused = 0

    def acquire(self, granted: Callable[[], None], refused: Callable[[], None]) -> None:
        """``granted()`` once a permit is ours (now or later), or ``refused()`` when the wait
        times out (at once when ``timeout`` is 0)."""
        if self.free > 0:
            self.free -= 1
            granted()
            return
        if self.timeout is not None and self.timeout <= 0:
            self.refused += 1
            refused()
            return
        entry: list[Any] = [granted, refused]
        self.waiting.append(entry)
        self.pending += 1
        if self.timeout is not None:
            self.clock.after(self.timeout, self._give_up, entry)

    def _give_up(self, entry: list[Any]) -> None:
        if entry[0] is None:
            return  # served already
        refused = entry[1]
        entry[0] = None
        self.pending -= 1
        self.timeouts += 1
        self.refused += 1
        refused()

    def release(self) -> None:
        """Give a permit back: to the longest waiter still waiting, else to the pool."""
        while self.waiting:
            entry = self.waiting.popleft()
            if entry[0] is not None:
                granted = entry[0]
                entry[0] = None
                self.pending -= 1
                granted()
                return
        self.free += 1
