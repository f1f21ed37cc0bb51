"""A named dependency's own API: what it answers when no fault decides otherwise.

``pg`` answers its two routes itself (``harness.gateway.server``). A named
dependency (``dependencies.<name>``) answers every path through one of these:

- ``StubApi``: the routes of ``harness.stubs`` (a scenario's ``routes:``, a WireMock
  mappings folder); a call no route matches is answered as WireMock answers it,
  and its ledger row says ``unmatched``;
- ``ForwardApi``: the real upstream's own answer, passed on.

Either way the phase's faults come first: a fault that answers (an error, a
hang, a reset) answers instead, and a latency fault delays the usual answer.
Each call's fate goes by its key: the ``call-key`` header when the scenario
names one, else the method, path, query and body, so every build meets the
same failures for the same calls.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import aiohttp
from aiohttp import web
from yarl import URL

from harness.core.fate import fate
from harness.gateway.overrides import FAULT_HEADER
from harness.gateway.upstream import Upstream, UpstreamError
from harness.stubs.model import UNMATCHED, StubAnswer, StubRequest, Stubs, unmatched_answer

FORWARDED = "forward"
"""The ledger's route for a call passed on to the real upstream."""

MAX_BODY_BYTES = 256 << 20
"""The largest request body a named dependency takes (aiohttp's default is 1 MiB): a call's
body is read whole, to route it and name its fate; a larger one is answered 413 and recorded."""

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "host",
    }
)
"""Headers that belong to one connection (RFC 9110 7.6.1), never passed on; and the length
and host, which the next hop sets itself. So are the headers a ``Connection`` header names."""

AUTO_HEADERS = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")
"""Headers aiohttp's client adds when a request lacks them: a forwarded call must not gain
them (the upstream sees the client's request, not aiohttp's)."""


