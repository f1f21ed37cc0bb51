"""Seed 004's half-open claim at the breaker itself: 1 trial call flaps, 5 needing 3 do not.

A gateway that answers one call in ten (the rest fail) is driven through the shop's own
:class:`CircuitBreaker` on a fake clock, one call every 50 ms, and the breaker's state
changes are counted by its listener. With one trial call, every trial that lands on the
good call closes the breaker, which then reopens as soon as its closed window holds its
minimum of (mostly failed) calls: a flap. With five trial calls needing three successes
(failure-rate threshold 50 %: two failures of five close it, three reopen it), five
consecutive calls never hold three good ones, so it never closes.
"""

from __future__ import annotations

import contextlib
from functools import partial

from targets.shop.resilience import CallNotPermittedError, CircuitBreaker, CircuitBreakerConfig
from targets.shop.resilience.states import State

SPACING_S = 0.05
CALLS = 2000  # 100 s of traffic


class GatewayDown(Exception):
    """The gateway failed the call."""


def _flaps(permitted: int, good_every: int = 10) -> int:
    """Times the breaker left closed over ``CALLS`` calls (the first open included)."""
    now = [0.0]
    changes: list[tuple[State, State]] = []
    config = CircuitBreakerConfig(
        sliding_window_size=100,
        minimum_number_of_calls=20,
        failure_rate_threshold=50.0,
        wait_duration_in_open_state_s=0.3,
        permitted_number_of_calls_in_half_open_state=permitted,
        automatic_transition_from_open_to_half_open_enabled=True,
    )
    breaker = CircuitBreaker(
        "pgClient",
        config,
        clock=lambda: now[0],
        on_state_change=lambda a, b: changes.append((a, b)),
    )

    def gateway(index: int) -> int:
        if index % good_every:
            raise GatewayDown(index)
        return index

    for index in range(CALLS):
        now[0] = index * SPACING_S
        with contextlib.suppress(GatewayDown, CallNotPermittedError):
            breaker.call(partial(gateway, index))
    return sum(1 for old, _ in changes if old is State.CLOSED)


def test_one_trial_call_flaps_on_a_gateway_that_answers_one_call_in_ten() -> None:
    left_closed = _flaps(permitted=1)
    assert left_closed >= 20  # 29: a lucky trial about every 3.5 s of the 100 s


def test_five_trial_calls_needing_three_never_close_on_it() -> None:
    left_closed = _flaps(permitted=5)
    assert left_closed == 1  # opened once, when the failures began, and stayed away from closed


def test_five_trial_calls_do_close_when_the_gateway_is_half_good() -> None:
    """Not a breaker that never closes: on a gateway that answers every other call, five
    trial calls close it about as often as one does."""
    one = _flaps(permitted=1, good_every=2)
    five = _flaps(permitted=5, good_every=2)
    assert five >= 0.5 * one > 0
