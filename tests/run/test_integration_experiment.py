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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.conftest import ROOT, harness_cmd, ignore_sigint, leftover_processes, short_scenario

pytestmark = pytest.mark.integration


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


def test_breaker_contains_a_hung_gateway(short_run: Path) -> None:
    run_dir = short_run
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
            assert stats["max_lateness_s"] < 0.5  # the run-validity bound (LATE_WARN_S)

    prod_before = before["endpoints"]["products"]["latency_s"]
    prod_after = after["endpoints"]["products"]["latency_s"]
    assert prod_after["p95"] < prod_before["p95"] and prod_after["p99"] < prod_before["p99"]
    assert prod_before["p95"] > 0.5  # product reads really queued behind payments

    assert before["workers"]["max_workers"] == 8
    assert before["workers"]["busy_max_fault"] == 8  # the retry-only pool saturates
    assert after["workers"]["busy_p50_fault"] < 8
    # No breaker in retry-only: its series never appear, so blocked calls are not measured.
    assert before["breaker"]["blocked_total"] is None
    assert before["not_measured"]["breaker.blocked_total"].startswith("blocked_calls: no series")
    assert after["breaker"]["blocked_total"] > 0
    assert after["pg"]["calls"] < before["pg"]["calls"]
    assert before["pg"]["retries"] > 0
    assert after["pg"]["amplification_fault"] < 0.5 * before["pg"]["amplification_fault"]

    for build in ("before", "after"):
        samples = pd.read_parquet(run_dir / build / "samples.parquet")
        assert set(samples["endpoint"]) == {"payments", "products"}
        assert (samples["end"] >= samples["intended_start"]).all()
        assert (run_dir / build / "metrics.parquet").exists()
    for name, build in (("before", before), ("after", after)):
        ledger = pd.read_parquet(run_dir / name / "pg.parquet")
        payments = pd.read_parquet(run_dir / name / "payments.parquet")
        assert len(ledger) == build["ledger"]["calls"] > 0
        assert len(payments) == build["ledger"]["reconciliation"]["payments_recorded"] > 0
        # Every call the gateway approved belongs to a payment the target recorded APPROVED.
        rec = build["ledger"]["reconciliation"]
        assert rec["approved_both"] == build["ledger"]["approved_at_gateway"] > 0
        assert rec["recorded_approved_not_at_gateway"] == 0
    assert before["ledger"]["duplicate_keys"] > 0  # retries reach the gateway twice
    assert before["ledger"]["max_calls_per_key"] == 2  # max-attempts 2
    markdown = (run_dir / "report.md").read_text()
    assert "products p95" in markdown and "after vs before" in markdown

    again = subprocess.run(
        harness_cmd("report", str(run_dir)), cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0 and "products p95" in again.stdout


def _disturb_run(
    tmp_path: Path,
    disturb: Callable[[Path, subprocess.Popen[str]], None],
    sigint_ignored: bool = False,
) -> tuple[subprocess.Popen[str], str, str, Path]:
    """Start a long real run, do ``disturb`` once its load runs, and wait for the exit;
    ``sigint_ignored``: started as a script's background job is (``harness run ... &``)."""
    results = tmp_path / "results"
    proc = subprocess.Popen(
        harness_cmd("run", str(short_scenario(tmp_path, "60s", "50s")), "--results", str(results)),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ignore_sigint if sigint_ignored else None,
    )
    try:
        run_dir = _wait_for_load(results, "before")
        disturb(run_dir, proc)
        # A hang guard: the stop itself is proved by what the run left (its manifest's status,
        # no later build). After a SIGINT the run stops its processes and writes the report of
        # what it has: ~10 s here, over 60 s in a fresh-clone make test at load 12.
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc, out, err, run_dir


def test_sigint_stops_everything_and_keeps_results(tmp_path: Path) -> None:
    """Started with SIGINT ignored (a script's ``harness run ... &``, or a CI job started in
    the background): the run still stops on it. It did not: Python keeps an inherited
    SIG_IGN, and the run went on 60 s after its Ctrl-C."""

    def interrupt(run_dir: Path, proc: subprocess.Popen[str]) -> None:
        time.sleep(6)
        proc.send_signal(signal.SIGINT)

    proc, out, err, run_dir = _disturb_run(tmp_path, interrupt, sigint_ignored=True)
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
    def kill_target(run_dir: Path, proc: subprocess.Popen[str]) -> None:
        time.sleep(3)
        target_pid = _manifest(run_dir)["builds"]["before"]["processes"]["target"]
        os.killpg(target_pid, signal.SIGKILL)

    proc, out, err, run_dir = _disturb_run(tmp_path, kill_target)
    assert proc.returncode == 3, out + err
    assert "target exited" in err
    manifest = _manifest(run_dir)
    assert manifest["status"] == "failed" and "target" in manifest["error"]
    assert len(pd.read_parquet(run_dir / "before" / "samples.parquet")) > 0
    assert leftover_processes(manifest["run_id"]) == []
