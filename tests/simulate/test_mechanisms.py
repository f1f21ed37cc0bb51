"""Each mechanism of the simulator against its documented semantics, on the simulated clock.

The layers are driven with a gateway stand-in whose every call ends after a set time
with a set error, so what is asserted is the layer's own rule: Resilience4j's breaker
(minimum calls, failure-rate and slow-call thresholds, open wait, half-open permits,
time-based window), the Retry's interval functions, a fair bulkhead, the DB pool's
queue, and the shop's accept queue.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from harness.simulate.clock import Clock, Pool
from harness.simulate.layers import Layers
from targets.shop.config import ShopConfig
from targets.shop.pg_client import PgRejected, PgTimeout
from targets.shop.resilience import BulkheadFullError, CallNotPermittedError, State

BREAKER = {
    "sliding-window-type": "COUNT_BASED",
    "sliding-window-size": 10,
    "minimum-number-of-calls": 10,
    "failure-rate-threshold": 50,
    "wait-duration-in-open-state": 5.0,
    "permitted-number-of-calls-in-half-open-state": 3,
    "automatic-transition-from-open-to-half-open-enabled": True,
}


def layers(clock: Clock, **blocks: Any) -> Layers:
    profile = "retry-circuit-breaker" if "circuitbreaker" in blocks else "retry-only"
    blocks.setdefault("retry", {"max-attempts": 1})
    config = ShopConfig.from_dict(
        {"pg-url": "http://x", "profile": profile, "resilience4j": blocks}
    )
    return Layers(clock, config, random.Random(1))


class Gateway:
    """Every call ends ``took`` seconds after it is sent, with ``error()``; sends are logged."""

    def __init__(self, clock: Clock, took: float, error: Callable[[], BaseException | None]):
        self.clock, self.took, self.error = clock, took, error
        self.sent: list[float] = []

    def send(self, done: Callable[[BaseException | None], None]) -> None:
        self.sent.append(self.clock.now)
        self.clock.after(self.took, done, self.error())


def calls(clock: Clock, chain: Layers, gateway: Gateway, times: list[float]) -> list[Any]:
    """One call through ``chain`` at each of ``times``; each one's error (None: answered)."""
    results: list[Any] = [None] * len(times)

    def start(i: int) -> None:
        def done(value: Any, error: BaseException | None) -> None:
            results[i] = error if error is not None else "ok"

        chain.run(gateway.send, i, done)

    for i, t in enumerate(times):
        clock.at(t, start, i)
    clock.run(max(times) + 100)
    return results


def test_breaker_opens_at_minimum_calls_at_the_failure_rate_threshold() -> None:
    clock = Clock()
    chain = layers(clock, circuitbreaker=BREAKER)
    gateway = Gateway(clock, 0.05, lambda: PgTimeout("read"))
    results = calls(clock, chain, gateway, [0.1 * i for i in range(15)])
    # Ten failures fill the window (minimum 10, 100 % >= 50 %): the 11th is refused.
    assert len(gateway.sent) == 10
    assert all(isinstance(r, PgTimeout) for r in results[:10])
    assert all(isinstance(r, CallNotPermittedError) for r in results[10:])


def test_below_the_threshold_the_breaker_stays_closed() -> None:
    clock = Clock()
    chain = layers(clock, circuitbreaker=BREAKER)
    outcomes = iter([PgTimeout("read") if i % 5 < 2 else None for i in range(40)])  # 40 %
    gateway = Gateway(clock, 0.05, lambda: next(outcomes))
    calls(clock, chain, gateway, [0.1 * i for i in range(40)])
    assert len(gateway.sent) == 40
    assert chain.breaker is not None and chain.breaker.state is State.CLOSED


def test_a_4xx_is_ignored_by_the_breaker() -> None:
    clock = Clock()
    chain = layers(clock, circuitbreaker=BREAKER)
    gateway = Gateway(clock, 0.05, lambda: PgRejected(402, ""))
    calls(clock, chain, gateway, [0.1 * i for i in range(20)])
    assert len(gateway.sent) == 20
    assert chain.call_seconds["ignored"][0] == 20


def test_half_open_probes_close_it_after_the_open_wait() -> None:
    clock = Clock()
    chain = layers(clock, circuitbreaker=BREAKER)
    healthy_after = 3.0
    gateway = Gateway(clock, 0.05, lambda: PgTimeout("r") if clock.now < healthy_after else None)
    times = [0.1 * i for i in range(10)] + [4.0, 5.5, 5.6, 5.7, 5.8, 5.9]
    results = calls(clock, chain, gateway, times)
    assert isinstance(results[10], CallNotPermittedError)  # 4.0 s: still open (opened ~0.95 s)
    # Half-open at ~5.95 s (automatic): the calls before it are refused...
    assert all(isinstance(r, CallNotPermittedError) for r in results[11:])
    breaker = chain.breaker
    assert breaker is not None
    assert breaker.state is State.HALF_OPEN
    # ... and three good probes close it; a fourth call is refused while they are out.
    results = calls(clock, chain, gateway, [clock.now + d for d in (0.0, 0.01, 0.02, 0.03)])
    assert results[:3] == ["ok", "ok", "ok"]
    assert isinstance(results[3], CallNotPermittedError)
    assert breaker.state is State.CLOSED


