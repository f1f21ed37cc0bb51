"""What counts as a failure or a retryable error: the configs' exception lists
(Resilience4j's recordExceptions / ignoreExceptions / retryExceptions)."""

from __future__ import annotations

from typing import Any

import pytest

import targets.shop.resilience as resilience
from targets.shop.resilience import (
    CallNotPermittedError,
    CircuitBreaker,
    CircuitBreakerConfig,
    Retry,
    RetryConfig,
    State,
)


class Sick(Exception):
    """The dependency is unwell (5xx / timeout-like)."""


class SlowSick(Sick):
    """A subclass: matched through its base."""


class BadRequest(Exception):
    """Our own request was wrong (4xx-like)."""


class Odd(Exception):
    """Listed nowhere."""


def test_public_face_lists_everything_once_and_sorted() -> None:
    assert resilience.__all__ == sorted(set(resilience.__all__))
    for name in resilience.__all__:
        assert getattr(resilience, name) is not None


# --- CircuitBreakerConfig.classify ------------------------------------------------------


def test_by_default_every_error_is_a_failure() -> None:
    config = CircuitBreakerConfig()
    assert [config.classify(e) for e in (Sick(), BadRequest(), KeyboardInterrupt())] == [
        "failed",
        "failed",
        "failed",
    ]


def test_ignored_exceptions_win_over_recorded_ones() -> None:
    config = CircuitBreakerConfig(record_exceptions=(Exception,), ignore_exceptions=(BadRequest,))
    assert config.classify(BadRequest()) == "ignored"
    assert config.classify(Sick()) == "failed"


def test_an_error_neither_recorded_nor_ignored_counts_as_successful() -> None:
    config = CircuitBreakerConfig(record_exceptions=(Sick,), ignore_exceptions=(BadRequest,))
    assert config.classify(SlowSick()) == "failed"  # subclasses match
    assert config.classify(BadRequest()) == "ignored"
    assert config.classify(Odd()) == "successful"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("record_exceptions", ("Sick",)),
        ("ignore_exceptions", (int,)),
        ("ignore_exceptions", BadRequest),
    ],
)
def test_exception_lists_must_hold_exception_classes(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field):
        CircuitBreakerConfig(**{field: value})


def test_exception_lists_arrive_as_lists_and_are_kept_as_tuples() -> None:
    config = CircuitBreakerConfig(ignore_exceptions=[BadRequest])  # type: ignore[arg-type]
    assert config.ignore_exceptions == (BadRequest,)
    hash(config)  # still a usable frozen value


def test_breaker_counts_errors_by_its_config() -> None:
    now = [0.0]
    cb = CircuitBreaker(
        "pg",
        CircuitBreakerConfig(
            sliding_window_size=4,
            minimum_number_of_calls=4,
            record_exceptions=(Sick,),
            ignore_exceptions=(BadRequest,),
        ),
        clock=lambda: now[0],
    )
    for error in (BadRequest(), BadRequest(), Odd(), Sick(), Sick()):
        cb.acquire_permission()
        cb.on_error(0.01, error)
    m = cb.metrics()
    assert (m.ignored_calls, m.successful_calls, m.failed_calls_total) == (2, 1, 2)
    assert (m.buffered_calls, m.failed_calls, m.state) == (3, 2, State.CLOSED)
    cb.acquire_permission()
    cb.on_error(0.01, SlowSick())  # 3 of 4 failed: open
    assert cb.state is State.OPEN


def test_ignored_error_gives_back_a_half_open_permit_by_config() -> None:
    now = [0.0]
    cb = CircuitBreaker(
        "pg",
        CircuitBreakerConfig(
            permitted_number_of_calls_in_half_open_state=1, ignore_exceptions=(BadRequest,)
        ),
        clock=lambda: now[0],
    )
    cb.transition_to_half_open()
    cb.acquire_permission()
    cb.on_error(0.01, BadRequest())
    cb.acquire_permission()  # the permit came back
    with pytest.raises(CallNotPermittedError):
        cb.acquire_permission()


def test_is_recorded_replaces_the_config_lists() -> None:
    cb = CircuitBreaker(
        "pg",
        CircuitBreakerConfig(ignore_exceptions=(BadRequest,)),
        is_recorded=lambda e: isinstance(e, BadRequest),
    )
    cb.on_error(0.01, BadRequest())
    cb.on_error(0.01, Sick())
    m = cb.metrics()
    assert (m.failed_calls_total, m.ignored_calls) == (1, 1)


# --- RetryConfig.should_retry -----------------------------------------------------------


def test_by_default_every_exception_is_retried() -> None:
    assert RetryConfig().should_retry(BadRequest())


def test_retry_exceptions_limit_what_is_retried_and_ignore_wins() -> None:
    config = RetryConfig(retry_exceptions=(Exception,), ignore_exceptions=(BadRequest,))
    assert config.should_retry(Sick())
    assert not config.should_retry(BadRequest())
    narrow = RetryConfig(retry_exceptions=(Sick,))
    assert narrow.should_retry(SlowSick())
    assert not narrow.should_retry(Odd())


def test_retry_exception_lists_are_checked() -> None:
    with pytest.raises(ValueError, match="retry_exceptions"):
        RetryConfig(retry_exceptions=("TimeoutError",))  # type: ignore[arg-type]


def test_retry_uses_its_config_lists_unless_given_a_predicate() -> None:
    slept: list[float] = []
    config = RetryConfig(max_attempts=3, wait_duration_s=0.0, retry_exceptions=(Sick,))
    attempts: list[int] = []

    def fails(error: Exception) -> Any:
        def fn(attempt: int) -> None:
            attempts.append(attempt)
            raise error

        return fn

    with pytest.raises(Sick):
        Retry("pg", config, sleep=slept.append).call(fails(Sick()))
    assert attempts == [1, 2, 3]
    attempts.clear()
    with pytest.raises(Odd):
        Retry("pg", config, sleep=slept.append).call(fails(Odd()))
    assert attempts == [1]
    attempts.clear()
    with pytest.raises(Odd):
        Retry("pg", config, should_retry=lambda e: True, sleep=slept.append).call(fails(Odd()))
    assert attempts == [1, 2, 3]
