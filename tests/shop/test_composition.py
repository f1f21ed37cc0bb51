"""The shop's composition as data: the settings file, the payment flow and its series,
driven through the real gateway client over a scripted httpx transport (no network)."""

from __future__ import annotations

import io
import json
import re
import threading
from typing import Any

import httpx
import pytest

from targets.shop.app import ShopApp
from targets.shop.config import OUTERMOST, ShopConfig
from targets.shop.resilience import (
    BulkheadConfig,
    CircuitBreakerConfig,
    FallbackConfig,
    NaiveCircuitBreakerConfig,
    RetryConfig,
    ThreadPoolBulkheadConfig,
    TimeLimiterConfig,
)
from tests.shop.test_payments import exposition, make_service, scripted_gateway

# --- the settings file ---------------------------------------------------------------


def settings(**resilience4j: Any) -> dict[str, Any]:
    """A settings file as the harness writes it (every block present, defaults included)."""
    blocks: dict[str, Any] = {
        "retry": {"max-attempts": 3, "wait-duration": 0.0, "fallback": None},
        "circuitbreaker": None,
        "bulkhead": None,
        "thread-pool-bulkhead": None,
        "timelimiter": None,
        "fallback": None,
    }
    blocks.update(resilience4j)
    return {
        "target": "shop",
        "profile": "retry-circuit-breaker" if blocks["circuitbreaker"] else "retry-only",
        "workers": 4,
        "pg-client": {"connect-timeout": 1.0, "read-timeout": 3.0},
        "resilience4j": blocks,
        "resilience": None,
        "pg-url": "http://pg",
    }


BREAKER_AS_WRITTEN = {
    "type": "resilience4j",
    "failure-count": 5,
    "window": 10.0,
    "open-duration": 30.0,
    "fallback": None,
    "sliding-window-size": 5,
    "minimum-number-of-calls": 5,
}


def test_new_blocks_map_by_the_one_rule() -> None:
    config = ShopConfig.from_dict(
        settings(
            bulkhead={"max-concurrent-calls": 10, "max-wait-duration": 0.5, "fallback": None},
            timelimiter={"timeout-duration": 2.0, "cancel-running-future": False},
            **{
                "thread-pool-bulkhead": {
                    "core-thread-pool-size": 2,
                    "max-thread-pool-size": 4,
                    "queue-capacity": 10,
                    "keep-alive-duration": 0.1,
                    "fallback": {"kind": "error", "value": None, "ttl": 60.0},
                }
            },
            fallback={"kind": "cached", "value": None, "ttl": 300.0},
        )
    )
    assert config.bulkhead == BulkheadConfig(max_concurrent_calls=10, max_wait_duration_s=0.5)
    assert config.timelimiter == TimeLimiterConfig(2.0, cancel_running_future=False)
    assert config.thread_pool_bulkhead == ThreadPoolBulkheadConfig(2, 4, 10, 0.1)
    assert config.fallbacks == {
        "thread-pool-bulkhead": FallbackConfig(kind="error"),
        OUTERMOST: FallbackConfig(kind="cached", ttl_s=300.0),
    }
    assert config.layers == ("retry", "time-limiter", "bulkhead", "thread-pool-bulkhead")


def test_the_breakers_type_picks_its_settings() -> None:
    rate = ShopConfig.from_dict(settings(circuitbreaker=BREAKER_AS_WRITTEN))
    assert rate.circuitbreaker == CircuitBreakerConfig(
        sliding_window_size=5, minimum_number_of_calls=5
    )
    naive = ShopConfig.from_dict(
        settings(circuitbreaker={**BREAKER_AS_WRITTEN, "type": "naive", "failure-count": 3})
    )
    assert naive.circuitbreaker == NaiveCircuitBreakerConfig(failure_count=3)
    assert naive.layers == ("retry", "circuit-breaker")


