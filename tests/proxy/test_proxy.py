"""The TCP fault proxy on real loopback sockets: each toxic as a client sees it.

Upstream is a small asyncio echo server in the test's own loop; the proxy runs
in the same loop through its library API (test_integration_proxy.py runs it as
a process). Timing bounds are loose on purpose: the lower bound is what the
toxic guarantees, the upper one only catches "never happened".
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import socket
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.core.errors import InputError, RunError, ScenarioError
from harness.core.fate import fate
from harness.core.net import AddressError, OpenFiles, parse_address
from harness.proxy.main import main
from harness.proxy.server import Proxy
from harness.proxy.toxics import LatencyToxic, ProxyConfigError, load_schedule, load_schedule_text
from tests.proxy.streams import client, port_of, proxied, round_trip, run

# ---------------------------------------------------------------- plain forwarding


def test_forwards_bytes_both_ways_and_counts_them() -> None:
    async def body() -> None:
        async with proxied() as proxy, client(port_of(proxy)) as conn:
            assert await round_trip(conn) < 1.0
            bulk = bytes(range(256)) * 4096  # 1 MiB: the fast path and its flow control
            reader, writer = conn
            writer.write(bulk)
            assert await asyncio.wait_for(reader.readexactly(len(bulk)), 10) == bulk
            assert proxy.stats.bytes == {"upstream": 100 + len(bulk), "downstream": 100 + len(bulk)}
            families = {f.name: f for f in text_string_to_metric_families(proxy.metrics_text())}
            assert families["proxy_connections"].samples[0].value == 1
            assert families["proxy_connections_active"].samples[0].value == 1
            by_stream = {s.labels["stream"]: s.value for s in families["proxy_bytes"].samples}
            assert by_stream["downstream"] == 100 + len(bulk)
        assert proxy.stats.connections_active == 0

    run(body)


def test_half_close_is_passed_on() -> None:
    async def body() -> None:
        async with proxied() as proxy, client(port_of(proxy)) as (reader, writer):
            writer.write(b"last words")
            writer.write_eof()
            assert await asyncio.wait_for(reader.read(), 5) == b"last words"

    run(body)


# ---------------------------------------------------------------- each toxic


def test_latency_adds_its_delay_to_each_round_trip() -> None:
    async def body() -> None:
        async with proxied([{"type": "latency", "latency": "150ms"}]) as proxy:
            async with client(port_of(proxy)) as conn:
                rtts = [await round_trip(conn) for _ in range(4)]
            assert all(0.14 <= r < 1.0 for r in rtts), rtts
            proxy.set_toxics([{"type": "latency", "latency": "100ms", "jitter": "50ms"}])
            async with client(port_of(proxy)) as conn:
                rtts = [await round_trip(conn) for _ in range(8)]
            assert all(0.045 <= r < 1.0 for r in rtts), rtts
            assert max(rtts) - min(rtts) > 0.005, rtts  # jitter varies the delay
            proxy.set_toxics([{"type": "latency", "latency": "100ms", "stream": "both"}])
            async with client(port_of(proxy)) as conn:
                assert 0.19 <= await round_trip(conn) < 1.5

    run(body)


def test_latency_is_pipelined_not_added_per_chunk() -> None:
    """Like Toxiproxy: each chunk leaves `latency` after it arrived, so bulk data is not slowed."""

    async def body() -> None:
        async with (
            proxied([{"type": "latency", "latency": "200ms"}]) as proxy,
            client(port_of(proxy)) as conn,
        ):
            elapsed = await round_trip(conn, b"y" * 4_000_000)
            assert 0.19 <= elapsed < 3.0

    run(body)


def test_bandwidth_limits_throughput() -> None:
    async def body() -> None:
        async with (
            proxied([{"type": "bandwidth", "rate": 50}]) as proxy,
            client(port_of(proxy)) as conn,
        ):
            elapsed = await round_trip(conn, b"z" * 100_000)  # 100 KB at 50 KB/s
            assert 1.8 <= elapsed < 6.0

    run(body)


async def _time_to_eof(proxy: Proxy) -> float:
    async with client(port_of(proxy)) as (reader, writer):
        writer.write(b"bye")
        writer.write_eof()  # the echo server answers, then closes its side
        assert await asyncio.wait_for(reader.readexactly(3), 5) == b"bye"
        started = time.monotonic()
        assert await asyncio.wait_for(reader.read(), 5) == b""
        return time.monotonic() - started


def test_slow_close_delays_the_eof() -> None:
    async def body() -> None:
        async with proxied() as proxy:
            assert await _time_to_eof(proxy) < 0.3
            proxy.set_toxics([{"type": "slow-close", "delay": "600ms"}])
            assert 0.55 <= await _time_to_eof(proxy) < 3.0

    run(body)


def test_timeout_zero_is_a_blackhole_that_lifts_with_the_toxic() -> None:
    async def body() -> None:
        async with (
            proxied([{"type": "timeout", "timeout": 0}]) as proxy,
            client(port_of(proxy)) as (reader, writer),
        ):
            writer.write(b"anyone?")
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(reader.read(100), 0.8)
            assert proxy.stats.connections_active == 1  # held open, not closed
            proxy.set_toxics([])  # data was held, not dropped: it arrives now
            assert await asyncio.wait_for(reader.readexactly(7), 5) == b"anyone?"

    run(body)


def test_timeout_closes_the_connection_after_the_timeout() -> None:
    async def body() -> None:
        async with (
            proxied([{"type": "timeout", "timeout": "1s"}]) as proxy,
            client(port_of(proxy)) as (reader, writer),
        ):
            started = time.monotonic()
            writer.write(b"ping")
            assert await asyncio.wait_for(reader.read(100), 5) == b""  # EOF, no data
            assert 0.9 <= time.monotonic() - started < 3.0

    run(body)


def test_reset_peer_resets_the_connection() -> None:
    async def body() -> None:
        async with proxied([{"type": "reset-peer"}]) as proxy:
            async with client(port_of(proxy)) as (reader, writer):
                writer.write(b"ping")
                with pytest.raises(ConnectionResetError):
                    await asyncio.wait_for(reader.read(100), 5)
            proxy.set_toxics([{"type": "reset-peer", "timeout": "400ms"}])
            async with client(port_of(proxy)) as (reader, writer):
                started = time.monotonic()
                writer.write(b"ping")
                with pytest.raises(ConnectionResetError):
                    await asyncio.wait_for(reader.read(100), 5)
                assert 0.35 <= time.monotonic() - started < 3.0

    run(body)


def test_slicer_delivers_many_small_delayed_reads() -> None:
    async def body() -> None:
        toxic = {"type": "slicer", "average-size": 10, "size-variation": 4, "delay": "20ms"}
        async with proxied([toxic]) as proxy, client(port_of(proxy)) as (reader, writer):
            started = time.monotonic()
            writer.write(b"s" * 200)
            reads: list[bytes] = []
            while sum(map(len, reads)) < 200:
                reads.append(await asyncio.wait_for(reader.read(65536), 5))
            assert b"".join(reads) == b"s" * 200
            assert len(reads) >= 10, [len(r) for r in reads]
            assert max(map(len, reads)) <= 40
            assert time.monotonic() - started >= 0.25

    run(body)


def test_limit_data_closes_after_that_many_bytes() -> None:
    async def body() -> None:
        async with (
            proxied([{"type": "limit-data", "bytes": 1000}]) as proxy,
            client(port_of(proxy)) as (reader, writer),
        ):
            writer.write(b"d" * 5000)
            received = b""
            while chunk := await asyncio.wait_for(reader.read(65536), 5):
                received += chunk
            assert received == b"d" * 1000

    run(body)


# ---------------------------------------------------------------- toxicity and seeds


async def _hits(seed: int, n: int = 200) -> list[bool]:
    """Which of n sequential connections met a 50% limit-data toxic (cut after 2 bytes)."""
    toxic = {"type": "limit-data", "bytes": 2, "toxicity": 0.5}
    hits = []
    async with proxied([toxic], seed=seed) as proxy:
        for _ in range(n):
            async with client(port_of(proxy)) as (reader, writer):
                writer.write(b"hello")
                try:
                    await asyncio.wait_for(reader.readexactly(5), 5)
                    hits.append(False)
                except asyncio.IncompleteReadError as exc:
                    assert exc.partial == b"he"
                    hits.append(True)
        assert proxy.stats.toxics_applied["limit-data"] == sum(hits)
    return hits


def test_toxicity_hits_about_half_and_the_same_connections_for_a_seed() -> None:
    async def body() -> None:
        first, again, other = await _hits(7), await _hits(7), await _hits(8)
        assert 70 <= sum(first) <= 130
        assert first == again
        assert first != other
        assert first == [fate(7, str(i), 1, "0") < 0.5 for i in range(1, 201)]

    run(body)


# ---------------------------------------------------------------- schedule

SCHEDULE = """\
phases:
  - name: slow
    start: 600ms
    duration: 1200ms
    toxics:
      - {type: latency, latency: 300ms}
