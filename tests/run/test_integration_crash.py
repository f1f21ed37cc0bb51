"""Integration: `kill -9` of `harness run` mid-build leaves nothing running, and the run is
closed afterwards as "crashed" with its samples kept and readable.

Real gateway, real target under gunicorn (master + worker), real Locust.
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

from tests.conftest import ROOT, harness_cmd, leftover_processes, short_scenario

pytestmark = pytest.mark.integration


def _manifest(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "manifest.json").read_text())


def wait_for_samples(results: Path, build: str, rows: int, timeout_s: float = 90) -> Path:
    """Wait until ``build`` has started its load and written ``rows`` samples; the run folder."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for csv in results.glob(f"*/*/{build}/samples.csv"):
            if csv.read_text().count("\n") > rows:
                return csv.parent.parent
        time.sleep(0.2)
    raise AssertionError(f"{build} never wrote {rows} samples")


def test_kill_9_mid_build_leaves_nothing_and_clean_closes_the_run(tmp_path: Path) -> None:
    results = tmp_path / "results"
    proc = subprocess.Popen(
        harness_cmd("run", str(short_scenario(tmp_path, "60s", "50s")), "--results", str(results)),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        run_dir = wait_for_samples(results, "before", rows=30)
        run_id = _manifest(run_dir)["run_id"]
        assert len(leftover_processes(run_id)) >= 4  # gateway, gunicorn master + worker, Locust
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        killed_at = time.monotonic()
        while leftover_processes(run_id) and time.monotonic() - killed_at < 10:
            time.sleep(0.1)
        assert leftover_processes(run_id) == [], "the run's processes outlived it by 10 s"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _manifest(run_dir)["status"] == "running"  # what the crash left

    clean = subprocess.run(
        harness_cmd("clean", "--results", str(results)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert f"{run_dir}: crashed" in clean.stdout
    manifest = _manifest(run_dir)
    assert manifest["status"] == "crashed" and manifest["ended_at"]
    assert manifest["builds"]["before"]["status"] == "crashed"
    samples = pd.read_parquet(run_dir / "before" / "samples.parquet")
    assert len(samples) >= 30 and manifest["builds"]["before"]["samples"] == len(samples)
    assert len(pd.read_parquet(run_dir / "before" / "pg.parquet")) > 0
    # The scraper's spool: what it read before the kill is kept, the shop's and the gateway's.
    metrics = pd.read_parquet(run_dir / "before" / "metrics.parquet")
    assert {"target", "pg"} <= set(metrics["source"]) and metrics["t"].is_monotonic_increasing
    assert "pg_calls_total" in set(metrics["series"])
    assert not list(run_dir.rglob("*.tmp")) and not (run_dir / ".reserve").exists()

    report = subprocess.run(
        harness_cmd("report", str(run_dir)), cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in report.stderr
    assert report.returncode == 0, report.stdout + report.stderr
    built = json.loads((run_dir / "report.json").read_text())["builds"]["before"]
    assert built
    assert built["workers"].get("max_workers") is not None, built["workers"]  # from the spool