def test_todays_files_read_the_same() -> None:
    """A file from before composition-as-data: no new key, the same two compositions."""
    before = ShopConfig.from_dict(
        {"profile": "retry-only", "resilience4j": {"retry": {"max-attempts": 2}}, "pg-url": "x"}
    )
    after = ShopConfig.from_dict(
        {
            "profile": "retry-circuit-breaker",
            "resilience4j": {"circuitbreaker": {"sliding-window-size": 10}},
            "pg-url": "x",
        }
    )
    assert (before.layers, after.layers) == (("retry",), ("retry", "circuit-breaker"))
    assert before.fallbacks == after.fallbacks == {}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"resilience4j": {"time-limiter": {}}}, "unknown block 'time-limiter'"),
        ({"resilience4j": {"circuitbreaker": {"type": "pybreaker"}}}, "unknown type"),
        ({"resilience4j": {"circuitbreaker": {"fail-max": 5}}}, "unknown setting 'fail-max'"),
        ({"resilience4j": {"bulkhead": {"max-calls": 5}}}, "unknown setting 'max-calls'"),
        ({"resilience": ["retry", "retry"]}, "listed twice"),
        ({"resilience": ["retry", "bulkhead"]}, "listed but not configured"),
        (
            {"resilience": [], "resilience4j": {"retry": {"fallback": {"kind": "error"}}}},
            "configured but not in the composition",
        ),
    ],
)
def test_bad_files_are_refused(changes: dict[str, Any], message: str) -> None:
    data: dict[str, Any] = {"profile": "retry-only", "pg-url": "x", **changes}
    with pytest.raises(ValueError, match=message):
        ShopConfig.from_dict(data)


def test_a_fallback_on_a_layer_outside_the_composition_is_refused() -> None:
    with pytest.raises(ValueError, match="a fallback on 'bulkhead'"):
        ShopConfig(pg_url="x", fallbacks={"bulkhead": FallbackConfig()})


# --- seed 002: where the fallback sits -----------------------------------------------


def seed_002(**changes: Any) -> Any:
    """The seed's breaker (window 5, minimum 5) behind Retry (3 attempts), gateway down."""
    return make_service(
        scripted_gateway("503"),
        profile="retry-circuit-breaker",
        retry=RetryConfig(max_attempts=3, wait_duration_s=0.0),
        circuitbreaker=CircuitBreakerConfig(sliding_window_size=5, minimum_number_of_calls=5),
        **changes,
    )


def gateway_calls(service: Any) -> int:
    return sum(service.stats().pg_calls.values())


def test_retry_only_makes_every_attempt() -> None:
    service = make_service(
        scripted_gateway("503"), retry=RetryConfig(max_attempts=3, wait_duration_s=0.0)
    )
    results = [service.pay(f"k{i}", 100) for i in range(10)]
    assert gateway_calls(service) == 30
    assert {(r.status, r.reason, r.attempts) for r in results} == {
        ("TIMEOUT_UNKNOWN", "server_error", 3)
    }


def test_cb_wrong_one_gateway_call_per_payment_whatever_max_attempts() -> None:
    service = seed_002(fallbacks={"circuit-breaker": FallbackConfig(kind="value", value="x")})
    results = [service.pay(f"k{i}", 100) for i in range(10)]
    assert gateway_calls(service) == 5  # 1 per payment until the breaker opened, then 0
    assert {r.attempts for r in results} == {1}  # Retry never retried
    assert {(r.status, r.fallback, r.value) for r in results} == {("FAILED", "value", "x")}
    assert [r.reason for r in results] == ["server_error"] * 5 + ["not_permitted"] * 5
    assert service.retry.metrics().successful_without_retry == 10


def test_cb_correct_retry_retries_until_the_breaker_opens() -> None:
    service = seed_002(fallbacks={OUTERMOST: FallbackConfig(kind="value", value="x")})
    results = [service.pay(f"k{i}", 100) for i in range(10)]
    assert gateway_calls(service) == 5  # 3 + 2: the fifth failure opened the breaker
    assert [r.attempts for r in results[:3]] == [3, 3, 1]  # refusals are not retried
    assert service.retry.metrics().retries == 4
    assert {(r.status, r.fallback) for r in results} == {("FAILED", "value")}


