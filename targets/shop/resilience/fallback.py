"""Fallbacks: an answer in place of an error, where the composition puts them.

A fallback turns a failure into a value. Every layer outside it then sees a success:
a Retry outside a breaker's fallback never retries, and a breaker outside a bulkhead's
fallback records its refusals as successes (seed 002's trap). Resilience4j attaches one
with ``fallbackMethod`` on an annotation, or ``Decorators.withFallback`` at a position
of the chain; :mod:`.decorators` does the latter.

Kinds (:class:`FallbackConfig.kind`):

* ``error``: a fast failure answer (the service answers "unavailable" at once);
* ``value``: a fixed answer, ``value``;
* ``cached``: the last good answer for the same key, if it is at most ``ttl_s`` old.
  Every good answer that passes through is stored; without a fresh one the original
  error goes on (a miss, counted).

What a fallback handles is the caller's call, as for the other layers:
``fallback_exceptions`` (empty: every ``Exception``) minus ``ignore_exceptions``.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from targets.shop.resilience._checks import ExceptionTypes, exception_types, require_seconds

__all__ = ["Fallback", "FallbackAnswer", "FallbackConfig", "FallbackKind", "FallbackMetrics"]

T = TypeVar("T")

FallbackKind = Literal["error", "value", "cached"]

MAX_CACHED_KEYS = 100_000
"""A cached fallback forgets its oldest entries beyond this many keys."""


@dataclass(frozen=True)
class FallbackConfig:
    """Which answer replaces an error, and which errors it replaces."""

    kind: FallbackKind = "error"
    value: Any = None
    """The fixed answer of kind ``value``."""
    ttl_s: float = 60.0
    """How old a cached answer may be (kind ``cached``)."""
    fallback_exceptions: ExceptionTypes = ()
    ignore_exceptions: ExceptionTypes = ()

    def __post_init__(self) -> None:
        if self.kind not in ("error", "value", "cached"):
            raise ValueError(f"kind must be 'error', 'value' or 'cached', got {self.kind!r}")
        require_seconds("ttl_s", self.ttl_s, positive=True)
        for field_name in ("fallback_exceptions", "ignore_exceptions"):
            object.__setattr__(
                self, field_name, exception_types(field_name, getattr(self, field_name))
            )

    def handles(self, error: BaseException) -> bool:
        """Whether this fallback answers in place of ``error``."""
        if isinstance(error, self.ignore_exceptions):
            return False
        return not self.fallback_exceptions or isinstance(error, self.fallback_exceptions)


@dataclass(frozen=True)
class FallbackAnswer:
    """The answer a fallback gave instead of the call's; outer layers see it as a success."""

    layer: str
    """Where the fallback sits (the layer it is attached to)."""
    kind: FallbackKind
    error: BaseException
    """The error it replaced."""
    value: Any = None
    """The fixed value (``value``) or the cached answer (``cached``)."""
    age_s: float | None = None
    """How old the cached answer is (``cached`` only)."""

    @property
    def cached(self) -> bool:
        return self.kind == "cached"


@dataclass(frozen=True)
class FallbackMetrics:
    """Cumulative counters: answers given (a cached kind gives only cached answers), and
    errors a cached fallback had no fresh answer for."""

    answers: int
    cache_misses: int
    cached_keys: int


class Fallback:
    """One fallback at one position of the composition; thread-safe."""

    def __init__(
        self,
        layer: str,
        config: FallbackConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.layer = layer
        self.config = config
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: collections.OrderedDict[Hashable, tuple[float, Any]] = (
            collections.OrderedDict()
        )
        self._answers = 0
        self._misses = 0

    def __repr__(self) -> str:
        return f"Fallback(layer={self.layer!r}, kind={self.config.kind!r})"

    def call(self, fn: Callable[[], T], key: Hashable = None) -> T | FallbackAnswer:
        """``fn()``, or this fallback's answer if it raises an error the fallback handles.

        ``key`` identifies the answer for the cached kind (a product id, an idempotency
        key); answers that are themselves fallback answers are never cached.
        """
        try:
            result = fn()
        except Exception as exc:
            if not self.config.handles(exc):
                raise
            answer = self._answer(exc, key)
            if answer is None:
                raise
            return answer
        if self.config.kind == "cached" and not isinstance(result, FallbackAnswer):
            self._store(key, result)
        return result

    def metrics(self) -> FallbackMetrics:
        with self._lock:
            return FallbackMetrics(
                answers=self._answers, cache_misses=self._misses, cached_keys=len(self._cache)
            )

    def _answer(self, error: Exception, key: Hashable) -> FallbackAnswer | None:
        kind = self.config.kind
        if kind == "cached":
            now = self._clock()
            with self._lock:
                entry = self._cache.get(key)
                if entry is None or now - entry[0] > self.config.ttl_s:
                    self._misses += 1
                    return None
                self._answers += 1
            stored_at, value = entry
            return FallbackAnswer(self.layer, kind, error, value, age_s=now - stored_at)
        with self._lock:
            self._answers += 1
        value = self.config.value if kind == "value" else None
        return FallbackAnswer(self.layer, kind, error, value)

    def _store(self, key: Hashable, value: Any) -> None:
        now = self._clock()
        with self._lock:
            self._cache[key] = (now, value)
            self._cache.move_to_end(key)  # the cache stays in age order, oldest first
            while self._cache:
                stored_at = next(iter(self._cache.values()))[0]
                if len(self._cache) <= MAX_CACHED_KEYS and now - stored_at <= self.config.ttl_s:
                    break
                self._cache.popitem(last=False)  # expired, or beyond the bound
