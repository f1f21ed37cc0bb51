"""``harness compare`` on real runs: two builds of one run, two runs, and repeated builds."""

from __future__ import annotations

import json
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
