"""Resilience4j's concepts for the shop, in Python: no shop imports, so any caller can use them.

=====================  ==========================================================
module                 Resilience4j counterpart
=====================  ==========================================================
circuitbreaker         ``CircuitBreaker`` (``CircuitBreakerStateMachine``)
breaker                ``CallNotPermittedException`` and what both kinds of breaker
                       share (lock, clock, counters, listener, metrics)
circuitbreaker_config  ``CircuitBreakerConfig`` (record/ignore exceptions included)
states                 ``ClosedState``, ``OpenState``, ``HalfOpenState``
windows                ``core/metrics``: ``FixedSizeSlidingWindowMetrics``,
                       ``SlidingTimeWindowMetrics``
naivebreaker           none: the hand-written kind (N failures in a window, fixed
                       open time, no half-open), for comparison
retry                  ``Retry``, ``RetryConfig``
budget                 none (Resilience4j has no retry budget): gRPC's retry
                       throttling and Finagle's ``RetryBudget``, asked by Retry
interval               ``IntervalFunction`` (fixed, randomized, exponential, both)
bulkhead               ``Bulkhead`` (``SemaphoreBulkhead``), ``ThreadPoolBulkhead``
timelimiter            ``TimeLimiter``, ``TimeLimiterConfig``
fallback               ``fallbackMethod`` / ``Decorators.withFallback``: error, value
                       or cached answers
decorators             ``Decorators`` and Spring's default aspect order
=====================  ==========================================================

Exception tree: the layers' own refusals, each raised instead of running the call::

    Exception
     ├── CallNotPermittedError    a breaker (either kind) refused the call
     ├── BulkheadFullError        a bulkhead (either type) had no room for it
     └── TimeLimitExceededError   the caller stopped waiting for it

Every other exception is the protected call's own, re-raised unchanged.
"""

from targets.shop.resilience.breaker import BreakerMetrics, CallNotPermittedError
from targets.shop.resilience.budget import RetryBudget, RetryBudgetConfig, make_budget
from targets.shop.resilience.bulkhead import (
    Bulkhead,
    BulkheadConfig,
    BulkheadFullError,
    BulkheadMetrics,
    ThreadPoolBulkhead,
    ThreadPoolBulkheadConfig,
    ThreadPoolBulkheadMetrics,
)
from targets.shop.resilience.circuitbreaker import CircuitBreaker
from targets.shop.resilience.circuitbreaker_config import CallKind, CircuitBreakerConfig
from targets.shop.resilience.decorators import (
    DEFAULT_ORDER,
    DecorateSupplier,
    Decorators,
    resolve_order,
)
from targets.shop.resilience.fallback import (
    Fallback,
    FallbackAnswer,
    FallbackConfig,
    FallbackKind,
    FallbackMetrics,
)
from targets.shop.resilience.interval import (
    ExponentialBackoff,
    ExponentialRandomBackoff,
    FixedInterval,
    IntervalFunction,
    RandomizedInterval,
)
from targets.shop.resilience.naivebreaker import NaiveCircuitBreaker, NaiveCircuitBreakerConfig
from targets.shop.resilience.retry import Retry, RetryConfig, RetryMetrics
from targets.shop.resilience.states import State
from targets.shop.resilience.timelimiter import (
    TimeLimiter,
    TimeLimiterConfig,
    TimeLimiterMetrics,
    TimeLimitExceededError,
)

__all__ = [
    "BreakerMetrics",
    "Bulkhead",
    "BulkheadConfig",
    "BulkheadFullError",
    "BulkheadMetrics",
    "CallKind",
    "CallNotPermittedError",
    "CircuitBreaker",
    "CircuitBreakerConfig",
    "DEFAULT_ORDER",
    "DecorateSupplier",
    "Decorators",
    "ExponentialBackoff",
    "ExponentialRandomBackoff",
    "Fallback",
    "FallbackAnswer",
    "FallbackConfig",
    "FallbackKind",
    "FallbackMetrics",
    "FixedInterval",
    "IntervalFunction",
    "NaiveCircuitBreaker",
    "NaiveCircuitBreakerConfig",
    "RandomizedInterval",
    "Retry",
    "RetryBudget",
    "RetryBudgetConfig",
    "RetryConfig",
    "RetryMetrics",
    "State",
    "ThreadPoolBulkhead",
    "ThreadPoolBulkheadConfig",
    "ThreadPoolBulkheadMetrics",
    "TimeLimitExceededError",
    "TimeLimiter",
    "TimeLimiterConfig",
    "TimeLimiterMetrics",
    "make_budget",
    "resolve_order",
]
