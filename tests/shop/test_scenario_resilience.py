"""The scenario side of the shop's layers (``harness.scenario.builds.resilience``): the YAML keys,
the problems ``harness validate`` reports with their lines, and the settings file the
shop reads back from them."""

from __future__ import annotations

from typing import Any

import pytest

from harness.core.errors import ScenarioError
from harness.run.kinds.shop.target import shop_settings
from harness.scenario.builds.resilience import BLOCK_OF, LAYERS
from harness.scenario.loader import load_scenario_text
from targets.shop.config import BLOCKS, OUTERMOST, ShopConfig
from targets.shop.resilience import (
    DEFAULT_ORDER,
    CircuitBreakerConfig,
    FallbackConfig,
    NaiveCircuitBreakerConfig,
)

HEAD = """\
name: composition
duration: 60s
traffic:
  payments: {method: POST, path: /api/payments, rate: 10, body: {amount: 1}}
builds:
"""

SEED_002 = """\
  retry-only:
    profile: retry-only
    resilience4j:
      retry: {max-attempts: 3, wait-duration: 500ms}
  cb-wrong:
    profile: retry-circuit-breaker
    resilience4j:
      retry: {max-attempts: 3, wait-duration: 500ms}
      circuitbreaker: {sliding-window-size: 5, minimum-number-of-calls: 5, fallback: value}
  cb-correct:
    profile: retry-circuit-breaker
    resilience4j:
      retry: {max-attempts: 3, wait-duration: 500ms}
      circuitbreaker: {sliding-window-size: 5, minimum-number-of-calls: 5}
      fallback: {kind: value, value: {status: CIRCUIT_OPEN}}
  breaker-outside:
    profile: retry-circuit-breaker
    resilience: [circuit-breaker, retry]
    resilience4j:
      circuitbreaker: {sliding-window-size: 5, minimum-number-of-calls: 5}
"""

SEED_004 = """\
  naive:
    profile: retry-circuit-breaker
    resilience4j:
      retry: {max-attempts: 1}
      circuitbreaker: {type: naive, failure-count: 5, window: 10s, open-duration: 30s}
  rate-based:
    profile: retry-circuit-breaker
    resilience4j:
      retry: {max-attempts: 1}
      circuitbreaker:
        sliding-window-size: 100
        minimum-number-of-calls: 100
        failure-rate-threshold: 50
        wait-duration-in-open-state: 10s
        permitted-number-of-calls-in-half-open-state: 3
        automatic-transition-from-open-to-half-open-enabled: true
  layered:
    profile: retry-only
    resilience: [retry, time-limiter, bulkhead]
    resilience4j:
      timelimiter: {timeout-duration: 2s, cancel-running-future: false}
      bulkhead: {max-concurrent-calls: 10, max-wait-duration: 50ms, fallback: error}
      fallback: {kind: cached, ttl: 5m}
"""


def shop_configs(builds: str) -> dict[str, ShopConfig]:
    """Each build as the shop reads it from the file the harness writes."""
    scenario = load_scenario_text(HEAD + builds, "composition.yaml").scenario
    return {
        name: ShopConfig.from_dict({**shop_settings(build), "pg-url": "http://pg"})
        for name, build in scenario.builds.items()
    }


def problems(builds: str) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(HEAD + builds, "composition.yaml")
    return [str(p) for p in info.value.problems]


def test_both_sides_name_the_same_layers_in_the_same_default_order() -> None:
    assert LAYERS == DEFAULT_ORDER
    assert {block: layer for layer, block in BLOCK_OF.items()} == BLOCKS


def test_seed_002s_builds_reach_the_shop() -> None:
    configs = shop_configs(SEED_002)
    assert {name: c.layers for name, c in configs.items()} == {
        "retry-only": ("retry",),
        "cb-wrong": ("retry", "circuit-breaker"),
        "cb-correct": ("retry", "circuit-breaker"),
        "breaker-outside": ("circuit-breaker", "retry"),
    }
    assert configs["cb-wrong"].fallbacks == {"circuit-breaker": FallbackConfig(kind="value")}
    assert configs["cb-correct"].fallbacks == {
        OUTERMOST: FallbackConfig(kind="value", value={"status": "CIRCUIT_OPEN"})
    }
    assert configs["retry-only"].fallbacks == {}


def test_seed_004s_builds_reach_the_shop() -> None:
    configs = shop_configs(SEED_004)
    assert configs["naive"].circuitbreaker == NaiveCircuitBreakerConfig(5, 10.0, 30.0)
    rate = configs["rate-based"].circuitbreaker
    assert isinstance(rate, CircuitBreakerConfig)
    assert (rate.sliding_window_size, rate.permitted_number_of_calls_in_half_open_state) == (
        100,
        3,
    )
    layered = configs["layered"]
    assert layered.layers == ("retry", "time-limiter", "bulkhead")
    assert layered.timelimiter is not None and layered.bulkhead is not None
    assert (layered.timelimiter.timeout_duration_s, layered.bulkhead.max_wait_duration_s) == (
        2.0,
        0.05,
    )
    assert {k: (v.kind, v.ttl_s) for k, v in layered.fallbacks.items()} == {
        "bulkhead": ("error", 60.0),
        OUTERMOST: ("cached", 300.0),
    }


