"""Integration: spring-shop on PostgreSQL, the harness's TCP proxy between it and its database.

Debian's PostgreSQL (``tests/postgres.py``), the proxy (``harness.proxy``) in front of it, and
the spring-shop jar as a ``command:`` build given nothing but Spring properties
(``spring.datasource.url`` pointing at the proxy). For ten seconds of the measured window the
proxy delays every answer from the database by 800 ms. The run's pool figures, read from
HikariCP's series through ``preset: spring-boot``, must show it then and not before; the
product reads (one statement each) must slow down with it; and what the service says of its
connections, what the proxy counted and what the database stored must agree.

The scenario cannot start a dependency's proxy (docs/proxy.md, "Beside a run"), so the test
runs it in this process and starts the slow phase from the build's ``t0`` in the manifest.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

from harness.proxy.server import Proxy
from tests.conftest import leftover_processes
from tests.postgres import PASSWORD, USER, Database, needs_postgres, running_postgres
from tests.scenario_runs import only_run, run_harness
from tests.spring.conftest import needs_java

pytestmark = [pytest.mark.integration, needs_java, needs_postgres]

BUILD = "postgres"
# The slow phase, counted from the measured window's start, and the delay it adds to every
# chunk the database sends (each statement is one round trip: ~800 ms longer).
SLOW_FROM_S, SLOW_TO_S = 10.0, 20.0
DELAY = "800ms"

# Warm-up 15 s: the JIT settles within ~7.5 s of load (test_integration_spring_shop.py).
# Chosen once: 10 product reads/s and 2 payments/s (3 statements each) are 16 statements/s,
# far under what 10 connections serve at sub-millisecond answers, and over the 12.5/s they
# serve at 800 ms: during the slow phase the pool is exhausted, threads queue for a
# connection, and a wait longer than connection-timeout (1 s, instead of Hikari's 30 s, so
# it happens within the phase) fails the request with a 500.
SCENARIO = """\
name: spring-postgres
seed: 19
warmup: 15s
duration: 30s
drain: 5s
traffic:
  payments: {{method: POST, path: /api/payments, rate: 2, timeout: 10s, body: {{amount: 15000}},
             idempotency-key: true, calls-gateway: true}}
  products: {{path: "/api/products/{{id}}", params: {{id: [1, 1000]}}, rate: 10, timeout: 10s}}
builds:
  {build}:
    command: [{java}, -XX:TieredStopAtLevel=1, -jar, {jar}, "--server.port={{port}}",
              "--management.server.port={{metrics_port}}", "--pg.base-url={{pg_url}}",
              "--spring.datasource.url={url}",
              --spring.datasource.username={user}, --spring.datasource.password={password},
              --spring.datasource.hikari.connection-timeout=1000]
    health: {{timeout: 300s}}  # ~10 s alone; minutes on a machine shared with other JVMs
    metrics: {{preset: spring-boot, path: /actuator/prometheus}}
