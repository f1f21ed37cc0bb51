"""Helpers of the proxy tests: an echo server as the dependency, a client, a proxied pair."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any

from harness.proxy.server import Proxy

Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def run(body: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(body())


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


@contextlib.asynccontextmanager
async def echo_server() -> AsyncIterator[int]:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        server.close()
        await server.wait_closed()


@contextlib.asynccontextmanager
async def proxied(toxics: Sequence[dict[str, Any]] = (), **kwargs: Any) -> AsyncIterator[Proxy]:
    """A proxy in front of an echo server, with these toxics in force."""
    async with echo_server() as upstream:
        proxy = Proxy("127.0.0.1:0", f"127.0.0.1:{upstream}", **kwargs)
        proxy.set_toxics(toxics)
        await proxy.start()
        try:
            yield proxy
        finally:
            await proxy.stop()


@contextlib.asynccontextmanager
async def client(port: int) -> AsyncIterator[Stream]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def round_trip(conn: Stream, payload: bytes = b"x" * 100) -> float:
    reader, writer = conn
    started = time.monotonic()
    writer.write(payload)
    assert await asyncio.wait_for(reader.readexactly(len(payload)), 10) == payload
    return time.monotonic() - started


def port_of(proxy: Proxy) -> int:
    """The port a started proxy listens on."""
    assert proxy.port is not None
    return proxy.port
