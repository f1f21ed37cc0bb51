"""Requests in flight: the concurrency figure any service gets, from the load generator's own
samples (issue 30, item 3).

On Netty (WebFlux) or Node a request waiting on the gateway holds no thread: 201 requests were
open at once while an unrelated route stayed at 20 ms, and busy workers, read from a thread
pool, had nothing to say. Synthetic samples of that shape: ``orders`` call the gateway and wait
2 s in the outage (50 ms otherwise); ``catalogue`` reads answer in 20 ms throughout; both at
10/s, sent on the same instants. In the outage 20 orders are open at once once the first ones
have waited their 2 s, and a catalogue read one fifth of the time: 21 at most, 20 the median.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.analysis.figures import analyse
from harness.analysis.in_flight import InFlight
from harness.analysis.model import Report
from harness.gates.evaluate import evaluate
from harness.load.plan import DROPPED
from harness.report.tables import headline_rows, markdown
from harness.results.io import LEDGER_DTYPES, METRICS_COLUMNS, empty_frame
from harness.results.model import BuildResult, RunResult
from harness.scenario.gates import parse_gate
from harness.scenario.loader import load_scenario_text
from tests.analysis.frames import sample_frame

T0 = 1_800_000_000.0
SCENARIO = """\
name: held
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
  waits: {profile: retry-only}
  quick: {profile: retry-circuit-breaker}
"""


def _build(name: str, outage_wait_s: float) -> BuildResult:
    """Orders wait ``outage_wait_s`` in the outage, 50 ms otherwise; reads take 20 ms."""
    start = T0 - 2.0 + np.arange(420) / 10
    t = start - T0
    wait = np.where((t >= 10) & (t < 20), outage_wait_s, 0.05)
    samples = pd.concat(
        [
            sample_frame("orders", start, wait, np.full(len(t), 200)),
            sample_frame("catalogue", start, np.full(len(t), 0.02), np.full(len(t), 200)),
        ],
        ignore_index=True,
    )
    metrics = pd.DataFrame(columns=METRICS_COLUMNS)  # a service whose metrics say nothing
    return BuildResult(name, samples, metrics, {"t0": T0}, empty_frame(LEDGER_DTYPES))


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    builds = {b.build: b for b in (_build("waits", 2.0), _build("quick", 0.05))}
    run = RunResult(tmp_path_factory.mktemp("run"), {"run_id": "r", "status": "completed"}, builds)
    return analyse(run, load_scenario_text(SCENARIO).scenario)


def _open_at(samples: pd.DataFrame, t: np.ndarray) -> np.ndarray:
    """Requests open at each instant of ``t``, counted one by one (sent at or before it, not
    answered by then)."""
    start = samples["actual_start"].to_numpy()[:, None]
    end = samples["end"].to_numpy()[:, None]
    return ((start <= t) & ~(end <= t)).sum(axis=0)


def test_requests_in_flight_are_read_from_the_samples_of_a_service_without_a_pool(
    report: Report,
) -> None:
    waits = report["builds"]["waits"]
    # Busy workers: no series at all (no pool to read); requests in flight: from the samples.
    assert waits["workers"]["busy_max_fault"] is None
    assert waits.get("in_flight") == {"max_fault": 21.0, "p50_fault": 20.0}
    outage = waits["phases"]["outage"]
    assert outage.get("in_flight") == {"max": 21.0, "p50": 20.0}
    # Which route held them: orders 20 at once, the reads never more than one.
    assert outage["endpoints"]["orders"].get("in_flight_max") == 20.0
    assert outage["endpoints"]["catalogue"].get("in_flight_max") == 1.0
    calm = waits["phases"]["calm"]
    assert calm.get("in_flight", {}).get("max") == 2.0
    quick = report["builds"]["quick"]
    assert quick.get("in_flight") == {"max_fault": 2.0, "p50_fault": 0.0}


def test_the_count_is_the_one_request_by_request(report: Report) -> None:
    samples = _build("waits", 2.0).samples
    grid = T0 + np.arange(10.0, 20.0, 0.001)  # every millisecond of the outage
    counted = _open_at(samples, grid)
    most, median = InFlight.of(samples).stats(T0 + 10.0, T0 + 20.0)
    assert most == counted.max() == 21
    assert median == np.median(counted) == 20


def test_unanswered_requests_stay_open_and_dropped_ones_were_never_sent() -> None:
    start = np.array([0.0, 1.0, 2.0, 3.0])
    samples = sample_frame("orders", start, np.array([1.5, np.nan, 0.5, 0.1]), np.zeros(4))
    samples.loc[3, "error"] = DROPPED  # never sent: no actual start, no end
    samples.loc[3, ["actual_start", "end"]] = np.nan
    flight = InFlight.of(samples)
    assert flight.stats(0.0, 1.0) == (1.0, 1.0)
    assert flight.stats(1.0, 1.6) == (2.0, 2.0)  # the first until 1.5, the second for ever
    assert flight.stats(2.5, 10.0) == (1.0, 1.0)  # the unanswered one, to the end
    assert flight.stats(1.5, 1.5) == (None, None)
    # An answer at the very instant of a send: the two never overlapped.
    back_to_back = sample_frame("orders", np.array([0.0, 1.0]), np.array([1.0, 1.0]), np.zeros(2))
    assert InFlight.of(back_to_back).stats(0.0, 2.0) == (1.0, 1.0)


def test_the_figures_are_gated_and_shown(report: Report) -> None:
    assert evaluate(parse_gate("waits.in_flight.max >= 21"), report).verdict == "pass"
    assert evaluate(parse_gate("waits.in_flight.p50[outage] == 20"), report).verdict == "pass"
    assert evaluate(parse_gate("waits.orders.in_flight_max[outage] == 20"), report).verdict == (
        "pass"
    )
    claim = parse_gate("waits.in_flight.max <= quick.in_flight.max")
    assert evaluate(claim, report).verdict == "fail"
    rows = {r[0]: r[1:] for r in headline_rows(report)}
    assert rows["requests in flight max (outage)"] == ["21", "2", "-90.5%"]
    assert rows["requests in flight p50 (outage)"][:2] == ["20", "0"]
    assert rows["orders in flight max (all phases)"][:2] == ["20", "1"]
    text = markdown(report)
    assert "| busy p50 | in flight p50 / max | blocked/s |" in text
    assert "| outage | waits | " in text and " | - | 20 / 21 | " in text
    change = report["comparison"]["quick"]["in_flight.max_fault"]
    assert (change["baseline"], change["value"]) == (21.0, 2.0)


def test_a_steady_load_reads_little_s_law() -> None:
    """1,000 requests a second held 50 ms each: 50 in flight at the median (Little's law),
    over the whole run and over each of its windows. Its speed is benchmarks/analysis_1m.py's
    (the whole analysis of a million samples, against numpy's bare percentiles), not a timed
    test's."""
    rng = np.random.default_rng(1)
    start = np.sort(rng.uniform(0, 200, 200_000))
    end = start + rng.exponential(0.05, len(start))
    samples = pd.DataFrame({"actual_start": start, "end": end, "error": ""}).astype(
        {"error": "string"}
    )
    flight = InFlight.of(samples)
    assert 40 <= flight.stats(0.0, 200.0)[1] <= 60
    for a in range(0, 200, 50):
        assert 40 <= flight.stats(float(a), float(a + 50))[1] <= 60
