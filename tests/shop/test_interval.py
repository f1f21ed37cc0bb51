"""Unit tests for the retry's interval functions (Resilience4j's IntervalFunction)."""

from __future__ import annotations

import math
import random
import threading
from typing import Any

import pytest

from targets.shop.resilience import (
    ExponentialBackoff,
    ExponentialRandomBackoff,
    FixedInterval,
    IntervalFunction,
    RandomizedInterval,
    Retry,
    RetryConfig,
)


def test_fixed_interval_is_the_same_after_every_attempt() -> None:
    fixed = FixedInterval(0.25)
    assert [fixed(n) for n in (1, 2, 3, 1000)] == [0.25] * 4


def test_exponential_backoff_multiplies_then_caps() -> None:
    backoff = ExponentialBackoff(0.1, 2.0, max_interval_s=0.5)
    assert [backoff(n) for n in (1, 2, 3, 4, 5)] == pytest.approx([0.1, 0.2, 0.4, 0.5, 0.5])
    assert ExponentialBackoff(0.1, 2.0)(11) == pytest.approx(102.4)  # no cap: grows forever


def test_exponential_backoff_survives_absurd_attempt_numbers() -> None:
    assert ExponentialBackoff(0.1, 2.0)(100_000) == math.inf
    assert ExponentialBackoff(0.1, 2.0, max_interval_s=3.0)(100_000) == 3.0
    assert ExponentialRandomBackoff(0.1, 2.0, 0.5, max_interval_s=3.0)(100_000) == 3.0


def test_randomized_interval_draws_uniformly_within_the_factor() -> None:
    rng = random.Random(99)
    jittered = RandomizedInterval(2.0, 0.25, rng=rng)
    reference = random.Random(99)
    waits = [jittered(1) for _ in range(500)]
    assert waits == pytest.approx([1.5 + reference.random() * 1.0 for _ in range(500)])
    assert all(1.5 <= w <= 2.5 for w in waits)


def test_randomization_factor_zero_is_the_plain_interval() -> None:
    assert RandomizedInterval(0.3, 0.0)(7) == 0.3
    assert ExponentialRandomBackoff(0.3, 2.0, 0.0)(3) == pytest.approx(1.2)


def test_exponential_random_backoff_caps_after_randomizing() -> None:
    # Resilience4j: min(randomize(initial * multiplier ** (n - 1)), max), so values near
    # the cap are clamped to it rather than spread around it.
    backoff = ExponentialRandomBackoff(1.0, 2.0, 0.5, max_interval_s=3.0, rng=random.Random(3))
    waits = [backoff(3) for _ in range(500)]  # 4 +- 2, capped at 3
    assert all(2.0 <= w <= 3.0 for w in waits)
    assert waits.count(3.0) > 200  # every draw above 3 is clamped


@pytest.mark.parametrize(
    "make",
    [
        lambda: FixedInterval(1.0),
        lambda: RandomizedInterval(1.0, 0.5),
        lambda: ExponentialBackoff(1.0, 2.0),
        lambda: ExponentialRandomBackoff(1.0, 2.0, 0.5),
    ],
)
def test_attempts_are_one_based(make: Any) -> None:
    function: IntervalFunction = make()
    with pytest.raises(ValueError, match="1-based"):
        function(0)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: FixedInterval(-0.1), "interval_s"),
        (lambda: FixedInterval(math.nan), "interval_s"),
        (lambda: RandomizedInterval(1.0, 1.5), "randomization_factor"),
        (lambda: RandomizedInterval(1.0, -0.1), "randomization_factor"),
        (lambda: ExponentialBackoff(1.0, 0.9), "multiplier"),
        (lambda: ExponentialBackoff(1.0, 2.0, max_interval_s=0.5), "max_interval_s"),
        (lambda: ExponentialRandomBackoff(1.0, 2.0, 2.0), "randomization_factor"),
        (lambda: ExponentialRandomBackoff(-1.0, 2.0, 0.5), "initial_interval_s"),
    ],
)
def test_invalid_settings_are_rejected(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def test_one_generator_shared_by_threads_yields_each_draw_once() -> None:
    rng = random.Random(5)
    jittered = RandomizedInterval(1.0, 1.0, rng=rng)
    waits: list[float] = []
    lock = threading.Lock()

    def worker() -> None:
        mine = [jittered(1) for _ in range(1000)]
        with lock:
            waits.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10.0)
    reference = random.Random(5)
    assert sorted(waits) == pytest.approx(sorted(reference.random() * 2.0 for _ in range(4000)))


# --- RetryConfig picks the function as Spring Boot's properties do ----------------------


@pytest.mark.parametrize(
    ("settings", "kind"),
    [
        ({}, FixedInterval),
        ({"enable_randomized_wait": True}, RandomizedInterval),
        ({"enable_exponential_backoff": True}, ExponentialBackoff),
        (
            {"enable_exponential_backoff": True, "enable_randomized_wait": True},
            ExponentialRandomBackoff,
        ),
    ],
)
def test_retry_config_picks_the_interval_function(settings: dict[str, Any], kind: type) -> None:
    assert isinstance(RetryConfig(**settings).interval_function(), kind)


def test_cap_applies_only_with_exponential_backoff() -> None:
    config = RetryConfig(
        wait_duration_s=1.0,
        enable_randomized_wait=True,
        randomized_wait_factor=1.0,
        exponential_max_wait_duration_s=1.0,
    )
    function = config.interval_function(random.Random(1))
    waits = [function(1) for _ in range(200)]
    assert max(waits) > 1.0  # randomized around 1 s, not capped at it


def test_retry_sleeps_what_its_interval_function_says() -> None:
    slept: list[float] = []
    config = RetryConfig(
        max_attempts=4,
        wait_duration_s=0.1,
        enable_exponential_backoff=True,
        enable_randomized_wait=True,
        exponential_max_wait_duration_s=0.3,
    )
    retry = Retry("pg", config, sleep=slept.append, rng=random.Random(11))
    expected = config.interval_function(random.Random(11))

    def always_fails(attempt: int) -> None:
        raise TimeoutError(attempt)

    with pytest.raises(TimeoutError):
        retry.call(always_fails)
    assert slept == [expected(1), expected(2), expected(3)]
