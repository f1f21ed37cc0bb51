"""The load generator's HTTP client against a real server process on loopback.

``scripted_server.py`` answers by path in every framing a server may choose
(Content-Length, chunked, until close, HTTP/1.0, interim 1xx, 204), and
closes connections the ways servers do (Connection: close, an idle timeout,
a request read and dropped). The client runs here under gevent, as it does
inside Locust.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gevent
import pytest

from harness.load.wire import Answer, BadResponse, Endpoint, NoAnswer
from harness.scenario.outcomes import Outcomes

pytestmark = pytest.mark.integration

SERVER = Path(__file__).with_name("scripted_server.py")


class Scripted:
    def __init__(self, tmp_path: Path, tls: tuple[Path, Path] | None = None) -> None:
        self.log = tmp_path / "requests.jsonl"
        self.log.touch()
        argv = [sys.executable, str(SERVER), str(self.log), *map(str, tls or ())]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{int(self.proc.stdout.readline())}"
        self.endpoints: list[Endpoint] = []

    def endpoint(self, method: str, timeout_s: float = 5.0, **kw: Any) -> Endpoint:
        """A client endpoint whose idle connections the fixture closes; the scripted server
        names its answers in ``X-Outcome``, read as each answer's label."""
        kw.setdefault("outcomes", Outcomes(label="X-Outcome"))
        ep = Endpoint(kw.pop("url", self.url), method, timeout_s, **kw)
        self.endpoints.append(ep)
        return ep

    def seen(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@pytest.fixture(params=["http"])
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Scripted]:
    tls = None
    if request.param == "https":
        if shutil.which("openssl") is None:
            pytest.skip("openssl makes the test certificate")
        tls = (tmp_path / "cert.pem", tmp_path / "key.pem")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-subj", "/CN=127.0.0.1", "-keyout", str(tls[1]), "-out", str(tls[0])],
            check=True, capture_output=True,
        )  # fmt: skip
    s = Scripted(tmp_path, tls)
    try:
        yield s
    finally:
        for ep in s.endpoints:
            ep.close()
        s.proc.kill()
        s.proc.wait()
        if s.proc.stdout is not None:
            s.proc.stdout.close()


@pytest.mark.parametrize("server", ["http", "https"], indirect=True)
def test_every_framing_is_read_and_the_connection_kept(server: Scripted) -> None:
    ep = server.endpoint("GET")
    assert ep.request("/cl") == Answer(200, "cl")
    assert ep.request("/chunked") == Answer(200, "chunked")
    assert ep.request("/interim") == Answer(200, "")
    assert ep.request("/nocontent") == Answer(204, "")
    assert ep.request("/status/503") == Answer(503, "scripted", None, "refused")
    assert ep.request("/slow") == Answer(200, "")
    assert ep.request("/cl") == Answer(200, "cl")
    assert ep.opened == 1
    assert {r["conn"] for r in server.seen()} == {server.seen()[0]["conn"]}


@pytest.mark.parametrize("path", ["/until-close", "/http10", "/close"])
def test_an_answer_that_ends_the_connection_is_read_and_the_next_opens_anew(
    server: Scripted, path: str
) -> None:
    ep = server.endpoint("GET")
    assert ep.request(path) == Answer(200, "")
    assert ep.request("/cl") == Answer(200, "cl")
    assert ep.opened == 2 and server.seen()[0]["conn"] != server.seen()[1]["conn"]


@pytest.mark.parametrize("server", ["http", "https"], indirect=True)
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_connection_the_server_closed_while_idle_is_not_reused(
    server: Scripted, method: str
) -> None:
    ep = server.endpoint(method, body={"a": 1} if method == "POST" else None)
    assert ep.request("/drop-idle") == Answer(200, "")
    deadline = time.monotonic() + 5  # until the server's FIN has arrived (a loaded machine)
    while ep.idle and ep.idle[-1].open_and_clean() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)  # and past the reuse that is not peeked (_PEEK_AFTER_S)
    assert ep.request("/cl") == Answer(200, "cl")
    assert ep.opened == 2
    assert [r["path"] for r in server.seen()] == ["/drop-idle", "/cl"]


