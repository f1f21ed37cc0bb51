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

With ``pg.capacity`` every call (approve or read) first waits for a slot and
is served (``harness.gateway.queueing``), then answered as its faults say;
its ledger row is written when that stage ends, even after its client left.

``GET /v1/catalogue/products/{id}`` (product reads) meets the same faults,
unless a fault's ``match.path`` leaves it out, and answers the product
(``{id, name, price}``, fixed by the id). Its fate and attempt count go by
the product and the request's ``Idempotency-Key`` or ``X-Request-Id``
(``decide.catalogue_key``); it needs neither, nor a body.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from aiohttp import web
from multidict import CIMultiDict
from prometheus_client import CollectorRegistry, Counter, Gauge

from harness.core.fate import fate
from harness.core.net import reset
from harness.core.precise_timer import PreciseTimer
from harness.core.timeline import phase_at
from harness.gateway.attempts import MAX_KEYS as MAX_KEYS
from harness.gateway.attempts import AttemptCounts as AttemptCounts
from harness.gateway.calls import (
    InFlight,
    approved,
    malformed,
    slow_body,
    too_long,
    usual_payload,
)
from harness.gateway.capacity import limit_at
from harness.gateway.connection import handler_of
from harness.gateway.decide import (
    Action,
    Call,
    catalogue_key,
    decide,
    decide_at,
    dispatch,
    next_change,
    refusing,
    sample_delay,
)
from harness.gateway.dependency import MAX_BODY_BYTES, DependencyApi, Routed, Usual
from harness.gateway.ledger import Ledger
from harness.gateway.overrides import FAULT_HEADER, OverrideError, load_json, parse_override
from harness.gateway.queueing import Capacity, Ticket
from harness.scenario.capacity import GatewayCapacity
from harness.scenario.faults import HANG_LIMIT_S, Fault, Phase