def test_breaker_outside_retry_counts_payments_not_attempts() -> None:
    """resilience4j#2383's other side: Retry inside, one window slot per payment."""
    inside = seed_002()
    outside = seed_002(resilience=("circuit-breaker", "retry"))
    for service in (inside, outside):
        for i in range(10):
            service.pay(f"k{i}", 100)
    assert gateway_calls(inside) == 5  # opened during the second payment
    assert gateway_calls(outside) == 15  # five payments of three attempts each
    assert outside.breaker is not None
    assert outside.breaker.metrics().not_permitted_calls == 5
    # Resilience4j's calls timer counts what the breaker recorded, as Spring's does: every
    # attempt with Retry outside (5 in 2 payments), one per payment with it inside.
    for service, failed in ((inside, 5), (outside, 5)):
        assert service.stats().call_seconds["failed"][0] == failed
        assert (
            'resilience4j_circuitbreaker_calls_seconds_count{kind="failed",name="pgClient"} '
            f"{failed}.0"
        ) in exposition(service).splitlines()


def test_a_cached_fallback_answers_a_repeated_key_with_the_gateways_approval() -> None:
    service = make_service(
        scripted_gateway("ok", "503", "503"),
        retry=RetryConfig(max_attempts=1),
        fallbacks={OUTERMOST: FallbackConfig(kind="cached")},
    )
    fresh = service.pay("same-key", 100)
    again = service.pay("same-key", 100)  # the gateway fails this time
    other = service.pay("other-key", 100)  # nothing cached: the error goes on
    assert (fresh.status, fresh.fallback) == ("APPROVED", None)
    assert (again.status, again.fallback, again.reason) == ("APPROVED", "cached", "server_error")
    assert again.value == {"status": "APPROVED"}
    assert (other.status, other.fallback) == ("TIMEOUT_UNKNOWN", None)
    lines = exposition(service).splitlines()
    assert 'shop_fallback_calls_total{kind="cached",layer="outermost"} 1.0' in lines
    assert 'shop_fallback_cache_misses_total{layer="outermost"} 1.0' in lines


def test_declines_are_answers_no_fallback_replaces_them() -> None:
    service = make_service(
        scripted_gateway("400"), fallbacks={OUTERMOST: FallbackConfig(kind="value")}
    )
    result = service.pay("k", 100)
    assert (result.status, result.reason, result.fallback) == ("FAILED", "pg_400", None)


# --- the other layers in the flow ----------------------------------------------------


def test_naive_breaker_in_the_flow_and_its_state_series() -> None:
    service = make_service(
        scripted_gateway("503"),
        profile="retry-circuit-breaker",
        retry=RetryConfig(max_attempts=1),
        circuitbreaker=NaiveCircuitBreakerConfig(failure_count=3),
    )
    results = [service.pay(f"k{i}", 100) for i in range(5)]
    assert [r.reason for r in results] == ["server_error"] * 3 + ["not_permitted"] * 2
    lines = exposition(service).splitlines()
    assert 'resilience4j_circuitbreaker_state{name="pgClient",state="open"} 1.0' in lines
    assert 'resilience4j_circuitbreaker_state{name="pgClient",state="closed"} 0.0' in lines
    assert not [line for line in lines if 'state="half_open"' in line]  # it has none
    assert (
        'resilience4j_circuitbreaker_not_permitted_calls_total{kind="not_permitted",'
        'name="pgClient"} 2.0'
    ) in lines


