"""Benchmark: the gateway with ``pg.capacity``: calls/s, and the queue's accuracy at 1,000 queued.

Each gateway runs as its own process (``python -m harness.pg`` on a socket
this script binds, with a ledger); this process is the client (aiohttp, one
connection per call in flight, keep-alive).

(a) Calls/s. A closed loop of ``--clients`` connections, each sending its
    next payment as soon as the last is answered, for ``--seconds``, against
    the plain gateway (``healthy``, no ``pg.capacity``) and against one with
    ``pg.capacity`` that never queues (concurrency 10,000, service 0 s),
    alternating ``ROUNDS`` times: what the capacity stage costs a call. The
    ratio is capacity / plain, of the medians; and the stage's own CPU time a
    call, measured in this process.

(b) Queue accuracy at 1,000 queued. ``--burst`` calls (default 1,010) sent at
    once, over connections opened before (``GET /health``), to a gateway with
    concurrency 10 and a fixed 20 ms service: 10 in service and 1,000 waiting.
    From its ledger: the share of calls served in the order they arrived
    (FIFO), each call's wait against M/D/c's for the same arrivals
    (``fifo_waits``: with the service times the gateway served, and with
    D itself), the drain rate against c / D = 500/s, and the peak of
    ``pg_capacity_queued``. The same burst against the plain gateway with
    ``latency: fixed 20ms`` (no queue: every call answered 20 ms after it came)
    is the reference: its calls/s and latencies are what the client and the
    plain gateway give for the same burst.

Run: ``.venv/bin/python benchmarks/pg_capacity.py`` (``--clients``, ``--seconds``,
``--burst``). About 40 s; always exits 0: it measures, it does not judge.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prometheus_client import CollectorRegistry  # noqa: E402

from harness.core.precise_timer import PreciseTimer  # noqa: E402
from harness.gateway.capacity import fifo_waits  # noqa: E402
from harness.gateway.queueing import Capacity  # noqa: E402
from harness.results.io import ledger_from_csv  # noqa: E402
from harness.scenario.capacity import GatewayCapacity  # noqa: E402

SLOTS = 10
SERVICE_S = 0.020


def scenario(capacity: dict[str, Any] | None, fault: dict[str, Any]) -> str:
    """A gateway-only scenario, as JSON (which YAML reads as it is)."""
    pg: dict[str, Any] = {
        "phases": [{"name": "bench", "start": 0, "duration": 3600, "fault": fault}]
    }
    if capacity is not None:
        pg["capacity"] = capacity
    return json.dumps(
        {
            "name": "bench-capacity",
            "seed": 1,
            "duration": 3600,
            "traffic": {"x": {"path": "/x", "rate": 1}},
            "pg": pg,
            "builds": {"b": {"profile": "retry-only"}},
        }
    )


class Gateway:
    """One gateway process on a socket bound here, with its ledger."""

    def __init__(
        self, tmp: Path, name: str, capacity: dict[str, Any] | None, fault: dict[str, Any]
    ) -> None:
        path = tmp / f"{name}.yaml"
        path.write_text(scenario(capacity, fault))
        self.ledger = tmp / f"{name}.csv"
        sock = socket.create_server(("127.0.0.1", 0), backlog=4096)
        sock.set_inheritable(True)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        argv = [sys.executable, "-m", "harness.pg", "--scenario", str(path)]
        argv += ["--fd", str(sock.fileno()), "--t0", "now", "--ledger", str(self.ledger)]
        self.proc = subprocess.Popen(argv, pass_fds=(sock.fileno(),), cwd=ROOT)
        sock.close()

    async def ready(self, session: aiohttp.ClientSession) -> None:
        """Return once it answers ``/health`` (15 s at most)."""
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(f"{self.url}/health") as answer:
                    if answer.status == 200:
                        return
            await asyncio.sleep(0.05)
        raise RuntimeError(f"gateway {self.url} did not start")

    async def gauge(self, session: aiohttp.ClientSession, name: str) -> float:
        async with session.get(f"{self.url}/metrics") as r:
            for line in (await r.text()).splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        return float("nan")

    def rows(self) -> pd.DataFrame:
        """Its ledger, once stopped (SIGTERM writes the rest)."""
        self.proc.terminate()
        self.proc.wait(timeout=20)
        frame = ledger_from_csv(self.ledger)
        return frame[frame["key"] != "warm"].sort_values("arrival", ignore_index=True)


async def _pay(session: aiohttp.ClientSession, url: str, key: str) -> int:
    async with session.post(
        f"{url}/v1/payments/approve", headers={"Idempotency-Key": key}, json={"amount": 1}
    ) as r:
        await r.read()
        return r.status


async def closed_loop(url: str, clients: int, seconds: float) -> tuple[float, int]:
    """Calls/s of ``clients`` connections each sending as soon as answered; and errors."""
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(_pay(session, url, f"warm-{i}") for i in range(clients)))
        done, errors = 0, 0
        stop = time.monotonic() + seconds

        async def client(c: int) -> None:
            nonlocal done, errors
            n = 0
            while time.monotonic() < stop:
                n += 1
                status = await _pay(session, url, f"c{c}-{n}")
                done += 1
                errors += status != 200

        began = time.monotonic()
        await asyncio.gather(*(client(c) for c in range(clients)))
        return done / (time.monotonic() - began), errors


async def burst(gateway: Gateway, n: int) -> tuple[list[float], float, float]:
    """``n`` calls at once over ``n`` connections: client latencies, drain seconds, peak queue."""
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        await gateway.ready(session)
        await _pay(session, gateway.url, "warm")

        async def health() -> None:
            async with session.get(f"{gateway.url}/health") as r:
                await r.read()

        await asyncio.gather(*(health() for _ in range(n)))  # n connections opened, kept alive
        peak = 0.0
        stop = False

        async def watch() -> None:
            nonlocal peak
            async with aiohttp.ClientSession() as side:
                while not stop:
                    peak = max(peak, await gateway.gauge(side, "pg_capacity_queued"))
                    await asyncio.sleep(0.05)

        async def one(i: int) -> float:
            sent = time.monotonic()
            await _pay(session, gateway.url, f"b{i}")
            return time.monotonic() - sent

        watcher = asyncio.create_task(watch())
        began = time.monotonic()
        latencies = await asyncio.gather(*(one(i) for i in range(n)))
        drain = time.monotonic() - began
        stop = True
        await watcher
        return list(latencies), drain, peak


def _ms(values: np.ndarray | list[float], q: float) -> str:
    return f"{np.quantile(np.asarray(values), q) * 1000:8.2f} ms"


ROUNDS = 3
"""Part (a) alternates the two gateways this many times: on a shared machine the load of
other work drifts, and alternating lets both meet it alike (the median is reported)."""


def part_a(tmp: Path, clients: int, seconds: float) -> None:
    print(f"(a) calls/s: closed loop, {clients} connections, {seconds:g} s a run, {ROUNDS} rounds")
    kinds: dict[str, dict[str, Any] | None] = {
        "plain (no pg.capacity)": None,
        "pg.capacity, never queues": {"concurrency": 10000, "service": {"delay": 0}},
    }
    gateways = {
        name: Gateway(tmp, f"a{i}", capacity, {"type": "healthy"})
        for i, (name, capacity) in enumerate(kinds.items())
    }
    rates: dict[str, list[float]] = {name: [] for name in kinds}
    errors = 0
    try:

        async def run() -> None:
            nonlocal errors
            async with aiohttp.ClientSession() as s:
                for g in gateways.values():
                    await g.ready(s)
            for _ in range(ROUNDS):
                for name, g in gateways.items():
                    rate, failed = await closed_loop(g.url, clients, seconds)
                    rates[name].append(rate)
                    errors += failed

        asyncio.run(run())
    finally:
        for g in gateways.values():
            g.rows()
    for name, runs in rates.items():
        shown = ", ".join(f"{r:,.0f}" for r in runs)
        print(f"  {name:28s} {np.median(runs):9,.0f} calls/s (median of {shown})")
    plain, capped = (float(np.median(runs)) for runs in rates.values())
    print(f"  ratio capacity / plain        {capped / plain:9.2f}   errors {errors}")
    print(f"  in-process: the stage {stage_cost_us():.1f} us a call (submit, serve 0 s, await)")


def stage_cost_us(n: int = 20_000) -> float:
    """CPU time of the capacity stage alone for one call that never waits, in this process."""
    settings = GatewayCapacity.model_validate({"concurrency": 1, "service": {"delay": 0}})

    async def run() -> float:
        capacity = Capacity(settings, PreciseTimer(), CollectorRegistry(), lambda: 1)
        began = time.perf_counter()
        for _ in range(n):
            ticket = capacity.submit(0.0, time.monotonic())
            assert ticket.task is not None
            await asyncio.shield(ticket.task)
        return (time.perf_counter() - began) / n * 1e6

    return asyncio.run(run())


def part_b(tmp: Path, n: int) -> None:
    print(f"(b) a burst of {n:,} calls at once; c = {SLOTS}, D = {SERVICE_S * 1000:g} ms")
    plain = Gateway(tmp, "b-plain", None, {"type": "latency", "delay": SERVICE_S})
    latencies, drain, _ = asyncio.run(burst(plain, n))
    plain.rows()
    print(
        f"  plain, latency 20ms: drained in {drain:6.2f} s = {n / drain:7,.0f} calls/s; "
        f"client latency p50 {_ms(latencies, 0.5)}, p99 {_ms(latencies, 0.99)}"
    )
    capacity = {"concurrency": SLOTS, "queue-limit": n, "service": {"delay": SERVICE_S}}
    gateway = Gateway(tmp, "b-capacity", capacity, {"type": "healthy"})
    latencies, drain, peak = asyncio.run(burst(gateway, n))
    rows = gateway.rows()
    arrivals = rows["arrival"].tolist()
    starts = (rows["arrival"] + rows["queue_s"]).to_numpy()
    # the start is a wall-clock arrival plus a monotonic wait: 0.1 ms allows their two stamps
    in_order = float(np.mean(np.diff(starts) >= -1e-4)) * 100
    served = fifo_waits(arrivals, SLOTS, rows["service_s"].tolist())
    ideal = fifo_waits(arrivals, SLOTS, [SERVICE_S] * len(rows))
    gap = np.abs(rows["queue_s"].to_numpy() - np.asarray(served))
    gap_ideal = rows["queue_s"].to_numpy() - np.asarray(ideal)
    late = rows["service_s"].to_numpy() - SERVICE_S
    expected_drain = n / SLOTS * SERVICE_S
    print(
        f"  pg.capacity: peak pg_capacity_queued {peak:,.0f}; rows {len(rows):,}, "
        f"all 200: {bool((rows['status'] == 200).all())}"
    )
    print(f"    FIFO: {in_order:6.2f}% of calls began service after the call that came before")
    print(
        f"    wait - M/D/c (served times): p50 {_ms(gap, 0.5)}, p99 {_ms(gap, 0.99)}, "
        f"max {gap.max() * 1000:.2f} ms"
    )
    print(
        f"    wait - M/D/c (D exactly):    p50 {_ms(gap_ideal, 0.5)}, p99 "
        f"{_ms(gap_ideal, 0.99)}; mean wait {rows['queue_s'].mean():.3f} s vs "
        f"{np.mean(ideal):.3f} s"
    )
    print(f"    service - D: p50 {_ms(late, 0.5)}, p99 {_ms(late, 0.99)}")
    print(
        f"    drained in {drain:6.2f} s = {n / drain:7,.0f} calls/s "
        f"(c / D = {SLOTS / SERVICE_S:,.0f}/s: {expected_drain:.2f} s)"
    )
    print(f"    client latency p50 {_ms(latencies, 0.5)}, p99 {_ms(latencies, 0.99)}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=100)
    p.add_argument("--seconds", type=float, default=2.5)
    p.add_argument("--burst", type=int, default=1010)
    args = p.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory() as tmp:
        parts: list[Callable[[], None]] = [
            lambda: part_a(Path(tmp), args.clients, args.seconds),
            lambda: part_b(Path(tmp), args.burst),
        ]
        for part in parts:
            try:
                part()
            except Exception:  # a benchmark measures; it reports a failure and goes on
                traceback.print_exc()


if __name__ == "__main__":
    main()
