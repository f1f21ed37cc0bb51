"""An endpoint's own time back to healthy (``<endpoint>.time_to_recover``).

Synthetic samples of product reads that never call the gateway: 10 ms while
healthy, seconds in a queue during the outage, and a queue that drains over a
few seconds after the gateway heals. ``gateway_time_to_recover`` (gateway requests
answered) sees nothing of that drain; the endpoint's figure, and so the service's
``time_to_recover`` (its slowest endpoint's: ``test_service_recovery``), does.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis.figures import build_figures
from harness.gates.evaluate import evaluate
from harness.results.io import LEDGER_DTYPES, METRICS_COLUMNS, empty_frame
from harness.results.model import BuildResult
from harness.scenario.gates import check_gate, parse_gate
from harness.scenario.loader import load_scenario_text
from harness.scenario.schema import Scenario
from tests.analysis.frames import sample_frame

T0 = 1_800_000_000.0
SCENARIO = """\
name: recovery
seed: 1
warmup: 2s
duration: 40s
traffic:
  payments: {method: POST, path: /api/payments, rate: 10, calls-gateway: true}
  products: {path: /api/products/1, rate: 10}
pg:
  phases:
    - {name: baseline, start: 0s, duration: 10s, fault: {type: healthy}}
    - {name: outage, start: 10s, duration: 10s, fault: {type: timeout}}
    - {name: recovery, start: 20s, duration: 20s, fault: {type: healthy}}
builds:
  b: {profile: retry-only}
"""


def _scenario() -> Scenario:
    return load_scenario_text(SCENARIO).scenario


def _build(drain_s: float) -> BuildResult:
    """Reads at 10 ms while healthy; 3 s in the outage; after it, a wait that falls from 3 s
    to nothing over ``drain_s``. Payments fail in the outage and succeed at once after it."""
    start = T0 - 2.0 + np.arange(420) / 10
    t = start - T0
    read = np.full(len(t), 0.010)
    read[(t >= 10) & (t < 20)] = 3.0
    after = t >= 20
    if drain_s:
        read[after] = np.maximum(0.010, 3.0 * (1 - (t[after] - 20) / drain_s))
    pay_status = np.where((t >= 10) & (t < 20), 503, 200)
    samples = pd.concat(
        [
            sample_frame("products", start, read, np.full(len(t), 200)),
            sample_frame("payments", start, np.full(len(t), 0.05), pay_status),
        ],
        ignore_index=True,
    )
    metrics = pd.DataFrame(columns=METRICS_COLUMNS)
    return BuildResult("b", samples, metrics, {"t0": T0}, empty_frame(LEDGER_DTYPES))


def test_a_draining_queue_shows_in_the_endpoints_recovery_not_the_runs() -> None:
    figures = build_figures(_scenario(), _build(drain_s=8.0))
    timeline = figures["timeline"]
    assert timeline["time_to_recover_s"] == 0.0  # payments answered again at once
    back = timeline["endpoints_recover_s"]
    # reads are within 2 x 10 ms (+10 ms) once the wait has fallen to 20 ms: ~7.95 s in;
    # the first whole second whose 5 s span has >= 95 % of them there
    assert back["products"] is not None and 7.0 <= back["products"] <= 8.0
    assert back["payments"] == 0.0
    quick = build_figures(_scenario(), _build(drain_s=0.0))["timeline"]["endpoints_recover_s"]
    assert quick["products"] == 0.0


def test_an_endpoint_that_never_comes_back_is_not_measured() -> None:
    figures = build_figures(_scenario(), _build(drain_s=60.0))
    assert figures["timeline"]["endpoints_recover_s"]["products"] is None


def test_gates_read_it_uncut_and_compare_builds() -> None:
    scenario = _scenario()
    gate = parse_gate("b.products.time_to_recover >= 5s")
    assert check_gate(gate, scenario) == []
    cut = parse_gate("b.products.time_to_recover[outage] >= 5s")
    assert check_gate(cut, scenario) == [
        "figure 'products.time_to_recover' is not cut by phase; drop [outage]"
    ]
    slow = {"b": build_figures(scenario, _build(drain_s=8.0))}
    quick = {"b": build_figures(scenario, _build(drain_s=0.0))}
    assert evaluate(gate, {"builds": slow}).verdict == "pass"  # type: ignore[arg-type]
    assert evaluate(gate, {"builds": quick}).verdict == "fail"  # type: ignore[arg-type]


def test_a_load_generator_that_sent_late_does_not_hold_a_recovered_endpoint_back() -> None:
    """Seed 003's short run on a loaded machine: the reads were back 1 s after the heal, but
    the load generator stalled and sent some reads 40 ms late, 50 ms from their intended
    start against a 20 ms limit: the endpoint read 'back after 3 s'. The service answered
    each at once: it is the service's time that says whether it is its healthy self."""
    build = _build(drain_s=0.0)
    samples = build.samples
    t = samples["intended_start"] - T0
    reads = samples["endpoint"] == "products"
    # one late send a second from 20 s to 25 s (the span every start after 20 s is judged on)
    late = reads & (t >= 20) & (t < 25) & (np.round(t * 10) % 10 == 3)
    samples.loc[late, "actual_start"] += 0.040
    samples.loc[late, "end"] += 0.040
    back = build_figures(_scenario(), build)["timeline"]["endpoints_recover_s"]
    assert back["products"] == 0.0
