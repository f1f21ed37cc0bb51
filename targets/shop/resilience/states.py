"""One class per breaker state, as in Resilience4j's ``CircuitBreakerStateMachine``.

Each state owns its window and its permits and answers, for one event, which transition
(if any) the event causes; :class:`~targets.shop.resilience.circuitbreaker.CircuitBreaker`
applies it. States never call back into the breaker, hold no lock and read no clock: the
breaker passes ``now`` in and calls them under its lock.

* CLOSED: every call is permitted. Outcomes fill a COUNT_BASED or TIME_BASED window; once
  it holds the minimum number of calls, a failure or slow-call rate at or above its
  threshold opens the breaker.
* OPEN: calls are refused until ``wait_duration_in_open_state_s`` has elapsed; then
  HALF_OPEN, at that very instant with the automatic transition, else on the first
  permission request after it. OPEN keeps the window that tripped it (its rates stay
  visible) and records late results of calls permitted earlier without evaluating them.
* HALF_OPEN: exactly ``permitted_number_of_calls_in_half_open_state`` trial permits and a
  fresh COUNT_BASED window of that size; when its minimum is reached the rates decide:
  at/above a threshold -> OPEN, else CLOSED. With ``max_wait_duration_in_half_open_state_s``
  it gives up and reopens after that long.
"""

from __future__ import annotations

import enum

from targets.shop.resilience.circuitbreaker_config import CircuitBreakerConfig
from targets.shop.resilience.windows import (
    FixedSizeSlidingWindowMetrics,
    SlidingTimeWindowMetrics,
    SlidingWindow,
    WindowTotals,
)

__all__ = ["BreakerState", "ClosedState", "HalfOpenState", "OpenState", "State", "Transition"]


class State(enum.StrEnum):
    """Breaker state; the string values are what metrics and logs show."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


Transition = tuple[State, float]
"""The state to move to, and the clock instant the move happens at."""


def _thresholds_exceeded(
    config: CircuitBreakerConfig, window: SlidingWindow, totals: WindowTotals
) -> bool | None:
    """Whether the window's rates reach a threshold; None below its minimum of calls."""
    failure_rate, slow_rate = totals.rates(window.minimum_calls)
    if failure_rate < 0.0:
        return None
    return (
        failure_rate >= config.failure_rate_threshold
        or slow_rate >= config.slow_call_rate_threshold
    )


class BreakerState:
    """What every state answers; the defaults are the "nothing happens" answers."""

    state: State
    window: SlidingWindow

    def __init__(self, config: CircuitBreakerConfig) -> None:
        self.config = config

    def due(self, now: float) -> Transition | None:
        """A timed transition whose instant has come by ``now``."""
        return None

    def before_acquire(self, now: float) -> Transition | None:
        """A transition a permission request triggers before it is judged."""
        return None

    def try_acquire(self) -> bool:
        """Take a permit if this state gives one."""
        raise NotImplementedError

    def release_permission(self) -> None:
        """Give back a permit taken for a call whose outcome will not be recorded."""

    def on_result(self, failed: bool, slow: bool, now: float) -> Transition | None:
        """Record a finished call; the transition its outcome causes, if any."""
        raise NotImplementedError


class ClosedState(BreakerState):
    """Permits every call; opens when the window's rates reach a threshold."""

    state = State.CLOSED

    def __init__(self, config: CircuitBreakerConfig) -> None:
        super().__init__(config)
        size = config.sliding_window_size
        if config.sliding_window_type == "COUNT_BASED":
            minimum = min(config.minimum_number_of_calls, size)
            self.window = FixedSizeSlidingWindowMetrics(size, minimum)
        else:
            self.window = SlidingTimeWindowMetrics(size, config.minimum_number_of_calls)

    def try_acquire(self) -> bool:
        return True

    def on_result(self, failed: bool, slow: bool, now: float) -> Transition | None:
        totals = self.window.record(failed, slow, now)
        if _thresholds_exceeded(self.config, self.window, totals):
            return State.OPEN, now
        return None


class OpenState(BreakerState):
    """Refuses calls until the wait is over; keeps the window that tripped it."""

    state = State.OPEN

    def __init__(self, config: CircuitBreakerConfig, at: float, window: SlidingWindow) -> None:
        super().__init__(config)
        self.window = window
        self.retry_after = at + config.wait_duration_in_open_state_s

    def due(self, now: float) -> Transition | None:
        if self.config.automatic_transition_from_open_to_half_open_enabled and (
            now >= self.retry_after
        ):
            return State.HALF_OPEN, self.retry_after
        return None

    def before_acquire(self, now: float) -> Transition | None:
        # Without the automatic transition, the first request after the wait moves us on.
        return (State.HALF_OPEN, now) if now >= self.retry_after else None

    def try_acquire(self) -> bool:
        return False

    def on_result(self, failed: bool, slow: bool, now: float) -> Transition | None:
        self.window.record(failed, slow, now)  # late result of an earlier call: never evaluated
        return None


class HalfOpenState(BreakerState):
    """A fixed number of trial permits whose outcomes decide between CLOSED and OPEN."""

    state = State.HALF_OPEN

    def __init__(self, config: CircuitBreakerConfig, at: float) -> None:
        super().__init__(config)
        # Resilience4j: a COUNT_BASED window of the permitted size, so its minimum is
        # min(minimum_number_of_calls, permitted).
        permitted = config.permitted_number_of_calls_in_half_open_state
        self.window = FixedSizeSlidingWindowMetrics(
            permitted, min(config.minimum_number_of_calls, permitted)
        )
        self.since = at
        self._permits = permitted

    def due(self, now: float) -> Transition | None:
        max_wait = self.config.max_wait_duration_in_half_open_state_s
        if max_wait > 0.0 and now >= self.since + max_wait:
            return State.OPEN, self.since + max_wait
        return None

    def try_acquire(self) -> bool:
        if self._permits > 0:
            self._permits -= 1
            return True
        return False

    def release_permission(self) -> None:
        permitted = self.config.permitted_number_of_calls_in_half_open_state
        self._permits = min(self._permits + 1, permitted)

    def on_result(self, failed: bool, slow: bool, now: float) -> Transition | None:
        totals = self.window.record(failed, slow, now)
        exceeded = _thresholds_exceeded(self.config, self.window, totals)
        if exceeded is None:
            return None  # below the window's minimum of calls
        return (State.OPEN, now) if exceeded else (State.CLOSED, now)
