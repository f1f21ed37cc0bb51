"""The payment gateway (PG) fault server: an async HTTP server that misbehaves on schedule.

It runs in its own process (``python -m harness.pg`` or ``harness pg``) so
that holding thousands of hung connections never stalls the orchestrator or
the load generator. ``harness.faults`` decides what each call meets; this
module only carries the decision out, on real sockets, and writes down what
it did.

Main listener:

- ``POST /v1/payments/approve``: needs an ``Idempotency-Key`` header and a JSON
  body; the live override, else the phase in force, decides the answer. An
  ``X-Harness-Fault: <JSON fault>`` header forces a fault on that one call.
- ``GET /metrics`` (Prometheus text), ``GET /health``, and ``/__admin/*``.

Control listener (``--control-fd`` / ``--control-port``, optional): only
``/metrics``, ``/health`` and ``/__admin/*``. A ``refuse`` fault closes the main
listener; the control listener stays up, so scrapes and steering go on.

Admin API (loopback callers only): ``POST /__admin/start {"t0": ...}`` sets
where the measured time line starts; ``GET /__admin/status``; ``GET``/``PUT
/__admin/fault`` reads the phase in force or installs an override for every
call; ``POST /__admin/reset[?counters=1]`` removes it (and the attempt counts).

Every approve call lands in the ledger (``--ledger PATH``, CSV), written in
the background at least every second and at shutdown.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import ipaddress
import json
import resource
import signal
import socket
import struct
import sys
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from pydantic import ValidationError

from harness.core.errors import InputError
from harness.core.precise_timer import PreciseTimer
from harness.gateway.decide import (
    Action,
    Call,
    decide,
    decide_at,
    fault_on,
    garbage,
    next_change,
    phase_at,
    refusing,
)
from harness.scenario.schema import FAULT_TYPES, Fault, FaultOverride, Phase, load_scenario

FAULT_HEADER = "X-Harness-Fault"
LEDGER_COLUMNS = (
    "arrival",
    "key",
    "attempt",
    "phase",
    "fault",
    "status",
    "decision",
    "duration_s",
    "client_gone",
)
LEDGER_FLUSH_S = 0.5
"""The ledger reaches the file at least this often, so a killed gateway loses at most this much."""
BACKLOG = 4096
SHUTDOWN_GRACE_S = 1.0
"""On SIGTERM, in-flight calls get this long before they are cut (and recorded as dropped)."""
_RST = struct.pack("ii", 1, 0)
"""SO_LINGER on, timeout 0: close() sends a TCP reset instead of a FIN."""

_LedgerRow = tuple[float, str, int, str, str, int, str, float, bool]


def is_loopback(host: str | None) -> bool:
    """Whether an address (or ``localhost``) is a loopback one."""
    if host == "localhost":
        return True
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Ledger:
    """Every approve call the gateway received, as CSV with a header (``LEDGER_COLUMNS``).

    The hot path only appends a tuple; a background task formats and writes
    the rows every ``LEDGER_FLUSH_S`` and flushes (no fsync), and shutdown
    writes the rest. Without a path, rows are not kept at all.
    """

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self._rows: list[_LedgerRow] = []
        self._file: IO[str] | None = None
        self._failed = False
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("w", newline="", encoding="utf-8")
            self._writer = csv.writer(self._file, lineterminator="\n")
            self._writer.writerow(LEDGER_COLUMNS)
            self._file.flush()

    def add(self, row: _LedgerRow) -> None:
        if self._file is not None:
            self._rows.append(row)

    def flush(self) -> None:
        """Write the buffered rows and hand them to the OS."""
        if self._file is None or not self._rows:
            return
        rows, self._rows = self._rows, []
        try:
            self._writer.writerows(
                (
                    f"{arrival:.6f}",
                    key,
                    attempt,
                    phase,
                    fault,
                    status,
                    decision,
                    f"{duration:.6f}",
                    "true" if gone else "false",
                )
                for arrival, key, attempt, phase, fault, status, decision, duration, gone in rows
            )
            self._file.flush()
        except OSError as exc:  # a full disk must not take the gateway down mid-experiment
            if not self._failed:
                print(f"pg: cannot write the ledger {self.path}: {exc}", file=sys.stderr)
            self._failed = True

    async def keep_flushing(self) -> None:
        while True:
            await asyncio.sleep(LEDGER_FLUSH_S)
            self.flush()

    def close(self) -> None:
        self.flush()
        if self._file is not None:
            self._file.close()
            self._file = None


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


class OverrideError(ValueError):
    """A fault given to the admin API or the override header is not valid."""


def _error_text(error: Any, single: bool) -> str:
    loc = list(error["loc"])
    if single and loc[:2] == ["faults", 0]:
        loc = loc[2:]
    # Drop the union tag pydantic puts after a list index (faults.0.error.status).
    shown = [
        str(p)
        for i, p in enumerate(loc)
        if not (p in FAULT_TYPES and (i == 0 or isinstance(loc[i - 1], int)))
    ]
    msg = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        msg = "unknown key"
    elif error["type"] == "missing":
        msg = "required key is missing"
    return f"{'.'.join(shown)}: {msg}" if shown else msg


def parse_override(data: Any, *, allow_refuse: bool) -> list[Fault]:
    """Validate an override: a fault object, or ``{"faults": [...]}``; JSON text is parsed first."""
    if isinstance(data, str | bytes):
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise OverrideError(f"not JSON ({exc})") from None
    single = not (isinstance(data, dict) and "faults" in data and "type" not in data)
    try:
        override = FaultOverride.model_validate({"faults": [data]} if single else data)
    except ValidationError as exc:
        raise OverrideError("; ".join(_error_text(e, single) for e in exc.errors())) from None
    if not allow_refuse and any(f.type == "refuse" for f in override.faults):
        raise OverrideError(
            "refuse takes the listener down: force it with PUT /__admin/fault on a gateway "
            "with a control listener (--control-port/--control-fd), not on one call or "
            "through the listener it closes"
        )
    return override.faults


def fault_json(fault: Fault) -> dict[str, Any]:
    """A fault as the scenario would write it (kebab-case keys, no unset options)."""
    return {"type": fault.type, **fault.model_dump(mode="json", by_alias=True, exclude_none=True)}


def _reset(transport: asyncio.Transport | None) -> None:
    """Drop a connection with a TCP reset (RST), not a polite FIN."""
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RST)
    transport.abort()


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
                _reset(call.transport)

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
            _reset(request.transport)
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

    # ------------------------------------------------------------ metrics, health, admin

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "UP"})

    @staticmethod
    def _loopback_only(request: web.Request) -> None:
        if not is_loopback(request.remote):
            raise web.HTTPForbidden(text="the admin API answers loopback callers only")

    async def admin_start(self, request: web.Request) -> web.Response:
        self._loopback_only(request)
        try:
            data = await request.json()
            self.t0 = float(data.get("t0", time.time())) if isinstance(data, dict) else time.time()
        except (ValueError, TypeError):
            return web.json_response(
                {"error": 'body must be JSON such as {"t0": 1.7e9}'}, status=400
            )
        self.changed.set()
        return web.json_response({"t0": self.t0})

    async def admin_status(self, request: web.Request) -> web.Response:
        self._loopback_only(request)
        phase = self.current_phase()
        return web.json_response(
            {
                "t0": self.t0,
                "elapsed_s": self.elapsed(),
                "phase": phase.name if phase else None,
                "fault": phase.fault.type if phase else "healthy",
                "override": self.override is not None,
                "listening": self.listening,
            }
        )

    async def admin_get_fault(self, request: web.Request) -> web.Response:
        self._loopback_only(request)
        t = self.elapsed()
        phase = self.current_phase()
        return web.json_response(
            {
                "t0": self.t0,
                "elapsed_s": t,
                "phase": phase.name if phase else None,
                "phase_start_s": phase.start if phase else None,
                "phase_end_s": phase.end if phase else None,
                "faults": [fault_json(f) for f in phase.faults] if phase else [],
                "repeat": phase.repeat.model_dump(by_alias=True)
                if phase and phase.repeat
                else None,
                "fault_on": bool(phase and t is not None and fault_on(phase, t)),
                "override": [fault_json(f) for f in self.override] if self.override else None,
                "override_since": self.override_since,
                "in_force": "override" if self.override else ("phase" if phase else "healthy"),
                "listening": self.listening,
            }
        )

    async def admin_put_fault(self, request: web.Request) -> web.Response:
        self._loopback_only(request)
        try:
            data = await request.json()
        except ValueError:
            return web.json_response({"error": "body must be JSON"}, status=400)
        try:
            faults = parse_override(data, allow_refuse=self.has_control)
        except OverrideError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        self.override = faults
        self.override_since = time.time()
        self.changed.set()
        return web.json_response({"override": [fault_json(f) for f in faults]})

    async def admin_reset(self, request: web.Request) -> web.Response:
        self._loopback_only(request)
        counters = request.query.get("counters", "").lower() in ("1", "true", "yes")
        self.override = None
        self.override_since = None
        if counters:
            self.attempts.clear()
        self.changed.set()
        return web.json_response({"override": None, "counters_cleared": counters})

    def _control_routes(self, app: web.Application) -> web.Application:
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/health", self.health)
        app.router.add_post("/__admin/start", self.admin_start)
        app.router.add_get("/__admin/status", self.admin_status)
        app.router.add_get("/__admin/fault", self.admin_get_fault)
        app.router.add_put("/__admin/fault", self.admin_put_fault)
        app.router.add_post("/__admin/reset", self.admin_reset)
        return app

    def app(self) -> web.Application:
        """The main listener's application: approve calls, plus metrics, health and admin."""
        app = self._control_routes(web.Application())
        app.router.add_post("/v1/payments/approve", self.approve)
        return app

    def control_app(self) -> web.Application:
        """The control listener's application: never refused, never serves approve calls."""
        return self._control_routes(web.Application())


