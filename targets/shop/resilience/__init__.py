"""Resilience4j's concepts for the shop, in Python: no shop imports, so any caller can use them.

=====================  ==========================================================
module                 Resilience4j counterpart
=====================  ==========================================================
circuitbreaker         ``CircuitBreaker`` (``CircuitBreakerStateMachine``)
circuitbreaker_config  ``CircuitBreakerConfig`` (record/ignore exceptions included)
states                 ``ClosedState``, ``OpenState``, ``HalfOpenState``
windows                ``core/metrics``: ``FixedSizeSlidingWindowMetrics``,
                       ``SlidingTimeWindowMetrics``
retry                  ``Retry``, ``RetryConfig``
interval               ``IntervalFunction`` (fixed, randomized, exponential, both)
=====================  ==========================================================

Exception tree: :class:`CallNotPermittedError` is the only error raised here; every
other exception is the protected call's own, re-raised unchanged.
"""

from targets.shop.resilience.circuitbreaker import (
    BreakerMetrics,
    CallNotPermittedError,
    CircuitBreaker,
)
from targets.shop.resilience.circuitbreaker_config import CallKind, CircuitBreakerConfig
from targets.shop.resilience.interval import (
    ExponentialBackoff,
    ExponentialRandomBackoff,
    FixedInterval,
    IntervalFunction,
    RandomizedInterval,
)
from targets.shop.resilience.retry import Retry, RetryConfig, RetryMetrics
from targets.shop.resilience.states import State

__all__ = [
    "BreakerMetrics",
    "CallKind",
    "CallNotPermittedError",
    "CircuitBreaker",
    "CircuitBreakerConfig",
    "ExponentialBackoff",
    "ExponentialRandomBackoff",
    "FixedInterval",
    "IntervalFunction",
    "RandomizedInterval",
    "Retry",
    "RetryConfig",
    "RetryMetrics",
    "State",
]
