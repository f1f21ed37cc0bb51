"""Benchmark: what the TCP fault proxy costs when it only forwards (no toxic in force).

Three processes, as in real use: an upstream server (a child of this script:
blocking sockets, a thread per connection, so it is never the slow part), the
proxy (``python -m harness.proxy``, its own process) and the client (this
process, blocking sockets with TCP_NODELAY). Each figure is measured against
the upstream directly and through the proxy, in the same invocation:

  round trip   N sequential 64-byte request/response pairs on one connection
               (after 200 warm-up pairs): p50, p99, mean, and what the proxy adds
  connect      200 new connections, each with one round trip: p50 and p99
  upload       200 MB client -> upstream, the upstream acknowledges the last byte
  download     200 MB upstream -> client, then the upstream closes
               (each bulk transfer 5 times, interleaved; the median is shown)

A third column repeats them through a proxy whose schedule keeps a 0 ms
latency toxic in force: every chunk then takes the toxic path (queue, task,
timestamps) instead of the direct callback-to-socket one, so the difference
is what that path costs.

Last, the latency toxic's own accuracy: 500 sequential round trips through a
fourth proxy with ``latency: 20ms`` in force, minus 20 ms, against direct
round trips that each start after 20 ms idle (see ``latency_accuracy``).

Run: ``.venv/bin/python benchmarks/proxy_overhead.py`` (``--pairs N``, ``--mb M``).
Bounded (sockets time out after 30 s; about 30 s in all here); always exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import socket
import socketserver
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHUNK = 1 << 20
TIMEOUT_S = 30.0
REPEAT = 5
ZERO_LATENCY = """\
phases:
  - name: toxic-path
    start: 0s
    duration: 1h
    toxics: [{type: latency, latency: 0ms}]
"""

TIMED_LATENCY_S = 0.020
TIMED_LATENCY = f"""\
phases:
  - name: timed
    start: 0s
    duration: 1h
    toxics: [{{type: latency, latency: {TIMED_LATENCY_S * 1000:g}ms}}]
