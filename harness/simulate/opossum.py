"""opossum's circuit breaker (the Node target's, ``targets/node-gateway``), on the simulated clock.

As opossum 9's ``lib/circuit.js`` and ``lib/status.js`` do it:

- a rolling window of ``rolling_count_timeout_s`` in ``rolling_count_buckets`` buckets,
  rotated every ``floor(timeout / buckets)`` (a timer since the breaker was made): the
  counts are the sum of the buckets still in the window;
- every call is a ``fire``, refused ones too; a failure (an error the ``errorFilter``
  does not pass, or a ``timeout``) is counted and then judged: with fewer fires than
  ``volume_threshold`` in the window nothing happens, else an error rate
  ``failures / fires * 100`` strictly above ``error_threshold_percentage`` opens it;
- open: every call is rejected (``reject``, answered by the fallback) until
  ``reset_timeout_s`` has passed, then half-open: the first call passes (``pendingClose``),
  the others are rejected while it runs; its success closes the breaker, its failure
  opens it again. Closing does not clear the window.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from dataclasses import dataclass

from harness.simulate.clock import Clock

STATES = ("closed", "open", "half_open")


@dataclass(frozen=True)
class OpossumConfig:
    """opossum's options, durations in seconds (its own defaults)."""

    timeout_s: float | None = 10.0
    error_threshold_percentage: float = 50.0
    reset_timeout_s: float = 30.0
    volume_threshold: int = 0
    rolling_count_timeout_s: float = 10.0
    rolling_count_buckets: int = 10


class OpossumBreaker:
    """The breaker's state, its rolling window and its cumulative event counts."""

    def __init__(self, clock: Clock, config: OpossumConfig) -> None:
        self.clock = clock
        self.config = config
        self.state = "closed"
        self.pending_close = False
        self.events: Counter[str] = Counter()
        """Cumulative counts by opossum's event names (``circuit{event}``)."""
        self._interval = (
            max(
                math.floor(config.rolling_count_timeout_s * 1000 / config.rolling_count_buckets),
                1,
            )
            / 1000.0
        )
        self._buckets: deque[tuple[int, Counter[str]]] = deque()
        self._half_open_at: float | None = None

    # ---------------------------------------------------------------- the window

    def _bucket(self) -> Counter[str]:
        """The current bucket, after dropping those rotated out of the window."""
        index = math.floor(self.clock.now / self._interval + 1e-9)
        oldest = index - self.config.rolling_count_buckets + 1
        while self._buckets and self._buckets[0][0] < oldest:
            self._buckets.popleft()
        if not self._buckets or self._buckets[-1][0] < index:
            self._buckets.append((index, Counter()))
        return self._buckets[-1][1]

    def stats(self) -> Counter[str]:
        """The window's counts (``circuit.stats``)."""
        self._bucket()
        total: Counter[str] = Counter()
        for _, bucket in self._buckets:
            total.update(bucket)
        return total

    def _count(self, event: str) -> None:
        self._bucket()[event] += 1
        self.events[event] += 1

    # ---------------------------------------------------------------- the calls

    def _advance(self) -> None:
        due = self._half_open_at
        if self.state == "open" and due is not None and self.clock.now >= due:
            self.state, self.pending_close = "half_open", True
            self._half_open_at = None
            self.events["halfOpen"] += 1

    def current(self) -> str:
        """The state now (the reset timer fires at its instant)."""
        self._advance()
        return self.state

    def fire(self) -> bool:
        """A call: whether it may run (else it was rejected, counted as such)."""
        self._advance()
        self._count("fire")
        if self.state != "closed" and not self.pending_close:
            self._count("reject")
            return False
        self.pending_close = False
        return True

    def success(self) -> None:
        """The call answered (or failed with an error the filter passes)."""
        self._advance()
        self._count("success")
        if self.state == "half_open":
            self.state = "closed"
            self.events["close"] += 1

    def failure(self, timed_out: bool = False) -> None:
        """The call failed (``timed_out``: opossum's own ``timeout`` cut it)."""
        self._advance()
        if timed_out:
            self._count("timeout")
        self._count("failure")
        stats = self.stats()
        half_open = self.state == "half_open"
        if stats["fire"] < self.config.volume_threshold and not half_open:
            return
        rate = stats["failure"] / stats["fire"] * 100 if stats["fire"] else 0.0
        if rate > self.config.error_threshold_percentage or half_open:
            self._open()

    def _open(self) -> None:
        if self.state != "open":
            self.state, self.pending_close = "open", False
            self.events["open"] += 1
            self._half_open_at = self.clock.now + self.config.reset_timeout_s
