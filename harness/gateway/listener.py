"""The main listener, which a ``refuse`` fault closes and re-opens on the same port.

While closed, a bound but non-listening socket holds the port (connections
to it are refused by the kernel) so no other process can take it; ``steer``
follows the override and the schedule and opens or closes it at the right
moment.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import time

from aiohttp import web

from harness.core.net import BACKLOG, OpenFiles, reset
from harness.gateway.server import Gateway


class MainListener:
    """The approve listener of one gateway: open, or closed with its port held."""

    def __init__(
        self, runner: web.AppRunner, sock: socket.socket, gateway: Gateway, files: OpenFiles
    ) -> None:
        self._runner = runner
        self._sock: socket.socket | None = sock
        self._gateway = gateway
        self._files = files
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
        self._sock = self._files.guard(self._sock)  # one line, not a traceback, at the fd limit
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
                reset(handler.transport)

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


async def steer(gateway: Gateway, listener: MainListener) -> None:
    """Close the main listener while a refuse is in force and re-open it after; follow the
    capacity in force (a brownout) at the same moments."""
    while True:
        gateway.changed.clear()
        if gateway.capacity is not None:  # a brownout begins or ends with its phase (or override)
            gateway.capacity.refresh()
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
