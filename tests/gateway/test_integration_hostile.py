"""Integration: the real gateway process against hostile and broken clients, on raw sockets.

Bytes that are not UTF-8 in a key, JSON nested past the parser's limit, NaN
where a time is expected, a client that half-closes, more connections than
the process has descriptors, a ledger that cannot be written: each gets a
clear answer, and none stops the gateway quietly.
"""

from __future__ import annotations

import contextlib
import csv
import json
import re
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, pg_scenario, wait_for

pytestmark = pytest.mark.integration

Limits = Callable[[], None]


class Gateway:
    """``python -m harness.pg --port 0 --t0 now`` with a ledger; stderr kept in a file."""

    def __init__(self, tmp: Path, limits: Limits | None = None, fault: str = "{type: healthy}"):
        self.ledger = tmp / "ledger.csv"
        self.stderr_path = tmp / "pg.err"
        argv = [sys.executable, "-m", "harness.pg", "--scenario", str(pg_scenario(tmp, fault))]
        argv += ["--port", "0", "--t0", "now", "--ledger", str(self.ledger)]
        with self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True, preexec_fn=limits
            )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if not found:
            self.stop()
            raise RuntimeError(f"the gateway did not start: {line!r} {self.stderr}")
        self.port = int(found[1])
        self.url = f"http://127.0.0.1:{self.port}"

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def rows(self) -> list[dict[str, str]]:
        with self.ledger.open(encoding="utf-8", newline="") as f:
            return list(csv.DictReader(f))

    def metric(self, name: str) -> float:
        for line in httpx.get(f"{self.url}/metrics", timeout=5).text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise KeyError(name)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()
        finally:
            if self.proc.stdout is not None:
                self.proc.stdout.close()


@pytest.fixture
def gateways(tmp_path: Path) -> Iterator[Callable[..., Gateway]]:
    started: list[Gateway] = []

    def start(limits: Limits | None = None, fault: str = "{type: healthy}") -> Gateway:
        started.append(Gateway(tmp_path, limits, fault))
        return started[-1]

    yield start
    for g in started:
        g.stop()


def approve(
    key: bytes, body: bytes = b'{"amount": 1}', headers: bytes = b"", close: bool = True
) -> bytes:
    """A raw approve request: the key's bytes go on the wire as they are."""
    return (
        b"POST /v1/payments/approve HTTP/1.1\r\nHost: pg\r\nIdempotency-Key: " + key + b"\r\n"
        b"Content-Type: application/json\r\n" + headers
        + b"Content-Length: " + str(len(body)).encode() + b"\r\n"
        + (b"Connection: close\r\n" if close else b"") + b"\r\n" + body
    )  # fmt: skip


