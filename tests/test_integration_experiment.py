"""Integration: short real experiments through the real CLI.

Real PG fault server, real target under gunicorn, real Locust, all on
loopback. Asserts the direction seed 000 shows, and that nothing started by a
run outlives it, whether it completes, is interrupted or its target dies.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.conftest import ROOT, harness_cmd, leftover_processes

pytestmark = pytest.mark.integration

# 8 threads; a payment meeting the hung gateway holds one for 2 x 0.8 s + 0.1 s,
# so 8 payments/s need ~14 threads: the retry-only pool must saturate.
SHORT = """\
name: short
seed: 3
warmup: 2s
duration: {duration}
traffic:
  payments:
    method: POST
    path: /api/payments
    rate: 8
    timeout: 8s
    body: {{amount: 1000}}
    idempotency-key: true
    calls-gateway: true
  products: {{path: "/api/products/{{id}}", params: {{id: [1, 100]}}, rate: 4, timeout: 8s}}
pg:
  phases:
    - {{name: baseline, start: 0s, duration: 3s, fault: {{type: healthy}}}}
    - {{name: outage, start: 3s, duration: {outage}, fault: {{type: timeout}}}}
builds:
  before:
    profile: retry-only
    workers: 8
    pg-client: {{connect-timeout: 500ms, read-timeout: 800ms}}
    resilience4j: {{retry: {{max-attempts: 2, wait-duration: 100ms}}}}
  after:
    profile: retry-circuit-breaker
    workers: 8
    pg-client: {{connect-timeout: 500ms, read-timeout: 800ms}}
    resilience4j:
      retry: {{max-attempts: 2, wait-duration: 100ms}}
      circuitbreaker:
        sliding-window-size: 10
        minimum-number-of-calls: 10
        failure-rate-threshold: 50
        wait-duration-in-open-state: 5s
        permitted-number-of-calls-in-half-open-state: 3
        automatic-transition-from-open-to-half-open-enabled: true
"""


def _scenario(tmp_path: Path, duration: str = "21s", outage: str = "18s") -> Path:
    path = tmp_path / "short.yaml"
    path.write_text(SHORT.format(duration=duration, outage=outage))
    return path


def _run_dir(results: Path) -> Path:
    runs = sorted((results / "short").iterdir())
    assert len(runs) == 1
    return runs[0]


def _manifest(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "manifest.json").read_text())


def _wait_for_load(results: Path, build: str, timeout_s: float = 90) -> Path:
    """Wait until the build's load has started; return the run folder."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = list((results / "short").glob("*/manifest.json")) if results.exists() else []
        if runs:
            try:
                info = json.loads(runs[0].read_text())["builds"].get(build, {})
            except ValueError:
                info = {}
            if "load_start" in info:
                return runs[0].parent
        time.sleep(0.2)
    raise AssertionError("the load never started")


def test_breaker_contains_a_hung_gateway(tmp_path: Path) -> None:
    results = tmp_path / "results"
    done = subprocess.run(
        harness_cmd("run", str(_scenario(tmp_path)), "--results", str(results)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    run_dir = _run_dir(results)
    manifest = _manifest(run_dir)
    assert manifest["status"] == "completed"
    assert leftover_processes(manifest["run_id"]) == []

    report = json.loads((run_dir / "report.json").read_text())
    before, after = report["builds"]["before"], report["builds"]["after"]
    for build in (before, after):
        for name, offered in (("payments", 8), ("products", 4)):
            stats = build["endpoints"][name]
            # Open model: the rate is held however slow the target gets.
            assert abs(stats["achieved_rps"] - offered) / offered <= 0.01, stats
            assert stats["max_lateness_s"] < 0.2

    prod_before = before["endpoints"]["products"]["latency_s"]
    prod_after = after["endpoints"]["products"]["latency_s"]
    assert prod_after["p95"] < prod_before["p95"] and prod_after["p99"] < prod_before["p99"]
    assert prod_before["p95"] > 0.5  # product reads really queued behind payments

    assert before["workers"]["max_workers"] == 8
    assert before["workers"]["busy_max_fault"] == 8  # the retry-only pool saturates
    assert after["workers"]["busy_p50_fault"] < 8
    assert before["breaker"]["blocked_total"] == 0
    assert after["breaker"]["blocked_total"] > 0
    assert after["pg"]["calls"] < before["pg"]["calls"]
    assert before["pg"]["retries"] > 0
    assert after["pg"]["amplification_fault"] < 0.5 * before["pg"]["amplification_fault"]

    for build in ("before", "after"):
        samples = pd.read_parquet(run_dir / build / "samples.parquet")
        assert set(samples["endpoint"]) == {"payments", "products"}
        assert (samples["end"] >= samples["intended_start"]).all()
        assert (run_dir / build / "metrics.parquet").exists()
    markdown = (run_dir / "report.md").read_text()
    assert "products p95" in markdown and "after vs before" in markdown

    again = subprocess.run(
        harness_cmd("report", str(run_dir)), cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0 and "products p95" in again.stdout


def test_sigint_stops_everything_and_keeps_results(tmp_path: Path) -> None:
    results = tmp_path / "results"
    proc = subprocess.Popen(
        harness_cmd("run", str(_scenario(tmp_path, "60s", "50s")), "--results", str(results)),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        run_dir = _wait_for_load(results, "before")
        time.sleep(6)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err
    manifest = _manifest(run_dir)
    assert manifest["status"] == "interrupted"
    assert manifest["builds"]["before"]["status"] == "interrupted"
    assert "after" not in manifest["builds"]
    samples = pd.read_parquet(run_dir / "before" / "samples.parquet")
    assert len(samples) > 20
    assert leftover_processes(manifest["run_id"]) == []


def test_a_dying_target_fails_the_run_but_keeps_its_results(tmp_path: Path) -> None:
    results = tmp_path / "results"
    proc = subprocess.Popen(
        harness_cmd("run", str(_scenario(tmp_path, "60s", "50s")), "--results", str(results)),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        run_dir = _wait_for_load(results, "before")
        time.sleep(3)
        target_pid = _manifest(run_dir)["builds"]["before"]["processes"]["target"]
        os.killpg(target_pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, out + err
    assert "target exited" in err
    manifest = _manifest(run_dir)
    assert manifest["status"] == "failed" and "target" in manifest["error"]
    assert len(pd.read_parquet(run_dir / "before" / "samples.parquet")) > 0
    assert leftover_processes(manifest["run_id"]) == []
