"""Circuit breaker with Resilience4j's rate-based state machine.

Why our own: no Python library has Resilience4j's sliding windows, and pybreaker holds
its lock for the whole protected call, which would distort the latency we measure. Here
one ``threading.Lock`` guards only the small bookkeeping; the protected call never runs
under it.

:class:`CircuitBreaker` is the state machine (Resilience4j's
``CircuitBreakerStateMachine``): it owns the lock, the clock, the cumulative counters
and the listener (the plumbing it shares with the naive breaker, :mod:`.breaker`), and
delegates to one object per state (:mod:`.states`, where the states are described).
Time-driven transitions are applied lazily whenever the breaker is touched, at the
instant a scheduler would have fired them, so no background thread is needed: even a
scraper polling :attr:`CircuitBreaker.state` sees OPEN turn HALF_OPEN.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from targets.shop.resilience.breaker import (
    Breaker,
    BreakerMetrics,
    CallNotPermittedError,
    StateChange,
)
from targets.shop.resilience.circuitbreaker_config import CallKind, CircuitBreakerConfig
from targets.shop.resilience.states import (
    BreakerState,
    ClosedState,
    HalfOpenState,
    OpenState,
    State,
    Transition,
)
from targets.shop.resilience.windows import WindowTotals

__all__ = [
    "BreakerMetrics",
    "CallNotPermittedError",
    "CircuitBreaker",
    "CircuitBreakerConfig",
    "State",
]


class CircuitBreaker(Breaker[CircuitBreakerConfig]):
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
        super().__init__(name, config, clock=clock, on_state_change=on_state_change)
        self._is_recorded = is_recorded
        self._state: BreakerState = ClosedState(config)

    # -- public API (``state``, ``call`` and ``metrics``: :class:`Breaker`) ---------------

    def acquire_permission(self) -> None:
        """Take a permit or raise :class:`CallNotPermittedError` (counted as not permitted)."""
        now = self._clock()
        events: list[StateChange] = []
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

    def transition_to_closed(self) -> None:
        """Force CLOSED with an empty window (admin / tests)."""
        self._force(State.CLOSED)

    def transition_to_open(self) -> None:
        """Force OPEN; the open-state wait starts now (admin / tests)."""
        self._force(State.OPEN)

    def transition_to_half_open(self) -> None:
        """Force HALF_OPEN with a fresh set of trial permits (admin / tests)."""
        self._force(State.HALF_OPEN)

    # -- internals (all called with the lock held, except _kind_of) ---------------------

    def _kind_of(self, error: BaseException) -> CallKind:
        if self._is_recorded is not None:
            return "failed" if self._is_recorded(error) else "ignored"
        return self.config.classify(error)

    def _on_result(self, kind: CallKind, duration_s: float) -> None:
        now = self._clock()
        events: list[StateChange] = []
        with self._lock:
            self._advance_time(now, events)
            self._count(kind)
            if kind == "ignored":
                self._state.release_permission()
            else:
                slow = duration_s > self.config.slow_call_duration_threshold_s
                caused = self._state.on_result(kind == "failed", slow, now)
                if caused is not None:
                    self._transition(caused, events)
        self._publish(events)

    def _current_state(self) -> State:
        return self._state.state

    def _window_metrics(self, now: float) -> tuple[WindowTotals, float, float]:
        window = self._state.window  # OPEN shows the window that tripped it
        totals = window.snapshot(now)
        return (totals, *totals.rates(window.minimum_calls))

    def _release_permission(self) -> None:
        self._state.release_permission()  # a HALF_OPEN trial permit goes back

    def _advance_time(self, now: float, events: list[StateChange]) -> None:
        """Apply scheduled transitions at the instant a timer would have fired them."""
        while (due := self._state.due(now)) is not None:
            self._transition(due, events)

    def _transition(self, transition: Transition, events: list[StateChange]) -> None:
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
        events: list[StateChange] = []
        with self._lock:
            self._advance_time(now, events)
            self._transition((target, now), events)
        self._publish(events)
