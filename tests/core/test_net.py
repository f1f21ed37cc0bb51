"""Loopback rules: one answer everywhere to "is this address local?", and the sockets on it."""

from __future__ import annotations

import argparse
import asyncio
import io
import socket

import pytest

from harness.core.errors import InputError
from harness.core.net import (
    LOOPBACK,
    AddressError,
    OpenFiles,
    fd_arg,
    inherited_socket,
    is_loopback,
    listener,
    parse_address,
    port_arg,
    port_of,
    raise_open_file_limit,
    reset,
)


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", True),
        ("127.3.2.1", True),
        ("::1", True),
        ("localhost", True),
        ("LocalHost", True),
        (None, False),  # an unknown peer (aiohttp's request.remote) is not trusted
        ("", False),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.1", False),
        ("2001:db8::1", False),
        ("example.com", False),
        ("[::1]", False),  # brackets belong to HOST:PORT, which parse_address takes apart
    ],
)
def test_is_loopback(host: str | None, expected: bool) -> None:
    assert is_loopback(host) is expected


def test_parse_address() -> None:
    assert parse_address("localhost:5432") == ("localhost", 5432)
    assert parse_address("[::1]:5432") == ("::1", 5432)
    assert parse_address(" 127.0.0.2:0 ") == ("127.0.0.2", 0)
    with pytest.raises(AddressError, match="port out of range"):
        parse_address("127.0.0.1:0", "upstream", port_zero=False)
    with pytest.raises(AddressError, match="port out of range"):
        parse_address("127.0.0.1:65536")
    with pytest.raises(AddressError, match="upstream '127.0.0.1': expected HOST:PORT"):
        parse_address("127.0.0.1", "upstream")
    for remote in ("0.0.0.0:1", "10.0.0.1:80", "example.com:80", "[2001:db8::1]:80"):
        with pytest.raises(AddressError, match="only loopback"):
            parse_address(remote)
    assert issubclass(AddressError, InputError) and issubclass(AddressError, ValueError)


def test_listener_is_loopback_inheritable_and_listening() -> None:
    with listener(backlog=8) as sock:
        assert sock.getsockname()[0] == LOOPBACK and port_of(sock) > 0
        assert sock.get_inheritable()
        with socket.create_connection((LOOPBACK, port_of(sock)), timeout=5):
            pass


def test_reset_sends_a_tcp_reset() -> None:
    async def body() -> None:
        accepted: asyncio.Future[asyncio.StreamWriter] = asyncio.get_running_loop().create_future()

        async def on_client(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.set_result(writer)

        server = await asyncio.start_server(on_client, LOOPBACK, 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection(LOOPBACK, port)
        transport = (await asyncio.wait_for(accepted, 5)).transport
        assert isinstance(transport, asyncio.Transport)
        reset(transport)
        with pytest.raises(ConnectionResetError):
            await asyncio.wait_for(reader.read(), 5)
        reset(None)  # nothing to reset: no error
        writer.close()
        server.close()
        await server.wait_closed()

    asyncio.run(body())


def test_raise_open_file_limit_never_lowers_it() -> None:
    import resource

    before = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert raise_open_file_limit() >= before


def test_port_and_fd_options_are_checked_before_use() -> None:
    assert (port_arg("0"), port_arg("65535"), fd_arg("3")) == (0, 65535, 3)
    for bad, message in (("70000", "out of range"), ("-1", "out of range"), ("x", "not a port")):
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            port_arg(bad)
    with pytest.raises(argparse.ArgumentTypeError, match="not a file descriptor"):
        fd_arg("-5")
    with socket.socket() as unused:
        closed = unused.detach()
    socket.socket(fileno=closed).close()  # a descriptor number that is now closed
    with pytest.raises(InputError, match=f"--fd {closed}: not an open socket"):
        inherited_socket(closed)
    with open(__file__) as f, pytest.raises(InputError, match="not an open socket"):
        inherited_socket(f.fileno())


def test_out_of_files_is_said_in_one_line_not_a_traceback_per_accept() -> None:
    """A guarded listener with no room pauses accepting; existing connections go on."""
    said = io.StringIO()
    files = OpenFiles("test", stream=said)
    accepted: list[asyncio.Transport] = []

    class Echo(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            self.transport = transport
            accepted.append(transport)

        def data_received(self, data: bytes) -> None:
            self.transport.write(data)

    async def body() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(files.exception_handler)
        guarded = files.guard(
            socket.create_server((LOOPBACK, 0)), room=lambda: len(accepted) + guarded.pending < 2
        )

        def make() -> asyncio.Protocol:
            guarded.settled()
            return Echo()

        server = await loop.create_server(make, sock=guarded, backlog=64)
        port = port_of(guarded)
        conns = [await asyncio.open_connection(LOOPBACK, port) for _ in range(6)]
        await asyncio.sleep(0.3)
        assert len(accepted) == 2  # the other four wait in the backlog
        reader, writer = conns[0]
        writer.write(b"ping")
        assert await asyncio.wait_for(reader.readexactly(4), 2) == b"ping"
        for _, w in conns:
            w.close()
        server.close()
        await server.wait_closed()

    asyncio.run(body())
    lines = said.getvalue().splitlines()
    assert lines == [
        "test: out of file descriptors (limit "
        f"{files.limit}): not accepting new connections until some close "
        "(they wait in the listen backlog)"
    ]
    assert files.hits >= 1
