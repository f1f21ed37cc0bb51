"""The shop's product-detail reads through the gateway's catalogue (seed 004's read path):
fresh, then cached during an outage after a warm read, then a miss for a product never
read; driven through the WSGI app and the real gateway client over a switchable httpx
transport (no network)."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
from prometheus_client import generate_latest

from targets.shop.app import ShopApp
from targets.shop.catalogue import product_key
from targets.shop.config import OUTERMOST, ShopConfig
from targets.shop.pg_client import PgClient
from targets.shop.resilience import CircuitBreakerConfig, FallbackConfig, RetryConfig

_PRODUCT = re.compile(r"^/v1/catalogue/products/(\d+)$")


class Catalogue:
    """A scripted gateway catalogue: healthy, or every call failing as ``mode`` says."""

    def __init__(self) -> None:
        self.mode = "healthy"
        self.seen: list[tuple[str, str, str | None]] = []
        """(method, path, X-Request-Id) of every call."""

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.seen.append((request.method, request.url.path, request.headers.get("X-Request-Id")))
        if self.mode == "timeout":
            raise httpx.ReadTimeout("read timed out", request=request)
        if self.mode == "reset":
            raise httpx.ReadError("connection reset", request=request)
        if self.mode.isdigit():
            return httpx.Response(int(self.mode), json={"error": "refused"})
        match = _PRODUCT.match(request.url.path)
        assert match, request.url.path
        pid = int(match.group(1))
        return httpx.Response(200, json={"id": pid, "name": f"product-{pid}", "price": 1700})


def shop(gateway: Catalogue, **settings: Any) -> ShopApp:
    settings = {"retry": RetryConfig(max_attempts=2, wait_duration_s=0.0), **settings}
    config = ShopConfig(pg_url="http://pg", workers=4, **settings)
    client = PgClient(config.pg_url, 1.0, 1.0, 4, transport=httpx.MockTransport(gateway.handle))
    return ShopApp(config, client)


def get(
    app: ShopApp, path: str, method: str = "GET", **headers: str
) -> tuple[int, dict[str, str], dict[str, Any]]:
    seen: dict[str, Any] = {}

    def start(status: str, hdrs: list[tuple[str, str]]) -> None:
        seen["status"], seen["headers"] = int(status.split()[0]), dict(hdrs)

    environ = {"REQUEST_METHOD": method, "PATH_INFO": path}
    environ.update({f"HTTP_{k.upper()}": v for k, v in headers.items()})
    data = b"".join(app(environ, start))
    return seen["status"], seen["headers"], json.loads(data)


def series(app: ShopApp, name: str) -> dict[str, float]:
    """Samples of one series in the shop's exposition: labels text -> value."""
    text = generate_latest(app.registry).decode()
    found = re.findall(rf"^{name}(\{{[^}}]*\}})? (\S+)$", text, flags=re.M)
    return {labels: float(value) for labels, value in found}


CACHED = {OUTERMOST: FallbackConfig(kind="cached", ttl_s=300.0)}


def test_fresh_then_cached_during_an_outage_then_a_miss_for_a_product_never_read() -> None:
    gateway = Catalogue()
    app = shop(gateway, fallbacks=CACHED)

    status, headers, body = get(app, "/api/products/7/detail", IDEMPOTENCY_KEY="req-1")
    assert status == 200
    assert body == {"id": 7, "name": "product-7", "price": 1700, "cached": False}
    assert headers["X-Outcome"] == "fresh" and "X-Fallback" not in headers
    assert gateway.seen == [("GET", "/v1/catalogue/products/7", "req-1")]  # the request's id

    gateway.mode = "timeout"
    status, headers, body = get(app, "/api/products/7/detail", X_REQUEST_ID="req-2")
    assert status == 200
    assert (headers["X-Fallback"], headers["X-Outcome"]) == ("cached", "cached")
    assert {k: body[k] for k in ("id", "name", "price", "cached", "fallback", "reason")} == {
        "id": 7,
        "name": "product-7",
        "price": 1700,
        "cached": True,
        "fallback": "cached",
        "reason": "timeout",  # the error the cached answer stands in for
    }
    assert body["age_s"] >= 0
    assert gateway.seen[1:] == [("GET", "/v1/catalogue/products/7", "req-2")] * 2  # retried

    status, headers, body = get(app, "/api/products/8/detail")
    assert status == 503
    assert headers["X-Outcome"] == "timeout" and "X-Fallback" not in headers
    assert body == {"id": 8, "reason": "timeout", "error": "product details unavailable"}
    assert gateway.seen[-1] == ("GET", "/v1/catalogue/products/8", None)

    # The existing series: one cached answer, one miss; every attempt a gateway call.
    assert series(app, "shop_fallback_calls_total") == {'{kind="cached",layer="outermost"}': 1.0}
    assert series(app, "shop_fallback_cache_misses_total") == {'{layer="outermost"}': 1.0}
    assert series(app, "shop_pg_calls_total") == {
        '{outcome="success"}': 1.0,
        '{outcome="timeout"}': 4.0,
    }
    assert series(app, "shop_payments_total") == {}  # reads are no payments

    gateway.mode = "healthy"  # back: fresh again
    assert get(app, "/api/products/8/detail")[1]["X-Outcome"] == "fresh"


