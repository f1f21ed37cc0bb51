"""``harness compare`` on real runs: two builds of one run, two runs, and repeated builds."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, harness_cmd, short_scenario


@pytest.mark.integration
def test_compare_command_and_repeats(short_run: Path, tmp_path: Path) -> None:
    within = subprocess.run(
        harness_cmd(
            "compare",
            str(short_run),
            "--build",
            "before",
            "--build",
            "after",
            "--markdown",
            str(tmp_path / "cmp.md"),
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert within.returncode == 0, within.stderr
    assert "before vs after" in within.stdout
    assert "| products.latency_s.p95 |" in (tmp_path / "cmp.md").read_text()

    results = tmp_path / "results"
    repeated = subprocess.run(
        harness_cmd(
            "run",
            str(short_scenario(tmp_path, "8s", "5s")),
            "--results",
            str(results),
            "--repeat",
            "2",
            "--build",
            "after",
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert repeated.returncode in (0, 1), repeated.stdout + repeated.stderr
    (run_dir,) = (results / "short").iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert list(manifest["builds"]) == ["after.r1", "after.r2"]
    report = json.loads((run_dir / "report.json").read_text())
    after = report["builds"]["after"]
    assert after["repetitions"] == 2 and "products.latency_s.p95" in after["ci95"]

    across = subprocess.run(
        harness_cmd("compare", str(short_run), str(run_dir)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert across.returncode == 0, across.stderr
    assert "products.latency_s.p95" in across.stdout
    bad = subprocess.run(
        harness_cmd("compare", str(short_run), "--build", "after"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "exactly two builds" in bad.stderr

    # The pull request's path (issue 31): this run gated against the shared run as main's
    # baseline, the summary written and appended to a GitHub job's summary.
    job = tmp_path / "step-summary.md"
    gate = subprocess.run(
        harness_cmd(
            "gate",
            str(run_dir),
            "--no-scenario-gates",
            "--baseline",
            str(short_run / "report.json"),
            "--gate",
            "after.products.p95[outage] not worse than baseline by 50%",
            "--summary",
            str(tmp_path / "summary.md"),
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "GITHUB_STEP_SUMMARY": str(job)},
    )
    assert gate.returncode in (0, 1), gate.stdout + gate.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## Resilience gates: short: ")
    assert f"against baseline run {short_run.name}" in summary
    assert f"**after: baseline run {short_run.name} → this run**" in summary
    assert "### Charts\n\n- [" in summary and "](charts/" in summary
    assert job.read_text() == summary + "\n"
