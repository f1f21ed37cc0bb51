"""``breaker_failures``: the calls a breaker recorded as failed, from Resilience4j's calls
timer (``resilience4j_circuitbreaker_calls_seconds_count{kind="failed"}``), read by the
``shop`` and ``spring-boot`` presets, cut by phase, gated per payment (resilience4j#2383:
Retry outside the breaker records every attempt), and "not exposed" without a breaker."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.analysis.figures import analyse
from harness.analysis.model import Report
from harness.analysis.presets import PRESETS
from harness.core.catalogue import NOT_EXPOSED
from harness.core.selectors import Selector
from harness.gates.evaluate import evaluate
from harness.report.tables import headline_rows
from harness.results.io import METRICS_COLUMNS
from harness.results.model import BuildResult, RunResult
from harness.scenario.gates import check_gate, parse_gate
from harness.scenario.loader import load_scenario_text
from harness.scenario.schema import Scenario
from tests.analysis.frames import sample_frame

T0 = 1_800_000_000.0
SCENARIO = """\
name: order
seed: 1
warmup: 2s
duration: 20s
traffic:
  payments: {method: POST, path: /api/payments, rate: 10, calls-gateway: true}
pg:
  phases:
    - {name: baseline, start: 0s, duration: 10s, fault: {type: healthy}}
    - {name: outage, start: 10s, duration: 10s, fault: {type: error, status: 503}}
builds:
  inside: {profile: retry-circuit-breaker}
  outside: {profile: retry-circuit-breaker, resilience: [circuit-breaker, retry]}
  none: {profile: retry-only}
"""
FAILED = '{"kind":"failed","name":"pgClient"}'
PER_PAYMENT = {"inside": 3.0, "outside": 1.0}
"""Failures the breaker records per payment in the outage: 3 attempts with Retry outside,
one call with the breaker outside."""


def _scenario() -> Scenario:
    return load_scenario_text(SCENARIO).scenario


def _metrics(build: str) -> pd.DataFrame:
    """Scrapes every second, half a second off the phase edges: 10 payments/s fail from
    the outage's first scrape on, each recorded ``PER_PAYMENT`` times; ``none`` has no breaker."""
    rows = []
    for t in T0 - 1.5 + np.arange(24.0):
        rows.append((t, "target", "shop_workers_busy", "{}", 1.0))
        if build in PER_PAYMENT:
            failed = 10 * PER_PAYMENT[build] * max(0.0, t - (T0 + 10.5))
            rows.append(
                (t, "target", "resilience4j_circuitbreaker_calls_seconds_count", FAILED, failed)
            )
    return pd.DataFrame(rows, columns=METRICS_COLUMNS)


def _report(tmp_path: Path) -> Report:
    start = T0 + np.arange(200) / 10
    samples = sample_frame("payments", start, np.full(200, 0.01), np.full(200, 200))
    builds = {
        name: BuildResult(name, samples, _metrics(name), {"t0": T0, "preset": "spring-boot"})
        for name in ("inside", "outside", "none")
    }
    return analyse(RunResult(tmp_path, {"run_id": "r", "status": "completed"}, builds), _scenario())


def test_both_resilience4j_presets_read_the_failed_calls() -> None:
    failed = Selector("resilience4j_circuitbreaker_calls_seconds_count", {"kind": "failed"})
    for name in ("shop", "spring-boot"):
        assert PRESETS[name].source("breaker_failures") == failed
    assert PRESETS["opossum"].source("breaker_failures") is None


def test_the_figure_per_window_and_phase(tmp_path: Path) -> None:
    builds = _report(tmp_path)["builds"]
    assert builds["inside"]["series"]["breaker_failures"] == {"total": pytest.approx(285.0)}
    outage = builds["outside"]["phases"]["outage"]["series"]["breaker_failures"]["total"]
    assert outage == pytest.approx(95.0, abs=5)  # the scrapes either side of the phase edges
    assert builds["outside"]["phases"]["baseline"]["series"]["breaker_failures"]["total"] == 0
    assert "series" not in builds["none"]  # no breaker: absent, not 0


@pytest.mark.parametrize(
    ("gate", "verdict"),
    [
        # resilience4j#2383: per payment, Retry outside records ~3x what the breaker outside does.
        (
            "inside.breaker_failures[outage] / inside.payments.requests[outage] "
            ">= 2.5 * outside.breaker_failures[outage] / outside.payments.requests[outage]",
            "pass",
        ),
        ("outside.breaker_failures[outage] / outside.payments.requests[outage] <= 1", "pass"),
        ("inside.breaker_failures[outage] / inside.payments.requests[outage] <= 1", "fail"),
        ("none.breaker_failures <= 1", "error"),
    ],
)
def test_gates_per_payment(tmp_path: Path, gate: str, verdict: str) -> None:
    parsed = parse_gate(gate)
    assert check_gate(parsed, _scenario()) == []
    result = evaluate(parsed, _report(tmp_path))
    assert result.verdict == verdict, result.detail
    if verdict == "error":
        assert result.detail == "none.breaker_failures was not measured: not exposed"


def test_the_headline_row(tmp_path: Path) -> None:
    rows = {r[0]: r[1:] for r in headline_rows(_report(tmp_path))}
    assert rows["breaker-recorded failures (all phases)"][2] == NOT_EXPOSED
