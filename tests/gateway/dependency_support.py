"""What the dependency-mode tests share: a real upstream on loopback, and the gateway process
playing a named dependency (``python -m harness.gateway --dependency NAME``)."""

from __future__ import annotations

import asyncio
import csv
import gzip
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from aiohttp import web

from tests.conftest import ROOT

BINARY = bytes(range(256)) * 64
"""16 KiB of every byte value."""
LARGE = bytes(i * 7 % 251 for i in range(3 << 20))
"""3 MiB: more than one read buffer, and more than aiohttp's default request size."""
GZIPPED = gzip.compress(b'{"compressed": true}' * 100, mtime=0)


@dataclass(frozen=True)
class Seen:
    """One request as the upstream received it."""

    method: str
    path_qs: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def values(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]


class Upstream:
    """A real HTTP upstream on 127.0.0.1, in a thread of its own: records every request and
    answers by path (``/status/N``, ``/sleep/MS``, ``/binary``, ``/gzip``, ``/large``,
    ``/redirect``, ``/no-content``, ``/echo-body``; anything else: 200 ``upstream saw
    <path_qs>`` with two ``Set-Cookie``)."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        sock = socket.create_server(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
        self._ready = threading.Event()
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the upstream did not start")

    def _serve(self, sock: socket.socket) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application(client_max_size=64 << 20)
        app.router.add_route("*", "/{tail:.*}", self._answer)
        self._runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(self._runner.setup())
        self._loop.run_until_complete(web.SockSite(self._runner, sock).start())
        self._ready.set()
        self._loop.run_forever()

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in request.raw_headers)
        self.seen.append(Seen(request.method, request.path_qs, headers, body))
        path = request.path
        if path.startswith("/status/"):
            return web.Response(status=int(path.rsplit("/", 1)[1]), text="as asked")
        if path.startswith("/sleep/"):  # answers after N ms
            await asyncio.sleep(int(path.rsplit("/", 1)[1]) / 1000)
            return web.Response(text="slept", headers={"X-Up": "slept"})
        if path == "/binary":
            return web.Response(body=BINARY, content_type="application/octet-stream")
        if path == "/gzip":
            return web.Response(
                body=GZIPPED,
                headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
            )
        if path == "/large":
            return web.Response(body=LARGE, content_type="application/octet-stream")
        if path == "/redirect":
            return web.Response(status=302, headers={"Location": "/elsewhere"})
        if path == "/no-content":
            return web.Response(status=204, headers={"X-Up": "204"})
        if path == "/echo-body":
            return web.Response(body=body, content_type="application/octet-stream")
        response = web.Response(
            text=f"upstream saw {request.path_qs}", headers={"X-Up": "yes", "ETag": '"v1"'}
        )
        response.headers.add("Set-Cookie", "a=1; Path=/")
        response.headers.add("Set-Cookie", "b=2; Path=/")
        return response

    def last(self) -> Seen:
        assert self.seen, "the upstream received nothing"
        return self.seen[-1]

    def stop(self) -> None:
        if self._runner is not None:
            runner = self._runner
            asyncio.run_coroutine_threadsafe(runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


def scenario(folder: Path, dependencies: str, seed: int = 1, name: str = "deps") -> Path:
    """A scenario file whose ``dependencies:`` block is ``dependencies`` (indented 2), each
    named by one build."""
    names = [
        line.strip().rstrip(":")
        for line in dependencies.splitlines()
        if line.startswith("  ") and not line.startswith("   ") and line.strip().endswith(":")
    ]
    env = ", ".join(f"{n.upper()}: '{{dep.{n}.url}}'" for n in names)
    path = folder / f"{name}.yaml"
    path.write_text(
        f"name: {name}\nseed: {seed}\nduration: 1h\ntraffic:\n  x: {{path: /x, rate: 1}}\n"
        f"dependencies:\n{dependencies}"
        f"builds:\n  b: {{command: 'service {{port}}', env: {{{env}}}}}\n"
    )
    return path


class DependencyProcess:
    """``python -m harness.gateway --dependency NAME`` on a socket bound here, with a ledger."""

    def __init__(
        self,
        scenario: Path,
        name: str,
        ledger: Path,
        t0: float | None = None,
        control: bool = False,
    ) -> None:
        main = socket.create_server(("127.0.0.1", 0), backlog=4096)
        socks = [main]
        argv = [sys.executable, "-m", "harness.gateway", "--scenario", str(scenario)]
        argv += ["--dependency", name, "--fd", str(main.fileno()), "--ledger", str(ledger)]
        self.url = f"http://127.0.0.1:{main.getsockname()[1]}"
        self.control_url = self.url
        if control:
            side = socket.create_server(("127.0.0.1", 0), backlog=64)
            socks.append(side)
            argv += ["--control-fd", str(side.fileno())]
            self.control_url = f"http://127.0.0.1:{side.getsockname()[1]}"
        if t0 is not None:
            argv += ["--t0", repr(t0)]
        self.ledger = ledger
        for s in socks:
            s.set_inheritable(True)
        self.proc = subprocess.Popen(argv, pass_fds=[s.fileno() for s in socks], cwd=ROOT)
        for s in socks:
            s.close()

    def wait_ready(self) -> DependencyProcess:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the gateway exited {self.proc.returncode}")
            try:
                if httpx.get(f"{self.control_url}/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("the gateway did not start")

    def start_clock(self, t0: float | None = None) -> float:
        t0 = time.time() if t0 is None else t0
        answer = httpx.post(f"{self.control_url}/__admin/start", json={"t0": t0}, timeout=5)
        assert answer.status_code == 200, answer.text
        return t0

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def rows(self) -> list[dict[str, str]]:
        """The ledger as written so far (the writer flushes every 0.5 s)."""
        if not self.ledger.exists():
            return []
        with self.ledger.open(newline="") as f:
            return list(csv.DictReader(f))

    def rows_for(self, key: str, n: int = 1, timeout: float = 5.0) -> list[dict[str, str]]:
        """The ledger rows whose key is ``key``, once there are ``n`` of them."""
        deadline = time.monotonic() + timeout
        while True:
            found = [r for r in self.rows() if r["key"] == key]
            if len(found) >= n or time.monotonic() > deadline:
                return found
            time.sleep(0.05)
