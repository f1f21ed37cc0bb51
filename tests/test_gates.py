"""Gates: the grammar, name checks against the scenario, verdicts, JUnit XML, and the CLI."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from harness.core.errors import ScenarioError
from harness.gates.evaluate import (
    BinOp,
    GateSyntaxError,
    Metric,
    Number,
    check_gate,
    evaluate,
    junit_xml,
    parse_gate,
)
from harness.scenario.schema import load_scenario_text
from tests.conftest import ROOT, harness_cmd

SCENARIO = """\
name: g
duration: 60s
traffic:
  payments: {method: POST, path: /api/payments, rate: 5, calls-gateway: true}
  products: {path: /p, rate: 5}
pg:
  phases:
    - {name: outage, start: 10s, duration: 30s, fault: {type: timeout}}
builds:
  before: {profile: retry-only}
  after: {profile: retry-circuit-breaker}
"""


def _report(before_p95: float, after_p95: float, after_busy: float | None) -> dict[str, Any]:
    def build(p95: float, busy: float | None) -> dict[str, Any]:
        stats = {
            "latency_s": {"p50": p95 / 2, "p95": p95, "p99": p95, "max": p95, "mean": p95},
            "success_pct": 90.0,
            "achieved_rps": 5.0,
            "requests": 300,
            "max_lateness_s": 0.001,
        }
        window = {
            "endpoints": {"products": stats, "payments": stats},
            "workers": {"busy_max": busy, "busy_mean": busy, "busy_p50": busy},
            "breaker": {"blocked": 10.0, "blocked_per_s": 1.0, "open_pct": 50.0},
            "pg": {"calls": 100.0, "payments": 150, "amplification": 0.66},
        }
        return {
            **window,
            "workers": {
                "max_workers": 200,
                "busy_p50_fault": busy,
                "busy_max_fault": busy,
                "busy_mean_fault": busy,
            },
            "breaker": {"blocked_total": 10.0, "blocked_per_s_fault": 1.0, "open_pct_fault": 50.0},
            "pg": {"calls": 100.0, "amplification": 0.66, "retries": 3.0},
            "timeline": {
                "time_to_open_s": 2.5,
                "time_to_recover_s": 4.0,
                "blocked_pct_healthy": 1.0,
            },
            "phases": {"outage": window},
        }

    return {"builds": {"before": build(before_p95, 200.0), "after": build(after_p95, after_busy)}}


def test_precedence_units_and_phases() -> None:
    gate = parse_gate("after.products.p95[outage] <= 0.5 * before.products.p95[outage] + 200ms")
    assert gate.op == "<="
    assert gate.left == Metric("after", ("products", "p95"), "outage")
    assert isinstance(gate.right, BinOp) and gate.right.op == "+"
    assert gate.right.right == Number(0.2)
    assert isinstance(gate.right.left, BinOp) and gate.right.left.op == "*"
    assert parse_gate("after.products.p99 < 2m").right == Number(120.0)
    assert parse_gate("baseline.after.pg.calls >= 1").left == Metric(
        "after", ("pg", "calls"), None, baseline=True
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("after.products.p95 <", "ends too early"),
        ("after.products.p95 1", "expected a comparison"),
        ("after < 1", "a figure is written build.figure"),
        ("after.products.p95 < 1 2", "unexpected"),
        ("after.products.p95 <= (1 + 2", "expected ')'"),
        ("after.products.p95 <= __import__('os')", "cannot read"),
        ("after.products.p95[1] < 2", "expected a phase name"),
    ],
)
def test_syntax_errors_say_what_was_expected(text: str, message: str) -> None:
    with pytest.raises(GateSyntaxError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_gate(text)


def test_names_are_checked_against_the_scenario() -> None:
    scenario = load_scenario_text(SCENARIO).scenario
    assert check_gate(parse_gate("after.products.p95[outage] < 1"), scenario) == []
    assert "unknown build 'aftr'" in check_gate(parse_gate("aftr.products.p95 < 1"), scenario)[0]
    assert (
        "unknown phase 'outag'"
        in check_gate(parse_gate("after.products.p95[outag] < 1"), scenario)[0]
    )
    assert (
        "unknown figure 'products.p96'"
        in check_gate(parse_gate("after.products.p96 < 1"), scenario)[0]
    )
    assert (
        "not cut by phase" in check_gate(parse_gate("after.time_to_open[outage] < 1"), scenario)[0]
    )


def test_scenario_gates_are_validated_with_lines() -> None:
    text = (
        SCENARIO
        + 'gates:\n  - "after.products.p95 < 1s"\n  - {name: typo, expr: "after.prods.p95 < 1"}\n'
    )
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, "g.yaml")
    (problem,) = info.value.problems
    assert str(problem).startswith("g.yaml:14:")
    assert "gates.1" in str(problem) and "unknown figure 'prods.p95'" in str(problem)


def test_verdicts() -> None:
    report = _report(before_p95=7.0, after_p95=2.5, after_busy=30.0)
    ok = evaluate(
        parse_gate("after.products.p95[outage] <= 0.5 * before.products.p95[outage]"), report
    )
    assert ok.verdict == "pass" and ok.left == 2.5 and ok.right == 3.5
    bad = evaluate(parse_gate("after.busy_workers.p50 <= 0.1 * after.max_workers"), report)
    assert bad.verdict == "fail" and bad.left == 30.0 and bad.right == pytest.approx(20.0)
    assert evaluate(parse_gate("after.time_to_open <= 3s"), report).passed
    assert evaluate(parse_gate("after.payments.error_pct == 10"), report).passed
    unmeasured = evaluate(
        parse_gate("after.busy_workers.p50 < 1"), _report(7.0, 2.5, after_busy=None)
    )
    assert unmeasured.verdict == "error" and "not measured" in unmeasured.detail
    needs_base = evaluate(parse_gate("after.products.p95 <= baseline.after.products.p95"), report)
    assert needs_base.verdict == "error" and "--baseline" in needs_base.detail
    regressed = evaluate(
        parse_gate("after.products.p95 <= 1.1 * baseline.after.products.p95"),
        report,
        baseline=_report(7.0, 2.0, 30.0),
    )
    assert regressed.verdict == "fail"


def test_junit_lists_every_gate() -> None:
    report = _report(7.0, 2.5, 30.0)
    results = [
        evaluate(parse_gate(t), report)
        for t in ("after.products.p95 < 3", "after.products.p95 < 1", "after.x.p95 < 1")
    ]
    root = ET.fromstring(junit_xml(results, "g"))
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    cases = suite.findall("testcase")
    assert cases[0].find("failure") is None
    failure = cases[1].find("failure")
    assert failure is not None and "2.5 < 1" in (failure.get("message") or "")
    assert cases[2].find("error") is not None


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
