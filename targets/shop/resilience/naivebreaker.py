"""A naive circuit breaker, as many hand-written ones are: N failures within a time window
open it, and it closes again after a fixed open time.

No failure rate, no minimum number of calls, no half-open trial: a burst of failures
during a one-second blip opens it as surely as an outage does, and when the open time is
over it lets the whole traffic through at once, healthy gateway or not. That is seed 004's
"before" (open after 5 failures, 30 s open), kept beside Resilience4j's rate-based breaker
so the two can be compared under the same faults.

It has the face of :class:`~targets.shop.resilience.circuitbreaker.CircuitBreaker`
(``acquire_permission``, ``on_success``, ``on_error``, ``call``, ``state``, ``metrics``)
and raises the same :class:`CallNotPermittedError`, so the composition and the exporter
treat both kinds alike: both are a :class:`~targets.shop.resilience.breaker.Breaker`.
Like it, it holds its lock only for bookkeeping, reads time from an injectable clock,
and applies the OPEN -> CLOSED move lazily at the instant it is due.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass

from targets.shop.resilience._checks import (
    ExceptionTypes,
    exception_types,
    require_int_at_least,
    require_seconds,
)
from targets.shop.resilience.breaker import Breaker, CallNotPermittedError, StateChange
from targets.shop.resilience.circuitbreaker_config import CallKind, classify_error
from targets.shop.resilience.states import State
from targets.shop.resilience.windows import WindowTotals

__all__ = ["NaiveCircuitBreaker", "NaiveCircuitBreakerConfig"]


@dataclass(frozen=True)
class NaiveCircuitBreakerConfig:
    """Open after ``failure_count`` failures within ``window_s`` seconds; stay open for
    ``open_duration_s`` seconds. Which errors count: as :class:`CircuitBreakerConfig`."""

    failure_count: int = 5
    window_s: float = 10.0
    open_duration_s: float = 30.0
    record_exceptions: ExceptionTypes = ()
    ignore_exceptions: ExceptionTypes = ()

    def __post_init__(self) -> None:
        require_int_at_least("failure_count", self.failure_count, 1)
        for field_name in ("window_s", "open_duration_s"):
            require_seconds(field_name, getattr(self, field_name), positive=True)
        for field_name in ("record_exceptions", "ignore_exceptions"):
            object.__setattr__(
                self, field_name, exception_types(field_name, getattr(self, field_name))
            )

    def classify(self, error: BaseException) -> CallKind:
        """How a call that raised ``error`` is counted (Resilience4j's rule)."""
        return classify_error(error, self.record_exceptions, self.ignore_exceptions)


class NaiveCircuitBreaker(Breaker[NaiveCircuitBreakerConfig]):
    """CLOSED counts failures in a sliding time window; OPEN refuses every call for a fixed
    time, then CLOSED again with an empty window. Thread-safe."""

    states: tuple[State, ...] = (State.CLOSED, State.OPEN)

    def __init__(
        self,
        name: str,
        config: NaiveCircuitBreakerConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_state_change: Callable[[State, State], None] | None = None,
    ) -> None:
        super().__init__(name, config, clock=clock, on_state_change=on_state_change)
        self._state = State.CLOSED
        self._failures: collections.deque[float] = collections.deque()
        self._closes_at = 0.0

    # -- public API (``state``, ``call`` and ``metrics``: :class:`Breaker`) ---------------

    def acquire_permission(self) -> None:
        """Pass in CLOSED; in OPEN raise :class:`CallNotPermittedError` (counted)."""
        events: list[StateChange] = []
        with self._lock:
            self._advance_time(self._clock(), events)
            state = self._state
            if state is State.OPEN:
                self._not_permitted += 1
        self._publish(events)
        if state is State.OPEN:
            raise CallNotPermittedError(self.name, state)

    def on_success(self, duration_s: float) -> None:
        """Record a successful call; successes never empty the window (that is the naivety)."""
        with self._lock:
            self._count("successful")

    def on_error(self, duration_s: float, error: BaseException) -> None:
        """Record a call that raised ``error``; a failure in CLOSED may open the breaker."""
        kind = self.config.classify(error)
        now = self._clock()
        events: list[StateChange] = []
        with self._lock:
            self._advance_time(now, events)
            self._count(kind)
            # only failures in CLOSED fill the window: late results while OPEN do not
            if kind == "failed" and self._state is State.CLOSED:
                self._failures.append(now)
                self._evict(now)
                if len(self._failures) >= self.config.failure_count:
                    self._open(now, events)
        self._publish(events)

    def transition_to_closed(self) -> None:
        """Force CLOSED with an empty window (admin / tests)."""
        events: list[StateChange] = []
        with self._lock:
            self._close(events)
        self._publish(events)

    def transition_to_open(self) -> None:
        """Force OPEN; the open time starts now (admin / tests)."""
        events: list[StateChange] = []
        with self._lock:
            self._open(self._clock(), events)
        self._publish(events)

    # -- internals (called with the lock held) --------------------------------------------

    def _current_state(self) -> State:
        return self._state

    def _window_metrics(self, now: float) -> tuple[WindowTotals, float, float]:
        """In the rate-based breaker's shape: no rates (-1), the window's failures."""
        self._evict(now)
        failures = len(self._failures)
        return WindowTotals(calls=failures, failed=failures), -1.0, -1.0

    def _evict(self, now: float) -> None:
        horizon = now - self.config.window_s
        while self._failures and self._failures[0] <= horizon:
            self._failures.popleft()

    def _advance_time(self, now: float, events: list[StateChange]) -> None:
        if self._state is State.OPEN and now >= self._closes_at:
            self._close(events)

    def _open(self, now: float, events: list[StateChange]) -> None:
        self._failures.clear()
        self._closes_at = now + self.config.open_duration_s
        self._change(State.OPEN, events)

    def _close(self, events: list[StateChange]) -> None:
        self._failures.clear()
        self._change(State.CLOSED, events)

    def _change(self, target: State, events: list[StateChange]) -> None:
        if self._state is not target:
            events.append((self._state, target))
            self._state = target
            self._transitions += 1
