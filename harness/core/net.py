"""Loopback networking: the one rule for what counts as local, and the sockets built on it.

Every server the harness starts binds loopback, and the gateway's admin API
and the proxy's addresses accept loopback only, so "is this address local?"
must get one answer everywhere: ``localhost`` (any case), 127.0.0.0/8 and
``::1`` are loopback; anything else, including no address at all, is not.

``OpenFiles`` keeps a server (the gateway, the proxy) within its limit of open
files: every connection is a descriptor, and at the limit asyncio would log a
traceback for every connection waiting to be accepted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import ipaddress
import resource
import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from harness.core.errors import InputError

LOOPBACK = "127.0.0.1"
BACKLOG = 4096
"""Listen backlog of the servers that take bursts of connections (gateway, proxy, targets)."""

_LINGER_ZERO = struct.pack("ii", 1, 0)
"""SO_LINGER on, timeout 0: close() sends a TCP reset instead of a FIN."""


class AddressError(InputError, ValueError):
    """An address that is malformed or not on loopback."""


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` is ``localhost``, in 127.0.0.0/8 or ``::1`` (None: no, unknown peer)."""
    if host is None:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _addresses(host: str) -> set[str]:
    """The addresses a loopback host names: ``localhost`` both families', an IP its own."""
    if host.lower() == "localhost":
        return {"127.0.0.1", "::1"}
    try:
        return {str(ipaddress.ip_address(host))}
    except ValueError:
        return {host}


def same_endpoint(a: tuple[str, int], b: tuple[str, int]) -> bool:
    """Whether two ``(host, port)`` name one socket however spelled (``localhost:5432``,
    ``127.0.0.1:5432``); port 0 (any free port) is never the same as another."""
    return a[1] == b[1] != 0 and bool(_addresses(a[0]) & _addresses(b[0]))


def parse_address(text: str, what: str = "address", *, port_zero: bool = True) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) -> (host, port), refusing non-loopback hosts.

    The proxy is a fault injector for local dependencies, never a relay to or
    from other machines, so a wrong address is an input error, not a warning.
    """
    host, sep, port_text = text.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port_text.isdigit():
        raise AddressError(f"{what} {text!r}: expected HOST:PORT, e.g. 127.0.0.1:5432")
    port = int(port_text)
    if not (0 if port_zero else 1) <= port <= 65535:
        raise AddressError(f"{what} {text!r}: port out of range")
    if not is_loopback(host):
        raise AddressError(
            f"{what} {text!r}: only loopback addresses are allowed (127.0.0.0/8, ::1, localhost)"
        )
    return host, port


def port_arg(text: str) -> int:
    """An argparse ``type`` for a TCP port: 0 (any free port) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is out of range: a port is 0 to 65535")
    return port


def fd_arg(text: str) -> int:
    """An argparse ``type`` for an inherited file descriptor: an integer of 0 or more."""
    try:
        fd = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a file descriptor number") from None
    if fd < 0:
        raise argparse.ArgumentTypeError(f"{fd} is not a file descriptor (they are 0 or more)")
    return fd


def inherited_socket(fd: int, what: str = "--fd") -> socket.socket:
    """The listening socket a parent passed as descriptor ``fd`` (InputError if it is none)."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        raise InputError(f"{what} {fd}: not an open socket ({exc.strerror or exc})") from None
    if sock.type != socket.SOCK_STREAM or sock.family not in (socket.AF_INET, socket.AF_INET6):
        sock.detach()  # not ours to close
        raise InputError(f"{what} {fd}: not a TCP socket")
    return sock


def listener(backlog: int = BACKLOG, port: int = 0) -> socket.socket:
    """A socket bound and listening on loopback, ready to hand to a child.

    ``port`` 0 (the default) lets the OS pick a free one; raises ``OSError`` if
    a fixed ``port`` is taken.
    """
    sock = socket.create_server((LOOPBACK, port), backlog=backlog)
    sock.set_inheritable(True)
    return sock


def port_of(sock: socket.socket) -> int:
    """The port a bound socket got."""
    return int(sock.getsockname()[1])


def arm_reset(transport: asyncio.BaseTransport | None) -> None:
    """Make the coming close of this connection a TCP reset (RST), not a polite FIN."""
    sock = None if transport is None else transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ZERO)


def reset(transport: asyncio.Transport | None) -> None:
    """Drop a connection with a TCP reset (RST) now."""
    if transport is not None:
        arm_reset(transport)
        transport.abort()


def raise_open_file_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (each held connection is a descriptor)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


OUT_OF_FILES = frozenset({errno.EMFILE, errno.ENFILE})
"""errno values that mean no descriptor could be had (this process's limit, or the system's)."""
FD_RESERVE = 32
"""Descriptors a server keeps for itself: listeners, the loop's epoll and pipe, timers, logs."""
REPEAT_WARNING_S = 60.0
"""The out-of-files line is printed again at most this often while the limit keeps being hit."""


