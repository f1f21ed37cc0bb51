"""A Toxiproxy-style TCP fault proxy: break a *real* dependency on loopback, on a schedule.

``harness pg`` plays a fake gateway; this proxy sits in front of a real one (a
database, a sandbox gateway on loopback) and damages the bytes on their way
with Toxiproxy's toxics (https://github.com/Shopify/toxiproxy#toxics):
latency, bandwidth, slow-close, timeout, reset-peer, slicer, limit-data. A
YAML schedule turns toxics on and off by phase, like a scenario's
``pg.phases``; a change applies to connections already open too, because a
pool's long-lived connections are what a real outage hits. The schedule's
format and every toxic, with what a client sees: docs/proxy.md.

Repeatable: toxic number ``i`` of the set in force hits connection ``N``
(numbered from 1 in accept order) when ``fate(seed, str(N), 1, str(i)) <
toxicity``; jitter and slice sizes come from a per-connection RNG seeded the
same way. Same seed, same connections, same damage.

The clock: with ``t0`` the schedule counts from it; without, from the start,
unless ``await_start``: then no toxic is in force until ``start_clock(t0)``,
which the control listener's ``POST /__admin/start {"t0": ...}`` calls (how the
run puts a TCP dependency on its one phase clock, as it does each gateway).

Safety: the listen, upstream and metrics addresses must be loopback. Each
connection is a ``relay.Connection``, which reaches this server only through
the small ``relay.Host`` protocol that ``Proxy`` implements. The process
around it (options, signals, exit codes) is ``harness.proxy.main``.

Open files: each connection holds two descriptors (client and upstream), so
the proxy accepts only as many as its limit leaves room for; past that, new
connections wait in the listen backlog until some close, and one line on
stderr says so (``harness.core.net.OpenFiles``), instead of accepting clients
it cannot connect upstream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import socket
import time
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

from harness.core.errors import RunError
from harness.core.net import (
    BACKLOG,
    AddressError,
    GuardedSocket,
    OpenFiles,
    is_loopback,
    parse_address,
    same_endpoint,
)
from harness.core.precise_timer import PreciseTimer
from harness.proxy.relay import Connection, Refuser, Stats
from harness.scenario.toxics import ProxyPhase, Schedule, Toxic, check_toxics

_HTTP_ERRORS = (
    TimeoutError,
    ConnectionError,
    asyncio.IncompleteReadError,
    asyncio.LimitOverrunError,
)
_BODY_LIMIT = 4096
"""The longest body the control listener reads (``{"t0": ...}`` is some 30 bytes)."""


class Proxy:
    """A TCP proxy from a loopback listen address to a loopback upstream, with toxics.

    Library use: ``port = await proxy.start()``, ``proxy.set_toxics([...])``,
    ``await proxy.stop()``. With a ``schedule``, its phases set the toxics.
    At the open-file limit asyncio logs each pause of the listener unless the
    loop's exception handler is ``proxy.files.exception_handler`` (the process
    installs it).
    """

    def __init__(
        self,
        listen: str,
        upstream: str,
        *,
        seed: int = 0,
        schedule: Schedule | None = None,
        t0: float | None = None,
        sock: socket.socket | None = None,
        max_connections: int = 10_000,
        files: OpenFiles | None = None,
        await_start: bool = False,
    ) -> None:
        if sock is not None:
            host, port = sock.getsockname()[:2]
            if not is_loopback(host):
                raise AddressError(f"listen socket {host}:{port} is not on a loopback address")
            self.listen: tuple[str, int] = (host, port)
        else:
            host, port = parse_address(listen, "listen")
            self.listen = ("127.0.0.1" if host.lower() == "localhost" else host, port)
        self.upstream = parse_address(upstream, "upstream", port_zero=False)
        if same_endpoint(self.listen, self.upstream):
            raise AddressError(_own_upstream(self.listen, self.upstream))
        self.seed = seed
        self.schedule = schedule or Schedule()
        self.t0 = t0
        self.await_start = await_start and t0 is None
        """No toxic until ``start_clock`` (``POST /__admin/start``) gives the schedule's t0."""
        self._clock: asyncio.Task[None] | None = None
        self.max_connections = max_connections
        self.stats = Stats()
        self.phase: str | None = None
        self.port: int | None = None
        self._sock = sock
        self._toxics: tuple[Toxic, ...] = ()
        self._conns: set[Connection] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_id = 0
        self._servers: list[asyncio.Server] = []
        self._stopping = False
        self.files = files or OpenFiles("proxy")
        self._guard: GuardedSocket | None = None
        self._opening = 0  # accepted connections not yet registered
        self._fd_cap = 0  # connections that fit in the open-file limit (set at start)
        self.timer = PreciseTimer()
        """Latency toxics end a fraction of a millisecond late; asyncio's round up to 1 ms."""

    # -- what a connection needs from its host (relay.Host)

    @property
    def toxics(self) -> tuple[Toxic, ...]:
        return self._toxics

    def next_id(self) -> int:
        self._last_id += 1
        return self._last_id

    def register(self, conn: Connection) -> None:
        self._opening = max(0, self._opening - 1)
        self._conns.add(conn)

    def unregister(self, conn: Connection) -> None:
        self._conns.discard(conn)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.create_task(coro)
        self._tasks.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self._tasks.discard)
        return task

    def out_of_files(self) -> None:
        self.files.hit()

    # -- life

    def _room(self) -> bool:
        """Whether one more connection (two descriptors) fits in the open-file limit."""
        pending = self._guard.pending if self._guard is not None else 0
        return len(self._conns) + self._opening + pending < self._fd_cap

    def _accept(self) -> asyncio.Protocol:
        if self._guard is not None:
            self._guard.settled()
        if self._stopping or len(self._conns) >= self.max_connections:
            self.stats.refused += 1
            return Refuser()
        self._opening += 1
        return Connection(self).client

    async def start(self) -> int:
        """Listen (and start the schedule's clock unless ``t0`` was given); return the port."""
        loop = asyncio.get_running_loop()
        host, port = self.listen
        self._fd_cap = self.files.budget(fds_per_connection=2)
        try:
            if self._sock is not None:
                sock, self._sock = self._sock, None
            else:
                family = socket.AF_INET6 if ":" in host else socket.AF_INET
                sock = socket.create_server((host, port), family=family, backlog=BACKLOG)
            self._guard = self.files.guard(sock, room=self._room)
            server = await loop.create_server(self._accept, sock=self._guard, backlog=BACKLOG)
        except OSError as exc:
            raise RunError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        self._servers.append(server)
        self.port = int(server.sockets[0].getsockname()[1])
        if same_endpoint((host, self.port), self.upstream):  # port 0 picked the upstream's
            raise RunError(_own_upstream((host, self.port), self.upstream))
        if self.schedule.phases and not self.await_start:
            self.start_clock(time.time() if self.t0 is None else self.t0)
        return self.port

    def start_clock(self, t0: float) -> None:
        """Count the schedule from ``t0`` (Unix s) from now on; a clock already running is
        replaced (the toxics then follow the new one at once)."""
        self.t0 = t0
        self.await_start = False
        if self._clock is not None:
            self._clock.cancel()
        if self.schedule.phases and not self._stopping:
            self._clock = self.spawn(self._run_schedule())

    def set_toxics(
        self, toxics: Sequence[Toxic | Mapping[str, Any]], phase: str | None = None
    ) -> None:
        """Put these toxics in force now, on new connections and on every open one."""
        self._toxics = tuple(check_toxics(toxics))
        self.phase = phase
        for conn in list(self._conns):
            conn.apply(self._toxics)

    async def _run_schedule(self) -> None:
        """Switch toxics at every phase boundary; returns after the last phase ends."""
        assert self.t0 is not None
        phases = self.schedule.phases
        bounds = sorted({p.start for p in phases} | {p.end for p in phases})
        current: ProxyPhase | None = None
        for i in range(4 * len(bounds) + 10):  # each turn passes a boundary (or wakes early)
            now = time.time() - self.t0
            phase = self.schedule.phase_at(now)
            if i == 0 or phase is not current:
                self.set_toxics(phase.toxics if phase else [], phase.name if phase else None)
                current = phase
            later = [b for b in bounds if b > now]
            if not later:
                return
            await asyncio.sleep(later[0] - now + 0.001)

    async def stop(self) -> None:
        """Stop accepting, close every connection (aborting any still open after 2 s)."""
        self._stopping = True
        for server in self._servers:
            server.close()
        conns = list(self._conns)
        for conn in conns:
            conn.close()
        if conns:
            await asyncio.wait([c.done for c in conns], timeout=2.0)
        for conn in list(self._conns):
            conn.abort()
        tasks = [t for t in self._tasks if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=2.0)
        for server in self._servers:
            await server.wait_closed()
        await asyncio.sleep(0)  # let the aborted transports' connection_lost callbacks run
        self.timer.close()

    # -- observability

    def metrics_text(self) -> str:
        """The counters in Prometheus text format (0.0.4)."""
        s, phase = self.stats, self.phase or "none"
        families: list[tuple[str, str, str, dict[str, int]]] = [
            ("connections_total", "counter", "Connections accepted.", {"": s.connections_total}),
            ("connections_active", "gauge", "Connections open now.", {"": s.connections_active}),
            ("bytes_total", "counter", "Bytes forwarded; upstream = client to dependency.",
             {f'{{stream="{d}"}}': n for d, n in s.bytes.items()}),
            ("toxics_applied_total", "counter", "Toxics that hit a connection (per activation).",
             {f'{{toxic="{t}"}}': n for t, n in sorted(s.toxics_applied.items())}),
            ("upstream_errors_total", "counter", "Upstream unreachable.", {"": s.upstream_errors}),
            ("refused_total", "counter", "Connections refused.", {"": s.refused}),
            ("out_of_files_total", "counter", "Times no file descriptor was left.",
             {"": self.files.hits}),
            ("toxics_in_force", "gauge", "Toxics in force now (the phase's).",
             {"": len(self._toxics)}),
            ("phase", "gauge", "Schedule phase in force.", {f'{{phase="{phase}"}}': 1}),
        ]  # fmt: skip
        out: list[str] = []
        for name, kind, help_, samples in families:
            out += [f"# HELP proxy_{name} {help_}", f"# TYPE proxy_{name} {kind}"]
            out += [f"proxy_{name}{labels} {value}" for labels, value in samples.items()]
        return "\n".join(out) + "\n"

    async def serve_metrics(
        self, port: int = 0, host: str = "127.0.0.1", sock: socket.socket | None = None
    ) -> int:
        """Serve the control routes on a loopback port (or an inherited listening ``sock``);
        return the port. ``GET /metrics`` (Prometheus text), ``GET /health`` and ``POST
        /__admin/start {"t0": UNIX_S}`` (the schedule's clock, ``start_clock``)."""
        if sock is not None:
            host = str(sock.getsockname()[0])
        if not is_loopback(host):
            raise AddressError(f"metrics host {host}: only loopback addresses are allowed")
        try:
            if sock is None:
                family = socket.AF_INET6 if ":" in host else socket.AF_INET
                sock = socket.create_server((host, port), family=family)
            server = await asyncio.start_server(self._http, sock=self.files.guard(sock))
        except OSError as exc:
            raise RunError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        self._servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    def _answer(self, head: bytes, body: bytes) -> tuple[str, str, bytes]:
        """Status, content type and body for one control request."""
        if head.startswith((b"GET /metrics ", b"GET /metrics?")):
            return "200 OK", "text/plain; version=0.0.4", self.metrics_text().encode()
        if head.startswith(b"GET /health "):
            return "200 OK", "application/json", b'{"status": "UP"}'
        if head.startswith(b"POST /__admin/start "):
            try:
                t0 = _t0(body)
            except ValueError as exc:
                said = json.dumps({"error": f'body must be JSON such as {{"t0": 1.7e9}} ({exc})'})
                return "400 Bad Request", "application/json", said.encode()
            self.start_clock(t0)
            return "200 OK", "application/json", json.dumps({"t0": t0}).encode()
        return (
            "404 Not Found",
            "text/plain",
            b"here: GET /metrics, GET /health, POST /__admin/start\n",
        )

    async def _http(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(5):
                head = await reader.readuntil(b"\r\n\r\n")
                length = _content_length(head)
                if length > _BODY_LIMIT:
                    raise ConnectionError("body too long")
                data = await reader.readexactly(length) if length else b""
            code, kind, body = self._answer(head, data)
            writer.write(
                f"HTTP/1.1 {code}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
                f"Connection: close\r\n\r\n".encode() + body
            )  # fmt: skip
            await writer.drain()
        except _HTTP_ERRORS:
            pass  # a slow, broken or oversized request gets no answer
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


def _content_length(head: bytes) -> int:
    """A request head's ``Content-Length`` (0 without one; a malformed one is a broken
    request: ``ConnectionError``, answered nothing)."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            if not value.strip().isdigit():
                raise ConnectionError("malformed Content-Length")
            return int(value.strip())
    return 0


def _t0(body: bytes) -> float:
    """``t0`` from a ``/__admin/start`` body: finite Unix seconds; now without a body or key."""
    if not body.strip():
        return time.time()
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError("not JSON") from None
    if not isinstance(data, dict) or "t0" not in data:
        return time.time()
    value = data["t0"]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"t0 must be a number of Unix seconds, not {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"t0 must be a finite number of Unix seconds, not {value!r}")
    return float(value)


def _own_upstream(listen: tuple[str, int], upstream: tuple[str, int]) -> str:
    return (
        f"listen {listen[0]}:{listen[1]} is its own upstream {upstream[0]}:{upstream[1]}: "
        "every connection would connect back to the proxy, fanning out until it runs out "
        "of files; give --upstream the dependency's address and --listen another port"
    )
