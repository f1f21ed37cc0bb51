"""A lean HTTP/1.1 client for forward mode: one upstream, a pool of kept-alive connections.

Forward mode (``dependencies.<name>.forward``) passes every call on to one real
upstream on loopback. aiohttp's ``ClientSession`` costs more CPU a call than the
rest of the gateway together (URL objects, header multidicts, cookie and redirect
handling, a stream reader), so forward mode speaks HTTP/1.1 itself, on an
``asyncio.Protocol`` per connection:

- the request goes out as given: method, raw path and query, the headers' own
  bytes (the caller drops the hop-by-hop ones), ``Host`` set to the upstream's,
  ``Content-Length`` when there is a body (or the method carries one: POST, PUT,
  PATCH), nothing else added;
- the answer is read whole: framed by ``Content-Length``, by ``Transfer-Encoding:
  chunked`` (decoded; trailers dropped), or, with neither, by the connection's
  close; a HEAD's answer, 1xx, 204 and 304 have no body (1xx interim answers are
  skipped); the body's bytes are not decoded (``Content-Encoding`` passes as is);
  redirects are answers like any other;
- a connection is kept for the next call unless either side said
  ``Connection: close`` (or HTTP/1.0 without keep-alive), the answer ran to the
  close, or it was idle longer than ``IDLE_S``;
- anything that goes wrong (refused, reset, closed mid-answer, an answer that is
  not HTTP, ``timeout_s`` over) is an ``UpstreamError``, which the caller answers
  502.

Retry rule (``Upstream.request``): a kept-alive connection may have been closed
by the upstream between two calls (its idle timeout) just as a request is
written on it. A call is sent again, once, on a fresh connection only when it
went out on a reused connection, the connection closed before a single byte of
the answer came back, and resending cannot do harm: the request was never
written (the close was seen first) or its method is idempotent (RFC 9110 9.2.2:
GET, HEAD, OPTIONS, TRACE, PUT, DELETE). A POST or PATCH whose reused
connection closed under it is a 502, as the upstream may have acted on it.
``IDLE_S`` keeps that race rare: connections idle longer are not reused.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterable
from typing import cast
from urllib.parse import urlsplit

IDLE_S = 1.0
"""A kept-alive connection idle longer than this is closed rather than reused (upstreams
close idle ones after 2 s (gunicorn), 5 s (uvicorn, Node), or more)."""
MAX_IDLE = 256
"""Idle connections kept at most; more are closed when their call ends."""
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})
"""Methods whose request may be sent again (RFC 9110 9.2.2)."""
_BODY_METHODS = frozenset({b"POST", b"PUT", b"PATCH"})
"""Methods that carry a ``Content-Length`` even when their body is empty (as aiohttp did)."""
_SMALL = 64 << 10
"""A request body up to this size goes out with its head in one write."""


class UpstreamError(Exception):
    """The upstream gave no usable answer."""


class _NotSent(UpstreamError):
    """The connection closed before any byte of the answer came back (a retry may help)."""

    def __init__(self, why: str, written: bool = True) -> None:
        super().__init__(why)
        self.written = written
        """Whether the request may have reached the upstream."""


class Answer:
    """The upstream's answer: status, headers (raw, in order), body."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