class OpenFiles:
    """A server's limit of open files: raised as far as allowed, kept to, and reported in one line.

    At the limit, asyncio's accept loop would log a traceback for every
    connection waiting in the backlog (thousands a second, and it keeps
    trying). Listening sockets from ``guard`` instead stop accepting for a
    second at a time, leave new connections in the kernel's backlog, and the
    server keeps serving the connections it has; one line on stderr says why.
    """

    def __init__(self, who: str, *, stream: TextIO | None = None) -> None:
        self.who = who
        self.hits = 0
        """Times an accept (or a connection's own socket) found no descriptor left."""
        self._stream = stream
        self._said_at: float | None = None

    @property
    def limit(self) -> int:
        """The soft RLIMIT_NOFILE in force now."""
        return resource.getrlimit(resource.RLIMIT_NOFILE)[0]

    def budget(self, fds_per_connection: int) -> int:
        """How many connections fit in the limit, keeping ``FD_RESERVE`` for the process."""
        limit = self.limit
        if limit == resource.RLIM_INFINITY:
            return 1 << 30
        return max(1, (limit - FD_RESERVE) // fds_per_connection)

    def hit(self) -> None:
        """No descriptor was left: count it and say so (once a minute at most)."""
        self.hits += 1
        now = time.monotonic()
        if self._said_at is not None and now - self._said_at < REPEAT_WARNING_S:
            return
        self._said_at = now
        print(
            f"{self.who}: out of file descriptors (limit {self.limit}): not accepting new "
            "connections until some close (they wait in the listen backlog)",
            file=self._stream or sys.stderr,
            flush=True,
        )

    def guard(self, sock: socket.socket, room: Callable[[], bool] | None = None) -> GuardedSocket:
        """This listening socket, as one whose accepts stop at the limit (or when ``room`` says).

        The returned socket takes over the descriptor: use it, not ``sock``.
        """
        if isinstance(sock, GuardedSocket):
            return sock
        return GuardedSocket(self, sock, room)

    def exception_handler(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The loop's exception handler: an accept out of descriptors is one line, no traceback."""
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in OUT_OF_FILES:
            if not isinstance(exc, _AcceptPaused):  # a guarded socket has already said so
                self.hit()
            return
        loop.default_exception_handler(context)


class _AcceptPaused(OSError):
    """Raised by a guarded accept at the limit: asyncio pauses that listener for a second."""


class GuardedSocket(socket.socket):
    """A listening socket that stops accepting when out of descriptors (see ``OpenFiles``).

    asyncio accepts up to ``backlog`` connections per wake-up and, on EMFILE,
    logs and tries again for each of them; this socket reports the first
    EMFILE of a wake-up, then tells the loop the backlog is empty, so asyncio
    pauses the listener (its ``ACCEPT_RETRY_DELAY``, 1 s) instead. With a
    ``room`` callable, accepting also pauses whenever it answers False.
    """

    def __init__(
        self, files: OpenFiles, sock: socket.socket, room: Callable[[], bool] | None
    ) -> None:
        super().__init__(sock.family, sock.type, sock.proto, fileno=sock.detach())
        self.files = files
        self.room = room
        self.pending = 0
        """With ``room``: accepted sockets their server has not yet taken (it calls ``settled``)."""
        self._paused = False

    def settled(self) -> None:
        """One accepted socket became a connection (or was turned away)."""
        self.pending = max(0, self.pending - 1)

    def accept(self) -> tuple[socket.socket, Any]:
        if self._paused:  # the rest of this wake-up: "nothing more to accept"
            raise BlockingIOError(errno.EAGAIN, "accepting is paused")
        if self.room is not None and not self.room():
            self._pause()
            raise _AcceptPaused(errno.EMFILE, "open-file budget reached")
        try:
            conn, address = super().accept()
        except OSError as exc:
            if exc.errno in OUT_OF_FILES:
                self._pause()
                raise _AcceptPaused(exc.errno, exc.strerror) from None
            raise
        if self.room is not None:
            self.pending += 1
        return conn, address

    def _pause(self) -> None:
        self.files.hit()
        self._paused = True
        try:
            asyncio.get_running_loop().call_soon(self._resume)
        except RuntimeError:  # not on a loop: nothing to break out of
            self._paused = False

    def _resume(self) -> None:
        self._paused = False