def exchange(port: int, request: bytes, half_close: bool = False, timeout: float = 5) -> bytes:
    """Send ``request`` on a new connection; read until the gateway closes it (or ``timeout``)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        answer = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                data = sock.recv(65536)
            except TimeoutError:
                break
            if not data:
                break
            answer += data
        return answer


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


def body_of(answer: bytes) -> Any:
    return json.loads(answer.partition(b"\r\n\r\n")[2])


# ---------------------------------------------------------------- issue 12, item 1


def test_a_key_that_is_not_utf8_is_written_escaped_and_the_ledger_goes_on(
    gateways: Callable[..., Gateway],
) -> None:
    g = gateways()
    assert status_of(exchange(g.port, approve(b"ok-1"))) == 200
    assert status_of(exchange(g.port, approve(b"\xff\xfe"))) == 200
    assert status_of(exchange(g.port, approve(b"ok-2"))) == 200
    # Written while running (every 0.5 s), not only at SIGTERM: the writer did not die.
    assert wait_for(lambda: [r["key"] for r in g.rows()] == ["ok-1", "\\xff\\xfe", "ok-2"]), (
        g.rows(),
        g.stderr,
    )
    assert g.metric("pg_ledger_escaped_rows_total") == 1
    assert status_of(exchange(g.port, approve(b"\xff\xfe"))) == 200  # the same key again
    assert wait_for(lambda: len(g.rows()) == 4)
    assert [r["attempt"] for r in g.rows() if r["key"] == "\\xff\\xfe"] == ["1", "2"]
    assert g.stop() == 0
    err = g.stderr
    assert err.count("not valid UTF-8") == 1 and "Traceback" not in err


def test_a_ledger_that_cannot_be_written_stops_the_gateway_loudly(
    gateways: Callable[..., Gateway],
) -> None:
    """A write that fails mid-run (here: the file size limit) ends the process with exit 3."""

    def small_files() -> None:  # the header and stderr fit, thirty rows do not
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))

    g = gateways(small_files)
    for i in range(30):
        with contextlib.suppress(httpx.TransportError):  # it may be gone already
            httpx.post(
                f"{g.url}/v1/payments/approve",
                headers={"Idempotency-Key": f"payment-number-{i}"},
                json={"amount": 1},
                timeout=5,
            )
    assert g.proc.wait(timeout=10) == 3  # what the orchestrator's check_alive sees
    err = g.stderr
    assert err.startswith("error cannot write the ledger") and "File too large" in err
    assert err.count("\n") == 1 and "Traceback" not in err


# ---------------------------------------------------------------- issue 12, item 8


def test_json_nested_past_the_parser_is_400_on_every_route_and_recorded(
    gateways: Callable[..., Gateway],
) -> None:
    g = gateways()
    deep = b"[" * 100_000 + b"]" * 100_000
    body = exchange(g.port, approve(b"deep-body", body=deep))
    assert status_of(body) == 400 and "nested too deeply" in body_of(body)["error"]
    header = exchange(
        g.port, approve(b"deep-header", headers=b"X-Harness-Fault: " + b"[" * 5000 + b"\r\n")
    )
    assert status_of(header) == 400 and "nested too deeply" in body_of(header)["error"]
    for path in (b"/__admin/fault", b"/__admin/start"):
        method = b"PUT " if path.endswith(b"fault") else b"POST "
        request = (
            method + path + b" HTTP/1.1\r\nHost: pg\r\nContent-Length: "
            + str(len(deep)).encode() + b"\r\nConnection: close\r\n\r\n" + deep
        )  # fmt: skip
        answer = exchange(g.port, request)
        assert status_of(answer) == 400, (path, answer[:200])
    nan = exchange(g.port, approve(b"nan-body", body=b'{"amount": NaN}'))
    assert status_of(nan) == 400 and "NaN is not JSON" in body_of(nan)["error"]
    assert wait_for(lambda: len(g.rows()) == 3)
    seen = {r["key"]: (r["attempt"], r["fault"], r["status"]) for r in g.rows()}
    assert seen == {
        "deep-body": ("1", "invalid-request", "400"),
        "deep-header": ("0", "invalid-request", "400"),  # refused before it counted
        "nan-body": ("1", "invalid-request", "400"),
    }
    assert g.stop() == 0
    assert "Traceback" not in g.stderr


def _strict(text: str) -> Any:
    def refuse(name: str) -> None:
        raise ValueError(f"{name} in the gateway's JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    "body",
    [b'{"t0": NaN}', b'{"t0": Infinity}', b'{"t0": -Infinity}', b'{"t0": 1e400}',
     b'{"t0": "nan"}', b'{"t0": "inf"}', b'{"t0": true}', b'{"t0": [1]}', b'{"t0": null}'],
)  # fmt: skip
def test_admin_start_takes_a_finite_number_only_and_status_stays_json(
    gateways: Callable[..., Gateway], body: bytes
) -> None:
    g = gateways()
    before = _strict(httpx.get(f"{g.url}/__admin/status", timeout=5).text)["t0"]
    answer = httpx.post(f"{g.url}/__admin/start", content=body, timeout=5)
    assert answer.status_code == 400, answer.text
    assert "t0" in answer.json()["error"]
    status = _strict(httpx.get(f"{g.url}/__admin/status", timeout=5).text)
    assert status["t0"] == before and status["phase"] == "only"
    _strict(httpx.get(f"{g.url}/__admin/fault", timeout=5).text)
    ok = httpx.post(f"{g.url}/__admin/start", json={"t0": 1.7e9}, timeout=5)
    assert ok.status_code == 200 and ok.json() == {"t0": 1.7e9}


def test_a_client_that_half_closes_after_its_request_gets_the_answer(
    gateways: Callable[..., Gateway],
) -> None:
    g = gateways()
    plain = exchange(g.port, approve(b"half-1", close=False), half_close=True)
    assert status_of(plain) == 200 and body_of(plain)["status"] == "APPROVED"
    # The FIN arrives while the answer is held back by the fault: still answered.
    slow = approve(b"half-2", close=False, headers=b'X-Harness-Fault: {"type": "latency", '
                   b'"delay": "300ms"}\r\n')  # fmt: skip
    started = time.monotonic()
    answer = exchange(g.port, slow, half_close=True)
    assert status_of(answer) == 200 and time.monotonic() - started >= 0.29
    # A FIN on an idle keep-alive connection, or in the middle of a body, closes it at once.
    with socket.create_connection(("127.0.0.1", g.port), timeout=5) as sock:
        sock.sendall(approve(b"keep", close=False))
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        sock.shutdown(socket.SHUT_WR)
        assert sock.recv(65536) == b""
    cut = approve(b"cut", body=b'{"amount": 1}')[:-5]  # Content-Length says 5 more bytes
    started = time.monotonic()
    assert exchange(g.port, cut, half_close=True) == b""
    assert time.monotonic() - started < 2
    assert g.stop() == 0


# ---------------------------------------------------------------- issue 12, item 9


def _few_files() -> None:
    """64 descriptors, and the gateway may not raise the limit (the hard limit is 64 too)."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))


