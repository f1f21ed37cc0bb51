"""The gateway's state and its approve handler: carry out each decision on a real socket.

``harness.gateway.decide`` decides what each call meets; this module carries
the decision out (delays, answers, resets, garbage, slow bodies) and writes
down what it did, in the ledger and the metrics. The admin API is in
``admin``, the listener that ``refuse`` closes in ``listener``, the process
around them in ``app`` and ``main``.

``POST /v1/payments/approve`` needs an ``Idempotency-Key`` header and a JSON
body; the ``X-Harness-Fault`` header, else the live override, else the phase
in force decides the answer. Malformed input (no key, a bad header, a body
that is not JSON, however deeply nested) is answered 400 and recorded.

``GET /v1/catalogue/products/{id}`` (product reads) meets the same faults,
unless a fault's ``match.path`` leaves it out, and answers the product
(``{id, name, price}``, fixed by the id). Its fate and attempt count go by
the product and the request's ``Idempotency-Key`` or ``X-Request-Id``
(``decide.catalogue_key``); it needs neither, nor a body.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge

from harness.core.net import reset
from harness.core.precise_timer import PreciseTimer
from harness.core.timeline import phase_at
from harness.gateway.connection import handler_of
from harness.gateway.decide import (
    Action,
    Call,
    catalogue_key,
    catalogue_product,
    decide,
    decide_at,
    garbage,
    next_change,
    refusing,
)
from harness.gateway.ledger import Ledger
from harness.gateway.overrides import FAULT_HEADER, OverrideError, load_json, parse_override
from harness.scenario.faults import Fault, Phase

_INVALID = Action("respond", "invalid-request", status=400)

MAX_KEYS = 1_000_000
"""Idempotency-Keys whose attempt count the gateway keeps (about 200 MB at the cap)."""


class AttemptCounts:
    """How many times each Idempotency-Key was called, for the ``max_keys`` most recent keys.

    A key unused for longest is forgotten first; if it comes back, it counts
    from attempt 1 again (and meets attempt 1's fate). Without a bound, every
    unique key would cost memory for the gateway's whole life.
    """

    def __init__(self, max_keys: int = MAX_KEYS) -> None:
        if max_keys < 1:
            raise ValueError("max_keys must be at least 1")
        self.max_keys = max_keys
        self.forgotten = 0
        """Keys dropped to stay within ``max_keys``."""
        self._counts: OrderedDict[str, int] = OrderedDict()

    def next(self, key: str) -> int:
        """Count one more call of ``key``; return its attempt number (1 for a new key)."""
        counts = self._counts
        attempt = counts.pop(key, 0) + 1
        counts[key] = attempt  # now the most recent
        if len(counts) > self.max_keys:
            counts.popitem(last=False)
            self.forgotten += 1
        return attempt

    def __getitem__(self, key: str) -> int:
        return self._counts.get(key, 0)

    def __len__(self) -> int:
        return len(self._counts)

    def clear(self) -> None:
        self._counts.clear()


@dataclass(eq=False)
class _Call:
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
    status: int = 0
    outcome: str = "client_gone"
    client_gone: bool = False
    dropped: bool = False
    """The gateway cut the connection itself (refuse, shutdown), not the client."""
    transport: asyncio.Transport | None = None
    finished: bool = False
    """Counted and written to the ledger (once: at the end, or when the client left)."""


class Gateway:
    """State of one gateway: schedule, clock origin, override, attempt counts, metrics, ledger."""

    def __init__(
        self,
        phases: list[Phase],
        seed: int,
        t0: float | None = None,
        ledger_path: str | Path | None = None,
        precise_timer: bool = True,
        max_keys: int = MAX_KEYS,
    ) -> None:
        self.phases = phases
        self.seed = seed
        self.t0 = t0
        self.attempts = AttemptCounts(max_keys)
        self.override: list[Fault] | None = None
        self.override_since: float | None = None
        self.listening = True
        self.has_control = False
        self.stopping = False
        self.changed = asyncio.Event()
        """Set when anything that may take the listener down or up changed (t0, override)."""
        self._calls: set[_Call] = set()
        self.timer = PreciseTimer(precise_timer)
        """Injected delays end a fraction of a millisecond late; asyncio's round up to 1 ms."""
        self.registry = CollectorRegistry()
        self.received = Counter(
            "pg_calls_received",
            "Calls received by the gateway (approve calls and product reads), counted on arrival",
            ["phase"],
            registry=self.registry,
        )
        self.calls = Counter(
            "pg_calls",
            "Calls the gateway finished with (answered, cut, or the client hung up)",
            ["phase", "fault", "outcome"],
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "pg_calls_in_flight", "Calls not yet finished", registry=self.registry
        )
        Gauge(
            "pg_keys_tracked",
            "Idempotency-Keys whose attempt count is kept (at most MAX_KEYS)",
            registry=self.registry,
        ).set_function(lambda: len(self.attempts))
        Gauge(
            "pg_keys_forgotten",
            "Least recently used keys dropped to bound memory (they count from attempt 1 again)",
            registry=self.registry,
        ).set_function(lambda: self.attempts.forgotten)
        self.ledger_escaped = Counter(
            "pg_ledger_escaped_rows",
            "Ledger rows whose Idempotency-Key was not valid UTF-8 and is written escaped",
            registry=self.registry,
        )
        self.ledger = Ledger(ledger_path, on_escaped=self.ledger_escaped.inc)

    # ------------------------------------------------------------ time line

    def elapsed(self) -> float | None:
        """Seconds into the measured time line, or None before it starts."""
        return None if self.t0 is None else time.time() - self.t0

    def current_phase(self) -> Phase | None:
        t = self.elapsed()
        return None if t is None else phase_at(self.phases, t)

    def refusing_now(self) -> bool:
        """Whether the main listener must be closed now (override first, then the schedule)."""
        if self.override is not None:
            return any(f.type == "refuse" for f in self.override)
        return refusing(self.phases, self.elapsed())

    def seconds_to_change(self) -> float | None:
        """Time until the schedule may open or close the listener (None: only an admin call)."""
        t = self.elapsed()
        if self.override is not None or t is None:
            return None
        nxt = next_change(self.phases, t)
        return None if nxt is None else nxt - t

    def drop_calls(self) -> None:
        """Mark every call in progress as cut by the gateway (the listener is going down)."""
        for call in self._calls:
            call.dropped = True
            call.outcome = "dropped"

    def cut_hung_calls(self) -> None:
        """At shutdown, reset the calls that hang: no grace period could let them finish."""
        for call in list(self._calls):
            if call.action.kind == "hang":
                call.dropped = True
                call.outcome = "dropped"
                reset(call.transport)

    # ------------------------------------------------------------ approve and catalogue

    async def approve(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/payments/approve``: needs an ``Idempotency-Key`` and a JSON body."""
        return await self._handle(request, request.headers.get("Idempotency-Key", ""))

    async def catalogue(self, request: web.Request) -> web.StreamResponse:
        """``GET /v1/catalogue/products/{id}``: a product read, faulted like an approve call."""
        product = int(request.match_info["id"])
        headers = request.headers
        request_id = headers.get("Idempotency-Key") or headers.get("X-Request-Id") or ""
        return await self._handle(request, catalogue_key(product, request_id), product)

    async def _handle(
        self, request: web.Request, key: str, product: int | None = None
    ) -> web.StreamResponse:
        arrival = time.time()
        started = time.monotonic()
        t = None if self.t0 is None else arrival - self.t0
        phase = None if t is None else phase_at(self.phases, t)
        phase_name = phase.name if phase else "none"
        call = _Call(arrival, started, key, 0, phase_name, _INVALID, "", "", request.path, product)
        if not key:
            return await self._invalid(request, call, "Idempotency-Key header is required")
        forced: list[Fault] | None = None
        header = request.headers.get(FAULT_HEADER)
        if header is not None:
            try:
                forced = parse_override(header, allow_refuse=False)
            except OverrideError as exc:
                return await self._invalid(request, call, f"{FAULT_HEADER}: {exc}")
        call.attempt = attempt = self.attempts.next(key)
        self.received.labels(phase_name).inc()
        self.in_flight.inc()
        self._calls.add(call)
        call.transport = request.transport
        connection = handler_of(request)
        try:
            where = Call(request.path, request.headers)
            if forced is not None:
                action = decide(forced, self.seed, key, attempt, where)
            elif self.override is not None:
                action = decide(self.override, self.seed, key, attempt, where)
            else:
                action = decide_at(self.phases, t, self.seed, key, attempt, where)
            call.action, call.fault, call.decision = action, action.fault, action.decision
            if product is not None and call.decision == "approved":
                call.decision = "served"  # a product read approves nothing: it was answered
            if connection is not None:
                # A FIN during the call: the client hung up, or half-closed to await the answer.
                if not connection.peer_eof:
                    connection.on_peer_eof = lambda: self._peer_eof(call)
                elif action.kind == "hang":  # it came with the request: nobody will hang up later
                    self._peer_eof(call)
            return await self._execute(request, call)
        except web.HTTPException as exc:  # aiohttp refused the request (e.g. a body over 1 MB)
            call.fault, call.decision = "invalid-request", "none"
            call.status, call.outcome = exc.status, str(exc.status)
            raise
        except asyncio.CancelledError:
            if not call.dropped:
                if self.stopping:
                    call.outcome = "dropped"
                else:
                    call.client_gone = True
                    call.outcome = "client_gone"
            raise
        except Exception:  # a bug: aiohttp answers 500, and the ledger says so
            call.status, call.outcome = 500, "500"
            raise
        finally:
            if connection is not None:
                connection.on_peer_eof = None
            self._finish(call)

    def _peer_eof(self, call: _Call) -> None:
        """The client's FIN came during the call: record it as gone now, as if it hung up.

        A FIN cannot tell a hang-up from a half-close, and clients that give up
        (a read timeout) hang up, so the call is recorded as ``client_gone``
        with the time the client left. The answer is still written when it is
        due, for a client that only half-closed; a hang has none to give, so
        its connection is closed.
        """
        if call.finished:
            return
        call.client_gone = True
        call.outcome = "client_gone"
        self._finish(call)
        if call.action.kind == "hang" and call.transport is not None:
            call.transport.close()

    def _finish(self, call: _Call) -> None:
        """Count the call and write its ledger row, once."""
        if call.finished:
            return
        call.finished = True
        if call.attempt > 0:
            self._calls.discard(call)
            self.in_flight.dec()
        self._record(call)

    async def _execute(self, request: web.Request, call: _Call) -> web.StreamResponse:
        action = call.action
        body: Any = None
        if action.reads_body and call.product is not None:
            await request.read()  # a read's body (usually none) means nothing: read past it
        elif action.reads_body:
            try:
                body = load_json(await request.read())
            except ValueError as exc:
                return await self._invalid(request, call, f"body must be JSON ({exc})")
        if action.delay_s > 0:  # counted from arrival, so reading and deciding are not added
            await self.timer.sleep_until(call.started + action.delay_s)
        if action.kind == "hang":  # waited HANG_LIMIT_S: answer rather than hold the socket forever
            call.decision = "error"
            return await self._send(
                request, call, web.json_response({"error": "gateway timeout"}, status=504)
            )
        if action.kind == "reset":
            call.outcome = "reset"
            call.dropped = True
            reset(request.transport)
            return web.Response()  # never sent: the connection is gone
        if action.kind == "malformed":
            return self._malformed(request, call, body)
        if action.kind == "slow-body":
            return await self._slow_body(request, call, body)
        return await self._send(request, call, self._response(action, call, body))

    def _approved(self, call: _Call, body: Any) -> dict[str, Any]:
        """The good answer: the product for a read, an approval for a payment."""
        if call.product is not None:
            return catalogue_product(call.product)
        return {
            "status": "APPROVED",
            "transactionId": uuid.uuid4().hex,
            "amount": body.get("amount") if isinstance(body, dict) else None,
            "attempt": call.attempt,
        }

    def _response(self, action: Action, call: _Call, body: Any) -> web.Response:
        if action.body is None:
            response = web.json_response(self._approved(call, body), status=action.status)
        elif isinstance(action.body, str):
            response = web.Response(text=action.body, status=action.status)
        else:
            response = web.json_response(dict(action.body), status=action.status)
        if action.retry_after_s is not None:
            response.headers["Retry-After"] = str(action.retry_after_s)
        return response

    async def _send(
        self, request: web.Request, call: _Call, response: web.StreamResponse
    ) -> web.StreamResponse:
        """Write the whole answer inside the handler, so the ledger knows when it was out."""
        try:
            await response.prepare(request)
            await response.write_eof()
        except ConnectionError:
            call.client_gone = True
            call.outcome = "client_gone"
            return response
        call.status = response.status
        call.outcome = str(response.status)
        return response

    async def _invalid(self, request: web.Request, call: _Call, message: str) -> web.StreamResponse:
        """A 400 for a call the gateway cannot process; its ledger row says invalid-request."""
        call.fault = "invalid-request"
        call.decision = "none"
        response = await self._send(
            request, call, web.json_response({"error": message}, status=400)
        )
        if call.attempt == 0:  # refused before it counted as an attempt: record it here
            self._finish(call)
        return response

    def _malformed(self, request: web.Request, call: _Call, body: Any) -> web.StreamResponse:
        transport = request.transport
        call.outcome = "malformed"
        call.dropped = True
        if transport is None or transport.is_closing():
            return web.Response()
        if call.action.malformed == "garbage":
            transport.write(garbage(self.seed, call.key, call.attempt))
        elif call.action.malformed == "truncated":
            payload = json.dumps(self._approved(call, body)).encode()
            head = (
                "HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\n"
                f"Content-Length: {len(payload)}\r\n\r\n"
            ).encode()
            transport.write(head + payload[: len(payload) // 2])
        transport.close()  # FIN once written; nothing more will follow
        return web.Response()  # never sent: the connection is closed

    async def _slow_body(self, request: web.Request, call: _Call, body: Any) -> web.StreamResponse:
        """Status and headers at once; the body in ``chunks`` pieces, the last at ``duration``."""
        action = call.action
        payload = json.dumps(self._approved(call, body)).encode()
        payload += b" " * max(0, action.chunks - len(payload))  # JSON allows trailing spaces
        n = action.chunks
        bounds = [round(i * len(payload) / n) for i in range(n + 1)]
        response = web.StreamResponse(status=200)
        response.content_type = "application/json"
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
        call.status = 200
        call.outcome = "200"
        return response

    def _record(self, call: _Call) -> None:
        self.calls.labels(call.phase, call.fault, call.outcome).inc()
        self.ledger.add(
            (
                call.arrival,
                call.key,
                call.attempt,
                call.phase,
                call.fault,
                call.status,
                call.decision,
                time.monotonic() - call.started,
                call.client_gone,
                call.path,
            )
        )
