"""A Toxiproxy-style TCP fault proxy: break a *real* dependency on loopback, on a schedule.

``harness pg`` plays a fake gateway; this proxy sits in front of a real one (a
database, a sandbox gateway on loopback) and damages the bytes on their way
with Toxiproxy's toxics (https://github.com/Shopify/toxiproxy#toxics):
latency, bandwidth, slow-close, timeout, reset-peer, slicer, limit-data. A
YAML schedule turns toxics on and off by phase, like a scenario's
``pg.phases``; a change applies to connections already open too, because a
pool's long-lived connections are what a real outage hits.

Streams, as in Toxiproxy: ``upstream`` is client -> dependency, ``downstream``
(the default) is dependency -> client. A schedule (keys kebab-case, unknown
keys rejected, durations as in scenarios; phases count from the proxy's start
or ``--t0``, and outside every phase no toxic is in force)::

    phases:
      - {name: slow, start: 10s, duration: 30s,
         toxics: [{type: latency, latency: 200ms, jitter: 50ms, toxicity: 0.5}]}
      - {name: partition, start: 60s, duration: 20s, toxics: [{type: timeout, timeout: 0}]}

    python -m harness.proxy --listen 127.0.0.1:15432 --upstream 127.0.0.1:5432
        [--schedule s.yaml] [--seed N] [--t0 UNIX_TIME] [--metrics-port P] [--fd FD]

Repeatable: toxic number ``i`` of the set in force hits connection ``N``
(numbered from 1 in accept order) when ``fate(seed, str(N), 1, str(i)) <
toxicity``; jitter and slice sizes come from a per-connection RNG seeded the
same way. Same seed, same connections, same damage.

Deliberate differences from Toxiproxy: ``timeout`` and ``reset-peer`` *hold*
data (up to 1 MiB, then the source is no longer read: TCP back-pressure)
instead of dropping it, so a connection that outlives the phase resumes intact, as after
a healed partition; ``timeout`` counts from when the toxic came into force on
the connection (not from its last chunk); ``reset-peer`` resets both sockets.

Safety: the listen, upstream and metrics addresses must be loopback.
Speed: with no toxic on a direction, bytes go from one socket's callback
straight into the other socket (no queue, no task); flow control follows the
transports' write buffers. ``--metrics-port`` serves ``GET /metrics``
(Prometheus text) on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import ipaddress
import random
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, cast

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from harness.durations import Duration
from harness.errors import InputError, Problem, RunError, ScenarioError
from harness.faults import fate
from harness.scenario import _KEY, _describe, _index_nodes, _locate, _Model

Direction = Literal["upstream", "downstream"]
Stream = Literal["upstream", "downstream", "both"]

CONNECT_TIMEOUT_S = 5.0
"""A client whose upstream cannot be reached within this is closed (counted)."""
CLOSE_GRACE_S = 10.0
"""A graceful close whose peer never drains our write buffer is aborted after this."""
QUEUE_HIGH, QUEUE_LOW = 1 << 20, 1 << 18
"""Bytes held for toxics on one direction before its source stops being read, and resumes."""
WRITE_HIGH = 1 << 18
"""Per-socket write buffer above which the other socket stops being read (back-pressure)."""
_HTTP_ERRORS = (
    TimeoutError,
    ConnectionError,
    asyncio.IncompleteReadError,
    asyncio.LimitOverrunError,
)
HOLD_LIMIT_S = 600.0
"""Every wait is bounded: a ``timeout: 0`` blackhole closes after this, delays are capped by it."""


class ProxyConfigError(InputError, ValueError):
    """An address or toxic the proxy refuses; the CLI exits 2."""


def is_loopback(host: str) -> bool:
    """True for ``localhost``, 127.0.0.0/8 and ::1: the only places the proxy listens or dials."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_address(text: str, what: str = "address", *, port_zero: bool = True) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) -> (host, port), refusing non-loopback hosts.

    The proxy is a fault injector for local dependencies, never a relay to or
    from other machines, so a wrong address is an input error, not a warning.
    """
    host, sep, port_text = text.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port_text.isdigit():
        raise ProxyConfigError(f"{what} {text!r}: expected HOST:PORT, e.g. 127.0.0.1:5432")
    port = int(port_text)
    if not (0 if port_zero else 1) <= port <= 65535:
        raise ProxyConfigError(f"{what} {text!r}: port out of range")
    if not is_loopback(host):
        raise ProxyConfigError(
            f"{what} {text!r}: only loopback addresses are allowed (127.0.0.0/8, ::1, localhost)"
        )
    return host, port


# ---------------------------------------------------------------- toxics


class _Toxic(_Model):
    """What every toxic has: the chance it hits a connection and the direction it damages."""

    toxicity: float = Field(1.0, ge=0, le=1, description="probability per connection")
    stream: Stream = "downstream"

    def directions(self) -> tuple[Direction, ...]:
        return ("upstream", "downstream") if self.stream == "both" else (self.stream,)


class LatencyToxic(_Toxic):
    """Each chunk leaves ``latency`` +/- ``jitter`` after it arrived (pipelined, like Toxiproxy)."""

    type: Literal["latency"]
    latency: Duration = Field(ge=0, le=HOLD_LIMIT_S)
    jitter: Duration = Field(0.0, ge=0, le=HOLD_LIMIT_S)


class BandwidthToxic(_Toxic):
    """Throughput capped at ``rate`` KB/s (1 KB = 1000 bytes, as Toxiproxy), 100 ms slices."""

    type: Literal["bandwidth"]
    rate: float = Field(ge=1, description="KB/s")


class SlowCloseToxic(_Toxic):
    """The close (EOF) of this stream is passed on ``delay`` late."""

    type: Literal["slow-close"]
    delay: Duration = Field(ge=0, le=HOLD_LIMIT_S)


class TimeoutToxic(_Toxic):
    """No data passes; the connection is closed ``timeout`` after the toxic came into force.

    ``timeout: 0`` is a blackhole that holds the connection open, bounded by
    ``HOLD_LIMIT_S``. Held data flows again if the toxic goes before the close.
    """

    type: Literal["timeout"]
    timeout: Duration = Field(0.0, ge=0, le=HOLD_LIMIT_S)


class ResetPeerToxic(_Toxic):
    """At the first chunk of this stream: hold it, and RST both sockets ``timeout`` later."""

    type: Literal["reset-peer"]
    timeout: Duration = Field(0.0, ge=0, le=HOLD_LIMIT_S)


class SlicerToxic(_Toxic):
    """Data cut into ``average-size`` +/- ``size-variation`` byte writes, ``delay`` apart."""

    type: Literal["slicer"]
    average_size: int = Field(ge=1, le=1 << 20)
    size_variation: int = Field(0, ge=0)
    delay: Duration = Field(0.0, ge=0, le=HOLD_LIMIT_S)

    @model_validator(mode="after")
    def _variation_below_average(self) -> SlicerToxic:
        if self.size_variation >= self.average_size:
            raise ValueError("size-variation must be smaller than average-size")
        return self


class LimitDataToxic(_Toxic):
    """The connection is closed once ``bytes`` bytes passed on this stream."""

    type: Literal["limit-data"]
    bytes: int = Field(ge=0)


Toxic = Annotated[
    LatencyToxic
    | BandwidthToxic
    | SlowCloseToxic
    | TimeoutToxic
    | ResetPeerToxic
    | SlicerToxic
    | LimitDataToxic,
    Field(discriminator="type"),
]


class ToxicSet(_Model):
    """Toxics in force together: at most one of each type per stream (no Toxiproxy chains)."""

    toxics: list[Toxic] = Field(default_factory=list)

    @field_validator("toxics")
    @classmethod
    def _one_per_type_and_stream(cls, toxics: list[Toxic]) -> list[Toxic]:
        seen: set[tuple[str, str]] = set()
        for toxic in toxics:
            for direction in toxic.directions():
                if (toxic.type, direction) in seen:
                    raise ValueError(f"two {toxic.type} toxics on the {direction} stream")
                seen.add((toxic.type, direction))
        return toxics


class ProxyPhase(ToxicSet):
    """A named window of the proxy's time line with its toxics in force."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    start: Duration = Field(ge=0)
    duration: Duration = Field(gt=0)

    @property
    def end(self) -> float:
        return self.start + self.duration


