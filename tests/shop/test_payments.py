"""The shop's composition: its failure policy, the payment flow and the series it exports,
driven through the real gateway client over a scripted httpx transport (no network)."""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import generate_latest

from targets.shop.config import ShopConfig
from targets.shop.db import Store
from targets.shop.metrics import WorkerGauge, make_registry
from targets.shop.payments import (
    PaymentService,
    is_recorded_failure,
    is_retryable,
    pg_breaker_config,
    pg_retry_config,
)
from targets.shop.pg_client import (
    PgClient,
    PgConnectionError,
    PgRejected,
    PgServerError,
    PgTimeout,
)
from targets.shop.resilience import (
    BulkheadFullError,
    CallNotPermittedError,
    CircuitBreakerConfig,
    RetryConfig,
    TimeLimitExceededError,
)

SHOP = Path(__file__).resolve().parents[2] / "targets" / "shop"


def test_the_http_client_only_raises_its_own_errors() -> None:
    """What the errors mean is the caller's policy: pg_client imports none of the shop."""
    tree = ast.parse((SHOP / "pg_client.py").read_text())
    modules = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    modules += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in modules if m and m.startswith("targets")]


@pytest.mark.parametrize(
    ("error", "retried", "recorded"),
    [
        (PgTimeout("ReadTimeout"), True, True),
        (PgConnectionError("ConnectError"), True, True),
        (PgServerError(503), True, True),
        (PgRejected(400, "bad"), False, False),
        (CallNotPermittedError("pgClient"), False, True),
        (BulkheadFullError("pgClient"), False, True),
        (TimeLimitExceededError("pgClient", 1.0), True, True),
        (ValueError("bug"), False, True),
    ],
)
def test_the_shop_policy(error: BaseException, retried: bool, recorded: bool) -> None:
    assert is_retryable(error) is retried
    assert is_recorded_failure(error) is recorded


def test_policy_is_added_to_the_scenario_settings_not_instead_of_them() -> None:
    retry = pg_retry_config(RetryConfig(max_attempts=5, wait_duration_s=0.2))
    assert (retry.max_attempts, retry.wait_duration_s) == (5, 0.2)
    assert retry.ignore_exceptions == (CallNotPermittedError, BulkheadFullError)
    breaker = pg_breaker_config(CircuitBreakerConfig(sliding_window_size=7))
    assert breaker.sliding_window_size == 7
    assert breaker.ignore_exceptions == (PgRejected,)


# --- the flow and its series --------------------------------------------------------------


