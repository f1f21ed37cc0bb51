"""Gate verdicts against a report, and their JUnit XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from harness.gates.evaluate import evaluate
from harness.gates.junit import junit_xml
from harness.scenario.gates import parse_gate


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
    assert failure is not None and "2.50 s < 1.00 s" in (failure.get("message") or "")  # its unit
    assert cases[2].find("error") is not None