def test_bulkhead_refusals_are_not_retried_and_its_gauges() -> None:
    service = make_service(
        scripted_gateway("ok"),
        retry=RetryConfig(max_attempts=3, wait_duration_s=0.0),
        bulkhead=BulkheadConfig(max_concurrent_calls=0),
    )
    result = service.pay("k", 100)
    assert (result.status, result.reason, result.attempts) == (
        "TIMEOUT_UNKNOWN",
        "bulkhead_full",
        1,
    )
    lines = exposition(service).splitlines()
    assert 'resilience4j_bulkhead_available_concurrent_calls{name="pgClient"} 0.0' in lines
    assert 'resilience4j_bulkhead_max_allowed_concurrent_calls{name="pgClient"} 0.0' in lines
    assert 'shop_bulkhead_rejected_calls_total{name="pgClient",type="semaphore"} 1.0' in lines


def test_time_limiter_frees_the_caller_and_is_retried() -> None:
    release = threading.Event()

    def hanging(request: httpx.Request) -> httpx.Response:
        release.wait(5.0)
        return httpx.Response(200, json={"status": "APPROVED"})

    service = make_service(
        httpx.MockTransport(hanging),
        retry=RetryConfig(max_attempts=2, wait_duration_s=0.0),
        timelimiter=TimeLimiterConfig(timeout_duration_s=0.05),
    )
    try:
        result = service.pay("k", 100)
    finally:
        release.set()
    assert (result.status, result.reason, result.attempts) == ("TIMEOUT_UNKNOWN", "time_limit", 2)
    lines = exposition(service).splitlines()
    assert 'resilience4j_timelimiter_calls_total{kind="timeout",name="pgClient"} 2.0' in lines


def test_thread_pool_bulkhead_series() -> None:
    service = make_service(
        scripted_gateway("ok"),
        thread_pool_bulkhead=ThreadPoolBulkheadConfig(1, 2, 3),
    )
    assert service.pay("k", 100).status == "APPROVED"
    lines = exposition(service).splitlines()
    for line in [
        'resilience4j_bulkhead_core_thread_pool_size{name="pgClient"} 1.0',
        'resilience4j_bulkhead_max_thread_pool_size{name="pgClient"} 2.0',
        'resilience4j_bulkhead_queue_capacity{name="pgClient"} 3.0',
        'resilience4j_bulkhead_queue_depth{name="pgClient"} 0.0',
    ]:
        assert line in lines
    assert service.thread_pool_bulkhead is not None
    service.thread_pool_bulkhead.shutdown()


def test_todays_profiles_export_no_new_series() -> None:
    text = exposition(make_service(scripted_gateway("ok")))
    assert not re.search(r"bulkhead|timelimiter|fallback", text)


# --- the answer on the wire ----------------------------------------------------------


def post(app: ShopApp, key: str) -> tuple[str, dict[str, str], dict[str, Any]]:
    seen: dict[str, Any] = {}

    def start(status: str, headers: list[tuple[str, str]]) -> None:
        seen["status"], seen["headers"] = status, dict(headers)

    body = json.dumps({"amount": 100}).encode()
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/api/payments",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        "HTTP_IDEMPOTENCY_KEY": key,
    }
    data = b"".join(app(environ, start))
    return seen["status"], seen["headers"], json.loads(data)


@pytest.mark.parametrize(
    ("kind", "code", "status"),
    [("value", "200 OK", "FAILED"), ("error", "503 Service Unavailable", "TIMEOUT_UNKNOWN")],
)
def test_a_fallback_answer_is_marked(kind: str, code: str, status: str) -> None:
    app = ShopApp(
        ShopConfig(
            pg_url="http://127.0.0.1:9",
            workers=2,
            retry=RetryConfig(max_attempts=1),
            bulkhead=BulkheadConfig(max_concurrent_calls=0),
            fallbacks={OUTERMOST: FallbackConfig(kind=kind, value={"msg": "later"})},  # type: ignore[arg-type]
        )
    )
    http_status, headers, body = post(app, "k")
    assert http_status == code
    assert (headers["X-Fallback"], headers["X-Outcome"]) == (kind, "bulkhead_full")
    assert (body["status"], body["fallback"], body["cached"]) == (status, kind, False)
    assert body.get("value") == ({"msg": "later"} if kind == "value" else None)