def test_without_a_fallback_an_outage_fails_every_read() -> None:
    gateway = Catalogue()
    app = shop(gateway)
    assert get(app, "/api/products/7/detail")[0] == 200
    gateway.mode = "503"
    status, headers, body = get(app, "/api/products/7/detail")
    assert (status, headers["X-Outcome"], body["reason"]) == (503, "server_error", "server_error")
    assert "X-Fallback" not in headers and "cached" not in body


def test_an_open_breaker_is_answered_from_the_cache_too() -> None:
    """Reads pass the payments' very breaker (one per dependency): failures of either open it."""
    gateway = Catalogue()
    breaker = CircuitBreakerConfig(
        sliding_window_size=2, minimum_number_of_calls=2, wait_duration_in_open_state_s=60.0
    )
    app = shop(gateway, profile="retry-circuit-breaker", circuitbreaker=breaker, fallbacks=CACHED)
    assert app.catalogue.payments.breaker is app.service.breaker
    assert get(app, "/api/products/7/detail")[0] == 200
    gateway.mode = "reset"
    # Its attempt fails: [ok, failed] is 50%, open; the retry is refused (not_permitted).
    assert get(app, "/api/products/9/detail")[0] == 503
    calls = len(gateway.seen)
    status, headers, body = get(app, "/api/products/7/detail")
    assert (status, headers["X-Outcome"], body["reason"]) == (200, "cached", "not_permitted")
    status, headers, _ = get(app, "/api/products/9/detail")
    assert (status, headers["X-Outcome"]) == (503, "not_permitted")
    assert len(gateway.seen) == calls  # refused without calling
    assert series(app, "resilience4j_circuitbreaker_not_permitted_calls_total") == {
        '{kind="not_permitted",name="pgClient"}': 3.0
    }


@pytest.mark.parametrize(
    ("kind", "status"), [("value", 200), ("error", 503)], ids=["value", "error"]
)
def test_other_fallback_kinds_are_marked(kind: str, status: int) -> None:
    gateway = Catalogue()
    gateway.mode = "timeout"
    settings: dict[str, Any] = {"kind": kind}
    if kind == "value":
        settings["value"] = {"name": "unavailable"}
    app = shop(gateway, fallbacks={OUTERMOST: FallbackConfig(**settings)})
    code, headers, body = get(app, "/api/products/7/detail")
    assert code == status
    assert (headers["X-Fallback"], headers["X-Outcome"]) == (kind, "timeout")
    assert (body["fallback"], body["cached"]) == (kind, False)
    assert body.get("value") == ({"name": "unavailable"} if kind == "value" else None)


def test_a_refusal_of_the_gateway_is_passed_on_not_cached() -> None:
    gateway = Catalogue()
    app = shop(gateway, fallbacks=CACHED)
    assert get(app, "/api/products/7/detail")[0] == 200
    gateway.mode = "404"
    status, headers, _ = get(app, "/api/products/7/detail")
    assert (status, headers["X-Outcome"]) == (404, "pg_404")  # a 4xx is an answer already
    gateway.mode = "402"
    assert get(app, "/api/products/7/detail")[0] == 502
    assert len(gateway.seen) == 3  # a 4xx is not retried


def test_the_local_product_read_never_touches_the_gateway() -> None:
    gateway = Catalogue()
    app = shop(gateway, fallbacks=CACHED)
    status, headers, body = get(app, "/api/products/7")
    assert (status, body["id"], body["name"]) == (200, 7, "product-7")
    assert "X-Outcome" not in headers
    assert get(app, "/api/products/7/detail", method="POST")[0] == 405
    assert get(app, "/api/products/x/detail")[0] == 404
    assert gateway.seen == []


def test_a_read_and_a_payment_never_share_a_cache_entry() -> None:
    assert product_key(7) == ("product", 7) != "7"
