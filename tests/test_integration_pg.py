"""Integration: the real PG fault server on loopback, called by the shop's real gateway client.

Checks the retry classification (what is retried, what the breaker records)
against real responses and real timeouts, and that the gateway holds hung
connections and counts them.
"""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from targets.shop.breaker import CallNotPermittedError, CircuitBreaker, CircuitBreakerConfig
from targets.shop.pg_client import (
    PgClient,
    PgConnectionError,
    PgRejected,
    PgServerError,
    PgTimeout,
    is_recorded_failure,
    is_retryable,
)
from targets.shop.retry import Retry, RetryConfig
from tests.conftest import ROOT, PgServer, harness_cmd, pg_scenario

Factory = Callable[[str], PgServer]


def _client(url: str, read_timeout_s: float = 0.3) -> PgClient:
    return PgClient(url, connect_timeout_s=0.5, read_timeout_s=read_timeout_s, max_connections=50)


def test_each_failure_class_and_whether_it_is_retried(pg_factory: Factory) -> None:
    healthy = pg_factory("{type: healthy}")
    hung = pg_factory("{type: timeout}")
    broken = pg_factory("{type: error, status: 503}")

    with _client(healthy.url) as ok:
        assert ok.approve("k1", 100, "o1")["status"] == "APPROVED"
        with pytest.raises(PgRejected) as rejected:  # the gateway refuses an empty key with 400
            ok.approve("", 100, "o4")
    assert rejected.value.status == 400

    started = time.monotonic()
    with _client(hung.url, read_timeout_s=0.3) as c, pytest.raises(PgTimeout) as timeout:
        c.approve("k2", 100, "o2")
    assert 0.25 < time.monotonic() - started < 2.0
    with _client(broken.url) as c, pytest.raises(PgServerError) as server_error:
        c.approve("k3", 100, "o3")
    assert server_error.value.status == 503

    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    with _client(f"http://127.0.0.1:{port}") as c, pytest.raises(PgConnectionError) as refused:
        c.approve("k5", 100, "o5")

    for retried in (timeout.value, server_error.value, refused.value):
        assert is_retryable(retried) and is_recorded_failure(retried)
    assert not is_retryable(rejected.value) and not is_recorded_failure(rejected.value)
    assert not is_retryable(CallNotPermittedError("pgClient"))


def test_retry_outside_breaker_stops_calling_a_hung_gateway(pg_factory: Factory) -> None:
    hung = pg_factory("{type: timeout}")
    client = _client(hung.url, read_timeout_s=0.2)
    breaker = CircuitBreaker(
        "pgClient",
        CircuitBreakerConfig(
            sliding_window_size=4, minimum_number_of_calls=4, wait_duration_in_open_state_s=60
        ),
        is_recorded=is_recorded_failure,
    )
    retry = Retry(
        "pgClient", RetryConfig(max_attempts=2, wait_duration_s=0.0), should_retry=is_retryable
    )
    outcomes = []
    for i in range(6):
        try:
            retry.call(lambda n, i=i: breaker.call(lambda: client.approve(f"k{i}", 1, "o")))
        except (PgTimeout, CallNotPermittedError) as exc:
            outcomes.append(type(exc).__name__)
    # Two payments x two attempts fill the window of 4 and open the breaker.
    assert outcomes == ["PgTimeout"] * 2 + ["CallNotPermittedError"] * 4
    assert hung.metric("pg_calls_received_total") == 4
    assert hung.metric("pg_calls_total") == 4  # finished: each client gave up after 0.2 s
    assert breaker.metrics().not_permitted_calls == 4
    assert retry.metrics().retries == 2
    client.close()


def test_gateway_holds_hundreds_of_hung_calls_and_counts_them(pg_factory: Factory) -> None:
    hung = pg_factory("{type: timeout}")
    n = 300

    async def fire() -> list[str]:
        limits = httpx.Limits(max_connections=n)
        async with httpx.AsyncClient(base_url=hung.url, limits=limits, timeout=3.0) as client:

            async def one(i: int) -> str:
                try:
                    await client.post(
                        "/v1/payments/approve",
                        headers={"Idempotency-Key": f"h{i}"},
                        json={"amount": 1},
                    )
                except httpx.ReadTimeout:
                    return "timeout"
                return "answered"

            tasks = [asyncio.create_task(one(i)) for i in range(n)]
            await asyncio.sleep(2.0)
            in_flight = await asyncio.to_thread(hung.metric, "pg_calls_in_flight")
            assert in_flight == n
            received = await asyncio.to_thread(hung.metric, "pg_calls_received_total")
            assert received == n  # counted on arrival, while they still hang
            return await asyncio.gather(*tasks)

    results = asyncio.run(fire())
    assert results == ["timeout"] * n
    deadline = time.monotonic() + 5
    while hung.metric("pg_calls_in_flight") > 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert hung.metric("pg_calls_in_flight") == 0
    assert hung.metric("pg_calls_total", outcome="client_gone") == n


def test_same_keys_meet_the_same_fate_in_two_gateways(pg_factory: Factory) -> None:
    a = pg_factory("{type: error, probability: 0.5, status: 503}")
    b = pg_factory("{type: error, probability: 0.5, status: 503}")

    def statuses(server: PgServer) -> list[int]:
        with httpx.Client(base_url=server.url) as c:
            return [
                c.post(
                    "/v1/payments/approve", headers={"Idempotency-Key": f"p{i}"}, json={"amount": 1}
                ).status_code
                for i in range(60)
            ]

    first, second = statuses(a), statuses(b)
    assert first == second
    assert 10 < first.count(503) < 50


def test_harness_pg_serves_a_scenario_standalone(tmp_path: Path) -> None:
    scenario = pg_scenario(tmp_path, "{type: error, status: 502}")
    proc = subprocess.Popen(
        harness_cmd("pg", "--scenario", str(scenario), "--port", "0"),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert match, line
        url = match.group(0)
        answer = httpx.post(
            f"{url}/v1/payments/approve",
            headers={"Idempotency-Key": "a"},
            json={"amount": 1},
            timeout=5,
        )
        assert answer.status_code == 502
        status = httpx.get(f"{url}/__admin/status", timeout=5).json()
        assert status["phase"] == "only" and status["fault"] == "error"
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=15)


def test_harness_pg_refuses_non_loopback_addresses(tmp_path: Path) -> None:
    scenario = pg_scenario(tmp_path, "{type: healthy}")
    done = subprocess.run(
        harness_cmd("pg", "--scenario", str(scenario), "--host", "0.0.0.0"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "loopback" in done.stderr and "Traceback" not in done.stderr