class _Connection(asyncio.Protocol):
    """One connection to the upstream; reads one answer at a time."""

    def __init__(self, pool: Upstream) -> None:
        self._pool = pool
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reused = False
        self.idle_since = 0.0
        self._buf = bytearray()
        self._waiter: asyncio.Future[Answer] | None = None
        self._head_only = False
        self._got_bytes = False
        self._reset_answer()

    def _reset_answer(self) -> None:
        self._status = 0
        self._headers: list[tuple[str, str]] = []
        self._need = -1  # bytes of body still to come (Content-Length); -1: not known yet
        self._chunked = False
        self._to_close = False  # the body runs to the connection's close
        self._body = bytearray()
        self._chunk_left = -1  # chunked: data bytes left in this chunk (-1: a size line next)
        self._trailers = False
        self._keep = True

    # ------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._pool._forget(self)
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._to_close and self._status:
            self._done()  # an answer framed by the close: complete
            return
        why = f"the connection closed{f' ({exc})' if exc else ''}"
        if not self._got_bytes:
            waiter.set_exception(_NotSent(why + " before the answer began"))
        else:
            waiter.set_exception(UpstreamError(why + " in the middle of the answer"))

    def eof_received(self) -> bool | None:
        return None  # close: connection_lost says what it means

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            self._keep = False  # bytes nobody asked for: the connection is not to be trusted
            if self.transport is not None:
                self.transport.close()
            return
        self._got_bytes = True
        self._buf += data
        try:
            self._parse()
        except UpstreamError as exc:
            self._keep = False
            self._waiter.set_exception(exc)
            if self.transport is not None:
                self.transport.close()

    # ------------------------------------------------------------ one exchange

    def send(self, data: bytes, body: bytes, head_only: bool) -> asyncio.Future[Answer]:
        assert self.transport is not None
        self._waiter = waiter = self._pool.loop.create_future()
        self._head_only, self._got_bytes = head_only, False
        self._reset_answer()
        self._buf.clear()
        if body and len(body) <= _SMALL:
            self.transport.write(data + body)
        else:
            self.transport.write(data)
            if body:
                self.transport.write(body)
        return waiter

    def reusable(self) -> bool:
        transport = self.transport
        return (
            self._keep
            and not self.closed
            and transport is not None
            and not transport.is_closing()
            and not self._buf
            and transport.get_write_buffer_size() == 0
        )

    def _done(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(Answer(self._status, self._headers, bytes(self._body)))

    def _parse(self) -> None:
        buf = self._buf
        while not self._status:  # the head (skipping 1xx interim answers)
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > 1 << 20:
                    raise UpstreamError("the answer's head is over 1 MiB")
                return
            head = bytes(buf[:end])
            del buf[: end + 4]
            self._head(head)
        if self._to_close:
            self._body += buf
            buf.clear()
            return
        if self._chunked:
            self._dechunk()
            return
        if self._need > 0:
            take = min(self._need, len(buf))
            if take == len(buf):
                self._body += buf
                buf.clear()
            else:
                self._body += buf[:take]
                del buf[:take]
            self._need -= take
        if self._need == 0:
            if buf:  # more than its Content-Length: the answer is whole, the connection suspect
                self._keep = False
            self._done()

    def _head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")  # one decode: the bytes as they came
        status_line = lines[0]
        if not status_line.startswith("HTTP/1.") or len(status_line) < 12:
            raise UpstreamError(f"the answer is not HTTP/1.x: {status_line[:40]!r}")
        code = status_line[9:12]
        if not code.isdigit() or code[0] == "0":
            raise UpstreamError(f"a bad status line: {status_line[:40]!r}")
        status = int(code)
        http10 = status_line[7] == "0"
        headers: list[tuple[str, str]] = []
        length: str | None = None
        chunked = False
        connection = ""
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon or not name or name[-1] in " \t":
                raise UpstreamError(f"a bad header line: {line[:40]!r}")
            value = value.strip(" \t")
            headers.append((name, value))
            lower = name.lower()
            if lower == "content-length":
                if length is not None and length != value:
                    raise UpstreamError("two different Content-Length headers")
                length = value
            elif lower == "transfer-encoding":
                chunked = value.lower().rsplit(",", 1)[-1].strip() == "chunked"
            elif lower == "connection":
                connection += "," + value.lower()
        if 100 <= status < 200:
            if status == 101:
                raise UpstreamError("the upstream switched protocols (101)")
            return  # an interim answer (100 Continue, 103 Early Hints): the real one follows
        tokens = {t.strip() for t in connection.split(",")}
        if "close" in tokens or (http10 and "keep-alive" not in tokens):
            self._keep = False
        self._status, self._headers = status, headers
        if self._head_only or status in (204, 304):
            self._need = 0
        elif chunked:
            self._chunked = True
        elif length is not None:
            if not (length.isascii() and length.isdigit()):
                raise UpstreamError(f"a bad Content-Length: {length[:20]!r}")
            self._need = int(length)
        else:
            self._to_close = True
            self._keep = False

    def _dechunk(self) -> None:
        buf = self._buf
        pos = 0
        n = len(buf)
        while True:
            if self._trailers:  # after the last chunk: trailer lines until an empty one
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    break
                empty = end == pos
                pos = end + 2
                if empty:
                    del buf[:pos]
                    if buf:  # more than its last chunk: the connection is suspect
                        self._keep = False
                    self._done()
                    return
                continue
            if self._chunk_left < 0:  # a size line
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    if n - pos > 4096:
                        raise UpstreamError("a chunk size line over 4 KiB")
                    break
                size = bytes(buf[pos:end]).split(b";", 1)[0].strip()
                try:
                    self._chunk_left = int(size, 16)
                except ValueError:
                    raise UpstreamError(f"a bad chunk size: {size[:20]!r}") from None
                if self._chunk_left < 0:
                    raise UpstreamError(f"a bad chunk size: {size[:20]!r}")
                pos = end + 2
                if self._chunk_left == 0:
                    self._trailers = True
                continue
            if self._chunk_left > 0:  # the chunk's data
                take = min(self._chunk_left, n - pos)
                if take == 0:
                    break
                self._body += buf[pos : pos + take]
                pos += take
                self._chunk_left -= take
                if self._chunk_left > 0:
                    break
            if n - pos < 2:  # the CRLF after a chunk's data
                self._chunk_left = 0
                break
            if buf[pos : pos + 2] != b"\r\n":
                raise UpstreamError("a chunk not followed by CRLF")
            pos += 2
            self._chunk_left = -1
        del buf[:pos]


class Upstream:
    """One upstream (``http://host:port``, or https) and its idle kept-alive connections."""

    def __init__(self, base_url: str, timeout_s: float) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{base_url!r} is not an http(s) URL")
        self.ssl = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.ssl else 80)
        default = 443 if self.ssl else 80
        netloc = f"[{self.host}]" if ":" in self.host else self.host
        host_header = netloc if self.port == default else f"{netloc}:{self.port}"
        self._host_line = f"\r\nHost: {host_header}\r\n".encode()
        self.prefix = parts.path.rstrip("/").encode()
        """The base URL's own path, put before each call's path."""
        self.timeout_s = timeout_s
        self._idle: list[_Connection] = []
        self.opened = 0
        """Connections opened so far."""
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def _forget(self, conn: _Connection) -> None:
        if conn in self._idle:
            self._idle.remove(conn)

    async def _connect(self) -> _Connection:
        self.opened += 1
        try:
            _, conn = await self.loop.create_connection(
                lambda: _Connection(self),
                self.host,
                self.port,
                ssl=True if self.ssl else None,
            )
        except OSError as exc:
            raise UpstreamError(f"cannot connect: {type(exc).__name__} {exc}") from exc
        return conn

    def _take(self) -> _Connection | None:
        """The most recently used idle connection still fit for reuse (None: none is)."""
        idle = self._idle
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if conn.reusable() and now - conn.idle_since <= IDLE_S:
                conn.reused = True
                return conn
            if conn.transport is not None:
                conn.transport.close()
        return None

    def _put_back(self, conn: _Connection) -> None:
        if conn.reusable() and len(self._idle) < MAX_IDLE:
            conn.idle_since = time.monotonic()
            conn._waiter = None
            self._idle.append(conn)
        elif conn.transport is not None:
            conn.transport.close()

    def head(self, method: bytes, target: bytes, headers: Iterable[tuple[bytes, bytes]],
             body: bytes) -> bytes:  # fmt: skip
        """The request's head as it goes out: its own headers, ``Host`` and the length added."""
        parts = [method, b" ", self.prefix, target, b" HTTP/1.1", self._host_line]
        for name, value in headers:
            parts += (name, b": ", value, b"\r\n")
        if body or method in _BODY_METHODS:
            parts += (b"Content-Length: ", str(len(body)).encode(), b"\r\n")
        parts.append(b"\r\n")
        return b"".join(parts)

    async def send(self, data: bytes, body: bytes, method: str) -> Answer:
        """Send one call (``data``: its ``head``) and read its whole answer; see the module's
        retry rule. Raises ``UpstreamError``."""
        deadline = self.loop.time() + self.timeout_s
        head_only = method == "HEAD"
        for _ in range(2):
            conn = self._take() or await self._connect()
            try:
                return await self._exchange(conn, data, body, head_only, deadline)
            except _NotSent as exc:
                if not conn.reused or (exc.written and method not in IDEMPOTENT):
                    raise
        raise UpstreamError("the connection closed before the answer began, twice")

    async def _exchange(
        self, conn: _Connection, data: bytes, body: bytes, head_only: bool, deadline: float
    ) -> Answer:
        if conn.closed:
            raise _NotSent("the connection closed before the request was written", written=False)
        waiter = conn.send(data, body, head_only)
        timer = self.loop.call_at(deadline, _expire, waiter, self.timeout_s)
        try:
            answer = await waiter
        except BaseException:
            conn._keep = False
            if conn.transport is not None:
                conn.transport.close()
            raise
        finally:
            timer.cancel()
        self._put_back(conn)
        return answer

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            if conn.transport is not None:
                conn.transport.close()


def _expire(waiter: asyncio.Future[Answer], timeout_s: float) -> None:
    if not waiter.done():
        waiter.set_exception(UpstreamError(f"no answer within {timeout_s:g} s"))
