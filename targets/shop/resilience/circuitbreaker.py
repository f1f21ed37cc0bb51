"""Circuit breaker with Resilience4j's rate-based state machine.

Why our own: no Python library has Resilience4j's sliding windows, and pybreaker holds
its lock for the whole protected call, which would distort the latency we measure. Here
one ``threading.Lock`` guards only the small bookkeeping; the protected call never runs
under it.

:class:`CircuitBreaker` is the state machine (Resilience4j's
``CircuitBreakerStateMachine``): it owns the lock, the clock, the cumulative counters
and the listener, and delegates to one object per state (:mod:`.states`, where the
states are described). Time-driven transitions are applied lazily whenever the breaker
is touched, at the instant a scheduler would have fired them, so no background thread
is needed: even a scraper polling :attr:`CircuitBreaker.state` sees OPEN turn HALF_OPEN.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from targets.shop.resilience.circuitbreaker_config import CallKind, CircuitBreakerConfig
from targets.shop.resilience.states import (
    BreakerState,
    ClosedState,
    HalfOpenState,
    OpenState,
    State,
    Transition,
)

__all__ = [
    "BreakerMetrics",
    "CallNotPermittedError",
    "CircuitBreaker",
    "CircuitBreakerConfig",
    "State",
]

T = TypeVar("T")


class CallNotPermittedError(Exception):
    """The breaker refused a call (Resilience4j's CallNotPermittedException)."""

    def __init__(self, name: str, state: State | None = None) -> None:
        self.name = name
        self.state = state
        where = f" ({state.value})" if state is not None else ""
        super().__init__(f"CircuitBreaker '{name}'{where} does not permit further calls")


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


_StateChange = tuple[State, State]


class CircuitBreaker:
    """Thread-safe Resilience4j-style circuit breaker; see the module docstring.

    Which errors count is the config's ``record_exceptions`` / ``ignore_exceptions``
    (:meth:`CircuitBreakerConfig.classify`). ``is_recorded`` replaces that with one
    predicate: an error it rejects is ignored.
    """

    def __init__(
        self,
        name: str,
        config: CircuitBreakerConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        is_recorded: Callable[[BaseException], bool] | None = None,
        on_state_change: Callable[[State, State], None] | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self._clock = clock
        self._is_recorded = is_recorded
        self._on_state_change = on_state_change
        self._lock = threading.Lock()
        self._state: BreakerState = ClosedState(config)
        self._not_permitted = 0
        self._successful_total = 0
        self._failed_total = 0
        self._ignored_total = 0
        self._transitions = 0

    def __repr__(self) -> str:
        return f"CircuitBreaker(name={self.name!r}, state={self._state.state.value})"

    # -- public API ---------------------------------------------------------------------

    @property
    def state(self) -> State:
        """Current state, after applying any transition whose time has come."""
        events: list[_StateChange] = []
        with self._lock:
            self._advance_time(self._clock(), events)
            state = self._state.state
        self._publish(events)
        return state

    def acquire_permission(self) -> None:
        """Take a permit or raise :class:`CallNotPermittedError` (counted as not permitted)."""
        now = self._clock()
        events: list[_StateChange] = []
        with self._lock:
            self._advance_time(now, events)
            triggered = self._state.before_acquire(now)
            if triggered is not None:
                self._transition(triggered, events)
            permitted = self._state.try_acquire()
            if not permitted:
                self._not_permitted += 1
            state = self._state.state
        self._publish(events)
        if not permitted:
            raise CallNotPermittedError(self.name, state)

    def on_success(self, duration_s: float) -> None:
        """Record a successful call that took ``duration_s`` seconds."""
        self._on_result("successful", duration_s)

    def on_error(self, duration_s: float, error: BaseException) -> None:
        """Record a call that raised ``error``. An ignored error stays out of the window
        and, in HALF_OPEN, gives its trial permit back; an error the config neither
        records nor ignores counts as a success (Resilience4j)."""
        self._on_result(self._kind_of(error), duration_s)  # user code: outside the lock

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
                self._state.release_permission()
            raise
        self.on_success(self._clock() - start)
        return result

    def metrics(self) -> BreakerMetrics:
        """Consistent snapshot of the window and the cumulative counters."""
        now = self._clock()
        events: list[_StateChange] = []
        with self._lock:
            self._advance_time(now, events)
            window = self._state.window
            totals = window.snapshot(now)
            failure_rate, slow_rate = totals.rates(window.minimum_calls)
            snapshot = BreakerMetrics(
                state=self._state.state,
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

    # -- internals (all called with the lock held, except _kind_of and _publish) --------

    def _kind_of(self, error: BaseException) -> CallKind:
        if self._is_recorded is not None:
            return "failed" if self._is_recorded(error) else "ignored"
        return self.config.classify(error)

    def _on_result(self, kind: CallKind, duration_s: float) -> None:
        now = self._clock()
        events: list[_StateChange] = []
        with self._lock:
            self._advance_time(now, events)
            if kind == "ignored":
                self._ignored_total += 1
                self._state.release_permission()
            else:
                failed = kind == "failed"
                if failed:
                    self._failed_total += 1
                else:
                    self._successful_total += 1
                slow = duration_s > self.config.slow_call_duration_threshold_s
                caused = self._state.on_result(failed, slow, now)
                if caused is not None:
                    self._transition(caused, events)
        self._publish(events)

    def _advance_time(self, now: float, events: list[_StateChange]) -> None:
        """Apply scheduled transitions at the instant a timer would have fired them."""
        while (due := self._state.due(now)) is not None:
            self._transition(due, events)

    def _transition(self, transition: Transition, events: list[_StateChange]) -> None:
        target, at = transition
        old = self._state
        if target is State.OPEN:
            self._state = OpenState(self.config, at, old.window)  # OPEN shows what tripped it
        elif target is State.HALF_OPEN:
            self._state = HalfOpenState(self.config, at)
        else:
            self._state = ClosedState(self.config)
        if old.state is not target:
            self._transitions += 1
            events.append((old.state, target))

    def _force(self, target: State) -> None:
        now = self._clock()
        events: list[_StateChange] = []
        with self._lock:
            self._advance_time(now, events)
            self._transition((target, now), events)
        self._publish(events)

    def _publish(self, events: list[_StateChange]) -> None:
        """Run the listener outside the lock so it may inspect the breaker freely."""
        if self._on_state_change is None:
            return
        for old, new in events:
            self._on_state_change(old, new)