"""


def parse(text: str) -> dict[str, float]:
    """Prometheus text (the proxy's: no timestamps), ``name{labels}`` → value."""
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


class ProxyThread:
    """The harness's proxy on its own event loop in a thread, with its ``/metrics``."""

    def __init__(self, upstream: str) -> None:
        self.proxy = Proxy("127.0.0.1:0", upstream, seed=19)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.port = self.call(self.proxy.start())
        self.metrics_url = f"http://127.0.0.1:{self.call(self.proxy.serve_metrics())}/metrics"
        self.before_slow: dict[str, float] = {}
        """The proxy's ``/metrics`` just before the slow phase."""
        self.switched: dict[str, float] = {}
        """When the toxics changed (Unix s): ``slow``, ``healed``."""

    def call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    def slow_between(self, start: float, end: float) -> None:
        """Delay the database's answers from ``start`` to ``end`` (Unix s)."""

        async def drive() -> None:
            await asyncio.sleep(max(0.0, start - time.time()))
            async with httpx.AsyncClient() as client:
                self.before_slow = parse((await client.get(self.metrics_url, timeout=5)).text)
            self.proxy.set_toxics([{"type": "latency", "latency": DELAY}], "slow")
            self.switched["slow"] = time.time()
            await asyncio.sleep(max(0.0, end - time.time()))
            self.proxy.set_toxics([])
            self.switched["healed"] = time.time()

        asyncio.run_coroutine_threadsafe(drive(), self.loop)

    def counts(self) -> dict[str, float]:
        """The proxy's own ``/metrics`` now."""
        return parse(httpx.get(self.metrics_url, timeout=5).text)

    def close(self) -> None:
        self.call(self.proxy.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


def _slow_at_t0(results: Path, proxy: ProxyThread, stop: threading.Event) -> None:
    """Wait for the build's ``t0`` in the run's manifest, then schedule the slow phase."""
    while not stop.is_set():
        for manifest in results.glob("spring-postgres/*/manifest.json"):
            try:
                t0 = json.loads(manifest.read_text())["builds"][BUILD].get("t0")
            except (OSError, ValueError, KeyError):
                continue
            if t0 is not None:
                proxy.slow_between(t0 + SLOW_FROM_S, t0 + SLOW_TO_S)
                return
        time.sleep(0.1)


class Run:
    """The run's folder and figures, the proxy's counts at its end, and the database."""

    def __init__(
        self, run_dir: Path, proxy: ProxyThread, counts: dict[str, float], db: Database
    ) -> None:
        self.dir = run_dir
        self.counts = counts
        self.before_slow = proxy.before_slow
        self.switched = proxy.switched
        self.db = db
        self.manifest: dict[str, Any] = json.loads((run_dir / "manifest.json").read_text())
        report = json.loads((run_dir / "report.json").read_text())
        self.figures: dict[str, Any] = report["builds"][BUILD]
        self.t0 = float(self.figures["t0"])
        self.samples = pd.read_parquet(run_dir / BUILD / "samples.parquet")
        metrics = pd.read_parquet(run_dir / BUILD / "metrics.parquet")
        self.metrics = metrics[metrics["source"] == "target"]

    def series(self, name: str, start_s: float, end_s: float) -> pd.Series:
        """A Hikari series' scraped values between two offsets from ``t0``."""
        rows = self.metrics[self.metrics["series"] == name]
        t = rows["t"] - self.t0
        return rows[(t >= start_s) & (t < end_s)]["value"]

    def products(self, start_s: float, end_s: float) -> pd.DataFrame:
        s = self.samples
        t = s["intended_start"] - self.t0
        return s[(s["endpoint"] == "products") & (t >= start_s) & (t < end_s)]


@pytest.fixture(scope="module")
def database() -> Iterator[Database]:
    with running_postgres() as db:
        yield db


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, spring_jar: Path, database: Database) -> Run:
    folder = tmp_path_factory.mktemp("spring-postgres")
    results = folder / "results"
    proxy = ProxyThread(database.address)
    stop = threading.Event()
    watcher = threading.Thread(target=_slow_at_t0, args=(results, proxy, stop), daemon=True)
    try:
        scenario = folder / "spring-postgres.yaml"
        scenario.write_text(
            SCENARIO.format(
                build=BUILD,
                java=shutil.which("java"),
                jar=spring_jar,
                url=database.jdbc_url(f"127.0.0.1:{proxy.port}"),
                user=USER,
                password=PASSWORD,
            )
        )
        watcher.start()
        done = run_harness(["run", str(scenario), "--results", str(results)], timeout=900)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        counts = proxy.counts()
        assert set(proxy.switched) == {"slow", "healed"}, proxy.switched
    finally:
        stop.set()
        watcher.join(timeout=5)
        proxy.close()
    return Run(only_run(results), proxy, counts, database)


def test_the_pool_shows_the_slow_database_then_and_not_before(run: Run) -> None:
    before = (3.0, SLOW_FROM_S)  # a JVM short of CPU may still catch up on the warm-up
    slow = (SLOW_FROM_S + 2.0, SLOW_TO_S)  # past its first two seconds: the queue has built
    active = "hikaricp_connections_active"
    pending = "hikaricp_connections_pending"
    timeouts = "hikaricp_connections_timeout_total"
    # Means and margins, not single scrapes: a JVM starved of CPU queues for a moment too.
    assert run.series(active, *before).mean() <= 3
    assert run.series(pending, *before).mean() <= 1
    assert run.series(active, *slow).mean() >= 8  # the pool (10) all but exhausted
    assert run.series(pending, *slow).mean() >= 3
    assert run.series(timeouts, -100.0, SLOW_FROM_S).max() == 0
    assert run.series(timeouts, *slow).max() > 0
    # The report's figures, read through the preset from the same series.
    figures = run.figures["series"]
    assert figures["db_max"]["max"] == 10  # hikaricp_connections_max
    assert figures["db_pending"]["max_fault"] == run.series(pending, 0.0, 30.0).max()
    assert abs(figures["db_timeouts"]["total"] - run.series(timeouts, 0.0, 30.0).max()) <= 1


def test_product_reads_slow_down_with_the_database(run: Run) -> None:
    before = run.products(3.0, SLOW_FROM_S)
    slow = run.products(SLOW_FROM_S + 1.0, SLOW_TO_S)
    latency_before = (before["end"] - before["intended_start"]).median()
    latency_slow = (slow["end"] - slow["intended_start"]).median()
    assert (before["status"] == 200).all()
    assert latency_before < 0.2, latency_before
    assert latency_slow >= max(0.8, 4 * latency_before), latency_slow  # the delay, and a queue


def test_pool_timeouts_are_the_requests_that_failed(run: Run) -> None:
    """Each wait that timed out fails its request with a 500, and only that does (a request
    the client gave up on first has its 500 unseen: status 0)."""
    failed = int((run.samples["status"] == 500).sum())
    unseen = int((run.samples["status"] == 0).sum())
    final = run.series("hikaricp_connections_timeout_total", -1e9, 1e9).max()
    assert failed > 0
    assert failed <= final <= failed + unseen, (final, failed, unseen)


def test_the_proxy_counted_the_pool_s_connections(run: Run) -> None:
    """The proxy relayed every connection the pool opened, and no other."""
    slow_from = run.switched["slow"] - run.t0
    total = run.series("hikaricp_connections", slow_from - 5.0, slow_from)  # 5 scrapes
    assert len(total) >= 2 and (total == 10).all()  # minimum-idle defaults to the pool's size
    assert run.before_slow["proxy_connections_active"] == 10
    assert run.counts["proxy_connections_total"] == 10  # none was opened again
    assert run.counts["proxy_connections_active"] == 0  # the service's end closed them
    assert run.counts['proxy_toxics_applied_total{toxic="latency"}'] == 10
    assert run.counts['proxy_bytes_total{stream="upstream"}'] > 0
    assert leftover_processes(run.manifest["run_id"]) == []


def test_payment_records_are_in_postgresql_one_per_key(run: Run) -> None:
    payments = run.samples[run.samples["endpoint"] == "payments"]
    approved = int((payments["status"] == 200).sum())
    unseen = int((payments["status"] == 0).sum())  # approved, perhaps, after the client left
    rows = int(run.db.psql("SELECT count(*) FROM payments WHERE status = 'APPROVED'"))
    assert approved > 50
    assert approved <= rows <= approved + unseen, (rows, approved, unseen)
    keys = run.db.psql("SELECT count(DISTINCT idempotency_key) = count(*) FROM payments")
    assert keys == "t"
    unique = run.db.psql(
        "SELECT count(*) FROM pg_indexes WHERE tablename = 'payments'"
        " AND indexdef LIKE 'CREATE UNIQUE INDEX%(idempotency_key)'"
    )
    assert unique == "1"
    assert int(run.db.psql("SELECT count(*) FROM products")) == 1000
