"""One proxied connection: bytes from socket to socket, with the toxics in force applied.

With no toxic on a direction, bytes go from one socket's callback straight
into the other socket (no queue, no task); flow control follows the
transports' write buffers. With toxics, a direction's bytes pass through a
queue (``_Flow``) that delays, slices, throttles, holds or cuts them.

A connection talks to the proxy that accepted it only through ``Host``, so
this module knows nothing of the server around it.
"""

from __future__ import annotations

import asyncio
import collections
import random
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from harness.core.fate import fate
from harness.core.net import OUT_OF_FILES, arm_reset
from harness.core.precise_timer import PreciseTimer
from harness.scenario.toxics import (
    HOLD_LIMIT_S,
    BandwidthToxic,
    Direction,
    LatencyToxic,
    LimitDataToxic,
    ResetPeerToxic,
    SlicerToxic,
    SlowCloseToxic,
    TimeoutToxic,
    Toxic,
)

CONNECT_TIMEOUT_S = 5.0
"""A client whose upstream cannot be reached within this is closed (counted)."""
CLOSE_GRACE_S = 10.0
"""A graceful close whose peer never drains our write buffer is aborted after this."""
QUEUE_HIGH, QUEUE_LOW = 1 << 20, 1 << 18
"""Bytes held for toxics on one direction before its source stops being read, and resumes."""
WRITE_HIGH = 1 << 18
"""Per-socket write buffer above which the other socket stops being read (back-pressure)."""

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


class Host(Protocol):
    """What a connection needs from the proxy that accepted it (``Proxy`` is one)."""

    @property
    def seed(self) -> int: ...

    @property
    def upstream(self) -> tuple[str, int]: ...

    @property
    def stats(self) -> Stats: ...

    @property
    def timer(self) -> PreciseTimer: ...

    @property
    def toxics(self) -> tuple[Toxic, ...]:
        """The toxics in force now, for a connection that just opened."""
        ...

    def next_id(self) -> int:
        """A number for a new connection: 1, 2, ... in accept order (it seeds the fates)."""
        ...

    def register(self, conn: Connection) -> None:
        """A connection opened: toxics that change reach it; ``stop`` closes it."""
        ...

    def unregister(self, conn: Connection) -> None:
        """A connection is over (both sockets gone)."""
        ...

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run a task that the host keeps alive and cancels when it stops."""
        ...

    def out_of_files(self) -> None:
        """A connection could not open its upstream socket: no file descriptor was left."""
        ...


class Refuser(asyncio.Protocol):
    """Accepted while stopping or over ``max_connections``: dropped at once."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        cast(asyncio.Transport, transport).abort()


class _Side(asyncio.Protocol):
    """One socket of a proxied connection; every event is handed to the connection."""

    def __init__(self, conn: Connection) -> None:
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


class Connection:
    """A client socket, its upstream socket and the two flows between them."""

    def __init__(self, proxy: Host) -> None:
        self.proxy = proxy
        self.id = proxy.next_id()
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
        self.proxy.register(self)
        self.proxy.stats.connections_total += 1
        self.proxy.stats.connections_active += 1
        self.apply(self.proxy.toxics)
        self.connecting = self.proxy.spawn(self._connect())

    async def _connect(self) -> None:
        host, port = self.proxy.upstream
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                await self.loop.create_connection(lambda: self.server, host, port)
        except (OSError, TimeoutError) as exc:
            self.proxy.stats.upstream_errors += 1
            if isinstance(exc, OSError) and exc.errno in OUT_OF_FILES:
                self.proxy.out_of_files()
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
            flow.task = self.proxy.spawn(self._pump(flow))
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
            await self.proxy.timer.sleep_until(arrived + delay)  # loop.time() is monotonic
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
            arm_reset(side.transport)
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
            self.proxy.unregister(self)
            self.proxy.stats.connections_active -= 1
            self.done.set_result(None)
