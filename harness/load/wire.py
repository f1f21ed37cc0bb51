"""HTTP/1.1 on keep-alive connections, as the open-model scheduler needs it: a request, its answer.

Runs only inside Locust processes (it waits on gevent's hub). Why not
Locust's ``FastHttpSession``: per request it builds a urllib-compatible
request, runs a cookie jar, checks each pooled connection with ``select``,
parses every response header in Python callbacks, follows redirects and
fires Locust's request event (statistics the harness never reads). Sampled
with py-spy at 3,000 requests/s, those layers were 39% of the generator's
busy samples, and the generator held 2,000/s on one core where it now holds
15,000/s (benchmarks/README.md, ``generator_ceiling.py``). This client
does what a planned request needs and nothing else:

- per endpoint, a pool of idle keep-alive connections, last in first out;
  when none is idle a new one is opened at once (an open model never waits
  for a connection);
- an idle connection is peeked (non-blocking) before reuse, unless it was
  in use a moment ago: one the server closed, or that holds bytes nobody
  asked for, is dropped;
- an idempotent request (GET, HEAD, PUT, DELETE, OPTIONS, TRACE) whose reused
  connection was closed before any byte of the answer is sent once more on a
  new connection, as geventhttpclient does (RFC 9110 9.2.2); a POST never is;
- bodies by ``Content-Length``, ``chunked`` or until the server closes; 1xx
  interim answers are skipped; HEAD, 204 and 304 have none;
- the whole exchange (connect, send, answer) is bounded by the endpoint's
  timeout, raised as ``TimeoutError``;
- each answer is classed where it is read (``harness.scenario.outcomes``: refused,
  fallback, degraded...) from its status, its headers and, only when a rule of the
  endpoint reads it, its body (kept up to ``MAX_BODY_BYTES``), so no body is ever stored;
- no cookies, no redirects followed (a 3xx is the answer), no compression
  asked for; TLS without certificate checks, as Locust's default.
"""

from __future__ import annotations

import _socket
import email.utils
import errno
import json
import os
import re
import socket
import time
from collections.abc import Collection, Mapping
from typing import Any, NamedTuple
from urllib.parse import quote, urlsplit

import gevent
from gevent import socket as gsocket
from gevent import ssl as gssl

from harness.scenario.outcomes import MAX_BODY_BYTES, Classifier, Outcomes

IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})
MAX_HEAD = 64 * 1024
"""An answer whose status line and headers exceed this is refused (``BadResponse``)."""
_RECV = 65536
_PEEK_AFTER_S = 0.05
"""An idle connection used again within this is not peeked first: under load (reuse within
milliseconds) the peek's system call was 4.8% of the generator's busy samples at 8,000/s,
and no server closes a keep-alive connection that soon (its own ``Connection: close`` is
read with the answer)."""
_PLAIN_TARGET = re.compile(r"[!-~]*")
"""Printable ASCII without spaces: sent as is; anything else is percent-encoded first."""
_TARGET_SAFE = "/:@!$&'()*+,;=?%~[]"


class ConnectionClosed(ConnectionError):
    """The server closed the connection before the whole answer arrived."""


class NoAnswer(ConnectionClosed):
    """The connection broke before any byte of the answer: the server may not have read it."""


class BadResponse(ValueError):
    """The answer is not HTTP/1.x as this client reads it."""


class Answer(NamedTuple):
    status: int
    outcome: str
    """The answer's own name for itself: its ``outcomes.label`` header's value; ``""`` when
    the endpoint names no label header or the answer lacks it."""
    retry_after_s: float | None = None
    """A 429 or 503 answer's ``Retry-After`` in seconds (delta-seconds or an HTTP date);
    None when absent, unreadable, or another status (read only for those two)."""
    kind: str = "success"
    """Its class by the endpoint's outcomes (``harness.scenario.outcomes.CLASSES``)."""