_INVALID = Action("respond", "invalid-request", status=400)


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
        overwrite_ledger: bool = False,
        capacity: GatewayCapacity | None = None,
        api: DependencyApi | None = None,
        name: str = "pg",
    ) -> None:
        self.phases = phases
        self.api = api
        """A named dependency's own API (None: the payment gateway's two routes)."""
        self.name = name
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
        self._calls: set[InFlight] = set()
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
        self._received_of: dict[str, Any] = {}
        self._calls_of: dict[tuple[str, str, str], Any] = {}
        """Each label set's child of ``received`` and ``calls`` (``labels()`` costs a lookup
        with checks on every call)."""
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
        self.ledger = Ledger(
            ledger_path,
            on_escaped=self.ledger_escaped.inc,
            overwrite=overwrite_ledger,
            capacity=capacity is not None,
            routes=api is not None,
        )
        self.capacity_settings = capacity
        self.capacity = (
            None
            if capacity is None
            else Capacity(capacity, self.timer, self.registry, self.capacity_limit)
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

    def capacity_limit(self) -> int:
        """The slots in force now: ``pg.capacity.concurrency``, or less in a brownout."""
        assert self.capacity_settings is not None
        return limit_at(self.capacity_settings, self.phases, self.elapsed(), self.override)

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
        key = request.headers.get("Idempotency-Key", "")
        return await self._handle(request, key, too_long=too_long("Idempotency-Key", key))

    async def catalogue(self, request: web.Request) -> web.StreamResponse:
        """``GET /v1/catalogue/products/{id}``: a product read, faulted like an approve call."""
        product = int(request.match_info["id"])
        headers = request.headers
        named = "Idempotency-Key" if headers.get("Idempotency-Key") else "X-Request-Id"
        request_id = headers.get(named) or ""
        return await self._handle(
            request, catalogue_key(product, request_id), product, too_long(named, request_id)
        )

    async def dependency(self, request: web.Request) -> web.StreamResponse:
        """Any call to a named dependency: answered by its API (stubs, or the real upstream)
        unless the phase's faults answer first."""
        assert self.api is not None
        arrival, started = time.time(), time.monotonic()
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:  # over MAX_BODY_BYTES: refused, and recorded
            key = f"{request.method} {request.path} #too-large"
            routed = Routed(key, "invalid-request", _never)
            why = f"the request body is over {MAX_BODY_BYTES:,} bytes"
            return await self._handle(
                request, key, too_long=why, routed=routed, at=(arrival, started), refused=413
            )
        routed = self.api.route(request, body)
        return await self._handle(request, routed.key, routed=routed, at=(arrival, started))

    async def _handle(
        self,
        request: web.Request,
        key: str,
        product: int | None = None,
        too_long: str | None = None,
        routed: Routed | None = None,
        at: tuple[float, float] | None = None,
        refused: int = 400,
    ) -> web.StreamResponse:
        arrival, started = at if at is not None else (time.time(), time.monotonic())
        t = None if self.t0 is None else arrival - self.t0
        phase = None if t is None else phase_at(self.phases, t)
        phase_name = phase.name if phase else "none"
        call = InFlight(
            arrival, started, key, 0, phase_name, _INVALID, "", "", request.path, product
        )
        call.method = request.method
        if routed is not None:
            call.route, call.routed = routed.route, routed
        if not key:
            return await self._invalid(request, call, "Idempotency-Key header is required")
        if too_long is not None:
            return await self._invalid(request, call, too_long, refused)
        forced: list[Fault] | None = None
        header = request.headers.get(FAULT_HEADER)
        if header is not None:
            try:
                forced = parse_override(header, allow_refuse=False)
            except OverrideError as exc:
                return await self._invalid(request, call, f"{FAULT_HEADER}: {exc}")
        call.attempt = attempt = self.attempts.next(key)
        received = self._received_of.get(phase_name)
        if received is None:
            received = self._received_of[phase_name] = self.received.labels(phase_name)
        received.inc()
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
            if (product is not None or routed is not None) and call.decision == "approved":
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

    def _peer_eof(self, call: InFlight) -> None:
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

    def _finish(self, call: InFlight) -> None:
        """Count the call and write its ledger row, once."""
        if call.finished:
            return
        if call.ticket is not None and not call.ticket.over:
            self._hold(call, call.ticket)
            return
        call.finished = True
        if call.ticket is not None:
            if call.ticket.rejected is not None:  # even if its client left before hearing it
                call.fault, call.decision = call.ticket.rejected, "none"
            if call.client_gone:
                call.status = 0  # as without capacity: a client gone heard nothing
        if call.attempt > 0:
            self._calls.discard(call)
            self.in_flight.dec()
        self._record(call)

    def _hold(self, call: InFlight, ticket: Ticket) -> None:
        """The call is still queued or in service: its row is written when that ends.

        A client gone meanwhile leaves its call served to the end (``abandoned``),
        or, with ``cancel-on-disconnect``, cancelled and its connection closed.
        """
        assert ticket.task is not None and self.capacity is not None
        if call.client_gone:
            if self.capacity.settings.cancel_on_disconnect:
                ticket.task.cancel()
                if call.transport is not None:
                    call.transport.close()
            elif not call.abandoned:
                call.abandoned = True
                self.capacity.abandoned.inc()
        if not call.held:
            call.held = True
            ticket.task.add_done_callback(lambda _task: self._finish(call))

    def _queue_up(self, call: InFlight) -> Ticket:
        """Enter ``pg.capacity`` on arrival (the body is read while it waits)."""
        assert self.capacity is not None
        action = call.action
        rng = random.Random(fate(self.seed, call.key, call.attempt, "service"))
        planned = sample_delay(self.capacity.settings.service, rng)
        if action.kind != "hang":  # latency-type faults lengthen the service: they hold the slot
            planned += action.delay_s
        call.ticket = self.capacity.submit(min(planned, HANG_LIMIT_S), call.started)
        return call.ticket

    async def _execute(self, request: web.Request, call: InFlight) -> web.StreamResponse:
        action = call.action
        body: Any = None
        ticket = None if self.capacity is None else self._queue_up(call)
        if call.routed is not None:
            pass  # a named dependency's body was read to route it; it need not be JSON
        elif action.reads_body and call.product is not None:
            await request.read()  # a read's body (usually none) means nothing: read past it
        elif action.reads_body:
            try:
                body = load_json(await request.read())
            except ValueError as exc:
                if ticket is not None and ticket.task is not None:
                    ticket.task.cancel()  # nothing to serve: give up its place
                return await self._invalid(request, call, f"body must be JSON ({exc})")
        wait = action.delay_s
        if ticket is not None and ticket.task is not None and self.capacity is not None:
            await asyncio.shield(ticket.task)
            if ticket.rejected is not None:
                answer = {"error": "gateway at capacity", "reason": ticket.rejected}
                status = self.capacity.settings.full_status
                return await self._send(request, call, web.json_response(answer, status=status))
            wait = HANG_LIMIT_S if action.kind == "hang" else 0.0  # delays were served
        usual: Usual | None = None
        if call.routed is not None and _answers_usually(action):
            asked = time.monotonic()
            usual = await call.routed.usual()
            if wait > 0:  # a fault's delay comes on top of the upstream's own time
                wait += time.monotonic() - asked
            wait += usual.delay_s
            if usual.fault is not None:  # the dependency's own broken answer (WireMock fault)
                action = call.action = _own_fault(action, usual.fault)
                call.fault = action.fault  # stub-reset...: the stub's doing, not the phase's
                if action.decision == "none":  # nothing was answered
                    call.decision = "none"
        if wait > 0:  # counted from arrival, so reading and deciding are not added
            await self.timer.sleep_until(call.started + wait)
        return await dispatch(action, _Answer(self, request, call, body, usual))

    def _response(
        self, action: Action, call: InFlight, body: Any, usual: Usual | None = None
    ) -> web.Response:
        if action.body is None and usual is not None:
            response = web.Response(
                body=usual.body, status=usual.status, headers=CIMultiDict(usual.headers)
            )
            if usual.length is not None:  # a HEAD's answer: the length a GET would have
                response.headers["Content-Length"] = str(usual.length)
        elif action.body is None:
            response = web.json_response(approved(call, body), status=action.status)
        elif isinstance(action.body, str):
            response = web.Response(text=action.body, status=action.status)
        else:
            response = web.json_response(dict(action.body), status=action.status)
        if action.retry_after_s is not None:
            response.headers["Retry-After"] = str(action.retry_after_s)
        return response

    async def _send(
        self, request: web.Request, call: InFlight, response: web.StreamResponse
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

    async def _invalid(
        self, request: web.Request, call: InFlight, message: str, status: int = 400
    ) -> web.StreamResponse:
        """A 400 for a call the gateway cannot process; its ledger row says invalid-request."""
        call.fault = "invalid-request"
        call.decision = "none"
        response = await self._send(
            request, call, web.json_response({"error": message}, status=status)
        )
        if call.attempt == 0:  # refused before it counted as an attempt: record it here
            self._finish(call)
        return response

    def _record(self, call: InFlight) -> None:
        labels = (call.phase, call.fault, call.outcome)
        counted = self._calls_of.get(labels)
        if counted is None:
            counted = self._calls_of[labels] = self.calls.labels(*labels)
        counted.inc()
        row = (
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
        ) + ((call.method, call.route or "invalid-request") if self.api is not None else ())
        if self.capacity is None:
            self.ledger.add(row)
            return
        ticket = call.ticket
        self.ledger.add(
            row
            + (
                (0.0, math.nan, False, False)
                if ticket is None
                else (ticket.queue_s, ticket.service_s, call.abandoned, ticket.rejected is not None)
            )
        )


async def _never() -> Usual:
    raise AssertionError("a refused call has no usual answer")


def _answers_usually(action: Action) -> bool:
    """Whether the dependency's own answer is given (or broken on the way): no fault answers
    instead of it."""
    return (action.kind == "respond" and action.body is None) or action.kind in (
        "slow-body",
        "malformed",
    )


def _own_fault(action: Action, fault: str) -> Action:
    """The dependency's own broken answer as an action (when no fault of the phase answers).

    Its ledger ``fault`` is ``stub-`` and the kind (``stub-reset``, ``stub-garbage``...):
    the stub's or mapping's own doing, told apart from a phase's fault (and from
    ``healthy``)."""
    if action.kind != "respond":
        return action
    if fault == "reset":
        return replace(action, kind="reset", fault=f"stub-{fault}")
    if fault in ("empty", "garbage", "truncated"):
        return replace(
            action,
            kind="malformed",
            malformed=fault,  # type: ignore[arg-type]
            fault=f"stub-{fault}",
        )
    return action


class _Answer:
    """The answer the gateway sends for each kind of action, after its delay was served."""

    def __init__(
        self,
        server: Gateway,
        request: web.Request,
        call: InFlight,
        body: Any,
        usual: Usual | None = None,
    ) -> None:
        self.server, self.request, self.call, self.body = server, request, call, body
        self.usual = usual

    def _payload(self) -> bytes:
        """The good answer's bytes, for the faults that break it on the way."""
        return self.usual.body if self.usual is not None else usual_payload(self.call, self.body)

    async def respond(self, action: Action) -> web.StreamResponse:
        response = self.server._response(action, self.call, self.body, self.usual)
        return await self.server._send(self.request, self.call, response)

    async def hang(self, action: Action) -> web.StreamResponse:
        # Waited HANG_LIMIT_S: answer rather than hold the socket forever.
        self.call.decision = "error"
        timeout = web.json_response({"error": "gateway timeout"}, status=504)
        return await self.server._send(self.request, self.call, timeout)

    async def reset(self, action: Action) -> web.StreamResponse:
        self.call.outcome = "reset"
        self.call.dropped = True
        reset(self.request.transport)
        return web.Response()  # never sent: the connection is gone

    async def malformed(self, action: Action) -> web.StreamResponse:
        return malformed(self.request, self.call, self.server.seed, self._payload(), self.usual)

    async def slow_body(self, action: Action) -> web.StreamResponse:
        return await slow_body(self.request, self.call, self._payload(), self.usual)
