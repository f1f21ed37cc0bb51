"""Integration: a Spring Boot jar that is missing, that fails to start or whose JVM dies
mid-run is a clear failure: exit 3, the JVM's own last lines, nothing left running.

The jar is ``targets/spring-shop`` (``make spring-jar``), run as any jar would be.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.conftest import ROOT, harness_cmd, leftover_processes
from tests.spring.conftest import needs_java

pytestmark = [pytest.mark.integration, needs_java]

SCENARIO = """\
name: spring-fails
seed: 3
warmup: 2s
duration: {duration}
traffic:
  payments: {{method: POST, path: /api/payments, rate: 10, timeout: 5s, body: {{amount: 100}},
             idempotency-key: true, calls-gateway: true}}
  products: {{path: "/api/products/{{id}}", params: {{id: [1, 50]}}, rate: 5, timeout: 5s}}
pg:
  phases:
    - {{name: healthy, start: 0s, duration: {duration}, fault: {{type: healthy}}}}
builds:{first}
  jar:
    command: [{java}, -jar, {jar}, "--server.port={{port}}",
              "--management.server.port={{metrics_port}}", "--pg.base-url={{pg_url}}"{extra}]
    health: {{timeout: 300s}}
    metrics: {{preset: spring-boot, path: /actuator/prometheus}}
"""


FIRST = """
  first:
    command: [{java}, -jar, {jar}, "--server.port={{port}}",
              "--management.server.port={{metrics_port}}", "--pg.base-url={{pg_url}}"]
    health: {{timeout: 300s}}
    metrics: {{preset: spring-boot, path: /actuator/prometheus}}"""
"""A build before ``jar`` that runs to its end (whose results must outlive ``jar``'s death)."""


def _scenario(
    tmp_path: Path, jar: Path, duration: str = "5s", extra: str = "", first: bool = False
) -> Path:
    path = tmp_path / "spring-fails.yaml"
    java = shutil.which("java")
    before = FIRST.format(java=java, jar=jar) if first else ""
    text = SCENARIO.format(duration=duration, java=java, jar=jar, extra=extra, first=before)
    path.write_text(text)
    return path


def _harness(scenario: Path) -> list[str]:
    return harness_cmd("run", str(scenario), "--results", str(scenario.parent / "results"))


def _manifest(scenario: Path) -> dict[str, Any]:
    (run_dir,) = (scenario.parent / "results" / "spring-fails").iterdir()
    manifest: dict[str, Any] = json.loads((run_dir / "manifest.json").read_text())
    return manifest


def _failed_before_load(scenario: Path, done: subprocess.CompletedProcess[str], said: str) -> None:
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    error = " ".join(done.stderr.split())  # rich folds long lines
    assert "the target exited with code 1 before it answered at" in error, done.stderr
    assert said in error, done.stderr
    manifest = _manifest(scenario)
    info = manifest["builds"]["jar"]
    assert info["status"] == "failed" and "load_start" not in info  # no load was sent
    assert said in " ".join(info["log_tail"].split())
    assert leftover_processes(manifest["run_id"]) == []


def test_a_missing_jar_is_the_jvm_s_own_words_before_any_load(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, tmp_path / "no-such-app.jar")
    done = subprocess.run(_harness(scenario), cwd=ROOT, capture_output=True, text=True, timeout=60)
    _failed_before_load(scenario, done, "Unable to access jarfile")


def test_an_app_that_fails_to_start_shows_spring_s_report(tmp_path: Path, spring_jar: Path) -> None:
    """No gateway bean for an unknown variant: Spring's "APPLICATION FAILED TO START"."""
    scenario = _scenario(tmp_path, spring_jar, extra=", --shop.resilience=no-such-variant")
    done = subprocess.run(_harness(scenario), cwd=ROOT, capture_output=True, text=True, timeout=360)
    _failed_before_load(scenario, done, "APPLICATION FAILED TO START")


def test_an_actuator_without_the_prometheus_endpoint_names_the_property_before_load(
    tmp_path: Path, spring_jar: Path
) -> None:
    scenario = _scenario(
        tmp_path, spring_jar, extra=", --management.endpoints.web.exposure.include=health"
    )
    done = subprocess.run(_harness(scenario), cwd=ROOT, capture_output=True, text=True, timeout=360)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    error = " ".join(done.stderr.split())
    assert "/actuator/prometheus answered 404. Spring Boot's actuator does not expose" in error
    assert "management.endpoints.web.exposure.include=health,prometheus" in error
    manifest = _manifest(scenario)
    info = manifest["builds"]["jar"]
    assert info["status"] == "failed" and "load_start" not in info  # no load was sent
    assert leftover_processes(manifest["run_id"]) == []


def test_a_jvm_that_dies_mid_run_is_exit_3_with_its_log_and_results_kept(
    tmp_path: Path, spring_jar: Path
) -> None:
    """kill -9 of the second build's JVM 4 s into its measured window: the first build's
    results stay whole, the second's samples so far are kept, and nothing is left."""
    scenario = _scenario(tmp_path, spring_jar, duration="12s", first=True)
    proc = subprocess.Popen(
        _harness(scenario), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 700
        info: dict[str, Any] = {}
        while time.monotonic() < deadline and proc.poll() is None:
            if list((tmp_path / "results").glob("*/*/manifest.json")):
                info = _manifest(scenario)["builds"].get("jar", {})
                if "t0" in info and time.time() > info["t0"] + 4:
                    break
            time.sleep(0.2)
        assert "t0" in info, "the second build's load never started"
        killed_at = time.time()
        os.kill(info["processes"]["target"], signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, out + err
    assert "Traceback" not in err
    error = " ".join(err.split())
    assert "target exited with code -9" in error, err
    assert "Started ShopApplication" in error  # the JVM's own last lines
    manifest = _manifest(scenario)
    assert manifest["status"] == "failed" and "target" in manifest["error"]
    info = manifest["builds"]["jar"]
    assert info["status"] == "failed"
    assert "Started ShopApplication" in info["log_tail"]
    (run_dir,) = (tmp_path / "results" / "spring-fails").iterdir()
    assert manifest["builds"]["first"]["status"] == "completed"
    first = pd.read_parquet(run_dir / "first" / "samples.parquet")
    assert len(first) > 100  # every request of its window, whatever its answer
    assert (run_dir / "first" / "metrics.parquet").is_file()
    kept = pd.read_parquet(run_dir / "jar" / "samples.parquet")  # up to the JVM's death
    assert (kept["actual_start"] > info["t0"]).sum() > 20
    assert kept["actual_start"].max() < killed_at + 5
    assert leftover_processes(manifest["run_id"]) == []