@pytest.mark.parametrize(
    ("builds", "expected"),
    [
        (
            "  b:\n    profile: retry-circuit-breaker\n"
            "    resilience: [retry, circuit-breaker, retry]\n",
            "composition.yaml:8:17: builds.b.resilience: retry is listed twice",
        ),
        (
            "  b:\n    profile: retry-only\n    resilience: [retry, bulkheads]\n",
            "composition.yaml:8:25: builds.b.resilience.1: unknown layer 'bulkheads'",
        ),
        (
            "  b:\n    profile: retry-only\n    resilience: [retry, circuitbreaker]\n",
            "did you mean circuit-breaker?",
        ),
        (
            "  b:\n    profile: retry-only\n    resilience: [fallback, retry]\n",
            "a fallback is not a layer",
        ),
        (
            "  b:\n    profile: retry-only\n    resilience: [retry, time-limiter]\n",
            "time-limiter is listed but not configured: add resilience4j.timelimiter",
        ),
        (
            "  b:\n    profile: retry-only\n    resilience: [retry, circuit-breaker]\n",
            "profile retry-only has no breaker",
        ),
        (
            "  b:\n    profile: retry-circuit-breaker\n    resilience: [retry]\n",
            "circuit-breaker is not in resilience ['retry']",
        ),
        (
            "  b:\n    profile: retry-only\n    resilience: [retry]\n"
            "    resilience4j:\n      bulkhead: {fallback: error}\n",
            "resilience4j.bulkhead.fallback is attached to bulkhead, which is not in resilience",
        ),
        (
            "  b:\n    profile: retry-only\n    resilience: [retry]\n"
            "    resilience4j:\n      bulkhead: {}\n",
            "resilience4j.bulkhead is configured but bulkhead is not in resilience",
        ),
        (
            "  b:\n    profile: retry-only\n    resilience4j:\n      time-limiter: {}\n",
            "time-limiter: the block is named timelimiter",
        ),
        (
            "  b:\n    profile: retry-circuit-breaker\n    resilience4j:\n"
            "      circuitbreaker: {type: naive, sliding-window-size: 5}\n",
            "sliding-window-size is a setting of type resilience4j",
        ),
        (
            "  b:\n    profile: retry-circuit-breaker\n    resilience4j:\n"
            "      circuitbreaker: {open-duration: 5s}\n",
            "open-duration: set type: naive",
        ),
        (
            "  b:\n    profile: retry-only\n    resilience4j:\n"
            "      fallback: {kind: error, value: 1}\n",
            "value is the answer of kind value",
        ),
        (
            "  b:\n    profile: retry-only\n    resilience4j:\n"
            "      fallback: {kind: value, ttl: 1m}\n",
            "ttl applies to kind cached",
        ),
        (
            "  b:\n    profile: retry-only\n    resilience4j:\n      fallback: stale\n",
            "builds.b.resilience4j.fallback",
        ),
        (
            "  b:\n    profile: retry-only\n    resilience4j:\n"
            "      thread-pool-bulkhead: {core-thread-pool-size: 4, max-thread-pool-size: 2}\n",
            "max-thread-pool-size (2) is smaller than core-thread-pool-size (4)",
        ),
        (
            "  b:\n    profile: retry-only\n    resilience4j:\n"
            "      timelimiter: {timeout-duration: 0s}\n",
            "builds.b.resilience4j.timelimiter.timeout-duration",
        ),
        (
            "  b:\n    profile: retry-only\n    resilience4j:\n"
            "      bulkhead: {max-concurrent-calls: 100000}\n",
            "builds.b.resilience4j.bulkhead.max-concurrent-calls",
        ),
    ],
)
def test_bad_compositions_are_reported_with_their_line(builds: str, expected: str) -> None:
    found = problems(builds)
    assert any(expected in p for p in found), found


def test_defaults_and_shorthands() -> None:
    scenario = load_scenario_text(
        HEAD + "  b:\n    profile: retry-only\n    resilience4j:\n"
        "      bulkhead: {}\n      thread-pool-bulkhead: {}\n      timelimiter: {}\n"
        "      fallback: error\n",
        "composition.yaml",
    ).scenario
    dumped: dict[str, Any] = scenario.builds["b"].model_dump(mode="json", by_alias=True)
    blocks = dumped["resilience4j"]
    assert blocks["bulkhead"] == {
        "max-concurrent-calls": 25,
        "max-wait-duration": 0.0,
        "fallback": None,
    }
    assert blocks["thread-pool-bulkhead"]["queue-capacity"] == 100
    assert blocks["timelimiter"] == {
        "timeout-duration": 1.0,
        "cancel-running-future": True,
        "fallback": None,
    }
    assert blocks["fallback"] == {"kind": "error", "value": None, "ttl": 60.0}
    assert dumped["resilience"] is None