class Endpoint:
    """One endpoint's requests to ``base_url``: the fixed part of every head is built once."""

    def __init__(
        self,
        base_url: str,
        method: str,
        timeout_s: float,
        body: Any = None,
        outcomes: Outcomes | None = None,
        headers: Mapping[str, str] | None = None,
        varying: Collection[str] = (),
        body_varies: bool = False,
    ) -> None:
        """``body``: JSON sent with every request, unless ``body_varies`` (a JSON body given
        to each ``request``); ``headers``: sent with every request; ``varying``: names of
        headers each ``request`` gives. Either replaces the client's own header of that name
        (User-Agent, Content-Type, Accept). ``outcomes``: how its answers are classed
        (resolved; None: the ``default`` preset's)."""
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{base_url!r}: expected an http:// or https:// URL with a host")
        tls = parts.scheme == "https"
        port = parts.port or (443 if tls else 80)
        self.hostname = parts.hostname
        self.addresses: list[tuple[int, Any]] = [
            (family, address)
            for family, _, _, _, address in socket.getaddrinfo(
                parts.hostname, port, type=socket.SOCK_STREAM
            )
        ]
        """Where the host name points (``localhost``: maybe ``::1``, then ``127.0.0.1``); the
        first that takes a connection moves to the front."""
        self.tls: gssl.SSLContext | None = None
        if tls:
            self.tls = gssl.create_default_context()
            self.tls.check_hostname = False
            self.tls.verify_mode = gssl.CERT_NONE
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        if port != (443 if tls else 80):
            host += f":{port}"
        self.method = method.upper()
        self.prefix = parts.path.rstrip("/")
        self.timeout_s = timeout_s
        self.retry = self.method in IDEMPOTENT
        self.bodyless = self.method == "HEAD"
        given = {name.lower() for name in (*(headers or {}), *varying)}
        fixed = f"Host: {host}\r\n"
        if "user-agent" not in given:
            fixed += "User-Agent: harness-load\r\n"
        self.body = b""
        if body is not None and not body_varies:
            self.body = json.dumps(body).encode()
        if body is not None or body_varies:
            for name in ("Content-Type", "Accept"):
                if name.lower() not in given:
                    fixed += f"{name}: application/json\r\n"
        fixed += "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        self.length = ""
        if self.body or self.method in ("POST", "PUT", "PATCH"):
            self.length = f"Content-Length: {len(self.body)}\r\n"
        self.fixed = fixed
        self.classifier = Classifier((outcomes or Outcomes()).resolved())
        self.hub = gevent.get_hub()
        self.idle: list[_Plain | _Tls] = []
        self.opened = 0
        """Connections opened so far (a test's and the benchmark's window into reuse)."""

    # ------------------------------------------------------------ one request

    def request(self, path: str, headers: str = "", body: bytes | None = None) -> Answer:
        """Send one request for ``path`` (``headers``: extra ``Name: value\\r\\n`` lines;
        ``body``: this request's, else the endpoint's).

        Raises ``TimeoutError`` past the timeout, ``OSError`` (refused, reset...),
        ``ConnectionClosed`` or ``BadResponse``.
        """
        if not _PLAIN_TARGET.fullmatch(path):
            path = quote(path, safe=_TARGET_SAFE)
        if body is None:
            body, length = self.body, self.length
        else:
            length = f"Content-Length: {len(body)}\r\n"
        head = f"{self.method} {self.prefix}{path} HTTP/1.1\r\n{self.fixed}{length}{headers}\r\n"
        data = head.encode("latin-1") + body
        timer = gevent.Timeout(self.timeout_s)
        timer.start()
        try:
            return self._exchange(data)
        except gevent.Timeout as exc:
            if exc is not timer:
                raise
            raise TimeoutError(f"no answer in {self.timeout_s:g} s") from None
        finally:
            timer.close()

    def _exchange(self, data: bytes) -> Answer:
        conn, reused = self._connection()
        while True:
            try:
                try:
                    conn.sendall(data)
                except (ConnectionResetError, BrokenPipeError) as exc:
                    raise NoAnswer(str(exc)) from None
                status, outcome, keep, retry_after, kind = self._read(conn)
            except NoAnswer:  # before any byte of the answer: maybe a connection gone stale
                conn.close()
                if reused and self.retry:
                    conn, reused = self._connect(), False
                    continue
                raise
            except BaseException:  # a timeout, a kill, a broken answer: never reuse it
                conn.close()
                raise
            if keep:
                conn.last_used = time.monotonic()
                self.idle.append(conn)
            else:
                conn.close()
            return Answer(status, outcome, retry_after, kind)

    def _connection(self) -> tuple[_Plain | _Tls, bool]:
        """An idle connection that is still open, else a new one; and whether it is reused."""
        idle = self.idle
        if idle:
            now = time.monotonic()
            while idle:
                conn = idle.pop()
                if now - conn.last_used < _PEEK_AFTER_S or conn.open_and_clean():
                    return conn, True
                conn.close()
        return self._connect(), False

    def _connect(self) -> _Plain | _Tls:
        """A new connection, to the first of the host's addresses that takes one."""
        conn: _Plain | _Tls
        for k, (family, address) in enumerate(self.addresses):
            try:
                if self.tls is None:
                    conn = _Plain(self.hub, family, address)
                else:
                    conn = _Tls(self.tls, family, address, self.hostname)
            except OSError:
                if k == len(self.addresses) - 1:
                    raise
                continue
            if k:
                self.addresses.insert(0, self.addresses.pop(k))
            self.opened += 1
            return conn
        raise AssertionError("getaddrinfo returns at least one address")  # pragma: no cover

    def close(self) -> None:
        while self.idle:
            self.idle.pop().close()

    # ------------------------------------------------------------ the answer

    def _read(self, sock: _Plain | _Tls) -> tuple[int, str, bool, float | None, str]:
        """Read one answer off ``sock``: (status, label header, connection reusable,
        Retry-After of a 429/503, class)."""
        try:
            buf = sock.recv_first()
        except (ConnectionResetError, BrokenPipeError) as exc:
            raise NoAnswer(str(exc)) from None
        if not buf:
            raise NoAnswer("the server closed the connection before answering")
        head = rest = b""
        while True:
            end = buf.find(b"\r\n\r\n")
            while end < 0:
                if len(buf) > MAX_HEAD:
                    raise BadResponse(f"an answer's head over {MAX_HEAD} bytes")
                more = sock.recv()
                if not more:
                    raise ConnectionClosed("closed in the middle of an answer's head")
                buf += more
                end = buf.find(b"\r\n\r\n")
            head, rest = buf[: end + 2], buf[end + 4 :]
            if head[:7] != b"HTTP/1." or head[8:9] != b" " or not head[9:12].isdigit():
                raise BadResponse(f"not an HTTP/1.x status line: {head[:40]!r}")
            status = int(head[9:12])
            if 100 <= status < 200 and status != 101:  # interim (100 Continue, 103...)
                buf = rest
                while not buf:
                    buf = sock.recv()
                    if not buf:
                        raise ConnectionClosed("closed after an interim answer")
                continue
            break
        lower = head.lower()
        connection = _field(lower, lower, b"\r\nconnection:")
        # HTTP/1.0 closes unless it says keep-alive; 1.1 keeps it unless it says close.
        keep = b"keep-alive" in connection if head[7:8] == b"0" else b"close" not in connection
        classifier = self.classifier
        outcome = classifier.label(head, lower)
        retry_after = (
            retry_after_s(_field(lower, lower, b"\r\nretry-after:"))
            if status in (429, 503)
            else None
        )
        if self.bodyless or status in (204, 304) or status == 101:
            kind = classifier.classify(status, head, lower, b"")
            return status, outcome, keep and status != 101 and not rest, retry_after, kind
        body: bytearray | None = bytearray() if classifier.reads_body else None
        if b"chunked" in _field(lower, lower, b"\r\ntransfer-encoding:"):
            rest = _skip_chunked(sock, rest, body)
        else:
            length = _field(lower, lower, b"\r\ncontent-length:")
            if not length:  # the body runs until the server closes
                if body is not None:
                    _keep(body, rest)
                while more := sock.recv():
                    if body is not None:
                        _keep(body, more)
                kind = classifier.classify(status, head, lower, _kept(body))
                return status, outcome, False, retry_after, kind
            if not length.isdigit():
                raise BadResponse(f"Content-Length {length!r}")
            left = int(length) - len(rest)
            if body is not None:
                _keep(body, rest if left >= 0 else rest[: int(length)])
            rest = b"" if left >= 0 else b"?"
            while left > 0:
                more = sock.recv(min(left, _RECV))
                if not more:
                    raise ConnectionClosed("closed in the middle of an answer's body")
                left -= len(more)
                if body is not None:
                    _keep(body, more)
        kind = classifier.classify(status, head, lower, _kept(body))
        return status, outcome, keep and not rest, retry_after, kind


