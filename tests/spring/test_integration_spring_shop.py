"""Integration: the spring-shop jar run as a stranger's jar, read through ``preset: spring-boot``.

A real Spring Boot service (``targets/spring-shop``: Tomcat, HikariCP, OpenFeign,
Resilience4j annotations) started as a ``command:`` build with nothing but Spring
properties on its command line, under a short gateway outage. The preset's
figures, read from its live ``/actuator/prometheus``, are checked against counts
the service did not make: the gateway's ledger (``pg.parquet``) for the calls
that reached it and the retries, the load generator's samples for the payments
the breaker refused and for the requests in flight.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.conftest import ROOT, harness_cmd, leftover_processes
from tests.spring.conftest import needs_java

pytestmark = [pytest.mark.integration, needs_java]

DURATION_S = 25.0

# Warm-up 15 s (at the scenario's 30 requests/s, ~300 payments through Tomcat, Jackson, Feign
# and HikariCP before t0): in the first runs here the payments' median fell from ~41 ms (max
# 309 ms) in the JVM's first 2.5 s of load to a steady ~12 ms from ~7.5 s on, as the JIT
# compiled the request path; 15 s is twice that, so no cold-JVM latency is measured.
# The outage: the gateway hangs for 10 s and the client gives up after 1 s, twice (Retry's
# max-attempts 2): a retry-only payment holds its thread ~2.1 s, ~42 at 20/s. The breaker
# opens after its 10 calls, waits 3 s (instead of the seed's 10 s) so it probes within the run.
SCENARIO = """\
name: spring-shop
seed: 19
warmup: 15s
duration: 25s
drain: 5s
traffic:
  payments:
    method: POST
    path: /api/payments
    rate: 20
    timeout: 10s
    body: {{amount: 15000}}
    idempotency-key: true
    calls-gateway: true
  products: {{path: "/api/products/{{id}}", params: {{id: [1, 1000]}}, rate: 10, timeout: 10s}}
pg:
  phases:
    - {{name: baseline, start: 0s, duration: 5s, fault: {{type: healthy}}}}
    - {{name: outage, start: 5s, duration: 10s, fault: {{type: timeout}}}}
    - {{name: recovery, start: 15s, duration: 10s, fault: {{type: healthy}}}}
builds:
  retry-only:
    command: [{java}, -jar, {jar}, {common}, --shop.resilience=retry-only]
    health: {{timeout: 120s}}
    metrics: {{preset: spring-boot, path: /actuator/prometheus}}
  breaker:
    command: [{java}, -jar, {jar}, {common}, --shop.resilience=retry-circuit-breaker,
              --resilience4j.circuitbreaker.instances.pgClient.wait-duration-in-open-state=3s]
    health: {{timeout: 120s}}
    metrics: {{preset: spring-boot, path: /actuator/prometheus}}