def test_out_of_descriptors_the_gateway_says_so_once_and_serves_what_it_holds(
    gateways: Callable[..., Gateway],
) -> None:
    g = gateways(_few_files)
    with httpx.Client(base_url=g.url, timeout=5) as held:  # one keep-alive connection
        assert held.get("/health").status_code == 200
        flood = []
        try:
            for _ in range(200):  # 200 more connections than it has descriptors for
                flood.append(socket.create_connection(("127.0.0.1", g.port), timeout=5))
            assert wait_for(lambda: "out of file descriptors" in g.stderr)
            answer = held.post(
                "/v1/payments/approve", headers={"Idempotency-Key": "held"}, json={"amount": 1}
            )
            assert answer.status_code == 200
        finally:
            for sock in flood:
                sock.close()
    # Once the flood is gone it accepts again (asyncio retries the listener every second).
    assert httpx.get(f"{g.url}/health", timeout=5).status_code == 200
    assert g.stop() == 0
    err = g.stderr
    assert len(err) < 2048 and "Traceback" not in err, err[:2000]
    assert err.splitlines() == [
        "pg: out of file descriptors (limit 64): not accepting new connections until some "
        "close (they wait in the listen backlog)"
    ]


# ---------------------------------------------------------------- issue 12, item 5 (part)


@pytest.mark.parametrize(
    "option",
    [["--port", "70000"], ["--port", "-1"], ["--control-port", "70000"], ["--fd", "-5"],
     ["--t0", "nan"], ["--t0", "inf"]],
)  # fmt: skip
def test_a_bad_port_fd_or_t0_exits_2_without_a_traceback(tmp_path: Path, option: list[str]) -> None:
    scenario = pg_scenario(tmp_path, "{type: healthy}")
    done = subprocess.run(
        [sys.executable, "-m", "harness.pg", "--scenario", str(scenario), *option],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and option[0] in done.stderr


def test_malformed_http_is_400_in_one_log_line_each_and_the_log_is_bounded(
    gateways: Callable[..., Gateway],
) -> None:
    from harness.gateway.connection import MALFORMED_LOGGED

    g = gateways()
    bad_length = b"GET /health HTTP/1.1\r\nHost: pg\r\nContent-Length: abc\r\n\r\n"
    bad_chunk = (
        b"POST /v1/payments/approve HTTP/1.1\r\nHost: pg\r\n"
        b"Transfer-Encoding: chunked\r\n\r\nzz\r\n"
    )
    for request in [bad_length] + [bad_chunk] * (MALFORMED_LOGGED + 5):
        assert exchange(g.port, request, timeout=2).startswith(b"HTTP/1.0 400 ")
    assert status_of(exchange(g.port, approve(b"after-the-garbage"))) == 200
    assert g.stop() == 0
    err = g.stderr
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if "malformed request from 127.0.0.1" in line]
    assert len(lines) == MALFORMED_LOGGED, err
    assert "Content-Length" in lines[0] and lines[-1].endswith("later ones are not logged")


# ---------------------------------------------------------------- issue 22, item 13


def test_a_key_longer_than_255_characters_is_a_400_that_says_so(
    gateways: Callable[..., Gateway],
) -> None:
    # 8 KB keys cost ~7 KB each in the attempt counts (7-8 GB at the 1M-key cap): a key is
    # at most 255 characters, as at Stripe, and a longer one is refused, never counted.
    g = gateways()
    assert status_of(exchange(g.port, approve(b"k" * 255))) == 200
    answer = exchange(g.port, approve(b"k" * 8000))
    assert status_of(answer) == 400, answer[:200]
    assert "Idempotency-Key is 8,000 characters; at most 255" in body_of(answer)["error"]
    long_id = b"r" * 300
    read = b"GET /v1/catalogue/products/3 HTTP/1.1\r\nHost: pg\r\nX-Request-Id: " + long_id
    answer = exchange(g.port, read + b"\r\nConnection: close\r\n\r\n")
    assert status_of(answer) == 400 and "X-Request-Id is 300 characters" in body_of(answer)["error"]
    assert (
        status_of(exchange(g.port, read[: -len(long_id)] + b"ok\r\nConnection: close\r\n\r\n"))
        == 200
    )
    assert wait_for(lambda: len(g.rows()) == 4), g.rows()
    assert [r["fault"] for r in g.rows()][1:3] == ["invalid-request"] * 2
    assert g.metric("pg_keys_tracked") == 2  # the refused keys were never counted
