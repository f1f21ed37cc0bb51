"""One call in progress at the gateway, and the answers that are more than a response.

``InFlight`` is what was decided about a call and what actually happened to
it (for the ledger and the metrics); ``malformed`` and ``slow_body`` carry
out the answers that write the socket themselves.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from aiohttp import web

from harness.gateway.attempts import MAX_KEY_CHARS
from harness.gateway.decide import Action, catalogue_product, garbage
from harness.gateway.dependency import Routed, Usual
from harness.gateway.queueing import Ticket

_KNOWN = frozenset(s.value for s in HTTPStatus)


@dataclass(eq=False)
class InFlight:
    """One call in progress (an approve call or a product read): what was decided and what
    actually happened."""

    arrival: float
    started: float
    key: str
    attempt: int
    phase: str
    action: Action
    fault: str
    decision: str
    path: str = ""
    """The request's path, for the ledger."""
    product: int | None = None
    """The product a catalogue read asks for; None for an approve call."""
    method: str = ""
    route: str = ""
    """The route a named dependency matched (``unmatched``), for the ledger; "" for ``pg``."""
    routed: Routed | None = None
    """A named dependency's own answer to give when no fault decides otherwise."""
    status: int = 0
    outcome: str = "client_gone"
    client_gone: bool = False
    dropped: bool = False
    """The gateway cut the connection itself (refuse, shutdown), not the client."""
    transport: asyncio.Transport | None = None
    finished: bool = False
    """Counted and written to the ledger (once: at the end, or when the client left)."""
    ticket: Ticket | None = None
    """Its way through ``pg.capacity`` (None without one): the row waits for its end."""
    abandoned: bool = False
    """The client hung up while the call was queued or in service, and it was kept."""
    held: bool = False
    """Its row waits for the end of its capacity stage."""


def too_long(header: str, key: str) -> str | None:
    """Why a call's key is refused for its length (``MAX_KEY_CHARS``), or None."""
    if len(key) <= MAX_KEY_CHARS:
        return None
    return f"{header} is {len(key):,} characters; at most {MAX_KEY_CHARS}"


def approved(call: InFlight, body: Any) -> dict[str, Any]:
    """The good answer: the product for a read, an approval for a payment."""
    if call.product is not None:
        return catalogue_product(call.product)
    return {
        "status": "APPROVED",
        "transactionId": uuid.uuid4().hex,
        "amount": body.get("amount") if isinstance(body, dict) else None,
        "attempt": call.attempt,
    }


def usual_payload(call: InFlight, body: Any) -> bytes:
    """The good answer's bytes, as ``pg`` gives it (a named dependency's are its own)."""
    return json.dumps(approved(call, body)).encode()


def malformed(
    request: web.Request, call: InFlight, seed: int, payload: bytes, usual: Usual | None = None
) -> web.StreamResponse:
    """Bytes HTTP cannot parse (nothing, garbage, or a body cut short), then close. A named
    dependency's body is cut short under its own status and headers (``usual``)."""
    transport = request.transport
    call.outcome = "malformed"
    call.dropped = True
    if transport is None or transport.is_closing():
        return web.Response()
    if call.action.malformed == "garbage":
        transport.write(garbage(seed, call.key, call.attempt))
    elif call.action.malformed == "truncated":
        if usual is None:
            status, fields = 200, [("Content-Type", "application/json; charset=utf-8")]
        else:
            status, fields = usual.status, list(usual.headers)
        reason = HTTPStatus(status).phrase if status in _KNOWN else ""
        lines = [f"HTTP/1.1 {status} {reason}"] + [f"{k}: {v}" for k, v in fields]
        lines.append(f"Content-Length: {len(payload)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")
        transport.write(head + payload[: len(payload) // 2])
    transport.close()  # FIN once written; nothing more will follow
    return web.Response()  # never sent: the connection is closed


async def slow_body(
    request: web.Request, call: InFlight, payload: bytes, usual: Usual | None = None
) -> web.StreamResponse:
    """Status and headers at once; the body in ``chunks`` pieces, the last at ``duration``.
    A named dependency's own answer (``usual``) keeps its status, headers and bytes."""
    action = call.action
    if usual is None:
        payload += b" " * max(0, action.chunks - len(payload))  # JSON allows trailing spaces
        response = web.StreamResponse(status=200)
        response.content_type = "application/json"
    else:
        response = web.StreamResponse(status=usual.status)
        for name, value in usual.headers:
            response.headers.add(name, value)
    n = action.chunks
    bounds = [round(i * len(payload) / n) for i in range(n + 1)]
    response.content_length = len(payload)
    loop = asyncio.get_running_loop()
    try:
        writer = await response.prepare(request)
        if writer is not None and hasattr(writer, "send_headers"):
            writer.send_headers()  # aiohttp would otherwise hold them for the first piece
        begin = loop.time()
        for k in range(1, n + 1):
            await asyncio.sleep(max(0.0, begin + k * action.body_duration_s / n - loop.time()))
            await response.write(payload[bounds[k - 1] : bounds[k]])
        await response.write_eof()
    except ConnectionError:
        call.client_gone = True
        call.outcome = "client_gone"
        return response
    call.status = response.status
    call.outcome = str(response.status)
    return response
