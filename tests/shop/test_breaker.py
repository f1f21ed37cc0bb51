"""Unit tests for the shop's circuit breaker, state by state, driven by a fake clock."""

# `cb.state` is a property whose value changes as the clock moves; mypy would otherwise
# narrow it after the first assert and flag the next one as unreachable.
# mypy: disable-error-code="comparison-overlap"

from __future__ import annotations

import threading
from typing import Any

import pytest

from targets.shop.resilience import (
    BreakerMetrics,
    CallNotPermittedError,
    CircuitBreaker,
    CircuitBreakerConfig,
    State,
)


class FakeClock:
    """Manually driven monotonic clock."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Boom(Exception):
    """A recorded failure (5xx / timeout-like)."""


class ClientError(Exception):
    """A 4xx-like error the breaker must ignore."""


def not_client_error(error: BaseException) -> bool:
    return not isinstance(error, ClientError)


Transitions = list[tuple[State, State]]


def make(
    clock: FakeClock, transitions: Transitions | None = None, **overrides: Any
) -> CircuitBreaker:
    settings: dict[str, Any] = {
        "sliding_window_size": 10,
        "minimum_number_of_calls": 10,
        "failure_rate_threshold": 50.0,
        "wait_duration_in_open_state_s": 10.0,
        "permitted_number_of_calls_in_half_open_state": 3,
    }
    settings.update(overrides)
    listener = None if transitions is None else lambda old, new: transitions.append((old, new))
    return CircuitBreaker(
        "pg",
        CircuitBreakerConfig(**settings),
        clock=clock,
        is_recorded=not_client_error,
        on_state_change=listener,
    )


def succeed(cb: CircuitBreaker, n: int = 1, duration_s: float = 0.01) -> None:
    for _ in range(n):
        cb.acquire_permission()
        cb.on_success(duration_s)


def fail(cb: CircuitBreaker, n: int = 1, duration_s: float = 0.01) -> None:
    for _ in range(n):
        cb.acquire_permission()
        cb.on_error(duration_s, Boom("502"))


def trip(cb: CircuitBreaker) -> None:
    fail(cb, 10)
    assert cb.state is State.OPEN


# --- configuration -------------------------------------------------------------------


def test_defaults_are_resilience4j_defaults() -> None:
    cfg = CircuitBreakerConfig()
    assert cfg.sliding_window_type == "COUNT_BASED"
    assert cfg.sliding_window_size == 100
    assert cfg.minimum_number_of_calls == 100
    assert cfg.failure_rate_threshold == 50.0
    assert cfg.slow_call_rate_threshold == 100.0
    assert cfg.slow_call_duration_threshold_s == 60.0
    assert cfg.wait_duration_in_open_state_s == 60.0
    assert cfg.permitted_number_of_calls_in_half_open_state == 10
    assert cfg.automatic_transition_from_open_to_half_open_enabled is False
    assert cfg.max_wait_duration_in_half_open_state_s == 0.0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"sliding_window_type": "SESSION"}, "sliding_window_type"),
        ({"sliding_window_size": 0}, "sliding_window_size"),
        ({"sliding_window_size": 2.5}, "sliding_window_size"),
        ({"minimum_number_of_calls": 0}, "minimum_number_of_calls"),
        ({"failure_rate_threshold": 0.0}, "failure_rate_threshold"),
        ({"failure_rate_threshold": 100.1}, "failure_rate_threshold"),
        ({"failure_rate_threshold": float("nan")}, "failure_rate_threshold"),
        ({"slow_call_rate_threshold": -1.0}, "slow_call_rate_threshold"),
        ({"slow_call_duration_threshold_s": 0.0}, "slow_call_duration_threshold_s"),
        ({"wait_duration_in_open_state_s": 0.0}, "wait_duration_in_open_state_s"),
        ({"permitted_number_of_calls_in_half_open_state": 0}, "permitted_number_of_calls"),
        ({"max_wait_duration_in_half_open_state_s": -1.0}, "max_wait_duration"),
    ],
)
def test_config_validation(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CircuitBreakerConfig(**overrides)


def test_boundary_config_values_are_accepted() -> None:
    CircuitBreakerConfig(
        sliding_window_size=1,
        minimum_number_of_calls=1,
        failure_rate_threshold=100.0,
        slow_call_rate_threshold=100.0,
        permitted_number_of_calls_in_half_open_state=1,
        max_wait_duration_in_half_open_state_s=0.0,
    )


# --- CLOSED --------------------------------------------------------------------------


def test_stays_closed_below_minimum_number_of_calls() -> None:
    cb = make(FakeClock())
    fail(cb, 9)
    m = cb.metrics()
    assert m.state is State.CLOSED
    assert m.buffered_calls == 9
    assert m.failed_calls == 9
    assert m.failure_rate == -1.0
    assert m.slow_call_rate == -1.0
    cb.acquire_permission()  # still permitted


def test_opens_at_exactly_the_failure_rate_threshold() -> None:
    transitions: Transitions = []
    cb = make(FakeClock(), transitions)
    succeed(cb, 5)
    fail(cb, 5)
    m = cb.metrics()
    assert m.state is State.OPEN
    assert m.failure_rate == 50.0  # OPEN keeps the window that tripped it
    assert transitions == [(State.CLOSED, State.OPEN)]


def test_does_not_open_just_below_the_threshold() -> None:
    cb = make(FakeClock())
    succeed(cb, 6)
    fail(cb, 4)
    m = cb.metrics()
    assert m.state is State.CLOSED
    assert m.failure_rate == 40.0
    assert m.buffered_calls == 10


def test_count_window_keeps_only_the_last_n_calls() -> None:
    cb = make(FakeClock())
    fail(cb, 4)
    succeed(cb, 6)  # 40 %: closed
    succeed(cb, 4)  # the four failures slide out of the ring
    m = cb.metrics()
    assert m.state is State.CLOSED
    assert (m.buffered_calls, m.failed_calls, m.failure_rate) == (10, 0, 0.0)
    assert m.successful_calls == 10
    assert m.failed_calls_total == 4


def test_count_based_minimum_is_capped_by_window_size() -> None:
    cb = make(FakeClock(), sliding_window_size=4, minimum_number_of_calls=100)
    fail(cb, 3)
    assert cb.state is State.CLOSED
    fail(cb)
    assert cb.state is State.OPEN


def test_ignored_errors_are_not_counted() -> None:
    cb = make(FakeClock())
    for _ in range(20):
        cb.acquire_permission()
        cb.on_error(0.01, ClientError("404"))
    m = cb.metrics()
    assert m.state is State.CLOSED
    assert m.buffered_calls == 0
    assert m.failed_calls_total == 0
    assert m.ignored_calls == 20


def test_slow_calls_open_the_breaker() -> None:
    cb = make(FakeClock(), slow_call_rate_threshold=50.0, slow_call_duration_threshold_s=2.0)
    succeed(cb, 5, duration_s=0.1)
    succeed(cb, 4, duration_s=2.5)
    assert cb.state is State.CLOSED
    succeed(cb, 1, duration_s=2.5)
    m = cb.metrics()
    assert m.state is State.OPEN
    assert m.slow_call_rate == 50.0
    assert m.failure_rate == 0.0
    assert m.slow_calls == 5


def test_call_at_exactly_the_slow_threshold_is_not_slow() -> None:
    # Resilience4j counts a call as slow only when it takes longer than the threshold.
    cb = make(FakeClock(), slow_call_duration_threshold_s=2.0, minimum_number_of_calls=1)
    succeed(cb, 1, duration_s=2.0)
    assert cb.metrics().slow_calls == 0
    succeed(cb, 1, duration_s=2.001)
    assert cb.metrics().slow_calls == 1


def test_a_call_can_be_both_slow_and_failed() -> None:
    cb = make(FakeClock(), slow_call_duration_threshold_s=2.0)
    fail(cb, 1, duration_s=5.0)
    m = cb.metrics()
    assert (m.buffered_calls, m.failed_calls, m.slow_calls) == (1, 1, 1)


# --- OPEN ----------------------------------------------------------------------------


def test_open_refuses_calls_and_counts_them() -> None:
    cb = make(FakeClock())
    trip(cb)
    ran: list[int] = []
    for _ in range(3):
        with pytest.raises(CallNotPermittedError) as info:
            cb.call(lambda: ran.append(1))
        assert info.value.name == "pg"
    with pytest.raises(CallNotPermittedError):
        cb.acquire_permission()
    assert ran == []
    m = cb.metrics()
    assert m.not_permitted_calls == 4
    assert m.failed_calls_total == 10


def test_open_to_half_open_automatically_without_any_call() -> None:
    clock = FakeClock()
    transitions: Transitions = []
    cb = make(clock, transitions, automatic_transition_from_open_to_half_open_enabled=True)
    trip(cb)
    clock.advance(9.999)
    assert cb.state is State.OPEN
    clock.advance(0.001)
    assert cb.state is State.HALF_OPEN  # polled, no call made
    assert transitions == [(State.CLOSED, State.OPEN), (State.OPEN, State.HALF_OPEN)]
    assert cb.metrics().not_permitted_calls == 0


def test_open_to_half_open_only_on_next_acquire_without_automatic_transition() -> None:
    clock = FakeClock()
    transitions: Transitions = []
    cb = make(clock, transitions)
    trip(cb)
    clock.advance(9.0)
    with pytest.raises(CallNotPermittedError):
        cb.acquire_permission()
    clock.advance(100.0)
    assert cb.state is State.OPEN  # nothing polls it over: still OPEN
    assert cb.metrics().state is State.OPEN
    cb.acquire_permission()
    assert cb.state is State.HALF_OPEN
    assert transitions == [(State.CLOSED, State.OPEN), (State.OPEN, State.HALF_OPEN)]


def test_late_results_of_calls_started_before_opening_are_not_evaluated() -> None:
    clock = FakeClock()
    transitions: Transitions = []
    cb = make(clock, transitions, minimum_number_of_calls=4)
    cb.acquire_permission()  # a slow call starts while CLOSED ...
    cb.acquire_permission()  # ... and another one
    fail(cb, 4)  # meanwhile other calls trip the breaker
    assert cb.state is State.OPEN
    clock.advance(5.0)
    cb.on_success(5.0)  # the late calls finish while OPEN
    cb.on_error(5.0, Boom("late"))
    m = cb.metrics()
    assert m.state is State.OPEN
    assert transitions == [(State.CLOSED, State.OPEN)]  # no re-open, no close
    assert m.successful_calls == 1  # cumulative totals still see them
    assert m.failed_calls_total == 5
    # The late failure did not restart the open wait: half-open 10 s after opening.
    clock.advance(5.0)
    cb.acquire_permission()
    assert cb.state is State.HALF_OPEN
    assert cb.metrics().buffered_calls == 0  # half-open starts with an empty window


# --- HALF_OPEN -----------------------------------------------------------------------


def half_open(clock: FakeClock, cb: CircuitBreaker) -> None:
    trip(cb)
    clock.advance(10.0)
    assert cb.state is State.HALF_OPEN


def test_half_open_permits_exactly_n_concurrent_trials() -> None:
    clock = FakeClock()
    cb = make(clock, automatic_transition_from_open_to_half_open_enabled=True)
    half_open(clock, cb)
    for _ in range(3):
        cb.acquire_permission()
    with pytest.raises(CallNotPermittedError):
        cb.acquire_permission()
    with pytest.raises(CallNotPermittedError):
        cb.acquire_permission()
    m = cb.metrics()
    assert m.state is State.HALF_OPEN
    assert m.not_permitted_calls == 2


def test_half_open_first_acquire_uses_one_of_the_permits() -> None:
    clock = FakeClock()
    cb = make(clock)  # no automatic transition: the first acquire moves it
    trip(cb)
    clock.advance(10.0)
    for _ in range(3):
        cb.acquire_permission()
    with pytest.raises(CallNotPermittedError):
        cb.acquire_permission()


def test_half_open_waits_for_all_trials_then_closes_on_success() -> None:
    clock = FakeClock()
    transitions: Transitions = []
    cb = make(clock, transitions, automatic_transition_from_open_to_half_open_enabled=True)
    half_open(clock, cb)
    succeed(cb, 1)
    fail(cb, 1)
    m = cb.metrics()
    assert m.state is State.HALF_OPEN  # 2 of 3 trials: not decided yet
    assert m.failure_rate == -1.0
    succeed(cb, 1)  # 1 failure of 3 = 33 % < 50 %
    m = cb.metrics()
    assert m.state is State.CLOSED
    assert m.buffered_calls == 0  # fresh window after closing
    assert transitions[-1] == (State.HALF_OPEN, State.CLOSED)
    fail(cb, 9)
    assert cb.state is State.CLOSED  # needs a full minimum again


def test_half_open_reopens_on_failures_and_a_new_wait_starts() -> None:
    clock = FakeClock()
    transitions: Transitions = []
    cb = make(clock, transitions, automatic_transition_from_open_to_half_open_enabled=True)
    half_open(clock, cb)
    clock.advance(1.0)
    succeed(cb, 1)
    fail(cb, 2)  # 66 % >= 50 %
    assert cb.state is State.OPEN
    with pytest.raises(CallNotPermittedError):
        cb.acquire_permission()
    clock.advance(9.999)
    assert cb.state is State.OPEN  # the wait restarted at the reopening
    clock.advance(0.001)
    assert cb.state is State.HALF_OPEN
    assert transitions == [
        (State.CLOSED, State.OPEN),
        (State.OPEN, State.HALF_OPEN),
        (State.HALF_OPEN, State.OPEN),
        (State.OPEN, State.HALF_OPEN),
    ]
    assert cb.metrics().transitions == 4


def test_half_open_minimum_is_capped_by_minimum_number_of_calls() -> None:
    # Resilience4j's half-open window is COUNT_BASED of the permitted size, so a minimum
    # below the permitted number decides early.
    clock = FakeClock()
    cb = make(
        clock,
        sliding_window_size=4,
        minimum_number_of_calls=2,
        permitted_number_of_calls_in_half_open_state=5,
        automatic_transition_from_open_to_half_open_enabled=True,
    )
    fail(cb, 2)
    clock.advance(10.0)
    assert cb.state is State.HALF_OPEN
    succeed(cb, 2)
    assert cb.state is State.CLOSED


def test_ignored_error_in_half_open_gives_the_permit_back() -> None:
    clock = FakeClock()
    cb = make(clock, automatic_transition_from_open_to_half_open_enabled=True)
    half_open(clock, cb)
    for _ in range(3):
        cb.acquire_permission()
    cb.on_error(0.01, ClientError("400"))
    cb.acquire_permission()  # the released permit can be taken again
    with pytest.raises(CallNotPermittedError):
        cb.acquire_permission()
    m = cb.metrics()
    assert m.ignored_calls == 1
    assert m.buffered_calls == 0


def test_interrupt_in_half_open_gives_the_permit_back_without_recording() -> None:
    clock = FakeClock()
    cb = make(clock, automatic_transition_from_open_to_half_open_enabled=True)
    half_open(clock, cb)

    def interrupted() -> None:
        raise KeyboardInterrupt

    for _ in range(5):
        with pytest.raises(KeyboardInterrupt):
            cb.call(interrupted)
    m = cb.metrics()
    assert m.not_permitted_calls == 0
    assert m.buffered_calls == 0
    assert m.state is State.HALF_OPEN


def test_max_wait_in_half_open_reopens() -> None:
    clock = FakeClock()
    transitions: Transitions = []
    cb = make(clock, transitions, max_wait_duration_in_half_open_state_s=5.0)
    trip(cb)
    clock.advance(10.0)
    cb.acquire_permission()  # HALF_OPEN from now; this trial never reports back
    clock.advance(4.999)
    assert cb.state is State.HALF_OPEN
    clock.advance(0.001)
    assert cb.state is State.OPEN
    with pytest.raises(CallNotPermittedError):
        cb.acquire_permission()
    clock.advance(10.0)
    cb.acquire_permission()
    assert cb.state is State.HALF_OPEN
    assert transitions == [
        (State.CLOSED, State.OPEN),
        (State.OPEN, State.HALF_OPEN),
        (State.HALF_OPEN, State.OPEN),
        (State.OPEN, State.HALF_OPEN),
    ]


def test_timed_transitions_fire_at_their_scheduled_instants_when_polled_late() -> None:
    clock = FakeClock()
    transitions: Transitions = []
    cb = make(
        clock,
        transitions,
        automatic_transition_from_open_to_half_open_enabled=True,
        max_wait_duration_in_half_open_state_s=5.0,
    )
    trip(cb)  # open at t0; half-open t0+10; reopened t0+15; half-open t0+25
    clock.advance(16.0)
    assert cb.state is State.OPEN
    clock.advance(8.999)
    assert cb.state is State.OPEN
    clock.advance(0.001)
    assert cb.state is State.HALF_OPEN
    assert len(transitions) == 4


def test_zero_max_wait_means_half_open_forever() -> None:
    clock = FakeClock()
    cb = make(clock, automatic_transition_from_open_to_half_open_enabled=True)
    half_open(clock, cb)
    clock.advance(1e6)
    assert cb.state is State.HALF_OPEN


# --- TIME_BASED window ---------------------------------------------------------------


def test_time_based_window_drops_calls_older_than_the_window() -> None:
    clock = FakeClock(1000.0)
    cb = make(clock, sliding_window_type="TIME_BASED", minimum_number_of_calls=5)
    fail(cb, 3)  # bucket 1000
    clock.advance(9.9)  # t = 1009.9: bucket 1000 is still within the last 10 seconds
    assert cb.metrics().buffered_calls == 3
    clock.advance(0.1)  # t = 1010: bucket 1000 drops out
    assert cb.metrics().buffered_calls == 0
    succeed(cb, 2)
    fail(cb, 1)
    m = cb.metrics()
    assert m.state is State.CLOSED  # 3 calls < minimum 5; with the old ones it would open
    assert (m.buffered_calls, m.failed_calls) == (3, 1)


def test_time_based_window_opens_on_rate_across_buckets() -> None:
    clock = FakeClock(1000.0)
    cb = make(clock, sliding_window_type="TIME_BASED", minimum_number_of_calls=6)
    for _ in range(3):  # one success and one failure per second
        succeed(cb)
        fail(cb)
        if cb.state is State.OPEN:
            break
        clock.advance(1.0)
    m = cb.metrics()
    assert m.state is State.OPEN
    assert (m.buffered_calls, m.failure_rate) == (6, 50.0)


def test_time_based_minimum_is_not_capped_by_window_size() -> None:
    clock = FakeClock(1000.0)
    cb = make(clock, sliding_window_type="TIME_BASED", sliding_window_size=2)
    fail(cb, 9)
    assert cb.state is State.CLOSED
    fail(cb)
    assert cb.state is State.OPEN


# --- call(), locking, listeners --------------------------------------------------------


def test_call_times_fn_with_the_clock_and_records_outcomes() -> None:
    clock = FakeClock()
    cb = make(clock, slow_call_duration_threshold_s=2.0)

    def slow_ok() -> str:
        clock.advance(3.0)
        return "ok"

    def slow_fail() -> None:
        clock.advance(2.5)
        raise Boom("boom")

    assert cb.call(slow_ok) == "ok"
    with pytest.raises(Boom):
        cb.call(slow_fail)
    m = cb.metrics()
    assert (m.successful_calls, m.failed_calls_total, m.slow_calls) == (1, 1, 2)


def test_seed_scenario_timeouts_open_half_open_and_reopen() -> None:
    clock = FakeClock()
    transitions: Transitions = []
    cb = CircuitBreaker(
        "pg",
        CircuitBreakerConfig(
            sliding_window_type="COUNT_BASED",
            sliding_window_size=10,
            minimum_number_of_calls=10,
            failure_rate_threshold=50.0,
            wait_duration_in_open_state_s=10.0,
            permitted_number_of_calls_in_half_open_state=3,
            automatic_transition_from_open_to_half_open_enabled=True,
        ),
        clock=clock,
        on_state_change=lambda old, new: transitions.append((old, new)),
    )

    def timeout() -> None:
        clock.advance(2.0)
        raise TimeoutError("PG read timeout")

    for i in range(10):
        assert cb.state is State.CLOSED, f"opened early, after {i} timeouts"
        with pytest.raises(TimeoutError):
            cb.call(timeout)
    assert cb.state is State.OPEN
    with pytest.raises(CallNotPermittedError):
        cb.call(timeout)
    clock.advance(9.0)
    assert cb.state is State.OPEN
    clock.advance(1.0)
    assert cb.state is State.HALF_OPEN
    for _ in range(3):
        with pytest.raises(TimeoutError):
            cb.call(timeout)
    m = cb.metrics()
    assert m.state is State.OPEN
    assert m.failed_calls_total == 13
    assert m.not_permitted_calls == 1
    assert transitions == [
        (State.CLOSED, State.OPEN),
        (State.OPEN, State.HALF_OPEN),
        (State.HALF_OPEN, State.OPEN),
    ]


def run_with_timeout(target: Any, timeout_s: float = 5.0) -> list[Any]:
    """Run target in a daemon thread so a deadlock fails the test instead of hanging it."""
    results: list[Any] = []
    errors: list[BaseException] = []

    def runner() -> None:
        try:
            results.append(target())
        except BaseException as exc:  # reported below, not as an unhandled-thread warning
            errors.append(exc)

    worker = threading.Thread(target=runner, daemon=True)
    worker.start()
    worker.join(timeout_s)
    assert not worker.is_alive(), "deadlock: the breaker lock is held where it must not be"
    if errors:
        raise errors[0]
    return results


def test_lock_is_not_held_while_the_protected_call_runs() -> None:
    cb = make(FakeClock())

    def inspecting_call() -> tuple[State, BreakerMetrics]:
        # Would deadlock on the non-reentrant lock if call() held it around fn.
        return cb.state, cb.metrics()

    [(state, metrics)] = run_with_timeout(lambda: cb.call(inspecting_call))
    assert state is State.CLOSED
    assert metrics.successful_calls == 0  # fn ran before its own success was recorded
    assert cb.metrics().successful_calls == 1


def test_other_threads_proceed_while_a_call_is_in_flight() -> None:
    cb = make(FakeClock())
    entered = threading.Event()
    release = threading.Event()

    def blocking() -> None:
        entered.set()
        assert release.wait(5.0)

    worker = threading.Thread(target=lambda: cb.call(blocking), daemon=True)
    worker.start()
    assert entered.wait(5.0)
    run_with_timeout(lambda: succeed(cb, 5))  # must not wait for the in-flight call
    release.set()
    worker.join(5.0)
    assert not worker.is_alive()
    assert cb.metrics().successful_calls == 6


def test_state_listener_runs_outside_the_lock() -> None:
    seen: list[tuple[State, State, State]] = []
    cb_holder: list[CircuitBreaker] = []

    def listener(old: State, new: State) -> None:
        seen.append((old, new, cb_holder[0].state))

    cb = CircuitBreaker(
        "pg",
        CircuitBreakerConfig(sliding_window_size=2, minimum_number_of_calls=2),
        clock=FakeClock(),
        on_state_change=listener,
    )
    cb_holder.append(cb)
    run_with_timeout(lambda: fail(cb, 2))
    assert seen == [(State.CLOSED, State.OPEN, State.OPEN)]


def test_concurrent_calls_are_all_counted() -> None:
    cb = make(FakeClock(), sliding_window_size=50, minimum_number_of_calls=50)
    n_threads, n_calls = 8, 500

    def worker() -> None:
        for _ in range(n_calls):
            cb.call(lambda: None)

    threads = [threading.Thread(target=worker) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10.0)
    m = cb.metrics()
    assert m.successful_calls == n_threads * n_calls
    assert m.buffered_calls == 50
    assert m.state is State.CLOSED


def test_forced_transitions() -> None:
    clock = FakeClock()
    transitions: Transitions = []
    cb = make(clock, transitions)
    cb.transition_to_open()
    with pytest.raises(CallNotPermittedError):
        cb.acquire_permission()
    cb.transition_to_half_open()
    assert cb.state is State.HALF_OPEN
    cb.transition_to_closed()
    cb.acquire_permission()
    cb.transition_to_closed()  # same state: no event
    assert transitions == [
        (State.CLOSED, State.OPEN),
        (State.OPEN, State.HALF_OPEN),
        (State.HALF_OPEN, State.CLOSED),
    ]
    assert cb.metrics().transitions == 3
