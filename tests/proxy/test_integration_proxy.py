"""The TCP fault proxy as a process, and in front of the real gateway process.

``python -m harness.proxy`` and ``harness proxy`` are one command line
(``harness.proxy.main``): both are started here as a user would.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from harness.proxy.server import Proxy
from tests.conftest import ROOT, PgServer, harness_cmd
from tests.proxy.streams import client, echo_server, round_trip, run

pytestmark = pytest.mark.integration


def test_real_gateway_over_http_through_the_proxy(pg_factory: Callable[[str], PgServer]) -> None:
    """The real gateway process as the dependency, called with keep-alive HTTP (httpx)."""
    gateway = pg_factory("{type: healthy}")

    async def body() -> None:
        proxy = Proxy("127.0.0.1:0", gateway.url.removeprefix("http://"))
        port = await proxy.start()
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:

                async def pay(key: str) -> float:
                    started = time.monotonic()
                    response = await http.post(
                        "/v1/payments/approve", json={"amount": 1}, headers={"Idempotency-Key": key}
                    )
                    assert response.status_code == 200, response.text
                    return time.monotonic() - started

                assert await pay("a") < 1.0
                proxy.set_toxics([{"type": "latency", "latency": "250ms"}])
                assert await pay("b") >= 0.24  # on the pooled connection opened before
                proxy.set_toxics([{"type": "reset-peer"}])
                with pytest.raises(httpx.TransportError):
                    await pay("c")
                proxy.set_toxics([])
                assert await pay("d") < 1.0
        finally:
            await proxy.stop()
        assert proxy.stats.connections_total >= 2  # the reset one, then a new one

    run(body)


def test_process_serves_metrics_and_stops_on_sigterm() -> None:
    async def body() -> None:
        async with echo_server() as upstream:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "harness.proxy",
                "--upstream",
                f"127.0.0.1:{upstream}",
                "--metrics-port",
                "0",
                cwd=ROOT,
                stdout=asyncio.subprocess.PIPE,
            )
            assert proc.stdout is not None
            try:
                line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
                found = re.search(r"proxy 127\.0\.0\.1:(\d+) .*127\.0\.0\.1:(\d+)/metrics", line)
                assert found, line
                port, metrics_port = int(found[1]), int(found[2])
                async with client(port) as conn:
                    await round_trip(conn)
                    async with client(metrics_port) as (reader, writer):
                        writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                        response = (await asyncio.wait_for(reader.read(), 5)).decode()
                    assert response.startswith("HTTP/1.1 200")
                    assert "proxy_connections_active 1" in response
                    proc.send_signal(signal.SIGTERM)
                    assert await asyncio.wait_for(proc.wait(), 10) == 0
                    assert await asyncio.wait_for(conn[0].read(), 5) == b""
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()

    run(body)


def test_cli_refuses_non_loopback_and_bad_schedules(tmp_path: Path) -> None:
    remote = subprocess.run(
        harness_cmd("proxy", "--upstream", "10.0.0.1:5432"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert remote.returncode == 2 and "Traceback" not in remote.stderr
    bad = tmp_path / "s.yaml"
    bad.write_text("phases:\n  - {name: a, start: 0s, duration: 1s, toxics: [{type: nope}]}\n")
    schedule = subprocess.run(
        harness_cmd("proxy", "--upstream", "127.0.0.1:5432", "--schedule", str(bad)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert schedule.returncode == 2 and f"{bad}:2:" in schedule.stderr


def test_a_time_that_is_not_finite_exits_2() -> None:
    for t0 in ("nan", "inf"):
        done = subprocess.run(
            harness_cmd("proxy", "--upstream", "127.0.0.1:5432", "--t0", t0),
            cwd=ROOT, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "--t0" in done.stderr and "Traceback" not in done.stderr


def _few_files() -> None:
    """64 descriptors, and the proxy may not raise the limit (the hard limit is 64 too)."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))


def test_out_of_descriptors_the_proxy_says_so_once_and_keeps_relaying() -> None:
    """More connections than descriptors: one line on stderr, the held ones still relay."""

    async def body() -> None:
        async with echo_server() as upstream:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "harness.proxy", "--upstream", f"127.0.0.1:{upstream}",
                cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                preexec_fn=_few_files,
            )  # fmt: skip
            assert proc.stdout is not None and proc.stderr is not None
            try:
                line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
                found = re.search(r"proxy 127\.0\.0\.1:(\d+) ", line)
                assert found, line
                port = int(found[1])
                async with client(port) as held:
                    await round_trip(held)
                    flood = [await asyncio.open_connection("127.0.0.1", port) for _ in range(150)]
                    for _, writer in flood:
                        writer.write(b"x")
                    first = await asyncio.wait_for(proc.stderr.readline(), 10)
                    assert first.startswith(b"proxy: out of file descriptors (limit 64)")
                    await round_trip(held)  # the connection it holds still relays

                    async def echoed(reader: asyncio.StreamReader) -> bool:
                        with contextlib.suppress(TimeoutError):
                            return await asyncio.wait_for(reader.readexactly(1), 1) == b"x"
                        return False

                    served = sum(await asyncio.gather(*(echoed(r) for r, _ in flood)))
                    assert 0 < served < 150  # as many as fit; the rest wait in the backlog
                    for _, writer in flood:
                        writer.close()
                    await round_trip(held)
                proc.send_signal(signal.SIGTERM)
                assert await asyncio.wait_for(proc.wait(), 10) == 0
                rest = await asyncio.wait_for(proc.stderr.read(), 5)
                assert len(first + rest) < 2048 and b"Traceback" not in rest, rest[:2000]
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()

    run(body)
