"""What both kinds of circuit breaker share: the refusal, the metrics, and the plumbing.

:class:`~targets.shop.resilience.circuitbreaker.CircuitBreaker` (Resilience4j's state
machine) and :class:`~targets.shop.resilience.naivebreaker.NaiveCircuitBreaker` decide
differently when to open and close, but have the same face: one ``threading.Lock``
held only for bookkeeping (never while the protected call runs), an injectable clock,
time-driven transitions applied lazily when the breaker is touched, the same
cumulative counters, and a state-change listener run outside the lock.
:class:`Breaker` is that face; a kind of breaker supplies how it permits and records
calls, and the hooks its ``state``, ``call`` and ``metrics`` read.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from targets.shop.resilience.circuitbreaker_config import CallKind
from targets.shop.resilience.states import State
from targets.shop.resilience.windows import WindowTotals

__all__ = ["Breaker", "BreakerMetrics", "CallNotPermittedError", "StateChange"]

T = TypeVar("T")
ConfigT = TypeVar("ConfigT")

StateChange = tuple[State, State]
"""(old, new): one transition, for the listener."""


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


class Breaker(ABC, Generic[ConfigT]):
    """The lock, clock, counters and listener of a breaker; see the module docstring.

    A subclass implements ``acquire_permission``, ``on_success`` and ``on_error``, and
    the hooks below that are called with the lock held: ``_advance_time``,
    ``_current_state``, ``_window_metrics`` and, if a refused trial must give its permit
    back, ``_release_permission``.
    """

    states: tuple[State, ...] = tuple(State)
    """The states this kind of breaker has (what its state gauge reports)."""

    def __init__(
        self,
        name: str,
        config: ConfigT,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_state_change: Callable[[State, State], None] | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self._clock = clock
        self._on_state_change = on_state_change
        self._lock = threading.Lock()
        self._not_permitted = 0
        self._successful_total = 0
        self._failed_total = 0
        self._ignored_total = 0
        self._transitions = 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, state={self._current_state().value})"

    # -- what each kind decides -----------------------------------------------------------

    @abstractmethod
    def acquire_permission(self) -> None:
        """Take a permit or raise :class:`CallNotPermittedError` (counted as not permitted)."""

    @abstractmethod
    def on_success(self, duration_s: float) -> None:
        """Record a successful call that took ``duration_s`` seconds."""

    @abstractmethod
    def on_error(self, duration_s: float, error: BaseException) -> None:
        """Record a call that raised ``error`` after ``duration_s`` seconds."""

    @abstractmethod
    def _advance_time(self, now: float, events: list[StateChange]) -> None:
        """Apply the transitions due by ``now``, at the instant a timer would have fired."""

    @abstractmethod
    def _current_state(self) -> State:
        """The state as it stands (without advancing time)."""

    @abstractmethod
    def _window_metrics(self, now: float) -> tuple[WindowTotals, float, float]:
        """The current window's calls, and its (failure %, slow %) rates (-1.0: none)."""

    def _release_permission(self) -> None:
        """Give back a permit taken for a call that was never recorded."""

    # -- the same for every kind ----------------------------------------------------------

    @property
    def state(self) -> State:
        """Current state, after applying any transition whose time has come."""
        events: list[StateChange] = []
        with self._lock:
            self._advance_time(self._clock(), events)
            state = self._current_state()
        self._publish(events)
        return state

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` under the breaker, timing it with the breaker's clock.

        The lock is not held while ``fn`` runs. Exceptions are recorded and re-raised;
        non-``Exception`` interrupts (KeyboardInterrupt, SystemExit, ...) are not
        recorded but do give back the permit (``_release_permission``).
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
                self._release_permission()
            raise
        self.on_success(self._clock() - start)
        return result

    def metrics(self) -> BreakerMetrics:
        """Consistent snapshot of the window and the cumulative counters."""
        now = self._clock()
        events: list[StateChange] = []
        with self._lock:
            self._advance_time(now, events)
            totals, failure_rate, slow_rate = self._window_metrics(now)
            snapshot = BreakerMetrics(
                state=self._current_state(),
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

    def _count(self, kind: CallKind) -> None:
        """Add a recorded call to the cumulative counters (lock held)."""
        if kind == "ignored":
            self._ignored_total += 1
        elif kind == "failed":
            self._failed_total += 1
        else:
            self._successful_total += 1

    def _publish(self, events: list[StateChange]) -> None:
        """Run the listener outside the lock so it may inspect the breaker freely."""
        if self._on_state_change is None:
            return
        for old, new in events:
            self._on_state_change(old, new)
