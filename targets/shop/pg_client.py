"""HTTP client towards the payment gateway: one typed exception per class of failure.

The client only names what went wrong (:class:`PgTimeout`, :class:`PgConnectionError`,
:class:`PgServerError`, :class:`PgRejected`); what is retried and what the breaker counts
as a failure is the caller's policy (``targets.shop.payments``).
"""

from __future__ import annotations

from typing import Any

import httpx


class PgError(Exception):
    """Base of every failure calling the gateway."""


class PgTimeout(PgError):
    """Connect or read timed out: the gateway may or may not have processed the call."""


class PgConnectionError(PgError):
    """The connection failed or broke (refused, reset, malformed answer)."""


class PgServerError(PgError):
    """The gateway answered 5xx."""

    def __init__(self, status: int) -> None:
        super().__init__(f"gateway answered {status}")
        self.status = status


class PgRejected(PgError):
    """The gateway answered 4xx: a business refusal (e.g. insufficient balance)."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"gateway refused with {status}")
        self.status = status
        self.body = body


class PgClient:
    """One pooled httpx client shared by all request threads (httpx.Client is thread-safe)."""

    def __init__(
        self,
        base_url: str,
        connect_timeout_s: float,
        read_timeout_s: float,
        max_connections: int,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._client = httpx.Client(
            base_url=base_url,
            timeout=httpx.Timeout(
                connect=connect_timeout_s,
                read=read_timeout_s,
                write=read_timeout_s,
                pool=connect_timeout_s,
            ),
            # As many connections as request threads: the pool must never be what waits.
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            transport=transport,
        )

    def approve(self, idempotency_key: str, amount: int, order: str) -> dict[str, Any]:
        """Ask the gateway to approve a payment; raise a ``PgError`` subclass on failure."""
        return self._call(
            "POST",
            "/v1/payments/approve",
            headers={"Idempotency-Key": idempotency_key},
            json={"amount": amount, "orderNumber": order},
        )

    def product(self, product_id: int, request_id: str | None = None) -> dict[str, Any]:
        """Read a product from the gateway's catalogue; raise a ``PgError`` subclass on failure.

        ``request_id`` (sent as ``X-Request-Id``) names the read, so the gateway
        gives each read its own fate and counts a retry of it as its next attempt.
        """
        headers = {"X-Request-Id": request_id} if request_id else {}
        return self._call("GET", f"/v1/catalogue/products/{product_id}", headers=headers)

    def _call(
        self, method: str, path: str, headers: dict[str, str], json: Any = None
    ) -> dict[str, Any]:
        """One request; its answer's JSON, or the ``PgError`` that names what went wrong."""
        try:
            response = self._client.request(method, path, headers=headers, json=json)
        except httpx.TimeoutException as exc:
            raise PgTimeout(type(exc).__name__) from exc
        except httpx.TransportError as exc:
            raise PgConnectionError(type(exc).__name__) from exc
        if response.status_code >= 500:
            raise PgServerError(response.status_code)
        if response.status_code >= 400:
            raise PgRejected(response.status_code, response.text[:500])
        try:
            data: dict[str, Any] = response.json()
        except ValueError as exc:
            raise PgConnectionError("MalformedResponse") from exc
        return data

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> PgClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
