"""Loopback rules: one answer everywhere to "is this address local?", and the sockets on it."""

from __future__ import annotations

import asyncio
import socket

import pytest

from harness.core.errors import InputError
from harness.core.net import (
    LOOPBACK,
    AddressError,
    is_loopback,
    listener,
    parse_address,
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
