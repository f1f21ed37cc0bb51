"""The lean forward client (``harness.gateway.upstream``) against scripted upstreams.

Each upstream here is a bare asyncio server whose answers are written byte by byte as
the test says: chunked answers, answers framed by the close, 1xx interim answers, HEAD,
204 and 304 without a body, ``Connection: close``, a kept-alive connection the upstream
closes between two calls (resent once on a fresh connection when that is safe, a 502
otherwise), a slow upstream that dribbles its answer, one that never answers, and
answers that are not HTTP.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from harness.gateway.upstream import Answer, Upstream, UpstreamError

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One request's head and body (by its Content-Length)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head, await reader.readexactly(length)


def _run(script: Script, calls: Callable[[Upstream], Awaitable[object]]) -> tuple[object, int]:
    """Serve ``script`` (given each connection's number) and run ``calls`` against it; return
    what ``calls`` returned and the connections the client opened."""

    async def main() -> tuple[object, int]:
        count = 0

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal count
            count += 1
            try:
                await script(reader, writer, count)
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        upstream = Upstream(f"http://127.0.0.1:{port}", timeout_s=2.0)
        try:
            result = await calls(upstream)
        finally:
            await upstream.close()
            server.close()
        return result, upstream.opened

    return asyncio.run(main())


async def _call(upstream: Upstream, method: str = "GET", body: bytes = b"") -> Answer:
    head = upstream.head(method.encode(), b"/thing?a=1", [(b"X-Mine", b"yes")], body)
    return await upstream.send(head, body, method)


def _keep_answering(answer: bytes) -> Script:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            await _read_request(reader)
            writer.write(answer)
            await writer.drain()

    return script


def test_a_request_goes_out_as_given_and_a_kept_connection_is_reused() -> None:
    seen: list[bytes] = []

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            head, body = await _read_request(reader)
            seen.append(head + body)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Up: 1\r\n\r\nok")

    async def calls(upstream: Upstream) -> list[Answer]:
        return [await _call(upstream), await _call(upstream, "POST", b"abc")]

    answers, opened = _run(script, calls)
    assert isinstance(answers, list)
    assert [(a.status, a.body) for a in answers] == [(200, b"ok"), (200, b"ok")]
    assert answers[0].headers == [("Content-Length", "2"), ("X-Up", "1")]
    assert opened == 1
    port = seen[0].split(b"Host: 127.0.0.1:", 1)[1].split(b"\r\n", 1)[0]
    assert seen[0] == (
        b"GET /thing?a=1 HTTP/1.1\r\nHost: 127.0.0.1:" + port + b"\r\nX-Mine: yes\r\n\r\n"
    )
    assert seen[1].endswith(b"X-Mine: yes\r\nContent-Length: 3\r\n\r\nabc")


def test_a_chunked_answer_is_decoded_and_its_trailers_dropped() -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n1\r\n,\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
    )

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            await _read_request(reader)
            for i in range(len(chunked)):  # one byte at a time: every split of the framing
                writer.write(chunked[i : i + 1])
                await writer.drain()

    async def calls(upstream: Upstream) -> list[Answer]:
        return [await _call(upstream), await _call(upstream)]

    answers, opened = _run(script, calls)
    assert isinstance(answers, list)
    assert [a.body for a in answers] == [b"hello, world"] * 2 and opened == 1


def test_an_answer_without_length_runs_to_the_close() -> None:
    answer = b"HTTP/1.1 200 OK\r\nX-Up: 1\r\n\r\nall of it"

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await _read_request(reader)
        writer.write(answer)
        await writer.drain()

    async def calls(upstream: Upstream) -> list[Answer]:
        return [await _call(upstream), await _call(upstream)]

    answers, opened = _run(script, calls)
    assert isinstance(answers, list)
    assert [a.body for a in answers] == [b"all of it"] * 2 and opened == 2


def test_head_204_304_and_interim_answers_have_no_body() -> None:
    answers = {
        "HEAD": b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n",
        "GET": b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
        "PUT": b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
    }

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            head, _ = await _read_request(reader)
            writer.write(answers[head.split(b" ", 1)[0].decode()])

    async def calls(upstream: Upstream) -> list[Answer]:
        return [await _call(upstream, m) for m in ("HEAD", "GET", "PUT", "HEAD")]

    got, opened = _run(script, calls)
    assert isinstance(got, list)
    assert [(a.status, a.body) for a in got] == [(200, b""), (204, b""), (304, b""), (200, b"")]
    assert got[0].headers == [("Content-Length", "99")] and opened == 1


def test_connection_close_is_not_reused() -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"

    async def calls(upstream: Upstream) -> list[Answer]:
        return [await _call(upstream), await _call(upstream)]

    got, opened = _run(_keep_answering(answer), calls)
    assert isinstance(got, list) and [a.body for a in got] == [b"ok", b"ok"] and opened == 2


def test_bytes_past_the_answer_end_it_and_the_connection_is_not_reused() -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA"

    async def calls(upstream: Upstream) -> list[Answer]:
        return [await _call(upstream), await _call(upstream)]

    got, opened = _run(_keep_answering(answer), calls)
    assert isinstance(got, list) and [a.body for a in got] == [b"ok", b"ok"] and opened == 2


def _closes_after_first(sent: list[bytes]) -> Script:
    """Answers one call per connection, keeps it alive, then closes it when the next request
    comes (as an upstream whose idle timeout fires just then)."""

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        head, body = await _read_request(reader)
        sent.append(head.split(b" ", 1)[0])
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        await _read_request(reader)  # the next call on this connection: closed unanswered

    return script


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_an_idempotent_call_is_resent_once_when_a_kept_connection_closes(method: str) -> None:
    sent: list[bytes] = []

    async def calls(upstream: Upstream) -> list[Answer]:
        return [await _call(upstream, method), await _call(upstream, method)]

    got, opened = _run(_closes_after_first(sent), calls)
    assert isinstance(got, list) and [a.body for a in got] == [b"ok", b"ok"]
    assert opened == 2 and len(sent) == 2


@pytest.mark.parametrize("method", ["POST", "PATCH"])
def test_a_post_is_not_resent_when_a_kept_connection_closes_under_it(method: str) -> None:
    sent: list[bytes] = []

    async def calls(upstream: Upstream) -> object:
        await _call(upstream, method, b"pay")
        with pytest.raises(UpstreamError, match="before the answer began"):
            await _call(upstream, method, b"pay")
        return await _call(upstream, method, b"pay")  # the next call: a fresh connection

    got, opened = _run(_closes_after_first(sent), calls)
    assert isinstance(got, Answer) and got.body == b"ok" and opened == 2


def test_a_connection_closed_while_idle_is_not_used() -> None:
    """The upstream closes the kept connection before the next call: the client sees the close
    and opens a fresh one, even for a POST (nothing was sent on the closed one)."""

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()

    async def calls(upstream: Upstream) -> list[Answer]:
        first = await _call(upstream, "POST", b"1")
        await asyncio.sleep(0.05)  # the close reaches the client
        return [first, await _call(upstream, "POST", b"2")]

    got, opened = _run(script, calls)
    assert isinstance(got, list) and [a.body for a in got] == [b"ok", b"ok"] and opened == 2


def test_a_slow_upstream_is_waited_for() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await _read_request(reader)
        for piece in (b"HTTP/1.1 200 OK\r\n", b"Content-Length: 4\r\n\r\n", b"sl", b"ow"):
            await asyncio.sleep(0.05)
            writer.write(piece)
            await writer.drain()
        await reader.read()

    got, _ = _run(script, _call)
    assert isinstance(got, Answer) and got.body == b"slow"


def test_an_upstream_that_never_answers_is_an_error_at_the_timeout() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await reader.read()

    async def calls(upstream: Upstream) -> str:
        upstream.timeout_s = 0.2
        with pytest.raises(UpstreamError, match="no answer within 0.2 s") as caught:
            await _call(upstream)
        return str(caught.value)

    _run(script, calls)


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (b"SSH-2.0-OpenSSH\r\n\r\n", "not HTTP"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", "middle of the answer"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", "bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"),
        (b"", "before the answer began"),
    ],
)
def test_a_broken_answer_is_an_error(answer: bytes, why: str) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await _read_request(reader)
        writer.write(answer)
        await writer.drain()

    async def calls(upstream: Upstream) -> None:
        with pytest.raises(UpstreamError, match=why):
            await _call(upstream)

    _run(script, calls)


def test_nothing_listening_is_an_error() -> None:
    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        upstream = Upstream(f"http://127.0.0.1:{port}", timeout_s=2.0)
        with pytest.raises(UpstreamError, match="cannot connect"):
            await _call(upstream)

    asyncio.run(main())
