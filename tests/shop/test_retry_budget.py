"""Retry budgets against their published semantics: gRPC's retry throttling (the C-core
``ServerRetryThrottleData`` test's sequence) and Finagle's ``RetryBudget`` (its
``RetryBudgetTest``'s figures: ``percent x requests + ttl x min-retries-per-second``)."""

from __future__ import annotations

from typing import Any

import pytest

from harness.core.errors import InputError
from harness.scenario.loader import load_scenario_text
from targets.shop.config import ShopConfig
from targets.shop.resilience import Retry, RetryBudgetConfig, RetryConfig, make_budget
from targets.shop.resilience.budget import FinagleRetryBudget, GrpcRetryThrottle


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_grpc_throttle_follows_grpc_cores_own_sequence() -> None:
    # max 4 tokens: the threshold is 2; each failure takes 1, each success gives 1.6.
    throttle = GrpcRetryThrottle(4, 1.6)
    throttle.on_failure()  # 3: above the threshold
    assert throttle.try_retry()
    throttle.on_success()  # 4: never above max
    assert throttle.tokens == 4
    throttle.on_failure()  # 3
    assert throttle.try_retry()
    throttle.on_failure()  # 2: at the threshold, no retries
    assert not throttle.try_retry()
    throttle.on_success()  # 3.6
    assert throttle.try_retry()
    for _ in range(10):
        throttle.on_failure()
    assert throttle.tokens == 0  # never below 0
    throttle.on_success()
    throttle.on_success()  # 3.2: above 2 again
    assert throttle.try_retry()


def test_grpc_throttle_lets_retries_through_only_while_most_calls_succeed() -> None:
    # ratio 0.1: a failure costs ten successes; one in eleven failing holds the tokens.
    throttle = GrpcRetryThrottle(10, 0.1)
    for _ in range(100):
        for _ in range(10):
            throttle.on_success()
        throttle.on_failure()
    assert throttle.try_retry()
    for _ in range(100):
        for _ in range(5):
            throttle.on_success()
        throttle.on_failure()  # one in six: the tokens drain to the threshold
    assert not throttle.try_retry()


@pytest.mark.parametrize(
    ("ttl", "min_per_s", "percent"),
    [
        (60.0, 0, 0.1),
        (60.0, 0, 0.5),
        (60.0, 0, 0.25),
        (60.0, 0, 0.75),
        (60.0, 0, 0.99),
        (60.0, 0, 0.01),
        (60.0, 0, 0.001),
        (1.0, 10, 0.0),
        (2.0, 5, 0.0),
        (1.0, 10, 0.1),
        (2.0, 5, 0.5),
    ],
)
def test_finagle_budget_allows_percent_of_requests_plus_the_reserve(
    ttl: float, min_per_s: int, percent: float
) -> None:
    """Finagle's RetryBudgetTest with time frozen: 10,000 requests, each depositing and then
    trying a retry; about percent x 10,000 + ttl x min-retries-per-second are allowed."""
    budget = FinagleRetryBudget(ttl, min_per_s, percent, clock=Clock())
    reserve = int(ttl) * min_per_s
    assert budget.balance == reserve
    if reserve == 0:
        assert not budget.try_retry()
    retried = 0
    for _ in range(10_000):
        budget.on_call()
        if budget.try_retry():
            retried += 1
        else:
            assert budget.balance == 0
    assert abs(retried - (int(10_000 * percent) + reserve)) <= 1


def test_finagle_budget_above_one_and_empty() -> None:
    budget = FinagleRetryBudget(60.0, 0, 2.0, clock=Clock())
    for _ in range(10_000):
        budget.on_call()
    assert budget.balance == 20_000
    empty = FinagleRetryBudget(10.0, 0, 0.0, clock=Clock())
    empty.on_call()
    assert empty.balance == 0 and not empty.try_retry()


def test_finagle_deposits_and_withdrawals_expire_after_ttl() -> None:
    clock = Clock()
    budget = FinagleRetryBudget(10.0, 0, 0.5, clock=clock)
    for _ in range(20):
        budget.on_call()
    assert budget.balance == 10
    for _ in range(10):
        assert budget.try_retry()
    assert not budget.try_retry()
    clock.now += 10.0  # both the deposits and the withdrawals are gone
    assert budget.balance == 0
    budget.on_call()
    budget.on_call()
    assert budget.try_retry() and not budget.try_retry()
    reserve = FinagleRetryBudget(10.0, 1, 0.0, clock=clock)  # 10 retries per 10 s
    assert sum(reserve.try_retry() for _ in range(20)) == 10
    clock.now += 10.0
    assert reserve.try_retry()  # the reserve is back as its withdrawals expire


