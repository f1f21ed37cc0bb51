"""A recovery that never came inside the measured window is *not reached*, with its bound.

Payments keep failing after a 2 s outage that ends 25 s before the window does: the
report says ``> 25.00 s`` (``not_reached`` in report.json), and gates compare the bound
instead of calling the figure "not measured"; gate values read in the figure's unit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.analysis.figures import analyse
from harness.analysis.model import Report
from harness.gates.evaluate import evaluate
from harness.report.tables import headline_rows, markdown
from harness.results.model import BuildResult, RunResult
from harness.scenario.gates import parse_gate
from harness.scenario.loader import load_scenario_text
from tests.analysis.frames import sample_frame

T0 = 1_800_000_000.0
SCENARIO = """\
name: never
seed: 1
warmup: 1s
duration: 30s
traffic:
  products: {method: GET, path: /api/products/1, rate: 10}
  payments: {method: POST, path: /api/payments, rate: 10, calls-gateway: true}
pg:
  phases:
    - {name: baseline, start: 0s, duration: 3s, fault: {type: healthy}}
    - {name: outage, start: 3s, duration: 2s, fault: {type: error}}
builds:
  b: {profile: retry-only, workers: 8}
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    start = T0 + np.arange(300) / 10
    failing = np.where(start - T0 < 3.0, 200, 500)  # payments never come back
    samples = sample_frame("products", start, np.full(300, 0.01), np.full(300, 200))
    payments = sample_frame("payments", start, np.full(300, 0.05), failing)
    build = BuildResult(
        "b", pd.concat([samples, payments], ignore_index=True), pd.DataFrame(), {"t0": T0}
    )
    path = tmp_path_factory.mktemp("run")
    return analyse(RunResult(path, {}, {"b": build}), load_scenario_text(SCENARIO).scenario)


def test_the_report_keeps_the_figure_none_and_says_its_bound(report: Report) -> None:
    b = report["builds"]["b"]
    assert b["timeline"].get("service_recover_s") is None
    assert b["timeline"]["time_to_recover_s"] is None
    assert b["timeline"]["endpoints_recover_s"] == {"products": 0.0, "payments": None}
    assert b["not_reached"] == {
        "timeline.service_recover_s": 25.0,
        "timeline.time_to_recover_s": 25.0,
        "timeline.endpoints_recover_s.payments": 25.0,
    }
    rows = {r[0]: r[1:] for r in headline_rows(report)}
    assert rows["time to recover"] == ["> 25.00 s"]
    assert rows["gateway calls answered again"] == ["> 25.00 s"]
    text = markdown(report)
    assert "| b | - | > 25.00 s | > 25.00 s | 0 ms | > 25.00 s |" in text  # the timeline table


@pytest.mark.parametrize(
    ("gate", "verdict", "detail"),
    [
        ("b.time_to_recover > 20s", "pass", "(> 25 s)"),
        ("b.time_to_recover >= 25s", "pass", "(> 25 s)"),
        ("b.time_to_recover <= 20s", "fail", "(> 25 s)"),
        ("20s < b.time_to_recover", "pass", "(> 25 s)"),  # the bound on the right
        ("b.payments.time_to_recover == 10s", "fail", "(> 25 s)"),
        ("b.time_to_recover <= 30s", "error", "whether it is <= 30 cannot be told"),
        ("b.gateway_time_to_recover > 20s", "pass", "(> 25 s)"),
        ("b.time_to_recover * 2 > 1", "error", "only a gate comparing it on its own"),
    ],
)
def test_gates_compare_the_bound(report: Report, gate: str, verdict: str, detail: str) -> None:
    result = evaluate(parse_gate(gate), report)
    assert (result.verdict, detail in result.detail) == (verdict, True), result.detail
    assert "time_to_recover was not reached" in result.detail or "payments" in result.detail
    assert "not measured" not in result.detail


def test_gate_values_read_in_the_figures_unit(report: Report) -> None:
    fast = evaluate(parse_gate("b.products.p95 <= 1.83s"), report)
    assert f"{fast.show(fast.left)} {fast.op} {fast.show(fast.right)}" == "10 ms <= 1.83 s"
    count = evaluate(parse_gate("b.products.requests >= 299.5"), report)
    assert count.show(count.left) == "300" and count.unit == ""
