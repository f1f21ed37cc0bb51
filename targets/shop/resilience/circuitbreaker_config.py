"""Resilience4j's ``CircuitBreakerConfig``: the thresholds, waits and window of a breaker,
and which exceptions count as failures.

A value object: it checks its settings once (what Resilience4j rejects fails here, so a
bad scenario file fails at load time) and everything downstream trusts it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from targets.shop.resilience._checks import (
    ExceptionTypes,
    exception_types,
    require_int_at_least,
    require_seconds,
)

__all__ = ["CallKind", "CircuitBreakerConfig", "SlidingWindowType", "classify_error"]

SlidingWindowType = Literal["COUNT_BASED", "TIME_BASED"]

CallKind = Literal["successful", "failed", "ignored"]
"""How the breaker counts a finished call (the ``kind`` label of Resilience4j's metrics)."""


def classify_error(
    error: BaseException, record_exceptions: ExceptionTypes, ignore_exceptions: ExceptionTypes
) -> CallKind:
    """How a call that raised ``error`` is counted, in Resilience4j's order: ignored if listed
    in ``ignore_exceptions``; else failed if ``record_exceptions`` is empty (every error is a
    failure) or lists it; else successful. Shared by both breaker kinds."""
    if isinstance(error, ignore_exceptions):
        return "ignored"
    if not record_exceptions or isinstance(error, record_exceptions):
        return "failed"
    return "successful"


@dataclass(frozen=True)
class CircuitBreakerConfig:
    """Resilience4j's CircuitBreakerConfig, with its defaults, durations in seconds.

    ``record_exceptions`` and ``ignore_exceptions`` play Resilience4j's
    ``recordExceptions`` / ``ignoreExceptions``: the caller, who knows its errors, says
    which ones mean the dependency is sick; see :meth:`classify`.
    """

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
    record_exceptions: ExceptionTypes = ()
    ignore_exceptions: ExceptionTypes = ()

    def __post_init__(self) -> None:
        """Reject settings Resilience4j rejects, so a bad scenario file fails at load time."""
        if self.sliding_window_type not in ("COUNT_BASED", "TIME_BASED"):
            raise ValueError(
                "sliding_window_type must be 'COUNT_BASED' or 'TIME_BASED', "
                f"got {self.sliding_window_type!r}"
            )
        require_int_at_least("sliding_window_size", self.sliding_window_size, 1)
        require_int_at_least("minimum_number_of_calls", self.minimum_number_of_calls, 1)
        require_int_at_least(
            "permitted_number_of_calls_in_half_open_state",
            self.permitted_number_of_calls_in_half_open_state,
            1,
        )
        for field_name in ("failure_rate_threshold", "slow_call_rate_threshold"):
            value = getattr(self, field_name)
            if not 0.0 < value <= 100.0:
                raise ValueError(f"{field_name} must be in (0, 100] percent, got {value!r}")
        for field_name in ("slow_call_duration_threshold_s", "wait_duration_in_open_state_s"):
            require_seconds(field_name, getattr(self, field_name), positive=True)
        if not self.max_wait_duration_in_half_open_state_s >= 0.0:
            raise ValueError(
                "max_wait_duration_in_half_open_state_s must be >= 0 seconds "
                f"(0 = wait forever), got {self.max_wait_duration_in_half_open_state_s!r}"
            )
        for field_name in ("record_exceptions", "ignore_exceptions"):
            object.__setattr__(
                self, field_name, exception_types(field_name, getattr(self, field_name))
            )

    def classify(self, error: BaseException) -> CallKind:
        """How a call that raised ``error`` is counted (:func:`classify_error`)."""
        return classify_error(error, self.record_exceptions, self.ignore_exceptions)
