"""Backoff between retry attempts, as Resilience4j's ``IntervalFunction``.

An interval function maps the number of the attempt that just failed (1-based) to the
seconds to wait before the next one. The four kinds mirror Resilience4j's factories:

====================================  ================================================
Resilience4j                          here
====================================  ================================================
``IntervalFunction.of``               :class:`FixedInterval`
``ofRandomized``                      :class:`RandomizedInterval`
``ofExponentialBackoff``              :class:`ExponentialBackoff`
``ofExponentialRandomBackoff``        :class:`ExponentialRandomBackoff`
====================================  ================================================

Randomized functions draw from an injectable ``random.Random`` (tests pass a seeded one)
under a lock of their own, since ``random.Random`` is not documented as thread-safe.
"""

from __future__ import annotations

import math
import random
import threading
from typing import Protocol

from targets.shop.resilience._checks import require_seconds

__all__ = [
    "ExponentialBackoff",
    "ExponentialRandomBackoff",
    "FixedInterval",
    "IntervalFunction",
    "RandomizedInterval",
]


class IntervalFunction(Protocol):
    """Seconds to wait after failed attempt number ``attempt`` (1-based)."""

    def __call__(self, attempt: int) -> float: ...


def _check_attempt(attempt: int) -> None:
    if attempt < 1:
        raise ValueError(f"attempt is 1-based, got {attempt!r}")


def _check_multiplier(multiplier: float) -> None:
    if not multiplier >= 1.0:
        raise ValueError(f"multiplier must be >= 1.0, got {multiplier!r}")


def _check_cap(initial_s: float, max_interval_s: float | None) -> None:
    if max_interval_s is not None and not max_interval_s >= initial_s:
        raise ValueError(
            f"max_interval_s must be >= the initial interval ({initial_s!r}), "
            f"got {max_interval_s!r}"
        )


def _exponential(initial_s: float, multiplier: float, attempt: int) -> float:
    try:
        return initial_s * multiplier ** (attempt - 1)
    except OverflowError:  # absurd attempt numbers: wait "forever", then the cap applies
        return math.inf


class _Jitter:
    """Spreads an interval uniformly over ``[i - f*i, i + f*i]`` with a shared generator."""

    def __init__(self, randomization_factor: float, rng: random.Random | None) -> None:
        if not 0.0 <= randomization_factor <= 1.0:
            raise ValueError(
                f"randomization_factor must be in [0, 1], got {randomization_factor!r}"
            )
        self.randomization_factor = randomization_factor
        self._rng = rng if rng is not None else random.Random()
        self._lock = threading.Lock()

    def __call__(self, interval_s: float) -> float:
        if not math.isfinite(interval_s):
            return interval_s
        with self._lock:
            unit = self._rng.random()
        delta = self.randomization_factor * interval_s
        return (interval_s - delta) + unit * (2.0 * delta)


class FixedInterval:
    """The same wait after every attempt (``IntervalFunction.of``)."""

    def __init__(self, interval_s: float) -> None:
        require_seconds("interval_s", interval_s)
        self.interval_s = interval_s

    def __call__(self, attempt: int) -> float:
        _check_attempt(attempt)
        return self.interval_s

    def __repr__(self) -> str:
        return f"FixedInterval({self.interval_s!r})"


class RandomizedInterval:
    """A fixed wait spread by ``+- randomization_factor`` of itself (``ofRandomized``)."""

    def __init__(
        self, interval_s: float, randomization_factor: float, rng: random.Random | None = None
    ) -> None:
        require_seconds("interval_s", interval_s)
        self.interval_s = interval_s
        self._jitter = _Jitter(randomization_factor, rng)

    def __call__(self, attempt: int) -> float:
        _check_attempt(attempt)
        return self._jitter(self.interval_s)

    def __repr__(self) -> str:
        factor = self._jitter.randomization_factor
        return f"RandomizedInterval({self.interval_s!r}, {factor!r})"


class ExponentialBackoff:
    """``initial_interval_s * multiplier ** (attempt - 1)``, capped at ``max_interval_s``
    when one is given (``ofExponentialBackoff``)."""

    def __init__(
        self, initial_interval_s: float, multiplier: float, max_interval_s: float | None = None
    ) -> None:
        require_seconds("initial_interval_s", initial_interval_s)
        _check_multiplier(multiplier)
        _check_cap(initial_interval_s, max_interval_s)
        self.initial_interval_s = initial_interval_s
        self.multiplier = multiplier
        self.max_interval_s = max_interval_s

    def __call__(self, attempt: int) -> float:
        _check_attempt(attempt)
        wait = self._spread(_exponential(self.initial_interval_s, self.multiplier, attempt))
        return wait if self.max_interval_s is None else min(wait, self.max_interval_s)

    def _spread(self, wait_s: float) -> float:
        """The wait before the cap applies: as it is (the randomized kind spreads it)."""
        return wait_s

    def __repr__(self) -> str:
        return (
            f"ExponentialBackoff({self.initial_interval_s!r}, {self.multiplier!r}, "
            f"max_interval_s={self.max_interval_s!r})"
        )


class ExponentialRandomBackoff(ExponentialBackoff):
    """The exponential wait spread by ``+- randomization_factor``, then capped: the cap
    applies after randomizing, as in Resilience4j (``ofExponentialRandomBackoff``)."""

    def __init__(
        self,
        initial_interval_s: float,
        multiplier: float,
        randomization_factor: float,
        max_interval_s: float | None = None,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(initial_interval_s, multiplier, max_interval_s)
        self._jitter = _Jitter(randomization_factor, rng)

    def _spread(self, wait_s: float) -> float:
        return self._jitter(wait_s)

    def __repr__(self) -> str:
        return (
            f"ExponentialRandomBackoff({self.initial_interval_s!r}, {self.multiplier!r}, "
            f"{self._jitter.randomization_factor!r}, max_interval_s={self.max_interval_s!r})"
        )