def scripted_gateway(*answers: str) -> httpx.MockTransport:
    """Answers in a loop: ok, 503, 400, timeout, reset."""
    script: Iterator[str] = itertools.cycle(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        answer = next(script)
        if answer == "timeout":
            raise httpx.ReadTimeout("read timed out", request=request)
        if answer == "reset":
            raise httpx.ConnectError("connection reset", request=request)
        if answer == "ok":
            return httpx.Response(200, json={"status": "APPROVED"})
        return httpx.Response(int(answer), text="refused")

    return httpx.MockTransport(handler)


def make_service(transport: httpx.MockTransport, **settings: object) -> PaymentService:
    settings = {"retry": RetryConfig(max_attempts=2, wait_duration_s=0.0), **settings}
    config = ShopConfig(pg_url="http://127.0.0.1:9", workers=4, **settings)  # type: ignore[arg-type]
    client = PgClient(config.pg_url, 1.0, 1.0, 4, transport=transport)
    return PaymentService(config, Store(":memory:", 10), client, clock=lambda: 0.0)


def exposition(service: PaymentService) -> str:
    text = generate_latest(make_registry(service, WorkerGauge(4))).decode()
    return re.sub(r"(_sum\{[^}]*\}) \S+", r"\1 <seconds>", text)


def test_retry_only_flow_and_series() -> None:
    service = make_service(scripted_gateway("503", "ok", "400", "timeout", "reset"))
    results = [service.pay(f"key-{i}", 100) for i in range(3)]
    assert [(r.status, r.reason, r.attempts) for r in results] == [
        ("APPROVED", None, 2),
        ("FAILED", "pg_400", 1),
        ("TIMEOUT_UNKNOWN", "connection_error", 2),
    ]
    stats = service.stats()
    assert stats.pg_calls == dict.fromkeys(
        ["server_error", "success", "rejected", "timeout", "connection_error"], 1
    )
    assert stats.call_seconds == {}  # no breaker on the path: its timer counts nothing
    text = exposition(service)
    for line in [
        'shop_pg_calls_total{outcome="rejected"} 1.0',
        'shop_payments_total{status="APPROVED"} 1.0',
        "shop_pg_retries_total 2.0",
        'resilience4j_retry_calls_total{kind="successful_with_retry",name="pgClient"} 1.0',
        'resilience4j_retry_calls_total{kind="failed_without_retry",name="pgClient"} 1.0',
        'resilience4j_retry_calls_total{kind="failed_with_retry",name="pgClient"} 1.0',
        # Spring's configured instance off the call path: its series, all zero.
        'resilience4j_circuitbreaker_calls_seconds_count{kind="failed",name="pgClient"} 0.0',
        'resilience4j_circuitbreaker_calls_seconds_count{kind="ignored",name="pgClient"} 0.0',
        'resilience4j_circuitbreaker_calls_seconds_sum{kind="successful",name="pgClient"} '
        "<seconds>",
    ]:
        assert line in text.splitlines()
    assert "resilience4j_circuitbreaker_state" not in text  # no breaker in this profile


def test_breaker_flow_and_series() -> None:
    service = make_service(
        scripted_gateway("503"),
        profile="retry-circuit-breaker",
        circuitbreaker=CircuitBreakerConfig(sliding_window_size=2, minimum_number_of_calls=2),
    )
    first = service.pay("key-1", 100)  # two 503s trip the breaker
    second = service.pay("key-2", 100)  # refused at once, not retried
    assert (first.status, first.reason, first.attempts) == ("TIMEOUT_UNKNOWN", "server_error", 2)
    assert (second.status, second.reason, second.attempts) == (
        "TIMEOUT_UNKNOWN",
        "not_permitted",
        1,
    )
    lines = exposition(service).splitlines()
    for line in [
        'resilience4j_circuitbreaker_state{name="pgClient",state="closed"} 0.0',
        'resilience4j_circuitbreaker_state{name="pgClient",state="open"} 1.0',
        'resilience4j_circuitbreaker_state{name="pgClient",state="half_open"} 0.0',
        'resilience4j_circuitbreaker_not_permitted_calls_total{kind="not_permitted",name="pgClient"}'
        " 1.0",
        'resilience4j_circuitbreaker_failure_rate{name="pgClient"} 100.0',
        'shop_pg_calls_total{outcome="server_error"} 2.0',
        'shop_payments_total{status="TIMEOUT_UNKNOWN"} 2.0',
    ]:
        assert line in lines


def test_a_refused_call_is_retried_when_the_retry_ignores_nothing() -> None:
    """Seed 002's Retry runs on Resilience4j's defaults, which retry every exception, the
    open breaker's CallNotPermittedException too (``retry.ignore-exceptions: []``)."""
    assert pg_retry_config(RetryConfig(), ()).ignore_exceptions == ()
    assert pg_retry_config(RetryConfig(), ()).should_retry(CallNotPermittedError("pgClient"))
    service = make_service(
        scripted_gateway("503"),
        retry=RetryConfig(max_attempts=3, wait_duration_s=0.0),
        retry_ignores=(),
        profile="retry-circuit-breaker",
        circuitbreaker=CircuitBreakerConfig(sliding_window_size=2, minimum_number_of_calls=2),
    )
    first = service.pay("key-1", 100)  # two 503s trip the breaker, the third attempt refused
    second = service.pay("key-2", 100)  # refused, retried, refused again: three attempts
    assert (first.status, first.attempts) == ("TIMEOUT_UNKNOWN", 3)
    assert (second.status, second.reason, second.attempts) == (
        "TIMEOUT_UNKNOWN",
        "not_permitted",
        3,
    )
    # The default (None): neither refusal retried, as seed 000's configuration says.
    assert not pg_retry_config(RetryConfig()).should_retry(CallNotPermittedError("pgClient"))