def passed_on(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The headers the next hop gets: every one, in order and with every value, except the
    hop-by-hop ones (``HOP_BY_HOP`` and those the ``Connection`` header names)."""
    headers = list(headers)
    dropped = HOP_BY_HOP
    named = {
        token.strip().lower()
        for name, value in headers
        if name.lower() == "connection"
        for token in value.split(",")
    }
    if named:
        dropped = HOP_BY_HOP | named
    return [(k, v) for k, v in headers if k.lower() not in dropped]


_FAULT_LOWER = FAULT_HEADER.lower()
_DROPPED_RAW = frozenset(n.encode() for n in HOP_BY_HOP | {_FAULT_LOWER})


def passed_on_raw(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``passed_on`` for a request's raw headers (their bytes, as the client sent them),
    less ``X-Harness-Fault``: the harness's own header, never the upstream's business."""
    dropped = _DROPPED_RAW
    kept = []
    for name, value in headers:
        lower = name.lower()
        if lower == b"connection":
            dropped = dropped | {t.strip().lower() for t in value.split(b",")}
        kept.append((lower, name, value))
    return [(name, value) for lower, name, value in kept if lower not in dropped]


@dataclass(frozen=True)
class Usual:
    """The answer a dependency gives a call when no fault decides otherwise."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    delay_s: float = 0.0
    """The dependency's own delay (a stub's ``delay``, WireMock's ``fixedDelayMilliseconds``)."""
    fault: str | None = None
    """The dependency's own broken answer (a WireMock ``fault``): reset, empty, garbage,
    truncated."""
    length: int | None = None
    """The ``Content-Length`` a bodiless answer announces (the upstream's answer to a HEAD)."""


@dataclass(frozen=True)
class Routed:
    """What a dependency knows of a call before any fault is decided."""

    key: str
    route: str
    usual: Callable[[], Awaitable[Usual]]


class DependencyApi(Protocol):
    """A named dependency's API (see the module's docstring)."""

    def route(self, request: web.Request, body: bytes) -> Routed: ...

    async def close(self) -> None: ...


def call_key(request: web.Request, body: bytes, header: str | None) -> str:
    """The call's name for its fate and attempt count."""
    if header is not None and (given := request.headers.get(header)):
        return given
    digest = hashlib.sha256()
    for part in (request.method, request.path_qs):
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    digest.update(body)
    return f"{request.method} {request.path} #{digest.hexdigest()[:16]}"


def stub_request(request: web.Request, body: bytes) -> StubRequest:
    query: dict[str, list[str]] = {}
    for name, value in request.query.items():
        query.setdefault(name, []).append(value)
    return StubRequest(
        method=request.method,
        path=request.raw_path.split("?", 1)[0],
        query=query,
        headers=request.headers,
        body=body,
        raw_query=request.rel_url.raw_query_string,
    )


def _usual(answer: StubAnswer) -> Usual:
    return Usual(answer.status, answer.headers, answer.body, answer.delay_s, answer.fault)


class StubApi:
    """Answers as the stubs say; a call no stub matches, as WireMock does."""

    def __init__(self, stubs: Stubs, seed: int, key_header: str | None) -> None:
        self.stubs, self.seed, self.key_header = stubs, seed, key_header

    def route(self, request: web.Request, body: bytes) -> Routed:
        key = call_key(request, body, self.key_header)
        asked = stub_request(request, body)
        matched = self.stubs.match(asked)
        if matched is None:
            answer = unmatched_answer(asked)

            async def unmatched() -> Usual:
                return _usual(answer)

            return Routed(key, UNMATCHED, unmatched)
        rng = random.Random(fate(self.seed, key, 0, "stub"))

        async def render() -> Usual:
            return _usual(matched.render(asked, rng, datetime.now(UTC)))

        return Routed(key, matched.route_id, render)

    async def close(self) -> None:
        return None


class ForwardApi:
    """Passes each call on to the real upstream and its answer back (502 if it cannot).

    ``client="lean"`` (the default) speaks HTTP/1.1 itself on kept-alive connections
    (``harness.gateway.upstream``: a fraction of aiohttp's CPU a call);
    ``client="aiohttp"`` uses aiohttp's ``ClientSession``, for comparison
    (``benchmarks/forward_overhead.py``). Either way the request goes out as the client
    sent it, less the hop-by-hop headers and ``X-Harness-Fault`` (the harness's own),
    and the answer comes back as the upstream gave it, less its hop-by-hop headers."""

    def __init__(
        self, upstream: str, key_header: str | None, timeout_s: float, client: str = "lean"
    ) -> None:
        if client not in ("lean", "aiohttp"):
            raise ValueError(f"client {client!r}: lean or aiohttp")
        self.upstream, self.key_header, self.client = upstream, key_header, client
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None
        self._lean = Upstream(upstream, timeout_s)

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=0, force_close=False)
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=self._timeout,
                auto_decompress=False,  # the bytes as sent, with their Content-Encoding
                cookie_jar=aiohttp.DummyCookieJar(),  # one client's cookies never reach another
            )
        return self._session

    def _failed(self, exc: BaseException) -> Usual:
        why = f"the upstream {self.upstream} did not answer: {type(exc).__name__} {exc}"
        return Usual(502, (("Content-Type", "text/plain"),), why.encode())

    def route(self, request: web.Request, body: bytes) -> Routed:
        key = call_key(request, body, self.key_header)
        if self.client == "aiohttp":
            return Routed(key, FORWARDED, self._aiohttp(request, body))
        method = request.method
        head = self._lean.head(
            method.encode("ascii"),
            request.raw_path.encode("utf-8", "surrogateescape"),
            passed_on_raw(request.raw_headers),
            body,
        )
        lean = self._lean

        async def forward() -> Usual:
            try:
                answer = await lean.send(head, body, method)
            except UpstreamError as exc:
                return self._failed(exc)
            kept = tuple(passed_on(answer.headers))
            length = None
            if method == "HEAD":
                given = next((v for k, v in answer.headers if k.lower() == "content-length"), "")
                length = int(given) if given.isdigit() else None
            return Usual(answer.status, kept, answer.body, length=length)

        return Routed(key, FORWARDED, forward)

    def _aiohttp(self, request: web.Request, body: bytes) -> Callable[[], Awaitable[Usual]]:
        sent = request.headers
        headers = [(k, v) for k, v in passed_on(sent.items()) if k.lower() != _FAULT_LOWER]
        skip = [name for name in AUTO_HEADERS if name not in sent]
        url = self.upstream + request.raw_path
        method = request.method

        async def forward() -> Usual:
            try:
                async with self._client().request(
                    method,
                    URL(url, encoded=True),  # the path and query as sent, not re-encoded
                    headers=headers,
                    skip_auto_headers=skip,
                    data=body or None,  # none: no Content-Type, no length a GET never had
                    allow_redirects=False,
                ) as answer:
                    payload = await answer.read()
                    kept = tuple(passed_on(answer.headers.items()))
                    length = answer.headers.get("Content-Length") if method == "HEAD" else None
                    return Usual(
                        answer.status,
                        kept,
                        payload,
                        length=int(length) if length is not None and length.isdigit() else None,
                    )
            except (aiohttp.ClientError, TimeoutError) as exc:
                return self._failed(exc)

        return forward

    async def close(self) -> None:
        await self._lean.close()
        if self._session is not None:
            await self._session.close()
