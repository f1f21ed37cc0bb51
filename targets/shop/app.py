"""The shop's WSGI application: payments call the gateway, product reads never do.

All share one bounded pool of request threads, which is the point: when
payments hold every thread waiting on a sick gateway, product reads queue.

``GET /api/products/{id}`` reads the shop's own database and never touches the
gateway. ``GET /api/products/{id}/detail`` is the read path *through* the
dependency (seed 004): the product comes from the gateway's catalogue, through
the build's resilience layers, and a ``cached`` fallback serves the last good
read of it during an outage (``targets.shop.catalogue``). Its answer says
where it came from: ``"cached": false`` and ``X-Outcome: fresh``, or
``"cached": true`` with ``X-Fallback: cached`` and ``X-Outcome: cached``; a
read nothing could answer is a 503 whose ``X-Outcome`` names the error.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from targets.shop.catalogue import CatalogueService, DetailResult
from targets.shop.config import ShopConfig
from targets.shop.db import Store
from targets.shop.dbpool import ConnectionPool, PoolTimeoutError
from targets.shop.metrics import WorkerGauge, make_registry
from targets.shop.payments import PaymentService
from targets.shop.pg_client import PgClient

StartResponse = Callable[[str, list[tuple[str, str]]], Any]
Environ = dict[str, Any]

_PRODUCT = re.compile(r"^/api/products/(\d+)$")
_DETAIL = re.compile(r"^/api/products/(\d{1,18})/detail$")
_REASONS = {
    200: "OK",
    400: "Bad Request",
    402: "Payment Required",
    404: "Not Found",
    405: "Method Not Allowed",
    502: "Bad Gateway",
    503: "Service Unavailable",
}
_STATUS_CODE = {"APPROVED": 200, "FAILED": 402, "TIMEOUT_UNKNOWN": 503}


def _json(
    start: StartResponse, code: int, body: object, headers: dict[str, str] | None = None
) -> Iterable[bytes]:
    data = json.dumps(body).encode()
    hdrs = [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
    hdrs += list((headers or {}).items())
    start(f"{code} {_REASONS.get(code, 'Error')}", hdrs)
    return [data]


class ShopApp:
    """Routes requests; counts busy workers around every one of them."""

    def __init__(self, config: ShopConfig, client: PgClient | None = None) -> None:
        """``client``: the gateway client to use instead of one built from ``config``."""
        self.config = config
        self.pool = ConnectionPool(config.db_pool) if config.db_pool is not None else None
        self.store = Store(config.db_path, config.products, self.pool)
        self.client = client or PgClient(
            config.pg_url, config.connect_timeout_s, config.read_timeout_s, config.workers
        )
        self.service = PaymentService(config, self.store, self.client)
        self.catalogue = CatalogueService(self.service, self.client)
        self.workers = WorkerGauge(config.workers)
        self.registry: CollectorRegistry = make_registry(self.service, self.workers, self.pool)

    def __call__(self, environ: Environ, start: StartResponse) -> Iterable[bytes]:
        self.workers.enter()
        try:
            return self._route(environ, start)
        except PoolTimeoutError as exc:
            # Hikari's SQLTransientConnectionException: Spring answers it with a 5xx.
            return _json(start, 503, {"error": str(exc)}, {"X-Outcome": "db_pool_timeout"})
        finally:
            self.workers.leave()

    def _route(self, environ: Environ, start: StartResponse) -> Iterable[bytes]:
        method = environ["REQUEST_METHOD"]
        path = environ.get("PATH_INFO", "")
        if path == "/api/payments":
            if method != "POST":
                return _json(start, 405, {"error": "use POST"})
            return self._payment(environ, start)
        match = _PRODUCT.match(path)
        if match:
            product = self.store.product(int(match.group(1)))
            if product is None:
                return _json(start, 404, {"error": "no such product"})
            return _json(start, 200, product)
        match = _DETAIL.match(path)
        if match:
            if method != "GET":
                return _json(start, 405, {"error": "use GET"})
            request_id = environ.get("HTTP_IDEMPOTENCY_KEY") or environ.get("HTTP_X_REQUEST_ID")
            return _detail(start, self.catalogue.detail(int(match.group(1)), request_id))
        if path == "/health":
            return _json(start, 200, {"status": "UP", "profile": self.config.profile})
        if path == "/metrics":
            data = generate_latest(self.registry)
            start(
                "200 OK",
                [("Content-Type", CONTENT_TYPE_LATEST), ("Content-Length", str(len(data)))],
            )
            return [data]
        return _json(start, 404, {"error": f"no route for {path}"})

    def _payment(self, environ: Environ, start: StartResponse) -> Iterable[bytes]:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = json.loads(environ["wsgi.input"].read(length) or b"{}")
        except (ValueError, json.JSONDecodeError):
            return _json(start, 400, {"error": "body must be JSON"})
        amount = body.get("amount") if isinstance(body, dict) else None
        if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
            return _json(start, 400, {"error": "amount must be a positive integer"})
        key = environ.get("HTTP_IDEMPOTENCY_KEY") or uuid.uuid4().hex
        result = self.service.pay(key, amount)
        answer: dict[str, object] = {
            "paymentId": result.payment_id,
            "status": result.status,
            "reason": result.reason,
            "attempts": result.attempts,
        }
        headers = {"X-Payment-Status": result.status, "X-Outcome": result.reason or result.status}
        code = _STATUS_CODE[result.status]
        if result.fallback is not None:
            # A fixed or cached answer is an answer: served (200); an error one is a fast 503.
            answer.update(fallback=result.fallback, cached=result.fallback == "cached")
            if result.fallback == "value":
                answer["value"] = result.value
            headers["X-Fallback"] = result.fallback
            code = 503 if result.fallback == "error" else 200
        return _json(start, code, answer, headers)


def _detail(start: StartResponse, result: DetailResult) -> Iterable[bytes]:
    """A product-detail read on the wire: 200 when served (fresh, cached or a fixed value),
    else 503 (the gateway's own 4xx: 404 for 404, else 502)."""
    headers = {"X-Outcome": result.outcome}
    if result.source == "fresh":
        return _json(start, 200, {**(result.product or {}), "cached": False}, headers)
    answer: dict[str, object] = {"id": result.product_id, "reason": result.reason}
    if result.source in ("cached", "value", "error"):
        headers["X-Fallback"] = result.source
        answer.update(fallback=result.source, cached=result.source == "cached")
    if result.source == "cached":
        answer.update(result.product or {})
        answer["age_s"] = result.age_s
        return _json(start, 200, answer, headers)
    if result.source == "value":
        answer["value"] = result.value
        return _json(start, 200, answer, headers)
    answer["error"] = "product details unavailable"
    if result.status is not None:  # the gateway refused this read itself
        return _json(start, 404 if result.status == 404 else 502, answer, headers)
    return _json(start, 503, answer, headers)