"""

COMMON = ", ".join(
    [
        '"--server.port={port}"',
        '"--management.server.port={metrics_port}"',
        '"--pg.base-url={pg_url}"',
        "--spring.cloud.openfeign.client.config.default.read-timeout=1000",
    ]
)


class Run:
    """One run of the scenario: its folder, manifest, report and the harness's output."""

    def __init__(self, run_dir: Path, done: subprocess.CompletedProcess[str]) -> None:
        self.dir = run_dir
        self.done = done
        self.manifest: dict[str, Any] = json.loads((run_dir / "manifest.json").read_text())
        self.report: dict[str, Any] = json.loads((run_dir / "report.json").read_text())

    def figures(self, build: str) -> dict[str, Any]:
        figures: dict[str, Any] = self.report["builds"][build]
        return figures

    def window(self, build: str) -> tuple[float, float]:
        t0 = float(self.figures(build)["t0"])
        return t0, t0 + DURATION_S

    def ledger(self, build: str) -> pd.DataFrame:
        return pd.read_parquet(self.dir / build / "pg.parquet")

    def samples(self, build: str) -> pd.DataFrame:
        return pd.read_parquet(self.dir / build / "samples.parquet")

    def scraped(self, build: str, series: str) -> pd.DataFrame:
        """The target's scrapes of ``series``: t, labels (parsed), value."""
        metrics = pd.read_parquet(self.dir / build / "metrics.parquet")
        rows = metrics[(metrics["source"] == "target") & (metrics["series"] == series)]
        return rows.assign(labels=rows["labels"].map(json.loads))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, spring_jar: Path) -> Run:
    folder = tmp_path_factory.mktemp("spring")
    scenario = folder / "spring.yaml"
    java = shutil.which("java")
    scenario.write_text(SCENARIO.format(java=java, jar=spring_jar, common=COMMON))
    done = subprocess.run(
        harness_cmd("run", str(scenario), "--results", str(folder / "results")),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = (folder / "results" / "spring-shop").iterdir()
    return Run(run_dir, done)


def test_the_jar_runs_as_a_command_build_with_nothing_left(run: Run) -> None:
    for build in ("retry-only", "breaker"):
        info = run.manifest["builds"][build]
        assert (info["status"], info["kind"], info["preset"]) == (
            "completed",
            "command",
            "spring-boot",
        )
        # Actuator on the management port the harness gave it, apart from the request port.
        assert info["target_metrics_url"].endswith("/actuator/prometheus")
        assert not info["target_metrics_url"].startswith(info["target_url"] + "/")
        record = json.loads((run.dir / build / "target.json").read_text())
        assert f"--pg.base-url={info['pg_url']}" in record["argv"]
        assert run.figures(build).get("not_measured") is None  # every series was read
    assert leftover_processes(run.manifest["run_id"]) == []


def test_gateway_calls_the_breaker_counted_are_the_ledger_s(run: Run) -> None:
    """``pg_calls`` (the breaker's timer, every kind) against the gateway's own rows."""
    ledger = run.ledger("breaker")
    start, end = run.window("breaker")
    in_window = int(((ledger["arrival"] >= start) & (ledger["arrival"] < end)).sum())
    target_calls = run.figures("breaker")["pg"]["target_calls"]
    assert in_window > 100
    # The report reads the counter at the window's edges by interpolating between scrapes.
    assert abs(target_calls - in_window) <= max(3, 0.03 * in_window), (target_calls, in_window)
    # The last scrape's total, exactly: every call the gateway answered before it.
    timer = run.scraped("breaker", "resilience4j_circuitbreaker_calls_seconds_count")
    last = timer[timer["t"] == timer["t"].max()]
    answered = ledger["arrival"] + ledger["duration_s"] < last["t"].iloc[0]
    assert set(last["labels"].map(lambda labels: labels["kind"])) == {
        "successful",
        "failed",
        "ignored",
    }
    assert abs(last["value"].sum() - int(answered.sum())) <= 1


def test_retries_are_the_calls_the_ledger_saw_twice(run: Run) -> None:
    """``retries`` (calls retried at least once) against the keys whose second attempt
    reached the gateway: max-attempts 2, so each is one retried call. A retry the breaker
    refused never reaches the gateway, and Resilience4j counts it ``failed_without_retry``."""
    for build in ("retry-only", "breaker"):
        ledger = run.ledger(build)
        start, end = run.window(build)
        second = (ledger["attempt"] >= 2) & (ledger["arrival"] >= start) & (ledger["arrival"] < end)
        retries = run.figures(build)["pg"]["retries"]
        assert abs(retries - int(second.sum())) <= 2, (build, retries, int(second.sum()))
    assert run.figures("retry-only")["pg"]["retries"] > 100  # every outage payment retried once


def test_blocked_calls_are_the_payments_answered_not_permitted(run: Run) -> None:
    """``blocked_calls`` against the samples: each refused payment said
    ``X-Outcome: not_permitted`` (its first or its retried attempt refused, one each)."""
    breaker = run.figures("breaker")["breaker"]
    assert breaker["blocked_total"] > 50
    assert run.figures("breaker")["timeline"]["time_to_open_s"] is not None
    samples = run.samples("breaker")
    start, end = run.window("breaker")
    refused = samples[
        (samples["outcome"] == "not_permitted")
        & (samples["intended_start"] >= start)
        & (samples["intended_start"] < end)
    ]
    assert abs(breaker["blocked_total"] - len(refused)) <= 2, (
        breaker["blocked_total"],
        len(refused),
    )
    assert (refused["status"] == 503).all()  # TIMEOUT_UNKNOWN, no gateway call
    assert run.figures("retry-only")["breaker"]["blocked_total"] == 0


def test_busy_workers_are_tomcat_s_and_match_the_requests_in_flight(run: Run) -> None:
    """Tomcat's busy-threads gauge against the requests the load generator had open at
    each scrape of the outage (the retry-only build holds ~42 threads)."""
    figures = run.figures("retry-only")["workers"]
    assert figures["max_workers"] == 200  # server.tomcat.threads.max
    assert figures["busy_max_fault"] >= 30
    busy = run.scraped("retry-only", "tomcat_threads_busy_threads")
    start, _ = run.window("retry-only")
    outage = busy[(busy["t"] >= start + 6) & (busy["t"] < start + 15)]  # after its first second
    samples = run.samples("retry-only")
    open_at = [
        int(((samples["actual_start"] <= t) & (samples["end"] > t)).sum()) for t in outage["t"]
    ]
    gauge = outage["value"].to_numpy()
    assert len(gauge) >= 5
    assert abs(gauge.mean() - sum(open_at) / len(open_at)) <= 0.15 * gauge.mean() + 2, (
        list(gauge),
        open_at,
    )
