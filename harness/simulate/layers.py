"""The shop's resilience composition, run on the simulated clock.

The layers are the shop's own objects wherever an object can run on a clock it is
given: the breaker is ``targets.shop.resilience``'s ``CircuitBreaker`` (Resilience4j's
count- and time-based windows, minimum calls, failure-rate and slow-call thresholds,
open wait, half-open permits and the automatic transition) or ``NaiveCircuitBreaker``;
the Retry's waits are its ``IntervalFunction`` and its exception lists the shop's
(``pg_retry_config``); fallbacks are its ``Fallback`` (its cache, its TTL). Only what
sleeps or blocks a thread is re-told here as events: the Retry's wait, the bulkhead's
wait for a permit (a fair FIFO, ``clock.Pool``) and the time limiter's deadline. The
order is ``ShopConfig.layers`` (outermost first), each fallback right outside its
layer, the outermost one around everything, as ``PaymentService.compose`` builds it.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Hashable
from typing import Any

from harness.simulate.clock import Clock, Pool
from targets.shop.config import OUTERMOST, ShopConfig
from targets.shop.payments import (
    BREAKER_NAME,
    BULKHEAD_NAME,
    TIME_LIMITER_NAME,
    outcome_of,
    pg_breaker_config,
    pg_fallback_config,
    pg_retry_config,
)
from targets.shop.resilience import (
    BulkheadFullError,
    CallNotPermittedError,
    CircuitBreaker,
    CircuitBreakerConfig,
    Fallback,
    NaiveCircuitBreaker,
    TimeLimitExceededError,
)
from targets.shop.resilience.decorators import BULKHEAD, CIRCUIT_BREAKER, RETRY, TIME_LIMITER

Done = Callable[[Any, BaseException | None], None]
"""Told how a call through a layer ended: its answer (None on error) and its error."""
Send = Callable[[Callable[[BaseException | None], None]], None]
"""The innermost call: one attempt at the gateway, told back its error (None: answered)."""


def _raise_or(value: Any, error: BaseException | None) -> Any:
    if error is not None:
        raise error
    return value


class Layers:
    """One build's layer instances and their counters (what the shop's ``/metrics`` reads)."""

    def __init__(self, clock: Clock, config: ShopConfig, rng: random.Random) -> None:
        self.clock = clock
        self.layers = config.layers
        self.retry_config = pg_retry_config(config.retry, config.retry_ignores)
        self.interval = self.retry_config.interval_function(rng)
        self.retries = 0
        self.retry_calls: Counter[str] = Counter()
        self.breaker_config = pg_breaker_config(config.circuitbreaker or CircuitBreakerConfig())
        self.breaker: CircuitBreaker | NaiveCircuitBreaker | None = None
        if CIRCUIT_BREAKER in self.layers:
            if isinstance(self.breaker_config, CircuitBreakerConfig):
                self.breaker = CircuitBreaker(BREAKER_NAME, self.breaker_config, clock=clock.time)
            else:
                self.breaker = NaiveCircuitBreaker(
                    BREAKER_NAME, self.breaker_config, clock=clock.time
                )
        self.bulkhead: Pool | None = None
        if config.bulkhead is not None and BULKHEAD in self.layers:
            b = config.bulkhead
            self.bulkhead = Pool(clock, b.max_concurrent_calls, b.max_wait_duration_s)
        self.time_limit_s: float | None = None
        if config.timelimiter is not None and TIME_LIMITER in self.layers:
            self.time_limit_s = config.timelimiter.timeout_duration_s
        self.time_limited: Counter[str] = Counter()
        self.fallbacks = {
            layer: Fallback(layer, pg_fallback_config(settings), clock=clock.time)
            for layer, settings in config.fallbacks.items()
        }
        self.pg_calls: Counter[str] = Counter()
        """Gateway attempts by outcome (``shop_pg_calls_total``)."""
        self.call_seconds: dict[str, list[float]] = {
            k: [0, 0.0] for k in ("successful", "failed", "ignored")
        }

    # ---------------------------------------------------------------- the chain

    def run(self, send: Send, key: Hashable, done: Done) -> None:
        """``send`` through every layer; ``done`` once the outermost has its answer."""
        self._layer(0, send, key, self._with_fallback(OUTERMOST, key, done))

    def _layer(self, i: int, send: Send, key: Hashable, done: Done) -> None:
        if i == len(self.layers):
            self._attempt(send, done)
            return
        layer = self.layers[i]
        done = self._with_fallback(layer, key, done)

        def inner(d: Done) -> None:
            self._layer(i + 1, send, key, d)

        if layer == RETRY:
            self._retry(inner, done)
        elif layer == CIRCUIT_BREAKER and self.breaker is not None:
            self._breaker(inner, done)
        elif layer == TIME_LIMITER and self.time_limit_s is not None:
            self._time_limited(inner, done, self.time_limit_s)
        elif layer == BULKHEAD and self.bulkhead is not None:
            self._bulkheaded(inner, done, self.bulkhead)
        else:
            inner(done)

    def _attempt(self, send: Send, done: Done) -> None:
        def answered(error: BaseException | None) -> None:
            self.pg_calls[outcome_of(error)] += 1
            done(None if error else {}, error)

        send(answered)

    def _with_fallback(self, layer: str, key: Hashable, done: Done) -> Done:
        fallback = self.fallbacks.get(layer)
        if fallback is None:
            return done

        def answered(value: Any, error: BaseException | None) -> None:
            try:
                result = fallback.call(lambda: _raise_or(value, error), key)
            except Exception as exc:  # noqa: BLE001 - the fallback did not answer for it
                done(None, exc)
                return
            done(result, None)

        return answered

    def _retry(self, inner: Callable[[Done], None], done: Done) -> None:
        most = self.retry_config.max_attempts

        def attempt(n: int) -> None:
            inner(lambda value, error: result(n, value, error))

        def result(n: int, value: Any, error: BaseException | None) -> None:
            with_retry = "without_retry" if n == 1 else "with_retry"
            if error is None:
                self.retry_calls[f"successful_{with_retry}"] += 1
                done(value, None)
                return
            if n < most and self.retry_config.should_retry(error):
                self.retries += 1
                self.clock.after(self.interval(n), attempt, n + 1)
                return
            self.retry_calls[f"failed_{with_retry}"] += 1
            done(None, error)

        attempt(1)

    def _breaker(self, inner: Callable[[Done], None], done: Done) -> None:
        breaker = self.breaker
        assert breaker is not None
        try:
            breaker.acquire_permission()
        except CallNotPermittedError as exc:
            done(None, exc)
            return
        started = self.clock.now

        def result(value: Any, error: BaseException | None) -> None:
            elapsed = self.clock.now - started
            if error is None:
                breaker.on_success(elapsed)
                kind = "successful"
            else:
                breaker.on_error(elapsed, error)
                kind = self.breaker_config.classify(error)
            timed = self.call_seconds[kind]
            timed[0] += 1
            timed[1] += elapsed
            done(value, error)

        inner(result)

    def _time_limited(self, inner: Callable[[Done], None], done: Done, limit: float) -> None:
        over = [False]

        def result(value: Any, error: BaseException | None) -> None:
            if over[0]:
                return  # the caller stopped waiting; the call ran on (cancel or not)
            over[0] = True
            self.time_limited["successful" if error is None else "failed"] += 1
            done(value, error)

        def expire() -> None:
            if over[0]:
                return
            over[0] = True
            self.time_limited["timeout"] += 1
            done(None, TimeLimitExceededError(TIME_LIMITER_NAME, limit))

        self.clock.after(limit, expire)
        inner(result)

    def _bulkheaded(self, inner: Callable[[Done], None], done: Done, pool: Pool) -> None:
        def granted() -> None:
            def result(value: Any, error: BaseException | None) -> None:
                pool.release()
                done(value, error)

            inner(result)

        pool.acquire(granted, lambda: done(None, BulkheadFullError(BULKHEAD_NAME)))
