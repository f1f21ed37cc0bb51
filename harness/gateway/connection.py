"""The gateway's HTTP connections: aiohttp's, except that a client may half-close and be answered.

aiohttp closes a connection as soon as the client's FIN arrives, so a client
that sends its request and then shuts down its sending side
(``shutdown(SHUT_WR)``) never gets the answer (aio-libs/aiohttp#3659). Here
a FIN that follows a complete request keeps the connection open until that
request (and any pipelined before it) is answered, then closes it; a FIN on
an idle connection, or in the middle of a request's body, closes it at once
as before.

A FIN cannot tell a half-close from a client that hung up, so the approve
handler hears of it through ``Handler.on_peer_eof`` and decides (see
``Gateway.approve``): the call is recorded as ``client_gone`` then, and the
answer, if one comes, is still written.

A request aiohttp cannot parse is answered 400 by aiohttp, as before, but
logged in one line instead of a traceback (a fuzzing client would otherwise
fill the log with them), and only the first ``MALFORMED_LOGGED``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

MALFORMED_LOGGED = 20
"""Malformed requests logged (one line each); later ones are answered 400 silently."""


class _Malformed:
    """How many malformed requests this process has seen (for the log's bound)."""

    seen = 0


class Handler(RequestHandler):
    """One HTTP connection (aiohttp's ``RequestHandler``) that survives a half-close."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.peer_eof = False
        """The client has shut down its sending side (or hung up: a FIN cannot tell)."""
        self.on_peer_eof: Callable[[], None] | None = None
        """Called once when the FIN arrives while a request is being handled."""
        self._last_payload: object | None = None

    # aiohttp's private state (_messages, _waiter) is read with care: if a release
    # renames it, a client that half-closes goes unanswered again (the tests say
    # so), and every connection still closes on its FIN, as in aiohttp.

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        messages = getattr(self, "_messages", None)
        if messages:
            self._last_payload = messages[-1][1]  # (message, payload) of the newest request

    def _answer_first(self) -> bool:
        """A complete request is queued or being handled (not idle, not mid-body)."""
        try:
            messages, waiter = self._messages, self._waiter
        except AttributeError:
            return False
        if not messages and waiter is not None and not waiter.done():
            return False  # idle: aiohttp waits for the next request
        payload = self._last_payload
        return payload is not None and bool(getattr(payload, "is_eof", lambda: False)())

    def log_exception(self, *args: Any, **kw: Any) -> None:
        exc = kw.get("exc_info")
        if not isinstance(exc, HttpProcessingError):
            super().log_exception(*args, **kw)
            return
        _Malformed.seen += 1
        if _Malformed.seen > MALFORMED_LOGGED:
            return
        remote = args[1] if len(args) > 1 else "?"
        what = (exc.message or type(exc).__name__).strip().splitlines()[0].rstrip(":")
        more = "; later ones are not logged" if _Malformed.seen == MALFORMED_LOGGED else ""
        self.logger.warning("malformed request from %s answered 400: %s%s", remote, what, more)

    def eof_received(self) -> bool | None:  # type: ignore[override]
        if not self._answer_first():
            return None  # as aiohttp: the transport closes
        self.peer_eof = True
        self.close()  # answer what was asked, then close instead of keeping alive
        callback, self.on_peer_eof = self.on_peer_eof, None
        if callback is not None:
            callback()
        return True  # keep the socket open for the answer


def handler_of(request: BaseRequest) -> Handler | None:
    """The connection a request came on, if it is one of ours."""
    protocol = request.protocol
    return protocol if isinstance(protocol, Handler) else None


class _Server(web.Server):
    def __call__(self) -> RequestHandler:
        return Handler(self, loop=self._loop, **self._kwargs)


class AppRunner(web.AppRunner):
    """``web.AppRunner`` whose connections are ``Handler``s."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _Server  # same state; only the connection class differs
        return server