def test_a_get_dropped_on_a_reused_connection_is_sent_once_more_a_post_never(
    server: Scripted,
) -> None:
    get = server.endpoint("GET")
    assert get.request("/drop-next") == Answer(200, "")
    assert get.request("/cl") == Answer(200, "cl")  # dropped, then sent again on a new connection
    assert [r["path"] for r in server.seen()] == ["/drop-next", "/cl", "/cl"]
    post = server.endpoint("POST", body={"a": 1})
    assert post.request("/drop-next") == Answer(200, "")
    with pytest.raises(NoAnswer):
        post.request("/cl")
    assert [r["path"] for r in server.seen()][3:] == ["/drop-next", "/cl"]


def test_a_post_carries_its_json_body_and_headers(server: Scripted) -> None:
    ep = server.endpoint("POST", url=server.url + "/api/", body={"amount": 1000})
    key = "Idempotency-Key: 6f1d9a4e-0000-5000-8000-000000000000\r\n"
    assert ep.request("/payments", key) == Answer(200, "")
    (seen,) = server.seen()
    assert (seen["method"], seen["path"]) == ("POST", "/api/payments")
    assert seen["body"] == json.dumps({"amount": 1000})
    h = seen["headers"]
    assert h["content-type"] == "application/json" and h["content-length"] == str(len(seen["body"]))
    assert h["idempotency-key"] == "6f1d9a4e-0000-5000-8000-000000000000"
    assert h["host"] == server.url.removeprefix("http://")


def test_a_path_that_is_not_plain_ascii_is_percent_encoded(server: Scripted) -> None:
    ep = server.endpoint("GET")
    assert ep.request("/a b/é?q=1") == Answer(200, "")
    assert server.seen()[0]["path"] == "/a%20b/%C3%A9?q=1"


def test_no_answer_in_time_is_a_timeout_and_the_connection_is_not_reused(
    server: Scripted,
) -> None:
    ep = server.endpoint("GET", 0.3)
    t = time.monotonic()
    with pytest.raises(TimeoutError):
        ep.request("/hang")
    assert 0.25 < time.monotonic() - t < 2
    assert ep.idle == []
    assert ep.request("/cl") == Answer(200, "cl") and ep.opened == 2


def test_not_http_is_a_bad_response_and_a_closed_port_refused(server: Scripted) -> None:
    ep = server.endpoint("GET")
    with pytest.raises(BadResponse):
        ep.request("/garbage")
    assert ep.idle == []
    server.proc.kill()
    server.proc.wait()
    with pytest.raises(ConnectionRefusedError):
        server.endpoint("GET").request("/cl")


def test_requests_in_flight_at_once_each_get_their_own_connection(server: Scripted) -> None:
    ep = server.endpoint("GET")
    jobs = [gevent.spawn(ep.request, "/slow") for _ in range(5)]
    gevent.joinall(jobs, timeout=5)
    assert [j.value for j in jobs] == [Answer(200, "")] * 5
    assert ep.opened == 5 and len(ep.idle) == 5
    assert ep.request("/cl") == Answer(200, "cl") and ep.opened == 5


def test_a_host_name_reaches_the_address_that_listens(
    server: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A name with two addresses, the first where nothing listens (as localhost may name ::1
    # first while the server listens on 127.0.0.1 only).
    real = socket.getaddrinfo
    port = int(server.url.rsplit(":", 1)[1])

    def two(host: str, *args: Any, **kw: Any) -> list[Any]:
        found = real("127.0.0.1", *args, **kw)
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", port, 0, 0)), *found]

    monkeypatch.setattr(socket, "getaddrinfo", two)
    ep = server.endpoint("GET", url=server.url.replace("127.0.0.1", "two-addresses.test"))
    assert ep.request("/cl") == Answer(200, "cl")
    assert ep.request("/cl") == Answer(200, "cl") and ep.opened == 1
    assert ep.addresses[0][1] == ("127.0.0.1", port)