def test_a_failed_half_open_probe_reopens_it() -> None:
    clock = Clock()
    chain = layers(
        clock, circuitbreaker={**BREAKER, "permitted-number-of-calls-in-half-open-state": 1}
    )
    gateway = Gateway(clock, 0.05, lambda: PgTimeout("r"))
    results = calls(clock, chain, gateway, [0.1 * i for i in range(10)] + [6.5, 6.6, 11.0, 11.6])
    assert len(gateway.sent) == 12  # the probes at 6.5 s and 11.6 s; each fails: open again
    assert isinstance(results[11], CallNotPermittedError)  # open again from 6.55 s...
    assert isinstance(results[12], CallNotPermittedError)  # ... to 11.55 s


def test_slow_calls_open_it_though_every_call_succeeds() -> None:
    clock = Clock()
    slow = {**BREAKER, "slow-call-duration-threshold": 0.5, "slow-call-rate-threshold": 50}
    chain = layers(clock, circuitbreaker=slow)
    gateway = Gateway(clock, 0.8, lambda: None)
    results = calls(clock, chain, gateway, [0.1 * i for i in range(20)])
    assert results[:10] == ["ok"] * 10
    # Calls 1-10 end at 0.8-1.7 s; calls sent after the 10th ended (1.7 s) are refused.
    assert 17 <= len(gateway.sent) <= 18  # the one sent at 1.7 s, the instant it opens
    assert all(isinstance(r, CallNotPermittedError) for r in results[18:])


def test_a_time_based_window_forgets_old_failures() -> None:
    clock = Clock()
    window = {**BREAKER, "sliding-window-type": "TIME_BASED", "sliding-window-size": 2,
              "minimum-number-of-calls": 4}  # fmt: skip
    chain = layers(clock, circuitbreaker=window)
    gateway = Gateway(clock, 0.01, lambda: PgTimeout("r"))
    # Three failures, then three more 5 s later: never 4 within 2 s... until the 4th.
    results = calls(clock, chain, gateway, [0.0, 0.1, 0.2, 5.0, 5.1, 5.2, 5.3, 5.4])
    assert all(isinstance(r, PgTimeout) for r in results[:7])
    assert isinstance(results[7], CallNotPermittedError)


def test_retry_waits_by_its_exponential_interval_function() -> None:
    clock = Clock()
    retry = {"max-attempts": 4, "wait-duration": 0.1, "enable-exponential-backoff": True,
             "exponential-backoff-multiplier": 2.0}  # fmt: skip
    chain = layers(clock, retry=retry)
    gateway = Gateway(clock, 0.0, lambda: PgTimeout("r"))
    results = calls(clock, chain, gateway, [0.0])
    assert isinstance(results[0], PgTimeout)
    assert gateway.sent == pytest.approx([0.0, 0.1, 0.3, 0.7])
    assert chain.retries == 3


def test_retry_does_not_retry_a_refused_call_by_default() -> None:
    clock = Clock()
    chain = layers(clock, retry={"max-attempts": 3, "wait-duration": 0.1}, circuitbreaker=BREAKER)
    gateway = Gateway(clock, 0.01, lambda: PgTimeout("r"))
    calls(clock, chain, gateway, [0.5 * i for i in range(8)])
    # Each payment: 3 attempts, each in the window; the 4th payment's first attempt fills
    # it to 10 failures... then every attempt is refused and not retried.
    assert len(gateway.sent) == 10
    assert chain.retries == 7  # 2 + 2 + 2, and the 4th payment's retry that was refused


def test_bulkhead_refuses_past_its_concurrent_calls() -> None:
    clock = Clock()
    chain = layers(clock, bulkhead={"max-concurrent-calls": 2})
    gateway = Gateway(clock, 1.0, lambda: None)
    results = calls(clock, chain, gateway, [0.0, 0.1, 0.2, 1.5])
    assert results[:2] == ["ok", "ok"]
    assert isinstance(results[2], BulkheadFullError)
    assert results[3] == "ok"


def test_pool_serves_waiters_first_come_first_served_and_times_them_out() -> None:
    clock = Clock()
    pool = Pool(clock, 1, timeout=1.0)
    served: list[tuple[str, float]] = []

    def ask(name: str, hold: float) -> None:
        def granted() -> None:
            served.append((name, clock.now))
            clock.after(hold, pool.release)

        pool.acquire(granted, lambda: served.append((name + " timed out", clock.now)))

    for t, name, hold in ((0.0, "a", 0.5), (0.1, "b", 0.3), (0.2, "c", 0.3), (0.3, "d", 0.3)):
        clock.at(t, ask, name, hold)
    clock.run(10)
    assert served == [
        ("a", 0.0),
        ("b", 0.5),
        ("c", 0.8),
        ("d", 1.1),
    ]
    clock = Clock()
    pool = Pool(clock, 1, timeout=0.4)
    for t, name, hold in ((0.0, "a", 1.0), (0.1, "b", 0.1)):
        clock.at(t, ask, name, hold)
    served.clear()
    clock.run(10)
    assert served == [("a", 0.0), ("b timed out", pytest.approx(0.5))]
    assert pool.timeouts == 1
