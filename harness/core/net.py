"""Loopback networking: the one rule for what counts as local, and the sockets built on it.

Every server the harness starts binds loopback, and the gateway's admin API
and the proxy's addresses accept loopback only, so "is this address local?"
must get one answer everywhere: ``localhost`` (any case), 127.0.0.0/8 and
``::1`` are loopback; anything else, including no address at all, is not.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import resource
import socket
import struct

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


def listener(backlog: int = BACKLOG) -> socket.socket:
    """A socket bound and listening on a free loopback port, ready to hand to a child."""
    sock = socket.create_server((LOOPBACK, 0), backlog=backlog)
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
