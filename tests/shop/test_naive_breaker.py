"""Unit tests for the naive circuit breaker, state by state, driven by a fake clock."""

# `cb.state` is a property whose value changes as the clock moves; mypy would otherwise
# narrow it after the first assert and flag the next one as unreachable.
# mypy: disable-error-code="comparison-overlap"

from __future__ import annotations

from typing import Any

import pytest

from targets.shop.resilience import (
    CallNotPermittedError,
    NaiveCircuitBreaker,
    NaiveCircuitBreakerConfig,
    State,
)
from tests.shop.test_breaker import FakeClock, run_with_timeout


class Boom(Exception):
    """A recorded failure."""


class ClientError(Exception):
    """A 4xx-like error the breaker ignores."""


Transitions = list[tuple[State, State]]


def make(
    clock: FakeClock, transitions: Transitions | None = None, **overrides: Any
) -> NaiveCircuitBreaker:
    settings: dict[str, Any] = {
        "failure_count": 5,
        "window_s": 10.0,
        "open_duration_s": 30.0,
        "ignore_exceptions": (ClientError,),
    }
    settings.update(overrides)
    listener = None if transitions is None else lambda old, new: transitions.append((old, new))
    return NaiveCircuitBreaker(
        "pg", NaiveCircuitBreakerConfig(**settings), clock=clock, on_state_change=listener
    )


def fail(cb: NaiveCircuitBreaker, n: int = 1, error: Exception | None = None) -> None:
    for _ in range(n):
        cb.acquire_permission()
        cb.on_error(0.01, error or Boom("503"))


def succeed(cb: NaiveCircuitBreaker, n: int = 1) -> None:
    for _ in range(n):
        cb.acquire_permission()
        cb.on_success(0.01)


# --- configuration -------------------------------------------------------------------