class Schedule(_Model):
    """Phases counted from the proxy's start (or ``--t0``); outside every phase, no toxics."""

    phases: list[ProxyPhase] = Field(default_factory=list)

    @field_validator("phases")
    @classmethod
    def _no_overlap(cls, phases: list[ProxyPhase]) -> list[ProxyPhase]:
        ordered = sorted(phases, key=lambda p: p.start)
        for a, b in zip(ordered, ordered[1:], strict=False):
            if b.start < a.end:
                raise ValueError(f"phase {b.name!r} starts before phase {a.name!r} ends")
        names = [p.name for p in phases]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"phase names must be unique, repeated: {dupes}")
        return ordered

    def phase_at(self, t_s: float) -> ProxyPhase | None:
        return next((p for p in self.phases if p.start <= t_s < p.end), None)


def load_schedule_text(text: str, file: str = "<schedule>") -> Schedule:
    """Validate schedule YAML; raise ``ScenarioError`` listing every problem (file:line:col)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
        raise ScenarioError(
            [Problem(file, line, col, "", f"not valid YAML: {exc.problem}")]
        ) from None
    if root is None or not isinstance(data, dict):
        raise ScenarioError([Problem(file, 1, 1, "", "expected a mapping with a phases: list")])
    problems: list[Problem] = []
    index: dict[tuple[str | int, ...], yaml.Node] = {}
    _index_nodes(root, (), index, problems, file)
    try:
        schedule = Schedule.model_validate(data)
    except ValidationError as exc:
        for error in exc.errors():
            loc = tuple(error["loc"])
            path, node = _locate(loc, index)
            if error["type"] == "extra_forbidden":
                node = index.get((*path, _KEY), node)
            shown = ".".join(
                str(p) for p in (path + loc[-1:] if error["type"] == "missing" else path)
            )
            message = _describe(error).replace("docs/scenario.md", "harness/proxy.py")
            mark = node.start_mark
            problems.append(Problem(file, mark.line + 1, mark.column + 1, shown, message))
        raise ScenarioError(problems) from None
    if problems:
        raise ScenarioError(problems)
    return schedule


def load_schedule(path: str | Path) -> Schedule:
    """Read and validate a schedule file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(
            [Problem(str(path), None, None, "", f"cannot read: {exc.strerror}")]
        ) from None
    return load_schedule_text(text, str(path))


