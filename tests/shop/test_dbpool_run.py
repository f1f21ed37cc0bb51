"""Integration: the shop's ``db-pool`` through the real ``harness run``.

Two builds read products at 15/s, which never touch the gateway. One has no
pool; the other one connection that each read holds 100 ms: 1.5 s of work
arrives each second for 1 s of capacity, so reads queue for the connection,
and once a read would wait more than its 400 ms connection-timeout it gets
Hikari's answer, a 503. The pool's Micrometer series show it, scraped from the
real process.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.scenario_runs import assert_nothing_left, run_with_passing_gates

pytestmark = pytest.mark.integration

SCENARIO = """\
name: db-pool
seed: 3
warmup: 1s
duration: 8s
traffic:
  products: {method: GET, path: "/api/products/{id}", params: {id: [1, 100]}, rate: 15, timeout: 5s}
pg:
  phases:
    - {name: healthy, start: 0s, duration: 8s, fault: {type: healthy}}
builds:
  nopool: {profile: retry-only, workers: 20}
  pooled:
    profile: retry-only
    workers: 20
    db-pool: {maximum-pool-size: 1, query-time: 100ms, connection-timeout: 400ms}
gates:
  - "pooled.products.p50 >= 0.1s"
  - "pooled.products.p50 >= 3 * nopool.products.p50"
  - "nopool.products.success_pct == 100"
  - "pooled.products.success_pct < 100"
  - "pooled.db_pending.max[healthy] >= 2"
"""


def test_reads_wait_for_the_pools_connections_and_time_out_like_hikari(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "db-pool.yaml"
    scenario.write_text(SCENARIO)
    run_dir, report = run_with_passing_gates(scenario, tmp_path, min_gates=5)
    assert_nothing_left(run_dir)

    pooled = report["builds"]["pooled"]["endpoints"]["products"]
    assert set(pooled["errors"]) == {"db_pool_timeout"}  # the 503's X-Outcome, nothing else
    # Served reads held the one connection one after another: 100 ms each at least.
    assert pooled["requests"] * pooled["success_pct"] / 100 <= 8 * 10 + 2

    metrics = pd.read_parquet(run_dir / "pooled" / "metrics.parquet")
    series = metrics.groupby("series")["value"]
    assert series.max()["hikaricp_connections_max"] == 1
    assert series.max()["hikaricp_connections_active"] == 1
    assert series.max()["hikaricp_connections_pending"] >= 2
    assert series.max()["hikaricp_connections_timeout_total"] >= 1
    plain = pd.read_parquet(run_dir / "nopool" / "metrics.parquet")
    assert not plain["series"].str.startswith("hikaricp_").any()
    # The same series as the report's figures (the catalogue's db_*, through the shop preset).
    figures = report["builds"]["pooled"]["series"]
    assert figures["db_max"]["max"] == 1
    assert figures["db_active"]["max_fault"] == 1
    assert figures["db_pending"]["max_fault"] >= 2
    assert figures["db_timeouts"]["total"] >= 1
    nopool = report["builds"]["nopool"].get("series", {})
    assert not [key for key in nopool if key.startswith("db_")], nopool  # no pool: "not exposed"
    assert (run_dir / "charts" / "db_pool.png").exists()
