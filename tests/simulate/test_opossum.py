"""opossum's breaker on the simulated clock, against opossum 9's ``lib/circuit.js`` and
``lib/status.js``; and the Node target's settings read as ``server.js`` reads them."""

from __future__ import annotations

from harness.simulate.clock import Clock
from harness.simulate.node import node_config
from harness.simulate.opossum import OpossumBreaker, OpossumConfig

CONFIG = OpossumConfig(
    error_threshold_percentage=50, reset_timeout_s=2.0, volume_threshold=4,
    rolling_count_timeout_s=1.0, rolling_count_buckets=10,
)  # fmt: skip


def step(clock: Clock, t: float) -> None:
    clock.run(t)


def failing(breaker: OpossumBreaker, calls: int) -> None:
    """``calls`` calls that are let through and fail."""
    for _ in range(calls):
        assert breaker.fire()
        breaker.failure()


def test_it_opens_above_the_threshold_once_the_volume_is_reached() -> None:
    clock = Clock()
    breaker = OpossumBreaker(clock, CONFIG)
    failing(breaker, 3)  # 3 fires, 3 failures: below the volume of 4, stays closed
    assert breaker.current() == "closed"
    assert breaker.fire()
    breaker.failure()  # 4 of 4 failed: 100 % > 50 %
    assert breaker.current() == "open"
    assert not breaker.fire()
    assert breaker.events["reject"] == 1


def test_exactly_at_the_threshold_it_stays_closed() -> None:
    clock = Clock()
    breaker = OpossumBreaker(clock, CONFIG)
    for ok in (True, True, False, False):  # 2 of 4: 50 %, not above 50 %
        assert breaker.fire()
        breaker.success() if ok else breaker.failure()
    assert breaker.current() == "closed"


def test_refused_calls_count_as_fires_in_the_window() -> None:
    clock = Clock()
    breaker = OpossumBreaker(clock, CONFIG)
    failing(breaker, 4)
    for _ in range(6):
        assert not breaker.fire()
    assert breaker.stats()["fire"] == 10
    assert breaker.stats()["reject"] == 6


def test_the_rolling_window_forgets_old_buckets() -> None:
    clock = Clock()
    breaker = OpossumBreaker(clock, CONFIG)
    failing(breaker, 3)
    step(clock, 1.05)  # a 1 s window of 100 ms buckets: the failures at 0 s are gone
    assert breaker.stats()["failure"] == 0
    breaker.fire()
    breaker.failure()
    assert breaker.current() == "closed"  # 1 fire in the window: below the volume


def test_half_open_lets_one_trial_through_and_its_outcome_decides() -> None:
    clock = Clock()
    breaker = OpossumBreaker(clock, CONFIG)
    failing(breaker, 4)
    step(clock, 1.9)
    assert breaker.current() == "open"
    step(clock, 2.0)  # reset timeout after the open
    assert breaker.current() == "half_open"
    assert breaker.fire()  # the trial
    assert not breaker.fire()  # others are rejected while it runs
    breaker.failure()
    assert breaker.current() == "open"  # a failed trial opens it again, whatever the rate
    step(clock, 4.0)
    assert breaker.current() == "half_open"
    assert breaker.fire()
    breaker.success()
    assert breaker.current() == "closed"
    assert breaker.events["open"] == 2 and breaker.events["close"] == 1


def test_node_gateway_settings_follow_profile_env_and_flags() -> None:
    config = node_config(
        {"PROFILE": "after", "CB_ERROR_THRESHOLD": "30", "PORT": "{port}"},
        ["node", "server.js", "--cb-volume-threshold", "5", "--max-concurrency=12"],
    )
    assert (config.vendor_timeout_s, config.retries, config.max_concurrency) == (5.0, 0, 12)
    assert config.breaker is not None
    assert config.breaker.error_threshold_percentage == 30
    assert config.breaker.volume_threshold == 5
    assert node_config({"PROFILE": "before"}, []).breaker is None