def test_defaults_are_seed_004s_hand_written_breaker() -> None:
    cfg = NaiveCircuitBreakerConfig()
    assert (cfg.failure_count, cfg.open_duration_s) == (5, 30.0)
    assert cfg.window_s == 10.0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"failure_count": 0}, "failure_count"),
        ({"failure_count": 2.5}, "failure_count"),
        ({"failure_count": True}, "failure_count"),
        ({"window_s": 0.0}, "window_s"),
        ({"open_duration_s": -1.0}, "open_duration_s"),
        ({"open_duration_s": float("nan")}, "open_duration_s"),
        ({"ignore_exceptions": ("x",)}, "ignore_exceptions"),
    ],
)
def test_config_validation(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        NaiveCircuitBreakerConfig(**overrides)


# --- CLOSED --------------------------------------------------------------------------


def test_opens_at_exactly_n_failures_within_the_window() -> None:
    clock = FakeClock()
    transitions: Transitions = []
    cb = make(clock, transitions)
    for _ in range(4):
        fail(cb)
        clock.advance(2.0)  # 4 failures over 6 s
    assert cb.state is State.CLOSED
    fail(cb)  # the fifth, 8 s after the first
    assert cb.state is State.OPEN
    assert transitions == [(State.CLOSED, State.OPEN)]


def test_failures_older_than_the_window_do_not_count() -> None:
    clock = FakeClock()
    cb = make(clock)
    fail(cb, 4)
    clock.advance(10.0)  # exactly one window later: the first four are out
    fail(cb)
    assert cb.state is State.CLOSED
    assert cb.metrics().failed_calls == 1
    fail(cb, 3)
    assert cb.state is State.CLOSED
    fail(cb)
    assert cb.state is State.OPEN


def test_successes_do_not_dilute_failures() -> None:
    """What makes it naive: 5 failures among 1,000 successes open it as surely as 5 of 5."""
    clock = FakeClock()
    cb = make(clock)
    for _ in range(5):
        succeed(cb, 200)
        fail(cb)
    assert cb.state is State.OPEN
    metrics = cb.metrics()
    assert (metrics.successful_calls, metrics.failed_calls_total) == (1000, 5)
    assert metrics.failure_rate == -1.0  # it has no rate


def test_ignored_errors_are_not_counted() -> None:
    cb = make(FakeClock())
    fail(cb, 10, ClientError("400"))
    assert cb.state is State.CLOSED
    assert cb.metrics().ignored_calls == 10


def test_errors_outside_a_record_list_count_as_successes() -> None:
    cb = make(FakeClock(), record_exceptions=(Boom,))
    fail(cb, 10, ValueError("bug"))
    assert cb.state is State.CLOSED
    assert cb.metrics().successful_calls == 10


# --- OPEN ----------------------------------------------------------------------------


def test_open_refuses_every_call_and_counts_them() -> None:
    clock = FakeClock()
    cb = make(clock)
    fail(cb, 5)
    for _ in range(3):
        with pytest.raises(CallNotPermittedError) as info:
            cb.acquire_permission()
    assert info.value.state is State.OPEN
    assert cb.metrics().not_permitted_calls == 3


def test_closes_after_the_open_duration_with_no_half_open() -> None:
    clock = FakeClock()
    transitions: Transitions = []
    cb = make(clock, transitions)
    fail(cb, 5)
    clock.advance(29.999)
    assert cb.state is State.OPEN
    clock.advance(0.001)
    assert cb.state is State.CLOSED  # straight back: every call passes again
    succeed(cb, 100)
    assert transitions == [(State.CLOSED, State.OPEN), (State.OPEN, State.CLOSED)]
    assert cb.metrics().transitions == 2


def test_reopens_after_n_fresh_failures_only() -> None:
    """Closing empties the window: the failures that opened it do not count again."""
    clock = FakeClock()
    cb = make(clock)
    fail(cb, 5)
    clock.advance(30.0)
    fail(cb, 4)
    assert cb.state is State.CLOSED
    fail(cb)
    assert cb.state is State.OPEN


def test_late_results_while_open_are_not_counted() -> None:
    clock = FakeClock()
    cb = make(clock)
    cb.acquire_permission()  # a call started while CLOSED...
    fail(cb, 5)
    cb.on_error(3.0, Boom("timeout"))  # ...ends while OPEN
    assert cb.metrics().failed_calls_total == 6
    clock.advance(30.0)
    assert cb.metrics().failed_calls == 0


def test_blip_blocks_healthy_traffic_for_the_whole_open_time() -> None:
    """Seed 004's complaint: a one-second blip blocks 30 s of healthy calls."""
    clock = FakeClock()
    cb = make(clock)
    fail(cb, 5)  # the blip
    blocked = 0
    for _ in range(300):  # 10 healthy calls a second for 30 s
        clock.advance(0.1)
        try:
            cb.call(lambda: None)
        except CallNotPermittedError:
            blocked += 1
    assert blocked == 299  # all but the call at exactly 30.0 s


# --- the breaker's face --------------------------------------------------------------


def test_call_records_outcomes_and_reraises() -> None:
    cb = make(FakeClock(), failure_count=2)
    assert cb.call(lambda: 42) == 42

    def boom() -> None:
        raise Boom("503")

    for _ in range(2):
        with pytest.raises(Boom):
            cb.call(boom)
    with pytest.raises(CallNotPermittedError):
        cb.call(lambda: 42)
    assert cb.states == (State.CLOSED, State.OPEN)


def test_lock_is_not_held_while_the_protected_call_runs() -> None:
    cb = make(FakeClock())
    [state] = run_with_timeout(lambda: cb.call(lambda: cb.metrics().state))
    assert state is State.CLOSED


def test_forced_transitions() -> None:
    clock = FakeClock()
    transitions: Transitions = []
    cb = make(clock, transitions)
    cb.transition_to_open()
    with pytest.raises(CallNotPermittedError):
        cb.acquire_permission()
    cb.transition_to_closed()
    cb.transition_to_closed()  # same state: no event
    cb.acquire_permission()
    assert transitions == [(State.CLOSED, State.OPEN), (State.OPEN, State.CLOSED)]
