"""The gateway's state and its approve handler: carry out each decision on a real socket.

``harness.gateway.decide`` decides what each call meets; this module carries
the decision out (delays, answers, resets, garbage, slow bodies) and writes
down what it did, in the ledger and the metrics. The admin API is in
``admin``, the listener that ``refuse`` closes in ``listener``, the process
around them in ``app`` and ``main``.

``POST /v1/payments/approve`` needs an ``Idempotency-Key`` header and a JSON
body; the ``X-Harness-Fault`` header, else the live override, else the phase
in force decides the answer.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge

from harness.core.net import reset
from harness.core.precise_timer import PreciseTimer
from harness.core.timeline import phase_at
from harness.gateway.decide import Action, Call, decide, decide_at, garbage, next_change, refusing
from harness.gateway.ledger import Ledger
from harness.gateway.overrides import FAULT_HEADER, OverrideError, parse_override
from harness.scenario.faults import Fault, Phase

_INVALID = Action("respond", "invalid-request", status=400)


@dataclass(eq=False)
class _Call:
    """One approve call in progress: what was decided and what actually happened."""

    arrival: float
    started: float
    key: str
    attempt: int
    phase: str
    action: Action
    fault: str
    decision: str
    status: int = 0
    outcome: str = "client_gone"
    client_gone: bool = False
    dropped: bool = False
    """The gateway cut the connection itself (refuse, shutdown), not the client."""
    transport: asyncio.Transport | None = None


class Gateway:
    """State of one gateway: schedule, clock origin, override, attempt counts, metrics, ledger."""

    def __init__(
        self,
        phases: list[Phase],
        seed: int,
        t0: float | None = None,
        ledger_path: str | Path | None = None,
        precise_timer: bool = True,
    ) -> None:
        self.phases = phases
        self.seed = seed
        self.t0 = t0
        self.attempts: dict[str, int] = defaultdict(int)
        self.override: list[Fault] | None = None
        self.override_since: float | None = None
        self.ledger = Ledger(ledger_path)
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
            "Approve calls received by the gateway, counted on arrival",
            ["phase"],
            registry=self.registry,
        )
        self.calls = Counter(
            "pg_calls",
            "Approve calls the gateway finished with (answered, cut, or the client hung up)",
            ["phase", "fault", "outcome"],
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "pg_calls_in_flight", "Approve calls not yet finished", registry=self.registry
        )

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

    # ------------------------------------------------------------ approve

    async def approve(self, request: web.Request) -> web.StreamResponse:
        arrival = time.time()
        started = time.monotonic()
        t = None if self.t0 is None else arrival - self.t0
        phase = None if t is None else phase_at(self.phases, t)
        phase_name = phase.name if phase else "none"
        key = request.headers.get("Idempotency-Key", "")
        if not key:
            return await self._invalid(
                request,
                _Call(arrival, started, "", 0, phase_name, _INVALID, "", ""),
                "Idempotency-Key header is required",
            )
        forced: list[Fault] | None = None
        header = request.headers.get(FAULT_HEADER)
        if header is not None:
            try:
                forced = parse_override(header, allow_refuse=False)
            except OverrideError as exc:
                return await self._invalid(
                    request,
                    _Call(arrival, started, key, 0, phase_name, _INVALID, "", ""),
                    f"{FAULT_HEADER}: {exc}",
                )
        self.attempts[key] += 1
        attempt = self.attempts[key]
        self.received.labels(phase_name).inc()
        where = Call(request.path, request.headers)
        if forced is not None:
            action = decide(forced, self.seed, key, attempt, where)
        elif self.override is not None:
            action = decide(self.override, self.seed, key, attempt, where)
        else:
            action = decide_at(self.phases, t, self.seed, key, attempt, where)
        call = _Call(
            arrival, started, key, attempt, phase_name, action, action.fault, action.decision
        )
        call.transport = request.transport
        self.in_flight.inc()
        self._calls.add(call)
        try:
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
        finally:
            self._calls.discard(call)
            self.in_flight.dec()
            self._record(call)

    async def _execute(self, request: web.Request, call: _Call) -> web.StreamResponse:
        action = call.action
        body: Any = None
        if action.reads_body:
            try:
                body = json.loads(await request.read())
            except ValueError:
                return await self._invalid(request, call, "body must be JSON")
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
            self._record(call)
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
            )
        )