# ---------------------------------------------------------------- connections


@dataclass
class Stats:
    """Counters since start; ``Proxy.metrics_text`` renders them for Prometheus."""

    connections_total: int = 0
    connections_active: int = 0
    refused: int = 0
    upstream_errors: int = 0
    bytes: dict[str, int] = field(default_factory=lambda: {"upstream": 0, "downstream": 0})
    toxics_applied: collections.Counter[str] = field(default_factory=collections.Counter)


class _Refuse(asyncio.Protocol):
    """Accepted while stopping or over ``max_connections``: dropped at once."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        cast(asyncio.Transport, transport).abort()


class _Side(asyncio.Protocol):
    """One socket of a proxied connection; every event is handed to the connection."""

    def __init__(self, conn: _Connection) -> None:
        self.conn = conn
        self.transport: asyncio.Transport | None = None
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(high=WRITE_HIGH)
        self.conn.made(self)

    def data_received(self, data: bytes) -> None:
        self.conn.received(self, data)

    def eof_received(self) -> bool:
        self.conn.eof(self)
        return True  # keep the socket open: half-close is passed on, not turned into a close

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.conn.lost(exc)

    def pause_writing(self) -> None:
        self.conn.writable(self, False)

    def resume_writing(self) -> None:
        self.conn.writable(self, True)


class _Flow:
    """One direction of a connection: the toxics on it and the chunks they hold back."""

    def __init__(self, direction: Direction, src: _Side, dst: _Side) -> None:
        self.direction = direction
        self.src, self.dst = src, dst
        self.toxics: dict[str, Toxic] = {}
        self.slow_close = 0.0
        self.queue: collections.deque[tuple[float, bytes]] = collections.deque()  # b"" = EOF
        self.queued = 0
        self.passed = 0  # bytes since the toxics came into force (limit-data)
        self.next_send = 0.0  # bandwidth pacing cursor (loop time)
        self.wake = asyncio.Event()
        self.can_write = asyncio.Event()
        self.can_write.set()
        self.pauses: set[str] = set()
        self.task: asyncio.Task[None] | None = None
        self.eof_sent = False

    def pause(self, reason: str) -> None:
        if not self.pauses and self.src.transport is not None:
            self.src.transport.pause_reading()
        self.pauses.add(reason)

    def resume(self, reason: str) -> None:
        if reason in self.pauses:
            self.pauses.discard(reason)
            if not self.pauses and self.src.transport is not None:
                self.src.transport.resume_reading()


class _Connection:
    """A client socket, its upstream socket and the two flows between them."""

    def __init__(self, proxy: Proxy) -> None:
        proxy._last_id += 1
        self.proxy = proxy
        self.id = proxy._last_id
        self.key = str(self.id)
        self.loop = asyncio.get_running_loop()
        self.client, self.server = _Side(self), _Side(self)
        self.up = _Flow("upstream", self.client, self.server)
        self.down = _Flow("downstream", self.server, self.client)
        self.rng = random.Random(fate(proxy.seed, self.key, 1, "rng"))
        self.closed = False
        self.changed = asyncio.Event()  # replaced (old one set) whenever toxics change
        self.timers: list[asyncio.TimerHandle] = []
        self.reset_timer: asyncio.TimerHandle | None = None
        self.connecting: asyncio.Task[None] | None = None
        self.done: asyncio.Future[None] = self.loop.create_future()

    # -- socket events

    def made(self, side: _Side) -> None:
        if side is self.server:
            if self.down.pauses and side.transport is not None:
                side.transport.pause_reading()
            return
        self.up.pause("connect")  # nothing is read from the client until upstream answers
        self.proxy._conns.add(self)
        self.proxy.stats.connections_total += 1
        self.proxy.stats.connections_active += 1
        self.apply(self.proxy.toxics)
        self.connecting = self.proxy._spawn(self._connect())

    async def _connect(self) -> None:
        host, port = self.proxy.upstream
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                await self.loop.create_connection(lambda: self.server, host, port)
        except (OSError, TimeoutError):
            self.proxy.stats.upstream_errors += 1
            self.close()
        else:
            self.up.resume("connect")
        finally:
            self.connecting = None
            transport = self.server.transport
            if self.closed and transport is not None and not transport.is_closing():
                transport.close()
            self._maybe_finish()

    def received(self, side: _Side, data: bytes) -> None:
        if self.closed:
            return
        flow = self.up if side is self.client else self.down
        if not flow.queue and not flow.toxics and flow.dst.transport is not None:
            flow.dst.transport.write(data)  # the fast path: no toxic, nothing held back
            self.proxy.stats.bytes[flow.direction] += len(data)
            return
        flow.queue.append((self.loop.time(), data))
        flow.queued += len(data)
        if flow.queued > QUEUE_HIGH:
            flow.pause("queue")
        self._wake(flow)

    def eof(self, side: _Side) -> None:
        if self.closed:
            return
        flow = self.up if side is self.client else self.down
        if not flow.queue and not flow.toxics and not flow.slow_close:
            self._send_eof(flow)
        else:
            flow.queue.append((self.loop.time(), b""))
            self._wake(flow)

    def lost(self, exc: Exception | None) -> None:
        if not self.closed:
            if exc is None:
                self.close()
            else:
                self.reset()  # one side was reset or broke: so is the other, as on a wire
        self._maybe_finish()

    def writable(self, side: _Side, ok: bool) -> None:
        flow = self.down if side is self.client else self.up
        if ok:
            flow.can_write.set()
            flow.resume("dst")
        else:
            flow.can_write.clear()
            flow.pause("dst")

    # -- toxics

    def apply(self, toxics: Sequence[Toxic]) -> None:
        """Decide which toxics hit this connection (seeded per connection and index); arm them."""
        for handle in self.timers:
            handle.cancel()
        self.timers.clear()
        if self.reset_timer is not None:
            self.reset_timer.cancel()
            self.reset_timer = None
        seed = self.proxy.seed
        hit = [t for i, t in enumerate(toxics) if fate(seed, self.key, 1, str(i)) < t.toxicity]
        for flow in (self.up, self.down):
            on = [t for t in hit if flow.direction in t.directions()]
            flow.toxics = {t.type: t for t in on if not isinstance(t, SlowCloseToxic)}
            flow.slow_close = max((t.delay for t in on if isinstance(t, SlowCloseToxic)), default=0)
            flow.passed = 0
        for toxic in hit:
            self.proxy.stats.toxics_applied[toxic.type] += 1
            if isinstance(toxic, TimeoutToxic):
                delay = toxic.timeout or HOLD_LIMIT_S
                self.timers.append(self.loop.call_later(delay, self.close))
        old, self.changed = self.changed, asyncio.Event()
        old.set()

    def _wake(self, flow: _Flow) -> None:
        if flow.task is None:
            flow.task = self.proxy._spawn(self._pump(flow))
        flow.wake.set()

    async def _pump(self, flow: _Flow) -> None:
        """Deliver held chunks in order through the flow's toxics, until the connection ends."""
        while not self.closed:
            if not flow.queue:
                flow.wake.clear()
                await flow.wake.wait()
                continue
            arrived, data = flow.queue[0]
            if data:
                await self._deliver(flow, arrived, data)
            elif flow.slow_close:
                await asyncio.sleep(flow.slow_close)
            if self.closed:
                return
            flow.queue.popleft()
            flow.queued -= len(data)
            if flow.queued <= QUEUE_LOW:
                flow.resume("queue")
            if not data:
                self._send_eof(flow)
                return

    async def _deliver(self, flow: _Flow, arrived: float, data: bytes) -> None:
        while "timeout" in flow.toxics or "reset-peer" in flow.toxics:
            reset = flow.toxics.get("reset-peer")
            if isinstance(reset, ResetPeerToxic) and self.reset_timer is None:
                self.reset_timer = self.loop.call_later(reset.timeout, self.reset)
            await self.changed.wait()  # held until the toxics change or the connection ends
            if self.closed:
                return
        toxics = flow.toxics
        limit, last = toxics.get("limit-data"), False
        if isinstance(limit, LimitDataToxic) and len(data) >= limit.bytes - flow.passed:
            data, last = data[: max(0, limit.bytes - flow.passed)], True
        latency = toxics.get("latency")
        if isinstance(latency, LatencyToxic):
            delay = latency.latency + self.rng.uniform(-latency.jitter, latency.jitter)
            wait = arrived + delay - self.loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
        slicer, bandwidth = toxics.get("slicer"), toxics.get("bandwidth")
        pieces = [data]
        if isinstance(slicer, SlicerToxic):
            pieces, at = [], 0
            while at < len(data):  # each slice is at least one byte long
                var = slicer.size_variation
                size = slicer.average_size + self.rng.randint(-var, var)
                pieces.append(data[at : at + size])
                at += size
        if isinstance(bandwidth, BandwidthToxic):  # Toxiproxy's 100 ms slices
            step = max(1, int(bandwidth.rate * 100))
            pieces = [p[i : i + step] for p in pieces for i in range(0, len(p), step)]
        for piece in pieces:
            if isinstance(slicer, SlicerToxic) and slicer.delay > 0:
                await asyncio.sleep(slicer.delay)
            if isinstance(bandwidth, BandwidthToxic):
                now = self.loop.time()
                flow.next_send = max(flow.next_send, now) + len(piece) / (bandwidth.rate * 1000)
                await asyncio.sleep(flow.next_send - now)
            if not await self._write(flow, piece):
                return
        if last:
            self.close()

    async def _write(self, flow: _Flow, data: bytes) -> bool:
        if not flow.can_write.is_set():
            await flow.can_write.wait()
        dst = flow.dst.transport
        if self.closed or dst is None or dst.is_closing():
            return False
        dst.write(data)
        flow.passed += len(data)
        self.proxy.stats.bytes[flow.direction] += len(data)
        return True

    # -- endings

    def _send_eof(self, flow: _Flow) -> None:
        flow.eof_sent = True
        if self.up.eof_sent and self.down.eof_sent:
            self.close()
            return
        dst = flow.dst.transport
        if dst is not None and not dst.is_closing() and dst.can_write_eof():
            dst.write_eof()

    def _end(self) -> None:
        self.closed = True
        for handle in self.timers:
            handle.cancel()
        self.timers.clear()
        if self.reset_timer is not None:
            self.reset_timer.cancel()
        current = asyncio.current_task()
        for task in (self.up.task, self.down.task, self.connecting):
            if task is not None and task is not current:
                task.cancel()
        for flow in (self.up, self.down):
            flow.can_write.set()
        self.changed.set()

    def close(self) -> None:
        """Graceful: flush the sockets' buffers, then FIN; chunks held by toxics are dropped."""
        if self.closed:
            return
        self._end()
        for side in (self.client, self.server):
            if side.transport is not None:
                side.transport.close()
        self.timers.append(self.loop.call_later(CLOSE_GRACE_S, self.abort))
        self._maybe_finish()

    def reset(self) -> None:
        """TCP RST on both sockets: SO_LINGER 0, then close (what reset-peer does)."""
        if self.closed:
            return
        self._end()
        for side in (self.client, self.server):
            if side.transport is not None:
                sock = side.transport.get_extra_info("socket")
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.setsockopt(
                            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                        )
        self.abort()

    def abort(self) -> None:
        self._end()
        for side in (self.client, self.server):
            if side.transport is not None:
                side.transport.abort()
        self._maybe_finish()

    def _maybe_finish(self) -> None:
        sides_gone = all(s.transport is None or s.lost for s in (self.client, self.server))
        if self.closed and sides_gone and self.connecting is None and not self.done.done():
            for handle in self.timers:
                handle.cancel()
            self.proxy._conns.discard(self)
            self.proxy.stats.connections_active -= 1
            self.done.set_result(None)


