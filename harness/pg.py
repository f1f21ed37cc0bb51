"""The payment gateway (PG) fault server: an async HTTP server that misbehaves on schedule.

It runs in its own process (``python -m harness.pg`` or ``harness pg``) so
that holding hundreds of hung connections never stalls the orchestrator or
the load generator. Endpoints:

- ``POST /v1/payments/approve``: needs an ``Idempotency-Key`` header and a JSON
  body; the fault of the phase in force decides the answer.
- ``GET /metrics``: Prometheus text: calls received (on arrival, by phase),
  calls finished (by phase, fault and outcome), in-flight calls.
- ``GET /health``.
- ``POST /__admin/start`` ``{"t0": <unix time>}``: where the measured time line
  starts (the orchestrator sets it right before the load begins).
- ``GET /__admin/status``: the phase in force now.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import time
import uuid
from collections import defaultdict

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from harness.faults import decide, phase_at
from harness.scenario import Phase, load_scenario


class Gateway:
    """State of one gateway: its schedule, clock origin, per-key attempt counts and metrics."""

    def __init__(self, phases: list[Phase], seed: int, t0: float | None = None) -> None:
        self.phases = phases
        self.seed = seed
        self.t0 = t0
        self.attempts: dict[str, int] = defaultdict(int)
        self.registry = CollectorRegistry()
        self.received = Counter(
            "pg_calls_received",
            "Approve calls received by the gateway, counted on arrival",
            ["phase"],
            registry=self.registry,
        )
        self.calls = Counter(
            "pg_calls",
            "Approve calls the gateway finished with (answered, or the client hung up)",
            ["phase", "fault", "outcome"],
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "pg_calls_in_flight", "Approve calls not yet answered", registry=self.registry
        )

    def elapsed(self) -> float | None:
        """Seconds into the measured time line, or None before it starts."""
        return None if self.t0 is None else time.time() - self.t0

    def current_phase(self) -> Phase | None:
        t = self.elapsed()
        return None if t is None else phase_at(self.phases, t)

    async def approve(self, request: web.Request) -> web.StreamResponse:
        key = request.headers.get("Idempotency-Key")
        if not key:
            return web.json_response({"error": "Idempotency-Key header is required"}, status=400)
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return web.json_response({"error": "body must be JSON"}, status=400)
        self.attempts[key] += 1
        attempt = self.attempts[key]
        phase = self.current_phase()
        phase_name = phase.name if phase else "none"
        self.received.labels(phase_name).inc()
        action = decide(phase.fault, self.seed, key, attempt) if phase else None
        fault = action.fault if action else "healthy"
        outcome = "client_gone"
        self.in_flight.inc()
        try:
            if action is not None and action.delay_s > 0:
                await asyncio.sleep(action.delay_s)
            if action is not None and action.kind == "hang":
                outcome = "hung"
                raise web.HTTPGatewayTimeout()
            status = action.status if action else 200
            outcome = str(status)
            if status >= 500:
                return web.json_response(
                    {"error": "gateway failure", "fault": fault}, status=status
                )
            return web.json_response(
                {
                    "status": "APPROVED",
                    "transactionId": uuid.uuid4().hex,
                    "amount": body.get("amount") if isinstance(body, dict) else None,
                    "attempt": attempt,
                }
            )
        finally:
            self.in_flight.dec()
            self.calls.labels(phase_name, fault, outcome).inc()

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "UP"})

    async def admin_start(self, request: web.Request) -> web.Response:
        data = await request.json()
        self.t0 = float(data.get("t0", time.time()))
        return web.json_response({"t0": self.t0})

    async def admin_status(self, request: web.Request) -> web.Response:
        phase = self.current_phase()
        return web.json_response(
            {
                "t0": self.t0,
                "elapsed_s": self.elapsed(),
                "phase": phase.name if phase else None,
                "fault": phase.fault.type if phase else "healthy",
            }
        )

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/payments/approve", self.approve)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/health", self.health)
        app.router.add_post("/__admin/start", self.admin_start)
        app.router.add_get("/__admin/status", self.admin_status)
        return app


def serve(gateway: Gateway, sock: socket.socket) -> None:
    """Serve until SIGTERM/SIGINT; handlers are cancelled when their client hangs up."""
    web.run_app(
        gateway.app(),
        sock=sock,
        print=None,
        handle_signals=True,
        handler_cancellation=True,
        backlog=4096,
        shutdown_timeout=1.0,
    )


def main(argv: list[str] | None = None) -> None:
    """Entry point for the PG process the orchestrator starts."""
    parser = argparse.ArgumentParser(prog="python -m harness.pg")
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--fd", type=int, help="an already bound, listening socket")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--t0", type=float, default=None)
    args = parser.parse_args(argv)
    loaded = load_scenario(args.scenario)
    gateway = Gateway(loaded.scenario.pg.phases, loaded.scenario.seed, args.t0)
    if args.fd is not None:
        sock = socket.socket(fileno=args.fd)
    else:
        sock = socket.create_server((args.host, args.port), backlog=4096)
    serve(gateway, sock)


if __name__ == "__main__":
    main()