class Failing(Exception):
    pass


def _always_fails(_: int) -> Any:
    raise Failing


def test_retry_asks_its_budget_and_counts_what_it_refused() -> None:
    retry = Retry(
        "pg",
        RetryConfig(max_attempts=3),
        sleep=lambda _: None,
        budget=GrpcRetryThrottle(4, 1.0),
    )
    # tokens 4: attempt 1 fails (3, retry), attempt 2 fails (2: at the threshold, refused)
    with pytest.raises(Failing):
        retry.call(_always_fails)
    m = retry.metrics()
    assert (m.retries, m.throttled, m.failed_with_retry) == (1, 1, 1)
    with pytest.raises(Failing):  # 1: no retry at all
        retry.call(_always_fails)
    assert retry.metrics().retries == 1 and retry.metrics().throttled == 2
    assert retry.call(lambda _: "ok") == "ok"  # 2: at the threshold
    assert retry.budget is not None and not retry.budget.try_retry()
    assert retry.call(lambda _: "ok") == "ok"  # 3: above it
    assert retry.budget is not None and retry.budget.try_retry()


def test_finagle_budget_in_a_retry_deposits_per_call_not_per_attempt() -> None:
    clock = Clock()
    retry = Retry(
        "pg",
        RetryConfig(max_attempts=5),
        sleep=lambda _: None,
        budget=FinagleRetryBudget(10.0, 0, 0.5, clock=clock),
    )
    for _ in range(4):  # 4 calls: 2 retries in all, whatever max-attempts allows
        with pytest.raises(Failing):
            retry.call(_always_fails)
    assert retry.metrics().retries == 2


def test_config_bounds_and_model() -> None:
    assert isinstance(make_budget(RetryBudgetConfig()), GrpcRetryThrottle)  # the default
    assert isinstance(make_budget(RetryBudgetConfig(model="finagle-budget")), FinagleRetryBudget)
    for bad in (
        {"max_tokens": 0},
        {"token_ratio": 1.5},
        {"ttl_s": 0.5},
        {"ttl_s": 61},
        {"min_retries_per_second": -1},
        {"percent_can_retry": -0.1},
        {"model": "hystrix"},
    ):
        with pytest.raises(ValueError):
            RetryBudgetConfig(**bad)


def test_the_shop_reads_the_budget_from_its_retry_block() -> None:
    config = ShopConfig.from_dict(
        {
            "pg-url": "http://127.0.0.1:1",
            "resilience4j": {
                "retry": {
                    "max-attempts": 3,
                    "budget": {"model": "finagle-budget", "ttl": 5.0, "percent-can-retry": 0.1},
                }
            },
        }
    )
    assert config.retry_budget == RetryBudgetConfig(
        model="finagle-budget", ttl_s=5.0, percent_can_retry=0.1
    )
    plain = ShopConfig.from_dict(
        {"pg-url": "http://127.0.0.1:1", "resilience4j": {"retry": {"budget": None}}}
    )
    assert plain.retry_budget is None


SCENARIO = """\
name: budget
duration: 10s
traffic:
  pay: {method: POST, path: /api/payments, rate: 5}
builds:
  b:
    profile: retry-only
    resilience4j:
      retry:
        budget: BUDGET
"""


def test_a_scenario_names_each_model_and_refuses_the_others_settings() -> None:
    text = SCENARIO.replace("BUDGET", "{model: finagle-budget, ttl: 5s, percent-can-retry: 0.1}")
    build = load_scenario_text(text).scenario.builds["b"]
    budget = build.resilience4j.retry.budget  # type: ignore[union-attr]
    assert budget is not None and budget.ttl == 5.0 and budget.model == "finagle-budget"
    default = load_scenario_text(SCENARIO.replace("BUDGET", "{}")).scenario.builds["b"]
    assert default.resilience4j.retry.budget.model == "grpc-throttling"  # type: ignore[union-attr]
    with pytest.raises(InputError, match="max-tokens: a setting of model grpc-throttling"):
        load_scenario_text(SCENARIO.replace("BUDGET", "{model: finagle-budget, max-tokens: 5}"))
    with pytest.raises(InputError, match="token-ratio"):
        load_scenario_text(SCENARIO.replace("BUDGET", "{token-ratio: 2}"))