# ---------------------------------------------------------------- the proxy


class Proxy:
    """A TCP proxy from a loopback listen address to a loopback upstream, with toxics.

    Library use: ``port = await proxy.start()``, ``proxy.set_toxics([...])``,
    ``await proxy.stop()``. With a ``schedule``, its phases set the toxics.
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
    ) -> None:
        if sock is not None:
            host, port = sock.getsockname()[:2]
            if not is_loopback(host):
                raise ProxyConfigError(f"listen socket {host}:{port} is not on a loopback address")
            self.listen: tuple[str, int] = (host, port)
        else:
            host, port = parse_address(listen, "listen")
            self.listen = ("127.0.0.1" if host.lower() == "localhost" else host, port)
        self.upstream = parse_address(upstream, "upstream", port_zero=False)
        self.seed = seed
        self.schedule = schedule or Schedule()
        self.t0 = t0
        self.max_connections = max_connections
        self.stats = Stats()
        self.phase: str | None = None
        self.port: int | None = None
        self._sock = sock
        self._toxics: tuple[Toxic, ...] = ()
        self._conns: set[_Connection] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_id = 0
        self._servers: list[asyncio.Server] = []
        self._stopping = False

    @property
    def toxics(self) -> tuple[Toxic, ...]:
        return self._toxics

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.create_task(coro)
        self._tasks.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self._tasks.discard)
        return task

    def _accept(self) -> asyncio.Protocol:
        if self._stopping or len(self._conns) >= self.max_connections:
            self.stats.refused += 1
            return _Refuse()
        return _Connection(self).client

    async def start(self) -> int:
        """Listen (and start the schedule's clock unless ``t0`` was given); return the port."""
        loop = asyncio.get_running_loop()
        host, port = self.listen
        try:
            if self._sock is not None:
                server = await loop.create_server(self._accept, sock=self._sock, backlog=4096)
            else:
                server = await loop.create_server(self._accept, host, port, backlog=4096)
        except OSError as exc:
            raise RunError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        self._servers.append(server)
        self.port = int(server.sockets[0].getsockname()[1])
        if self.schedule.phases:
            self.t0 = time.time() if self.t0 is None else self.t0
            self._spawn(self._run_schedule())
        return self.port

    def set_toxics(
        self, toxics: Sequence[Toxic | Mapping[str, Any]], phase: str | None = None
    ) -> None:
        """Put these toxics in force now, on new connections and on every open one."""
        try:
            checked = ToxicSet.model_validate({"toxics": list(toxics)}).toxics
        except ValidationError as exc:
            raise ProxyConfigError(f"invalid toxics: {exc}") from None
        self._toxics = tuple(checked)
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
            ("phase", "gauge", "Schedule phase in force.", {f'{{phase="{phase}"}}': 1}),
        ]  # fmt: skip
        out: list[str] = []
        for name, kind, help_, samples in families:
            out += [f"# HELP proxy_{name} {help_}", f"# TYPE proxy_{name} {kind}"]
            out += [f"proxy_{name}{labels} {value}" for labels, value in samples.items()]
        return "\n".join(out) + "\n"

    async def serve_metrics(self, port: int = 0, host: str = "127.0.0.1") -> int:
        """Serve ``GET /metrics`` (Prometheus text) on a loopback port; return the port."""
        if not is_loopback(host):
            raise ProxyConfigError(f"metrics host {host}: only loopback addresses are allowed")
        try:
            server = await asyncio.start_server(self._http, host, port)
        except OSError as exc:
            raise RunError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        self._servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    async def _http(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(5):
                head = await reader.readuntil(b"\r\n\r\n")
            ok = head.startswith((b"GET /metrics ", b"GET /metrics?"))
            body = self.metrics_text().encode() if ok else b"only GET /metrics here\n"
            code, kind = (
                ("200 OK", "text/plain; version=0.0.4") if ok else ("404 Not Found", "text/plain")
            )
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


# ---------------------------------------------------------------- process entry


def _announce(line: str) -> None:
    print(line, flush=True)


async def run_until_signalled(
    proxy: Proxy, metrics_port: int | None = None, announce: Callable[[str], None] = _announce
) -> None:
    """Run until SIGTERM or SIGINT, then close every connection."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signals = (signal.SIGTERM, signal.SIGINT)
    for sig in signals:
        loop.add_signal_handler(sig, stop.set)
    try:
        port = await proxy.start()
        line = f"proxy {proxy.listen[0]}:{port} -> {proxy.upstream[0]}:{proxy.upstream[1]}"
        if metrics_port is not None:
            line += f"; metrics http://127.0.0.1:{await proxy.serve_metrics(metrics_port)}/metrics"
        if proxy.schedule.phases:
            line += f"; {len(proxy.schedule.phases)} phase(s) from t0={proxy.t0:.3f}"
        announce(line + "; SIGTERM or Ctrl-C stops")
        await stop.wait()
    finally:
        await proxy.stop()
        for sig in signals:
            loop.remove_signal_handler(sig)


def serve(
    proxy: Proxy, metrics_port: int | None = None, announce: Callable[[str], None] = _announce
) -> None:
    """Blocking: run the proxy in its own event loop until SIGTERM/SIGINT."""
    asyncio.run(run_until_signalled(proxy, metrics_port, announce))


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m harness.proxy``: exit 2 on bad input, 3 if it cannot listen."""
    parser = argparse.ArgumentParser(
        prog="python -m harness.proxy", description="TCP fault proxy (loopback only)"
    )
    parser.add_argument("--listen", default="127.0.0.1:0", help="loopback HOST:PORT (port 0: any)")
    parser.add_argument("--upstream", required=True, help="loopback HOST:PORT to forward to")
    parser.add_argument("--schedule", help="YAML: phases: [{name, start, duration, toxics}]")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--t0", type=float, default=None, help="Unix time phases count from")
    parser.add_argument("--metrics-port", type=int, default=None)
    parser.add_argument("--fd", type=int, help="an already bound, listening socket")
    args = parser.parse_args(argv)
    sock = socket.socket(fileno=args.fd) if args.fd is not None else None
    try:
        schedule = load_schedule(args.schedule) if args.schedule else None
        proxy = Proxy(
            args.listen, args.upstream, seed=args.seed, schedule=schedule, t0=args.t0, sock=sock
        )
    except InputError as exc:
        if sock is not None:
            sock.close()
        problems = exc.problems if isinstance(exc, ScenarioError) else [exc]
        for problem in problems:
            print(f"error {problem}", file=sys.stderr)
        raise SystemExit(2) from None
    try:
        serve(proxy, args.metrics_port)
    except RunError as exc:
        print(f"error {exc}", file=sys.stderr)
        raise SystemExit(3) from None


if __name__ == "__main__":
    main()