def _keep(body: bytearray, data: bytes) -> None:
    """Keep a body's bytes for its rules, up to one byte past ``MAX_BODY_BYTES`` (then it is
    too long to be read: its body conditions do not hold)."""
    room = MAX_BODY_BYTES + 1 - len(body)
    if room > 0:
        body += data[:room]


def _kept(body: bytearray | None) -> bytes | None:
    return None if body is None else bytes(body)


class _Plain:
    """A plain TCP connection driven straight through gevent's hub.

    A non-blocking socket and one read and one write watcher: after sending, it
    waits for the answer before the first ``recv`` (gevent's socket tries the
    ``recv`` first, which fails with EAGAIN nearly every time here) and skips
    the gevent socket's Python layers. At 8,000/s gevent's socket methods were
    35% of the generator's busy samples, system calls included; this class,
    with the other changes measured with it, took the generator from 6,000/s
    to 15,000/s held (``generator_ceiling.py``).
    """

    __slots__ = ("hub", "sock", "read", "write", "last_used")

    def __init__(self, hub: Any, family: int, address: Any) -> None:
        self.hub = hub
        self.last_used = 0.0
        sock = self.sock = _socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            fd = sock.fileno()
            self.read = hub.loop.io(fd, 1)
            self.write = hub.loop.io(fd, 2)
            err = sock.connect_ex(address)
            if err == errno.EINPROGRESS:
                hub.wait(self.write)
                err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                raise OSError(err, os.strerror(err))  # ConnectionRefusedError, ...
        except BaseException:
            self.close()
            raise

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[self.sock.send(view) :]
            except BlockingIOError:
                self.hub.wait(self.write)

    def recv_first(self) -> bytes:
        """The first bytes of an answer just asked for: wait, then read."""
        self.hub.wait(self.read)
        return self.recv()

    def recv(self, size: int = _RECV) -> bytes:
        while True:
            try:
                data: bytes = self.sock.recv(size)
                return data
            except BlockingIOError:
                self.hub.wait(self.read)

    def open_and_clean(self) -> bool:
        """Whether an idle connection can carry a request: not closed, nothing unasked-for."""
        try:
            self.sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return True  # nothing to read: open and clean
        except OSError:
            pass
        return False  # b"" (the server closed it) or bytes nobody asked for

    def close(self) -> None:
        for name in ("read", "write"):
            watcher = getattr(self, name, None)
            if watcher is not None:
                watcher.close()
        self.sock.close()


