"""Composition of the layers around a call, as Resilience4j's ``Decorators``.

``Decorators.of_supplier(fn).with_circuit_breaker(cb).with_retry(retry).get()`` calls
``Retry(CircuitBreaker(fn))``: each ``with_*`` wraps what was built so far, so the last
one is the outermost (as in Resilience4j). A composition given as data lists its layers
the other way, outermost first, as one reads ``Retry ( CircuitBreaker ( fn ) )``;
:func:`resolve_order` checks such a list, or gives Resilience4j's default aspect order
(Spring Boot's, whatever order the annotations are written in)::

    Retry ( CircuitBreaker ( RateLimiter ( TimeLimiter ( Bulkhead ( fn ) ) ) ) )

restricted to the layers configured (there is no rate limiter here; a thread-pool
bulkhead sits where the bulkhead does).

A TimeLimiter directly outside a thread-pool bulkhead waits on the bulkhead's future
(Resilience4j decorates the bulkhead's ``CompletionStage``), so a call still queued in
the pool can be cancelled; around anything else it runs the inner layers in a thread of
its own.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence
from concurrent.futures import Future
from typing import Generic, Protocol, TypeVar

from targets.shop.resilience.bulkhead import Bulkhead, ThreadPoolBulkhead
from targets.shop.resilience.fallback import Fallback, FallbackAnswer
from targets.shop.resilience.retry import Retry
from targets.shop.resilience.timelimiter import TimeLimiter

__all__ = [
    "BULKHEAD",
    "CIRCUIT_BREAKER",
    "DEFAULT_ORDER",
    "LAYERS",
    "RETRY",
    "THREAD_POOL_BULKHEAD",
    "TIME_LIMITER",
    "DecorateSupplier",
    "Decorators",
    "resolve_order",
]

T = TypeVar("T")
U = TypeVar("U")

RETRY = "retry"
CIRCUIT_BREAKER = "circuit-breaker"
TIME_LIMITER = "time-limiter"
BULKHEAD = "bulkhead"
THREAD_POOL_BULKHEAD = "thread-pool-bulkhead"

DEFAULT_ORDER = (RETRY, CIRCUIT_BREAKER, TIME_LIMITER, BULKHEAD, THREAD_POOL_BULKHEAD)
"""Resilience4j's default aspect order, outermost first (the names of its
``*-aspect-order`` properties)."""

LAYERS = frozenset(DEFAULT_ORDER)


def resolve_order(order: Sequence[str] | None, configured: Collection[str]) -> tuple[str, ...]:
    """The layers, outermost first: ``order`` checked against the ``configured`` layers, or
    the default order restricted to them. A ``ValueError`` names what is wrong."""
    if order is None:
        return tuple(layer for layer in DEFAULT_ORDER if layer in configured)
    known = ", ".join(DEFAULT_ORDER)
    seen: set[str] = set()
    for layer in order:
        if layer not in LAYERS:
            raise ValueError(f"unknown layer {layer!r}; layers are: {known}")
        if layer in seen:
            raise ValueError(f"layer {layer!r} is listed twice")
        if layer not in configured:
            raise ValueError(f"layer {layer!r} is listed but not configured")
        seen.add(layer)
    left_out = [layer for layer in DEFAULT_ORDER if layer in configured and layer not in seen]
    if left_out:
        raise ValueError(
            f"{', '.join(left_out)} configured but not in the composition {list(order)}"
        )
    return tuple(order)


class _Protects(Protocol):
    """A layer that runs a call under its protection (breaker, bulkhead, time limiter)."""

    def call(self, fn: Callable[[], T], /) -> T: ...


class DecorateSupplier(Generic[T]):
    """A call and the layers around it so far; each ``with_*`` returns a new, wider one."""

    def __init__(self, fn: Callable[[], T], submit: Callable[[], Future[T]] | None = None) -> None:
        self._fn = fn
        self._submit = submit  # set right after a thread-pool bulkhead, for a TimeLimiter

    def with_retry(
        self, retry: Retry, on_attempt: Callable[[int], None] | None = None
    ) -> DecorateSupplier[T]:
        """Retry around what is built; ``on_attempt(n)`` is told each attempt's number."""
        inner = self._fn

        def attempt(n: int) -> T:
            if on_attempt is not None:
                on_attempt(n)
            return inner()

        return DecorateSupplier(lambda: retry.call(attempt))

    def with_circuit_breaker(self, breaker: _Protects) -> DecorateSupplier[T]:
        """A circuit breaker (either kind) around what is built."""
        return self._around(breaker)

    def with_bulkhead(self, bulkhead: Bulkhead) -> DecorateSupplier[T]:
        """A semaphore bulkhead around what is built."""
        return self._around(bulkhead)

    def with_thread_pool_bulkhead(self, bulkhead: ThreadPoolBulkhead) -> DecorateSupplier[T]:
        """What is built runs on the bulkhead's threads; the caller waits for it."""
        inner = self._fn
        return DecorateSupplier(lambda: bulkhead.call(inner), lambda: bulkhead.submit(inner))

    def with_time_limiter(self, limiter: TimeLimiter) -> DecorateSupplier[T]:
        """The caller waits at most the limiter's duration for what is built."""
        submit = self._submit
        if submit is not None:
            return DecorateSupplier(lambda: limiter.wait_for(submit()))
        return self._around(limiter)

    def with_fallback(
        self, fallback: Fallback, key: Hashable = None
    ) -> DecorateSupplier[T | FallbackAnswer]:
        """The fallback's answer in place of an error of what is built (``key``: its cache key)."""
        inner = self._fn
        return DecorateSupplier(lambda: fallback.call(inner, key))

    def decorate(self) -> Callable[[], T]:
        """The composed call."""
        return self._fn

    def get(self) -> T:
        """Run the composed call."""
        return self._fn()

    def _around(self, layer: _Protects) -> DecorateSupplier[T]:
        inner = self._fn
        return DecorateSupplier(lambda: layer.call(inner))


class Decorators:
    """Entry point, as Resilience4j's ``Decorators.ofSupplier``."""

    @staticmethod
    def of_supplier(fn: Callable[[], U]) -> DecorateSupplier[U]:
        return DecorateSupplier(fn)
