"""The gateway's web applications and its life as a process: serve until signalled.

Main listener: ``POST /v1/payments/approve`` and ``GET /v1/catalogue/products/{id}``
(product reads, faulted by the same schedule) plus the control routes
(``/metrics``, ``/health``, ``/__admin/*``). Control listener (optional):
the control routes only, never refused. On SIGTERM or SIGINT, hanging calls
are cut at once, the others get ``SHUTDOWN_GRACE_S``, and the ledger is written.
If the ledger cannot be written, the gateway stops at once (``LedgerError``).
At its limit of open files it stops accepting, says so in one line, and
keeps serving the connections it has (``harness.core.net.OpenFiles``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket

from aiohttp import web

from harness.core.net import BACKLOG, OpenFiles, raise_open_file_limit
from harness.core.serving import serve_until_signalled
from harness.gateway.admin import Admin
from harness.gateway.connection import AppRunner
from harness.gateway.decide import APPROVE_PATH, CATALOGUE_ROUTE
from harness.gateway.dependency import MAX_BODY_BYTES
from harness.gateway.listener import MainListener, steer
from harness.gateway.server import Gateway

SHUTDOWN_GRACE_S = 1.0
"""On SIGTERM, in-flight calls get this long before they are cut (and recorded as dropped)."""


def main_app(gateway: Gateway, control: bool = False) -> web.Application:
    """The main listener's application: approve calls and product reads, plus metrics,
    health and admin. A named dependency answers every path as its API says: with a
    control listener, its main one serves nothing else (the service may call a path
    of its own named ``/health`` or ``/metrics``)."""
    if gateway.api is not None:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        if not control:
            app = Admin(gateway).routes(app)
        app.router.add_route("*", "/{tail:.*}", gateway.dependency)
        return app
    app = Admin(gateway).routes(web.Application())
    app.router.add_post(APPROVE_PATH, gateway.approve)
    app.router.add_get(CATALOGUE_ROUTE, gateway.catalogue, allow_head=False)
    return app


def control_app(gateway: Gateway) -> web.Application:
    """The control listener's application: never refused, never serves approve calls or
    product reads."""
    return Admin(gateway).routes(web.Application())


class _Served:
    """One gateway on its sockets: what ``start`` set up, ``stop`` takes down (even half-done)."""

    def __init__(
        self,
        gateway: Gateway,
        sock: socket.socket,
        control_sock: socket.socket | None,
        files: OpenFiles,
    ) -> None:
        self.gateway = gateway
        self.sock = sock
        self.control_sock = control_sock
        self.files = files
        self.runners: list[web.AppRunner] = []
        self.listener: MainListener | None = None
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self) -> list[asyncio.Task[None]]:
        """Serve; return the tasks the gateway cannot live without (ledger writer, steering)."""
        gateway, control = self.gateway, self.control_sock
        gateway.has_control = control is not None
        apps = [main_app(gateway, control is not None)] + (
            [control_app(gateway)] if control is not None else []
        )
        for app in apps:
            runner = AppRunner(
                app, handler_cancellation=True, access_log=None, shutdown_timeout=SHUTDOWN_GRACE_S
            )
            await runner.setup()
            self.runners.append(runner)
        self.listener = MainListener(self.runners[0], self.sock, gateway, self.files)
        await self.listener.open()
        if control is not None:
            guarded = self.files.guard(control)
            await web.SockSite(self.runners[1], guarded, backlog=BACKLOG).start()
        gc.collect()
        gc.freeze()  # what start-up built lives as long as the process: no collection scans it
        self.tasks = [
            asyncio.create_task(gateway.ledger.keep_flushing(), name="the ledger writer"),
            asyncio.create_task(steer(gateway, self.listener), name="the listener's steering"),
        ]
        return self.tasks

    async def stop(self) -> None:
        gateway = self.gateway
        gateway.stopping = True
        gateway.cut_hung_calls()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for runner in self.runners:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(runner.cleanup(), 10 + SHUTDOWN_GRACE_S)
        if gateway.capacity is not None:  # calls still queued or served for clients gone
            await gateway.capacity.stop()
        if gateway.api is not None:
            await gateway.api.close()
        if self.listener is not None:
            self.listener.release()
        gateway.ledger.close()
        gateway.timer.close()


def serve(gateway: Gateway, sock: socket.socket, control_sock: socket.socket | None = None) -> None:
    """Serve until SIGTERM/SIGINT; then cut what is in flight, write the ledger and return.

    Raises ``RunError`` (after stopping) if the ledger cannot be written.
    """
    raise_open_file_limit()
    files = OpenFiles(gateway.name)
    served = _Served(gateway, sock, control_sock, files)
    serve_until_signalled(served.start, served.stop, files=files)
