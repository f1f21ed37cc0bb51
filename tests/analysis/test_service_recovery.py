"""The service's time to recover (``time_to_recover``, the headline's): its slowest endpoint's
own, not the gateway calls' answers (``gateway_time_to_recover``), issue 30 item 12.

Seed 000 on Spring read ``time to recover: before 0 ms`` while before's endpoints were not back
within the 20 s after the gateway healed: the gateway calls were answered at once, but behind a
queue that took seconds to drain. Synthetic samples of that shape: ``orders`` call the gateway
and are answered again at once after it heals; ``catalogue`` reads, which never call it, wait
in the queue and drain over ``drain_s``.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.analysis.figures import analyse
from harness.analysis.model import Report
from harness.gates.evaluate import evaluate
from harness.report.tables import headline_rows, markdown
from harness.results.io import LEDGER_DTYPES, METRICS_COLUMNS, empty_frame
from harness.results.model import BuildResult, RunResult
from harness.scenario.gates import parse_gate
from harness.scenario.loader import load_scenario_text
from tests.analysis.frames import sample_frame

T0 = 1_800_000_000.0
SCENARIO = """\
name: queue
seed: 1
warmup: 2s
duration: 40s
traffic:
  orders: {method: POST, path: /orders, rate: 10, calls-gateway: true}
  catalogue: {path: /catalogue/1, rate: 10}
pg:
  phases:
    - {name: calm, start: 0s, duration: 10s, fault: {type: healthy}}
    - {name: outage, start: 10s, duration: 10s, fault: {type: timeout}}
    - {name: healed, start: 20s, duration: 20s, fault: {type: healthy}}
builds:
  queued: {profile: retry-only}
  quick: {profile: retry-circuit-breaker}
"""


def _build(name: str, drain_s: float, orders_down_s: float = 0.0) -> BuildResult:
    """Catalogue reads at 10 ms while healthy, 3 s in the outage, then a wait falling from 3 s
    to nothing over ``drain_s``; orders fail in the outage and ``orders_down_s`` after it."""
    start = T0 - 2.0 + np.arange(420) / 10
    t = start - T0
    read = np.full(len(t), 0.010)
    read[(t >= 10) & (t < 20)] = 3.0
    after = t >= 20
    if drain_s:
        read[after] = np.maximum(0.010, 3.0 * (1 - (t[after] - 20) / drain_s))
    order_status = np.where((t >= 10) & (t < 20 + orders_down_s), 503, 200)
    samples = pd.concat(
        [
            sample_frame("catalogue", start, read, np.full(len(t), 200)),
            sample_frame("orders", start, np.full(len(t), 0.05), order_status),
        ],
        ignore_index=True,
    )
    metrics = pd.DataFrame(columns=METRICS_COLUMNS)
    return BuildResult(name, samples, metrics, {"t0": T0}, empty_frame(LEDGER_DTYPES))


def _report(tmp_path: Path, *builds: BuildResult) -> Report:
    run = RunResult(tmp_path, {"run_id": "r", "status": "completed"}, {b.build: b for b in builds})
    return analyse(run, load_scenario_text(SCENARIO).scenario)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    queued = _build("queued", drain_s=8.0)
    quick = _build("quick", drain_s=0.0, orders_down_s=3.0)
    return _report(tmp_path_factory.mktemp("run"), queued, quick)


def test_the_headline_time_to_recover_is_the_services_slowest_endpoint(report: Report) -> None:
    queued = report["builds"]["queued"]["timeline"]
    back = queued["endpoints_recover_s"]
    assert back["orders"] == 0.0 and back["catalogue"] is not None and back["catalogue"] >= 7.0
    # The gateway calls were answered at once; the service was back when its reads were.
    assert queued["time_to_recover_s"] == 0.0
    assert queued.get("service_recover_s") == back["catalogue"]
    quick = report["builds"]["quick"]["timeline"]
    assert quick.get("service_recover_s") == quick["time_to_recover_s"] == 3.0
    rows = {r[0]: r[1:] for r in headline_rows(report)}
    assert rows["time to recover"][:2] == [f"{back['catalogue']:.2f} s", "3.00 s"]
    assert rows["gateway calls answered again"][:2] == ["0 ms", "3.00 s"]


def test_gates_read_the_services_and_the_gateway_calls_figure_by_their_names(
    report: Report,
) -> None:
    assert evaluate(parse_gate("queued.time_to_recover >= 7s"), report).verdict == "pass"
    assert evaluate(parse_gate("queued.gateway_time_to_recover == 0"), report).verdict == "pass"
    # The claim the old headline made ("the queued build recovered first") is now false.
    claim = parse_gate("queued.time_to_recover <= quick.time_to_recover")
    assert evaluate(claim, report).verdict == "fail"


def test_an_endpoint_not_back_inside_the_window_makes_the_service_not_reached(
    tmp_path: Path,
) -> None:
    report = _report(tmp_path, _build("queued", drain_s=60.0))
    b = report["builds"]["queued"]
    assert b["timeline"].get("service_recover_s") is None
    assert b["timeline"]["time_to_recover_s"] == 0.0  # its answers came back at once
    assert b["not_reached"] == {
        "timeline.service_recover_s": 20.0,
        "timeline.endpoints_recover_s.catalogue": 20.0,
    }
    rows = {r[0]: r[1:] for r in headline_rows(report)}
    assert rows["time to recover"] == ["> 20.00 s"]
    assert rows["gateway calls answered again"] == ["0 ms"]
    assert "| queued | - | > 20.00 s | 0 ms | 0 ms | > 20.00 s |" in markdown(report)
    result = evaluate(parse_gate("queued.time_to_recover <= 10s"), report)
    assert result.verdict == "fail" and "(> 20 s)" in result.detail


def test_an_endpoint_never_healthy_before_the_fault_leaves_it_not_measured_and_says_which(
    tmp_path: Path,
) -> None:
    build = _build("queued", drain_s=0.0)
    reads = build.samples["endpoint"] == "catalogue"
    build.samples.loc[reads & (build.samples["intended_start"] < T0 + 10), "status"] = 500
    b = _report(tmp_path, build)["builds"]["queued"]
    assert b["timeline"]["endpoints_recover_s"]["catalogue"] is None
    assert b["timeline"].get("service_recover_s") is None
    assert "not_reached" not in b
    why = b["not_measured"]["timeline.service_recover_s"]
    assert why.startswith("the recovery of catalogue was not measured"), why


def test_a_report_written_before_the_figure_refuses_the_gate_saying_why(report: Report) -> None:
    old = copy.deepcopy(report)
    for build in old["builds"].values():
        del build["timeline"]["service_recover_s"]  # type: ignore[misc]
    result = evaluate(parse_gate("queued.time_to_recover <= 10s"), old)
    assert result.verdict == "error"
    assert "written before the figure existed" in result.detail, result.detail
    assert "gateway_time_to_recover" in result.detail, result.detail
    rows = {r[0] for r in headline_rows(old)}
    assert "time to recover" not in rows and "gateway calls answered again" in rows
