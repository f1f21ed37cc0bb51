"""Gates end to end: a short real run fails on its failing gate; ``harness gate`` exit codes."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import ROOT, harness_cmd


@pytest.mark.integration
def test_run_fails_on_its_failing_gate_and_writes_junit(short_run: Path) -> None:
    junit = short_run.parent.parent.parent / "gates.xml"
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    verdicts = {
        case.get("name"): "fail"
        if case.find("failure") is not None
        else "error"
        if case.find("error") is not None
        else "pass"
        for case in suite.findall("testcase")
    }
    assert verdicts == {
        "product reads protected": "pass",
        "after.busy_workers.p50[outage] <= 0.5 * after.max_workers": "pass",
        "after.pg.amplification[outage] <= 1.0": "pass",
        "payments succeed during the outage": "fail",
    }
    output = (short_run.parent.parent.parent / "run-output.txt").read_text()
    assert "payments succeed during the outage" in output and "3/4 pass" in output


@pytest.mark.integration
def test_gate_command(short_run: Path, tmp_path: Path) -> None:
    def gate(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            harness_cmd("gate", str(short_run), *args),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert gate().returncode == 1
    passing = gate(
        "--no-scenario-gates",
        "--gate",
        "after.products.p99 < before.products.p99",
        "--baseline",
        str(short_run),
        "--gate",
        "after.products.p95 <= 1.0 * baseline.after.products.p95",
        "--junit",
        str(tmp_path / "j.xml"),
    )
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert ET.parse(tmp_path / "j.xml").getroot().get("tests") == "2"
    typo = gate("--gate", "after.prods.p95 < 1")
    assert typo.returncode == 2 and "unknown figure" in typo.stderr
    report = json.loads((short_run / "report.json").read_text())
    assert report["builds"]["after"]["timeline"]["time_to_open_s"] is not None
