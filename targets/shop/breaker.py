"""Circuit breaker with Resilience4j's rate-based state machine.

Why our own: no Python library has Resilience4j's sliding windows, and pybreaker holds
its lock for the whole protected call, which would distort the latency we measure. Here
one ``threading.Lock`` guards only the small bookkeeping; the protected call never runs
under it.

State machine (https://resilience4j.readme.io/docs/circuitbreaker):

* CLOSED: every call is permitted. Each recorded outcome (success/failure, and slow if
  it took longer than ``slow_call_duration_threshold_s``) goes into a COUNT_BASED ring
  of the last N calls or a TIME_BASED set of N one-second buckets. Once the window holds
  at least the minimum number of calls, a failure rate or slow-call rate at or above its
  threshold trips the breaker to OPEN.
* OPEN: calls are refused with :class:`CallNotPermittedError` (and counted) until
  ``wait_duration_in_open_state_s`` has elapsed; then HALF_OPEN, either as soon as the
  wait is over (automatic transition: even a scraper polling :attr:`CircuitBreaker.state`
  sees it) or on the first permission request after it.
* HALF_OPEN: exactly ``permitted_number_of_calls_in_half_open_state`` trial permits.
  When that many trials are recorded their rates decide: at/above a threshold -> OPEN
  (a new wait starts), else CLOSED. Optionally HALF_OPEN gives up and reopens after
  ``max_wait_duration_in_half_open_state_s``.

Like Resilience4j, CLOSED and HALF_OPEN start with an empty window, while OPEN keeps the
window that tripped it (so its failure rate stays visible) and only records late results
of calls started before the breaker opened, without ever evaluating them.
Time-driven transitions are applied lazily whenever the breaker is touched, at the
instant a scheduler would have fired them, so no background thread is needed.
"""

from __future__ import annotations

import collections
import enum
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

__all__ = [
    "BreakerMetrics",
    "CallNotPermittedError",
    "CircuitBreaker",
    "CircuitBreakerConfig",
    "State",
]

T = TypeVar("T")

SlidingWindowType = Literal["COUNT_BASED", "TIME_BASED"]


