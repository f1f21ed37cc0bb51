"""Answers classed where the load generator reads them (issue 30, item 1): a real HTTP
server on loopback whose fallback answers 200 with an empty list, in every framing
(Content-Length, chunked, until the server closes), and a 503 without any outcome header."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.load.wire import Answer, Endpoint
from harness.scenario.outcomes import Outcomes

FULL = b'{"owners": [{"pets": [{"visits": [1]}]}]}'
EMPTY = b'{"owners": [{"pets": [{"visits": []}]}]}'
STAND_IN = b'{"source": "fallback"}'


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        framing, _, what = self.path.strip("/").partition("/")
        status = 503 if what == "refused" else 200
        body = {"full": FULL, "empty": EMPTY, "stand-in": STAND_IN}.get(what, b"")
        self.send_response(status)
        if framing == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(body), 7):  # small chunks: the body across several
                piece = body[i : i + 7]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        elif framing == "close":
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


OUTCOMES = Outcomes.model_validate(
    {
        "degraded": {
            "status": "2xx",
            "body": {"path": "$.owners[*].pets[*].visits", "empty": True},
        },
        "fallback": {"body": {"path": "$.source", "equal": "fallback"}},
    }
)


@pytest.mark.parametrize("framing", ["length", "chunked", "close"])
def test_a_200_fallback_is_read_from_its_body_in_every_framing(url: str, framing: str) -> None:
    ep = Endpoint(url, "GET", 5.0, outcomes=OUTCOMES)
    try:
        assert ep.request(f"/{framing}/full") == Answer(200, "", None, "success")
        assert ep.request(f"/{framing}/empty") == Answer(200, "", None, "degraded")
        assert ep.request(f"/{framing}/stand-in") == Answer(200, "", None, "fallback")
        assert ep.request(f"/{framing}/refused") == Answer(503, "", None, "refused")
    finally:
        ep.close()


def test_without_rules_a_503_is_refused_and_no_body_is_kept(url: str) -> None:
    ep = Endpoint(url, "GET", 5.0)
    try:
        assert not ep.classifier.reads_body
        assert ep.request("/length/refused") == Answer(503, "", None, "refused")
        assert ep.request("/chunked/empty") == Answer(200, "", None, "success")
    finally:
        ep.close()