"""
TIMED_PAIRS = 500

# ---------------------------------------------------------------- the upstream (child process)


class _Upstream(socketserver.BaseRequestHandler):
    """First byte picks the mode: E echo, U upload sink (8-byte size first), D download source."""

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        mode = sock.recv(1)
        if mode == b"E":
            while data := sock.recv(65536):
                sock.sendall(data)
        elif mode in (b"U", b"D"):
            size = int.from_bytes(_recv_exactly(sock, 8), "big")
            if mode == b"U":
                buf, left = bytearray(CHUNK), size
                while left > 0:
                    n = sock.recv_into(buf, min(CHUNK, left))
                    if not n:
                        return
                    left -= n
                sock.sendall(b"k")
            else:
                block, left = memoryview(bytes(CHUNK)), size
                while left > 0:
                    sock.sendall(block[: min(CHUNK, left)])
                    left -= min(CHUNK, left)
                sock.shutdown(socket.SHUT_WR)
                sock.recv(1)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve_upstream() -> None:
    with _Server(("127.0.0.1", 0), _Upstream) as server:
        print(server.server_address[1], flush=True)
        server.serve_forever()


# ---------------------------------------------------------------- the client


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        data = sock.recv(n - len(buf))
        if not data:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += data
    return bytes(buf)


@contextlib.contextmanager
def connect(port: int, mode: bytes) -> Iterator[socket.socket]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(mode)
        yield sock
    finally:
        sock.close()


def round_trips(port: int, pairs: int, idle_s: float = 0.0) -> list[float]:
    """Sequential 64-byte round trips on one connection (after 200 unmeasured ones).

    ``idle_s``: sleep that long before each, so every process on the path
    starts from idle, as it does around a latency toxic's wait.
    """
    payload = b"p" * 64
    times = []
    with connect(port, b"E") as sock:
        for i in range(pairs + 200):
            if idle_s and i >= 200:
                time.sleep(idle_s)
            started = time.perf_counter()
            sock.sendall(payload)
            _recv_exactly(sock, len(payload))
            if i >= 200:
                times.append(time.perf_counter() - started)
    return times


def connects(port: int, n: int = 200) -> list[float]:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        with connect(port, b"E") as sock:
            sock.sendall(b"p")
            _recv_exactly(sock, 1)
        times.append(time.perf_counter() - started)
    return times


def upload(port: int, size: int) -> float:
    block = memoryview(bytes(CHUNK))
    with connect(port, b"U") as sock:
        started = time.perf_counter()
        sock.sendall(size.to_bytes(8, "big"))
        left = size
        while left > 0:
            sock.sendall(block[: min(CHUNK, left)])
            left -= min(CHUNK, left)
        assert _recv_exactly(sock, 1) == b"k"
        return size / (time.perf_counter() - started) / 1e6


def download(port: int, size: int) -> float:
    buf = bytearray(CHUNK)
    with connect(port, b"D") as sock:
        started = time.perf_counter()
        sock.sendall(size.to_bytes(8, "big"))
        got = 0
        while n := sock.recv_into(buf):
            got += n
        elapsed = time.perf_counter() - started
        assert got == size, f"received {got} of {size} bytes"
        return size / elapsed / 1e6


# ---------------------------------------------------------------- processes


def start(argv: list[str], pattern: str) -> tuple[subprocess.Popen[str], int]:
    """Start a child and read its port from the first line it prints."""
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(pattern, line)
    if not found:
        stop(proc)
        raise RuntimeError(f"{argv[2]} did not start: {line!r}")
    return proc, int(found[1])


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--pairs", type=int, default=2000, help="sequential round trips")
    parser.add_argument("--mb", type=int, default=200, help="MB per bulk transfer")
    args = parser.parse_args()
    size = args.mb * 1_000_000
    procs: list[subprocess.Popen[str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        schedule = Path(tmp) / "zero-latency.yaml"
        schedule.write_text(ZERO_LATENCY)
        timed = Path(tmp) / "timed-latency.yaml"
        timed.write_text(TIMED_LATENCY)
        try:
            up, up_port = start([sys.executable, __file__, "--serve-upstream"], r"(\d+)")
            procs.append(up)
            ports = {"direct": up_port}
            proxy_argv = [sys.executable, "-m", "harness.proxy", "--upstream"]
            for name, extra in (("proxy", []), ("proxy+toxic", ["--schedule", str(schedule)])):
                proc, port = start([*proxy_argv, f"127.0.0.1:{up_port}", *extra], r":(\d+) ->")
                procs.append(proc)
                ports[name] = port
            run(ports, args.pairs, size)
            timed_argv = [*proxy_argv, f"127.0.0.1:{up_port}", "--schedule", str(timed)]
            proc, port = start(timed_argv, r":(\d+) ->")
            procs.append(proc)
            latency_accuracy(up_port, port)
        except Exception:
            print(f"failed\n{traceback.format_exc()}")
        finally:
            for proc in procs:
                stop(proc)
    return 0


@dataclass
class Figures:
    """One column of the table: a way to reach the upstream."""

    rtt: list[float] = field(default_factory=list)
    connect: list[float] = field(default_factory=list)
    uploads: list[float] = field(default_factory=list)
    downloads: list[float] = field(default_factory=list)

    @property
    def upload(self) -> float:
        return statistics.median(self.uploads)

    @property
    def download(self) -> float:
        return statistics.median(self.downloads)


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q / 100))]


def run(ports: dict[str, int], pairs: int, size: int) -> None:
    print(f"proxy overhead ({os.cpu_count()} CPUs; client, proxy and upstream: 3 processes)")
    got = {name: Figures() for name in ports}
    for name, port in ports.items():  # one measure for every column before the next measure
        got[name].rtt = round_trips(port, pairs)
    for name, port in ports.items():
        got[name].connect = connects(port)
    for _ in range(REPEAT):
        for name, port in ports.items():
            got[name].uploads.append(upload(port, size))
        for name, port in ports.items():
            got[name].downloads.append(download(port, size))
    mb = size // 1_000_000
    rows: list[tuple[str, Callable[[Figures], str]]] = [
        (f"round trip p50 ({pairs} pairs)", lambda f: ms(pct(f.rtt, 50))),
        ("round trip p99", lambda f: ms(pct(f.rtt, 99))),
        ("round trip mean", lambda f: ms(statistics.fmean(f.rtt))),
        ("connect + round trip p50", lambda f: ms(pct(f.connect, 50))),
        ("connect + round trip p99", lambda f: ms(pct(f.connect, 99))),
        (f"upload {mb} MB (median of {REPEAT})", lambda f: f"{f.upload:.0f} MB/s"),
        (f"download {mb} MB (median of {REPEAT})", lambda f: f"{f.download:.0f} MB/s"),
    ]
    print(f"{'':32}" + "".join(f"{name:>14}" for name in got))
    for label, show in rows:
        print(f"{label:32}" + "".join(f"{show(f):>14}" for f in got.values()))
    direct = got["direct"]
    for name, f in got.items():
        if name == "direct":
            continue
        print(
            f"{name}: adds {ms(pct(f.rtt, 50) - pct(direct.rtt, 50))} (p50) and "
            f"{ms(pct(f.rtt, 99) - pct(direct.rtt, 99))} (p99) per round trip; throughput "
            f"{f.upload / direct.upload:.2f}x direct up, {f.download / direct.download:.2f}x down"
        )


def latency_accuracy(direct_port: int, toxic_port: int) -> None:
    """How exactly the latency toxic delays, against a direct round trip that starts from idle.

    While a round trip waits out the toxic, every process on the path goes
    idle; waking them costs this virtual machine a few hundred microseconds,
    which a back-to-back direct round trip never pays. So the reference is a
    direct round trip after the same idle time.
    """
    through = round_trips(toxic_port, TIMED_PAIRS)
    direct = round_trips(direct_port, TIMED_PAIRS, idle_s=TIMED_LATENCY_S)
    error = [t - TIMED_LATENCY_S for t in through]
    label = f"{TIMED_LATENCY_S * 1000:g} ms"
    print(f"latency toxic {label} (downstream), {TIMED_PAIRS} sequential round trips:")
    print(
        f"  observed - {label}: p50 {ms(pct(error, 50))}, p99 {ms(pct(error, 99))}, "
        f"max {ms(max(error))}; never early: {min(error) >= 0}"
    )
    print(
        f"  reference, direct after {label} idle: p50 {ms(pct(direct, 50))}, "
        f"p99 {ms(pct(direct, 99))}; excess p50 {ms(pct(error, 50) - pct(direct, 50))}, "
        f"p99 {ms(pct(error, 99) - pct(direct, 99))}"
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve-upstream"]:
        serve_upstream()
    else:
        sys.exit(main())
