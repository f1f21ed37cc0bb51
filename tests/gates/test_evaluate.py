"""Gate verdicts against a report, and their JUnit XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import numpy as np
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


# ---------------------------------------------------------------- not worse than (the judge)


def _judged_report(before: list[float], after: list[float]) -> dict[str, Any]:
    report = _report(before_p95=float(np.median(before)), after_p95=float(np.median(after)),
                     after_busy=1.0)  # fmt: skip
    for name, blocks in (("before", before), ("after", after)):
        report["builds"][name]["blocks"] = {
            "products.latency_s.p99[outage]": blocks,
            "products.latency_s.p95[outage]": blocks,
        }
    return report


def _blocks(seed: int, scale: float = 1.0) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(v) for v in scale * np.exp(rng.normal(np.log(0.02), 0.2, 16))]


def test_not_worse_than_fails_a_regression_beyond_noise() -> None:
    report = _judged_report(_blocks(1), _blocks(2, scale=1.5))
    gate = parse_gate("after.products.p99[outage] not worse than before by 10%")
    result = evaluate(gate, report)
    assert result.verdict == "fail" and result.detail.startswith("worse: shift +")
    assert "beyond 10%" in result.detail
    assert evaluate(parse_gate("after.products.p99[outage] not worse than before by 90%"),
                    report).verdict == "pass"  # fmt: skip


def test_not_worse_than_passes_within_noise_and_against_the_baseline_run() -> None:
    report = _judged_report(_blocks(1), _blocks(2))
    result = evaluate(parse_gate("after.products.p99[outage] not worse than before"), report)
    assert result.verdict == "pass" and result.detail.startswith("within noise")
    baseline = _judged_report(_blocks(3), _blocks(4, scale=2.0))
    against = evaluate(parse_gate("after.products.p99[outage] not worse than baseline"),
                       report, baseline)  # fmt: skip
    assert against.verdict == "pass" and against.detail.startswith("better")
    missing = evaluate(parse_gate("after.products.p99[outage] not worse than baseline"), report)
    assert missing.verdict == "error" and "--baseline" in missing.detail


def test_not_worse_than_without_blocks() -> None:
    report = _judged_report([0.02], _blocks(2))
    result = evaluate(parse_gate("after.products.p99[outage] not worse than before"), report)
    assert result.verdict == "error" and "not enough data" in result.detail
    del report["builds"]["before"]["blocks"]
    old = evaluate(parse_gate("after.products.p99[outage] not worse than before"), report)
    assert old.verdict == "error" and "re-render it with harness report" in old.detail


def test_a_threshold_gate_says_when_its_margin_is_within_noise() -> None:
    report = _judged_report(_blocks(1), _blocks(2, scale=0.5))
    gate = parse_gate("after.products.p95[outage] <= 0.5 * before.products.p95[outage]")
    result = evaluate(gate, report)
    assert result.detail.startswith("margin within noise")
    clear = evaluate(parse_gate("after.products.p95[outage] <= before.products.p95[outage]"),
                     report)  # fmt: skip
    assert clear.verdict == "pass" and clear.detail == ""
