"""Per-replica and opens gates on a real run whose breakers flap, and through the CLI.

The run (``tests.report.flaprun``): ``one`` (one shop) and ``scaled`` (two
behind nginx) against a gateway that hangs; its scenario has gates with
``seed:``, one false on purpose.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.analysis.model import read_report
from harness.cli import app
from harness.gates.evaluate import evaluate
from harness.scenario.gates import parse_gate
from tests.report.flaprun import flap_run, needs_nginx

pytestmark = pytest.mark.integration


def _report(run_dir: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((run_dir / "report.json").read_text())
    return report


@needs_nginx
def test_replica_gates_read_each_replicas_own_figures() -> None:
    run_dir = flap_run()
    report = read_report(run_dir / "report.json")
    replicas = _report(run_dir)["builds"]["scaled"]["replicas"]

    def value(text: str) -> float | None:
        result = evaluate(parse_gate(f"{text} >= 0"), report)
        assert result.verdict == "pass", result
        return result.left

    for i in ("0", "1"):
        r = replicas[i]
        assert value(f"scaled.replicas.{i}.breaker.opens") == r["breaker"]["opens"]
        assert (
            value(f"scaled.replicas.{i}.breaker.opens[outage]")
            == (r["phases"]["outage"]["breaker"]["opens"])
        )
        assert value(f"scaled.replicas.{i}.breaker.open_pct") == r["breaker"]["open_pct_fault"]
        assert value(f"scaled.replicas.{i}.breaker.open_pct[calm]") == 0
        assert value(f"scaled.replicas.{i}.time_to_open") == r["breaker"]["time_to_open_s"]
        assert value(f"scaled.replicas.{i}.blocked.total") == r["breaker"]["blocked_total"]
        assert (
            value(f"scaled.replicas.{i}.blocked.per_s[outage]")
            == (r["phases"]["outage"]["breaker"]["blocked_per_s"])
        )
        assert value(f"scaled.replicas.{i}.busy_workers.max") == r["workers"]["busy_max_fault"]
        assert value(f"scaled.replicas.{i}.max_workers") == 8
        assert value(f"scaled.replicas.{i}.pg.retries") == r["pg"]["retries"]
    times = [replicas[i]["breaker"]["time_to_open_s"] for i in ("0", "1")]
    assert value("scaled.replicas.min.time_to_open") == min(times)
    assert value("scaled.replicas.max.time_to_open") == max(times)
    # The build's own figure is the first replica to open, and its opens the replicas' sum.
    assert value("scaled.time_to_open") == min(times)
    assert value("scaled.breaker.opens") == sum(replicas[i]["breaker"]["opens"] for i in "01")
    # A replica the run does not have (the scenario was edited since) is an error, not 0.
    missing = evaluate(parse_gate("scaled.replicas.5.breaker.opens >= 0"), report)
    assert missing.verdict == "error" and "the run has replicas 0..1" in missing.detail


@needs_nginx
def test_harness_gate_and_junit_with_replica_gates(tmp_path: Path) -> None:
    run_dir = flap_run()
    junit = tmp_path / "gates.xml"
    result = CliRunner().invoke(
        app,
        [
            "gate",
            str(run_dir),
            "--junit",
            str(junit),
            "-g",
            "scaled.replicas.max.breaker.opens[calm] == 0",
        ],
    )
    assert result.exit_code == 1, result.output  # the scenario's false gate
    output = " ".join(result.output.split())
    assert "gates (4/5 pass)" in output
    assert "each instance has its own state" in output  # the seed column
    cases = ET.parse(junit).getroot().findall(".//testcase")
    assert [c.get("name") for c in cases] == [
        "the breaker flaps in the outage",
        "each replica flaps on its own",
        "never opens (false on purpose)",
        "scaled.replicas.1.time_to_open < 8s",
        "scaled.replicas.max.breaker.opens[calm] == 0",
    ]
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert failed == ["never opens (false on purpose)"]
    # Refused before evaluation, exit 2: a replica beyond the build's replicas.
    bad = CliRunner().invoke(
        app, ["gate", str(run_dir), "-g", "scaled.replicas.2.breaker.opens < 1"]
    )
    assert bad.exit_code == 2
    assert "has replicas 0..1 (replicas: 2), not 2" in " ".join(bad.output.split())