"""


def test_schedule_switches_toxics_on_at_start_and_off_at_end_on_open_connections() -> None:
    async def body() -> None:
        async with proxied(schedule=load_schedule_text(SCHEDULE)) as proxy:
            assert proxy.t0 is not None
            t0 = proxy.t0

            async def at(t: float) -> None:
                await asyncio.sleep(max(0.0, t0 + t - time.time()))

            async with client(port_of(proxy)) as kept:
                assert await round_trip(kept) < 0.2
                assert proxy.phase is None
                await at(0.9)
                assert proxy.phase == "slow"
                assert await round_trip(kept) >= 0.28  # a connection opened before the phase
                async with client(port_of(proxy)) as fresh:
                    assert await round_trip(fresh) >= 0.28
                await at(2.1)
                assert proxy.phase is None
                assert await round_trip(kept) < 0.2
            assert proxy.stats.toxics_applied["latency"] == 2

    run(body)


def test_schedule_file_is_validated_with_locations(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        """\
phases:
  - name: a
    start: 0s
    duration: 10s
    toxics:
      - {type: latency, latncy: 1s}
  - name: b
    start: 5s
    duration: 2s
    toxics:
      - {type: bandwidth, rate: 10, stream: sideways}
      - {type: teleport}
"""
    )
    with pytest.raises(ScenarioError) as exc:
        load_schedule(path)
    text = str(exc.value)
    assert f"{path}:6:" in text and "phases.0.toxics.0" in text and "unknown key" in text
    assert "stream" in text and "teleport" in text
    path.write_text(SCHEDULE.replace("600ms", "2s") + SCHEDULE.replace("name: slow", "name: b"))
    with pytest.raises(ScenarioError):
        load_schedule(path)  # duplicate key phases
    overlap = "phases:\n" + "\n".join(SCHEDULE.splitlines()[1:]) + "\n"
    overlap += "\n".join(SCHEDULE.replace("name: slow", "name: b").splitlines()[1:]) + "\n"
    with pytest.raises(ScenarioError, match="starts before phase"):
        load_schedule_text(overlap)
    with pytest.raises(ScenarioError, match="two latency toxics on the downstream stream"):
        load_schedule_text(
            "phases: [{name: x, start: 0, duration: 1, toxics: "
            "[{type: latency, latency: 1s}, {type: latency, latency: 2s, stream: both}]}]"
        )
    with pytest.raises(ScenarioError, match="size-variation"):
        load_schedule_text(
            "phases: [{name: x, start: 0, duration: 1, toxics: "
            "[{type: slicer, average-size: 5, size-variation: 5}]}]"
        )
    assert load_schedule_text(SCHEDULE).phases[0].toxics == [
        LatencyToxic(type="latency", latency=0.3)
    ]


# ---------------------------------------------------------------- safety and lifecycle


def test_only_loopback_addresses_are_accepted() -> None:
    for listen in ("0.0.0.0:0", "10.0.0.1:80", "example.com:80", "[2001:db8::1]:80"):
        with pytest.raises(AddressError, match="only loopback"):
            Proxy(listen, "127.0.0.1:5432")
        with pytest.raises(ValueError, match="only loopback"):
            Proxy("127.0.0.1:0", listen if listen != "0.0.0.0:0" else "0.0.0.0:80")
    with pytest.raises(InputError, match="HOST:PORT"):
        Proxy("127.0.0.1", "127.0.0.1:1")
    with pytest.raises(InputError, match="port out of range"):
        Proxy("127.0.0.1:0", "127.0.0.1:0")
    assert parse_address("localhost:5432") == ("localhost", 5432)
    assert parse_address("[::1]:5432") == ("::1", 5432)
    assert parse_address("127.0.0.2:1") == ("127.0.0.2", 1)
    with pytest.raises(ProxyConfigError, match="invalid toxics"):
        Proxy("127.0.0.1:0", "127.0.0.1:1").set_toxics([{"type": "latency"}])


def test_main_exits_2_on_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--upstream", "192.168.1.10:5432"])
    assert exc.value.code == 2
    assert "only loopback" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("phases: [{name: x, start: 0, duration: 1, toxics: [{type: nope}]}]\n")
    with pytest.raises(SystemExit) as exc:
        main(["--upstream", "127.0.0.1:5432", "--schedule", str(bad)])
    assert exc.value.code == 2
    assert f"{bad}:1:" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "said"),
    [(["--metrics-port", "70000"], "--metrics-port: 70000 is out of range"),
     (["--listen", "127.0.0.1:70000"], "port out of range"),
     (["--fd", "-3"], "--fd: -3 is not a file descriptor"),
     (["--fd", "99999"], "--fd 99999: not an open socket")],
)  # fmt: skip
def test_main_exits_2_on_a_bad_port_or_fd(
    option: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--upstream", "127.0.0.1:5432", *option])
    assert exc.value.code == 2
    assert said in capsys.readouterr().err


class _FewFiles(OpenFiles):
    """An open-file limit that leaves room for three connections."""

    def budget(self, fds_per_connection: int) -> int:
        return 3


def test_past_its_open_file_budget_the_proxy_leaves_connections_waiting() -> None:
    said = io.StringIO()

    async def body() -> None:
        files = _FewFiles("proxy", stream=said)
        asyncio.get_running_loop().set_exception_handler(files.exception_handler)
        async with proxied(files=files) as proxy:
            port = port_of(proxy)
            conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(5)]
            for conn in conns[:3]:
                await round_trip(conn)
            waiting = conns[3]
            waiting[1].write(b"ping")
            with pytest.raises(TimeoutError):  # in the backlog: not accepted, not refused
                await asyncio.wait_for(waiting[0].readexactly(4), 0.5)
            await round_trip(conns[0])  # the ones it holds go on
            assert proxy.stats.connections_active == 3 and files.hits >= 1
            conns[0][1].close()  # one closes: a waiting one is taken (within asyncio's 1 s retry)
            assert await asyncio.wait_for(waiting[0].readexactly(4), 5) == b"ping"
            for _, writer in conns:
                writer.close()

    run(body)
    assert said.getvalue().count("\n") == 1
    assert said.getvalue().startswith("proxy: out of file descriptors (limit ")


def test_unreachable_upstream_closes_the_client() -> None:
    async def body() -> None:
        with socket.socket() as unused:  # bound, never listening: connections are refused
            unused.bind(("127.0.0.1", 0))
            proxy = Proxy("127.0.0.1:0", f"127.0.0.1:{unused.getsockname()[1]}")
            try:
                async with client(await proxy.start()) as (reader, _):
                    assert await asyncio.wait_for(reader.read(), 5) == b""
                assert proxy.stats.upstream_errors == 1
            finally:
                await proxy.stop()

    run(body)


def test_stop_closes_every_connection() -> None:
    async def body() -> None:
        async with contextlib.AsyncExitStack() as stack:
            proxy = await stack.enter_async_context(proxied([{"type": "timeout", "timeout": 0}]))
            conns = [await stack.enter_async_context(client(port_of(proxy))) for _ in range(5)]
            for _, writer in conns:
                writer.write(b"held")
            await asyncio.sleep(0.2)
            assert proxy.stats.connections_active == 5
            started = time.monotonic()
            await proxy.stop()
            assert time.monotonic() - started < 3.0
            assert proxy.stats.connections_active == 0
            for reader, _ in conns:
                assert await asyncio.wait_for(reader.read(100), 5) == b""

    run(body)


# ---------------------------------------------------------------- issue 22, item 14


@pytest.mark.parametrize(
    ("listen", "upstream"),
    [("127.0.0.1:5432", "127.0.0.1:5432"), ("localhost:5432", "127.0.0.1:5432"),
     ("127.0.0.1:5432", "LOCALHOST:5432"), ("[::1]:5432", "localhost:5432"),
     ("127.0.0.1:05432", "127.0.0.1:5432")],
)  # fmt: skip
def test_main_refuses_to_listen_on_its_own_upstream(
    listen: str, upstream: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each connection would connect to the proxy itself, fanning out until the fd guard stops it.
    with pytest.raises(SystemExit) as exc:
        main(["--upstream", upstream, "--listen", listen])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "is its own upstream" in err and "Traceback" not in err, err


def test_a_listen_socket_on_the_upstream_is_refused_and_other_loopbacks_pass() -> None:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        port = sock.getsockname()[1]
        with pytest.raises(AddressError, match="is its own upstream"):
            Proxy("", f"localhost:{port}", sock=sock)
    Proxy("127.0.0.2:5432", "127.0.0.1:5432")  # another address: another socket
    Proxy("127.0.0.1:0", "127.0.0.1:5432")  # any free port: never the upstream's, listened on


async def _bind_upstream_port() -> str:
    # Port 0 is picked by the kernel; were it the upstream's (nothing listening there), refuse.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proxy = Proxy(f"127.0.0.1:{port}", "127.0.0.1:1")
    proxy.upstream = ("127.0.0.1", port)  # as if the kernel had picked the upstream's port
    try:
        await proxy.start()
    except RunError as exc:
        return str(exc)
    finally:
        await proxy.stop()
    return ""


def test_a_bound_port_that_is_the_upstreams_is_refused() -> None:
    assert "is its own upstream" in asyncio.run(_bind_upstream_port())