_INVALID = Action("respond", "invalid-request", status=400)


class _Listener:
    """The main listener. ``refuse`` closes it, then it re-opens on the same port.

    While closed, a bound but non-listening socket holds the port (connections
    to it are refused by the kernel) so no other process can take it.
    """

    def __init__(self, runner: web.AppRunner, sock: socket.socket, gateway: Gateway) -> None:
        self._runner = runner
        self._sock: socket.socket | None = sock
        self._gateway = gateway
        self._family = sock.family
        self._address = sock.getsockname()[:2]
        self._site: web.SockSite | None = None
        # Accepted connections inherit it, so the port can be re-bound while they linger.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

    @property
    def is_open(self) -> bool:
        return self._site is not None

    async def open(self) -> None:
        if self._sock is None:
            self._sock = await self._hold_port()
            if self._sock is None:
                return
        self._sock.listen(BACKLOG)
        site = web.SockSite(self._runner, self._sock, backlog=BACKLOG)
        await site.start()
        self._site = site
        self._gateway.listening = True

    async def close(self) -> None:
        """Stop listening and cut every connection, as if the gateway process were gone."""
        site, self._site = self._site, None
        self._gateway.listening = False
        if site is not None:
            await site.stop()  # closes the listening socket
        self._sock = await self._hold_port()
        self._gateway.drop_calls()
        server = self._runner.server
        if server is not None:
            for handler in server.connections:
                _reset(handler.transport)

    async def _hold_port(self) -> socket.socket | None:
        deadline = time.monotonic() + 2.0
        while True:
            sock = socket.socket(self._family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(self._address)
                return sock
            except OSError as exc:
                sock.close()
                if time.monotonic() > deadline:
                    print(f"pg: cannot re-bind {self._address}: {exc}", file=sys.stderr)
                    return None
                await asyncio.sleep(0.01)

    def release(self) -> None:
        if self._sock is not None and self._site is None:
            self._sock.close()


async def _steer(gateway: Gateway, listener: _Listener) -> None:
    """Close the main listener while a refuse is in force and re-open it after."""
    while True:
        gateway.changed.clear()
        down = gateway.refusing_now()
        if down and listener.is_open:
            await listener.close()
        elif not down and not listener.is_open:
            await listener.open()
        wait = gateway.seconds_to_change()
        timeout = 60.0 if wait is None else min(60.0, max(0.001, wait))
        if not down and not listener.is_open:
            timeout = 0.1  # the port could not be re-bound yet: try again soon
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(gateway.changed.wait(), timeout)


async def _serve(gateway: Gateway, sock: socket.socket, control_sock: socket.socket | None) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    gateway.has_control = control_sock is not None
    runners = [
        web.AppRunner(
            app, handler_cancellation=True, access_log=None, shutdown_timeout=SHUTDOWN_GRACE_S
        )
        for app in ([gateway.app()] + ([gateway.control_app()] if control_sock else []))
    ]
    for runner in runners:
        await runner.setup()
    listener = _Listener(runners[0], sock, gateway)
    await listener.open()
    if control_sock is not None:
        await web.SockSite(runners[1], control_sock, backlog=BACKLOG).start()
    tasks = [
        asyncio.create_task(gateway.ledger.keep_flushing()),
        asyncio.create_task(_steer(gateway, listener)),
    ]
    try:
        await stop.wait()
    finally:
        gateway.stopping = True
        gateway.cut_hung_calls()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for runner in runners:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(runner.cleanup(), 10 + SHUTDOWN_GRACE_S)
        listener.release()
        gateway.ledger.close()
        gateway.timer.close()


def raise_open_file_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (each held connection is a descriptor)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def serve(gateway: Gateway, sock: socket.socket, control_sock: socket.socket | None = None) -> None:
    """Serve until SIGTERM/SIGINT; then cut what is in flight, write the ledger and return."""
    raise_open_file_limit()
    asyncio.run(_serve(gateway, sock, control_sock))


def _socket(fd: int | None, host: str, port: int | None) -> socket.socket | None:
    if fd is not None:
        sock = socket.socket(fileno=fd)
        if not is_loopback(str(sock.getsockname()[0])):
            raise InputError(f"fd {fd} is bound to {sock.getsockname()[0]}, not a loopback address")
        return sock
    if port is None:
        return None
    return socket.create_server((host, port), backlog=BACKLOG)


def main(argv: list[str] | None = None) -> None:
    """Entry point for the PG process the orchestrator starts (exit 2: bad input, 3: no port)."""
    parser = argparse.ArgumentParser(prog="python -m harness.pg")
    parser.add_argument("--scenario", required=True, help="serve this scenario's pg.phases")
    parser.add_argument("--fd", type=int, help="an already bound, listening socket to serve on")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address (without --fd)")
    parser.add_argument("--port", type=int, default=0, help="port without --fd (0: any free)")
    parser.add_argument("--control-fd", type=int, help="a bound, listening socket for control")
    parser.add_argument("--control-port", type=int, help="or a port for the control listener")
    parser.add_argument("--t0", type=float, default=None, help="Unix time the time line starts")
    parser.add_argument("--ledger", type=Path, help="write every call to this CSV file")
    parser.add_argument(
        "--timer",
        choices=("timerfd", "asyncio"),
        default="timerfd",
        help="how injected delays are timed (asyncio: the loop's 1 ms timers, for comparison)",
    )
    args = parser.parse_args(argv)
    try:
        if not is_loopback(args.host):
            raise InputError(f"--host {args.host}: the gateway only binds loopback addresses")
        loaded = load_scenario(args.scenario)
        gateway = Gateway(
            loaded.scenario.pg.phases,
            loaded.scenario.seed,
            args.t0,
            args.ledger,
            precise_timer=args.timer == "timerfd",
        )
    except InputError as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(2) from None
    except OSError as exc:
        print(f"cannot write the ledger {args.ledger}: {exc.strerror}", file=sys.stderr)
        raise SystemExit(2) from None
    try:
        sock = _socket(args.fd, args.host, args.port)
        control = _socket(args.control_fd, args.host, args.control_port)
    except InputError as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(2) from None
    except OSError as exc:
        print(f"cannot bind {args.host}: {exc.strerror}", file=sys.stderr)
        raise SystemExit(3) from None
    assert sock is not None
    if args.fd is None:
        line = f"payment gateway on http://{args.host}:{sock.getsockname()[1]}"
        if control is not None:
            line += f"  control on http://{args.host}:{control.getsockname()[1]}"
        print(line, flush=True)
    serve(gateway, sock, control)


if __name__ == "__main__":
    main()