class _Tls:
    """A TLS connection through gevent's SSL socket (slower; kept simple)."""

    __slots__ = ("sock", "last_used")

    def __init__(self, context: Any, family: int, address: Any, hostname: str) -> None:
        self.last_used = 0.0
        raw = gsocket.socket(family, socket.SOCK_STREAM)
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            raw.connect(address)
            self.sock = context.wrap_socket(raw, server_hostname=hostname)
        except BaseException:
            raw.close()
            raise

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_first(self) -> bytes:
        return self.recv()

    def recv(self, size: int = _RECV) -> bytes:
        data: bytes = self.sock.recv(size)
        return data

    def open_and_clean(self) -> bool:
        probe = _socket.socket(fileno=self.sock.fileno())  # the TCP socket under the TLS one
        try:
            probe.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return True
        except OSError:
            pass
        finally:
            probe.detach()
        return False

    def close(self) -> None:
        self.sock.close()


def retry_after_s(value: bytes, now: float | None = None) -> float | None:
    """``Retry-After`` (RFC 9110 10.2.3) in seconds from ``now``: delta-seconds or an HTTP
    date; None when empty or unreadable."""
    text = value.decode("latin-1").strip()
    if not text:
        return None
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _field(head: bytes, lower: bytes, key: bytes) -> bytes:
    """The value of the first header ``key`` (``b"\\r\\nname:"``, lower case) in ``head``."""
    i = lower.find(key)
    if i < 0:
        return b""
    i += len(key)
    return head[i : lower.find(b"\r\n", i)].strip()


def _skip_chunked(sock: _Plain | _Tls, buf: bytes, body: bytearray | None = None) -> bytes:
    """Read a chunked body (and its trailers) past, its data into ``body`` when given; what
    follows it (nothing, normally)."""
    while True:
        i = buf.find(b"\r\n")
        while i < 0:
            buf = _more(sock, buf)
            i = buf.find(b"\r\n")
        size_text = buf[:i].split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise BadResponse(f"chunk size {size_text[:20]!r}") from None
        buf = buf[i + 2 :]
        if size == 0:
            while True:  # trailers, then an empty line
                i = buf.find(b"\r\n")
                while i < 0:
                    buf = _more(sock, buf)
                    i = buf.find(b"\r\n")
                line, buf = buf[:i], buf[i + 2 :]
                if not line:
                    return buf
        need = size + 2  # the chunk and its CRLF
        while len(buf) < need:
            if body is not None:
                _keep(body, buf[: max(0, need - 2)])
            need -= len(buf)
            buf = _more(sock, b"")
        if body is not None:
            _keep(body, buf[: max(0, need - 2)])
        buf = buf[need:]


def _more(sock: _Plain | _Tls, buf: bytes) -> bytes:
    more = sock.recv()
    if not more:
        raise ConnectionClosed("closed in the middle of a chunked body")
    return buf + more