class State(enum.StrEnum):
    """Breaker state; the string values are what metrics and logs show."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CallNotPermittedError(Exception):
    """The breaker refused a call (Resilience4j's CallNotPermittedException)."""

    def __init__(self, name: str, state: State | None = None) -> None:
        self.name = name
        self.state = state
        where = f" ({state.value})" if state is not None else ""
        super().__init__(f"CircuitBreaker '{name}'{where} does not permit further calls")


@dataclass(frozen=True)
class CircuitBreakerConfig:
    """Resilience4j's CircuitBreakerConfig, with its defaults, durations in seconds."""

    sliding_window_type: SlidingWindowType = "COUNT_BASED"
    sliding_window_size: int = 100
    minimum_number_of_calls: int = 100
    failure_rate_threshold: float = 50.0
    slow_call_rate_threshold: float = 100.0
    slow_call_duration_threshold_s: float = 60.0
    wait_duration_in_open_state_s: float = 60.0
    permitted_number_of_calls_in_half_open_state: int = 10
    automatic_transition_from_open_to_half_open_enabled: bool = False
    max_wait_duration_in_half_open_state_s: float = 0.0

    def __post_init__(self) -> None:
        """Reject settings Resilience4j rejects, so a bad scenario file fails at load time."""
        if self.sliding_window_type not in ("COUNT_BASED", "TIME_BASED"):
            raise ValueError(
                "sliding_window_type must be 'COUNT_BASED' or 'TIME_BASED', "
                f"got {self.sliding_window_type!r}"
            )
        _require_int_at_least("sliding_window_size", self.sliding_window_size, 1)
        _require_int_at_least("minimum_number_of_calls", self.minimum_number_of_calls, 1)
        _require_int_at_least(
            "permitted_number_of_calls_in_half_open_state",
            self.permitted_number_of_calls_in_half_open_state,
            1,
        )
        for field_name in ("failure_rate_threshold", "slow_call_rate_threshold"):
            value = getattr(self, field_name)
            if not 0.0 < value <= 100.0:
                raise ValueError(f"{field_name} must be in (0, 100] percent, got {value!r}")
        for field_name in ("slow_call_duration_threshold_s", "wait_duration_in_open_state_s"):
            value = getattr(self, field_name)
            if not value > 0.0:
                raise ValueError(f"{field_name} must be > 0 seconds, got {value!r}")
        if not self.max_wait_duration_in_half_open_state_s >= 0.0:
            raise ValueError(
                "max_wait_duration_in_half_open_state_s must be >= 0 seconds "
                f"(0 = wait forever), got {self.max_wait_duration_in_half_open_state_s!r}"
            )


def _require_int_at_least(field_name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{field_name} must be an integer >= {minimum}, got {value!r}")


@dataclass(frozen=True)
class BreakerMetrics:
    """Point-in-time snapshot for exporters.

    Window figures (``failure_rate`` .. ``slow_calls``) describe the current state's
    sliding window; rates are percentages, or -1.0 while the window holds fewer calls
    than the minimum (as Resilience4j reports them). The ``*_total``-style counters are
    cumulative since the breaker was created, so they can back monotonic counters.
    """

    state: State
    failure_rate: float
    slow_call_rate: float
    buffered_calls: int
    failed_calls: int
    slow_calls: int
    not_permitted_calls: int
    successful_calls: int
    failed_calls_total: int
    ignored_calls: int
    transitions: int


@dataclass
class _Totals:
    calls: int = 0
    failed: int = 0
    slow: int = 0

    def add(self, failed: bool, slow: bool, sign: int = 1) -> None:
        self.calls += sign
        self.failed += sign * failed
        self.slow += sign * slow


class _CountWindow:
    """Ring of the last ``size`` outcomes with running totals (O(1) per record)."""

    def __init__(self, size: int, minimum_calls: int) -> None:
        self.minimum_calls = minimum_calls
        self._ring: list[tuple[bool, bool] | None] = [None] * size
        self._next = 0
        self._totals = _Totals()

    def record(self, failed: bool, slow: bool, now: float) -> _Totals:
        evicted = self._ring[self._next]
        if evicted is not None:
            self._totals.add(*evicted, sign=-1)
        self._ring[self._next] = (failed, slow)
        self._next = (self._next + 1) % len(self._ring)
        self._totals.add(failed, slow)
        return self._totals

    def snapshot(self, now: float) -> _Totals:
        return self._totals


class _TimeWindow:
    """``size`` one-second buckets keyed by whole clock seconds (Resilience4j's partial
    aggregation); buckets older than ``size`` seconds drop out whenever it is touched."""

    def __init__(self, size: int, minimum_calls: int) -> None:
        self.minimum_calls = minimum_calls
        self._size = size
        self._buckets: collections.deque[tuple[int, _Totals]] = collections.deque()
        self._totals = _Totals()

    def _evict(self, now: float) -> int:
        second = math.floor(now)
        while self._buckets and self._buckets[0][0] <= second - self._size:
            _, old = self._buckets.popleft()
            self._totals.calls -= old.calls
            self._totals.failed -= old.failed
            self._totals.slow -= old.slow
        return second

    def record(self, failed: bool, slow: bool, now: float) -> _Totals:
        second = self._evict(now)
        if not self._buckets or self._buckets[-1][0] < second:
            self._buckets.append((second, _Totals()))
        # A clock that stepped back lands in the newest bucket rather than reordering.
        self._buckets[-1][1].add(failed, slow)
        self._totals.add(failed, slow)
        return self._totals

    def snapshot(self, now: float) -> _Totals:
        self._evict(now)
        return self._totals


_Window = _CountWindow | _TimeWindow


def _rates(totals: _Totals, minimum_calls: int) -> tuple[float, float]:
    """(failure %, slow %), each -1.0 below the minimum number of calls."""
    if totals.calls == 0 or totals.calls < minimum_calls:
        return -1.0, -1.0
    return totals.failed * 100.0 / totals.calls, totals.slow * 100.0 / totals.calls


def _record_everything(error: BaseException) -> bool:
    return True


_Transition = tuple[State, State]


class CircuitBreaker:
    """Thread-safe Resilience4j-style circuit breaker; see the module docstring."""

    def __init__(
        self,
        name: str,
        config: CircuitBreakerConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        is_recorded: Callable[[BaseException], bool] = _record_everything,
        on_state_change: Callable[[State, State], None] | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self._clock = clock
        self._is_recorded = is_recorded
        self._on_state_change = on_state_change
        self._lock = threading.Lock()
        self._state = State.CLOSED
        self._window: _Window = self._closed_window()
        self._open_until = 0.0
        self._half_open_since = 0.0
        self._half_open_permits = 0
        self._not_permitted = 0
        self._successful_total = 0
        self._failed_total = 0
        self._ignored_total = 0
        self._transitions = 0

    def __repr__(self) -> str:
        return f"CircuitBreaker(name={self.name!r}, state={self._state.value})"

    # -- public API ---------------------------------------------------------------------

    @property
    def state(self) -> State:
        """Current state, after applying any transition whose time has come."""
        events: list[_Transition] = []
        with self._lock:
            self._advance_time(self._clock(), events)
            state = self._state
        self._publish(events)
        return state

    def acquire_permission(self) -> None:
        """Take a permit or raise :class:`CallNotPermittedError` (counted as not permitted)."""
        now = self._clock()
        events: list[_Transition] = []
        with self._lock:
            self._advance_time(now, events)
            if self._state is State.OPEN and now >= self._open_until:
                # No automatic transition: the first request after the wait moves us on.
                self._to_half_open(now, events)
            if self._state is State.CLOSED:
                permitted = True
            elif self._state is State.HALF_OPEN and self._half_open_permits > 0:
                self._half_open_permits -= 1
                permitted = True
            else:
                permitted = False
                self._not_permitted += 1
            state = self._state
        self._publish(events)
        if not permitted:
            raise CallNotPermittedError(self.name, state)

    def on_success(self, duration_s: float) -> None:
        """Record a successful call that took ``duration_s`` seconds."""
        now = self._clock()
        events: list[_Transition] = []
        with self._lock:
            self._advance_time(now, events)
            self._successful_total += 1
            self._record(failed=False, duration_s=duration_s, now=now, events=events)
        self._publish(events)

    def on_error(self, duration_s: float, error: BaseException) -> None:
        """Record a failed call; errors ``is_recorded`` rejects (e.g. 4xx) are ignored:
        they stay out of the window and, in HALF_OPEN, give their trial permit back."""
        recorded = self._is_recorded(error)  # user code: evaluated outside the lock
        now = self._clock()
        events: list[_Transition] = []
        with self._lock:
            self._advance_time(now, events)
            if recorded:
                self._failed_total += 1
                self._record(failed=True, duration_s=duration_s, now=now, events=events)
            else:
                self._ignored_total += 1
                self._release_permit()
        self._publish(events)

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` under the breaker, timing it with the breaker's clock.

        The lock is not held while ``fn`` runs. Exceptions are recorded and re-raised;
        non-``Exception`` interrupts (KeyboardInterrupt, SystemExit, ...) are not
        recorded but do return a HALF_OPEN trial permit.
        """
        self.acquire_permission()
        start = self._clock()
        try:
            result = fn()
        except Exception as exc:
            self.on_error(self._clock() - start, exc)
            raise
        except BaseException:
            with self._lock:
                self._release_permit()
            raise
        self.on_success(self._clock() - start)
        return result

    def metrics(self) -> BreakerMetrics:
        """Consistent snapshot of the window and the cumulative counters."""
        now = self._clock()
        events: list[_Transition] = []
        with self._lock:
            self._advance_time(now, events)
            totals = self._window.snapshot(now)
            failure_rate, slow_rate = _rates(totals, self._window.minimum_calls)
            snapshot = BreakerMetrics(
                state=self._state,
                failure_rate=failure_rate,
                slow_call_rate=slow_rate,
                buffered_calls=totals.calls,
                failed_calls=totals.failed,
                slow_calls=totals.slow,
                not_permitted_calls=self._not_permitted,
                successful_calls=self._successful_total,
                failed_calls_total=self._failed_total,
                ignored_calls=self._ignored_total,
                transitions=self._transitions,
            )
        self._publish(events)
        return snapshot

    def transition_to_closed(self) -> None:
        """Force CLOSED with an empty window (admin / tests)."""
        self._force(State.CLOSED)

    def transition_to_open(self) -> None:
        """Force OPEN; the open-state wait starts now (admin / tests)."""
        self._force(State.OPEN)

    def transition_to_half_open(self) -> None:
        """Force HALF_OPEN with a fresh set of trial permits (admin / tests)."""
        self._force(State.HALF_OPEN)

    # -- internals (all called with the lock held, except _publish) ---------------------

    def _closed_window(self) -> _Window:
        cfg = self.config
        if cfg.sliding_window_type == "COUNT_BASED":
            minimum = min(cfg.minimum_number_of_calls, cfg.sliding_window_size)
            return _CountWindow(cfg.sliding_window_size, minimum)
        return _TimeWindow(cfg.sliding_window_size, cfg.minimum_number_of_calls)

    def _half_open_window(self) -> _Window:
        # Resilience4j: a COUNT_BASED window of the permitted size, so its minimum is
        # min(minimum_number_of_calls, permitted).
        permitted = self.config.permitted_number_of_calls_in_half_open_state
        return _CountWindow(permitted, min(self.config.minimum_number_of_calls, permitted))

    def _record(
        self, *, failed: bool, duration_s: float, now: float, events: list[_Transition]
    ) -> None:
        slow = duration_s > self.config.slow_call_duration_threshold_s
        totals = self._window.record(failed, slow, now)
        if self._state is State.OPEN:
            return  # late result of a call permitted earlier: kept, never evaluated
        failure_rate, slow_rate = _rates(totals, self._window.minimum_calls)
        if failure_rate < 0.0:
            return  # below the minimum number of calls
        exceeded = (
            failure_rate >= self.config.failure_rate_threshold
            or slow_rate >= self.config.slow_call_rate_threshold
        )
        if exceeded:
            self._to_open(now, events)
        elif self._state is State.HALF_OPEN:
            self._to_closed(events)

    def _release_permit(self) -> None:
        if self._state is State.HALF_OPEN:
            permitted = self.config.permitted_number_of_calls_in_half_open_state
            self._half_open_permits = min(self._half_open_permits + 1, permitted)

    def _advance_time(self, now: float, events: list[_Transition]) -> None:
        """Apply scheduled transitions at the instant a timer would have fired them."""
        cfg = self.config
        while True:
            if (
                self._state is State.OPEN
                and cfg.automatic_transition_from_open_to_half_open_enabled
                and now >= self._open_until
            ):
                self._to_half_open(self._open_until, events)
            elif (
                self._state is State.HALF_OPEN
                and cfg.max_wait_duration_in_half_open_state_s > 0.0
                and now >= self._half_open_since + cfg.max_wait_duration_in_half_open_state_s
            ):
                self._to_open(
                    self._half_open_since + cfg.max_wait_duration_in_half_open_state_s, events
                )
            else:
                return

    def _to_open(self, at: float, events: list[_Transition]) -> None:
        # The window is kept: OPEN reports the rates that tripped it.
        self._open_until = at + self.config.wait_duration_in_open_state_s
        self._set_state(State.OPEN, events)

    def _to_half_open(self, at: float, events: list[_Transition]) -> None:
        self._window = self._half_open_window()
        self._half_open_since = at
        self._half_open_permits = self.config.permitted_number_of_calls_in_half_open_state
        self._set_state(State.HALF_OPEN, events)

    def _to_closed(self, events: list[_Transition]) -> None:
        self._window = self._closed_window()
        self._set_state(State.CLOSED, events)

    def _set_state(self, new: State, events: list[_Transition]) -> None:
        old, self._state = self._state, new
        if old is not new:
            self._transitions += 1
            events.append((old, new))

    def _force(self, target: State) -> None:
        now = self._clock()
        events: list[_Transition] = []
        with self._lock:
            self._advance_time(now, events)
            if target is State.CLOSED:
                self._to_closed(events)
            elif target is State.OPEN:
                self._to_open(now, events)
            else:
                self._to_half_open(now, events)
        self._publish(events)

    def _publish(self, events: list[_Transition]) -> None:
        """Run the listener outside the lock so it may inspect the breaker freely."""
        if self._on_state_change is None:
            return
        for old, new in events:
            self._on_state_change(old, new)
