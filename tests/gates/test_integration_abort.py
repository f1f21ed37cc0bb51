"""The early stop end to end: a shop build past a gate with ``abort: true`` after its first
phase is stopped there, every result kept, while the build that passes runs to the end.

Real processes (gateway, shop, Locust); about 50 s: the aborted build runs ~9 s of its
24 s window, the other all of it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.scenario_runs import assert_nothing_left, junit_verdicts, only_run, run_harness

# The outage hangs every call: `patient` waits 2 x 1 s per payment, `quick` 200 ms once.
# Its phase ends at 4 s; with the 2 s endpoint timeout its figures are final at 8 s.
SCENARIO = """\
name: abort-early
seed: 3
warmup: 1s
duration: 24s
traffic:
  payments:
    method: POST
    path: /api/payments
    rate: 5
    timeout: 2s
    body: {amount: 15000}
    idempotency-key: true
    calls-gateway: true
pg:
  phases:
    - {name: outage, start: 0s, duration: 4s, fault: {type: timeout}}
    - {name: recovery, start: 4s, duration: 20s, fault: {type: healthy}}
builds:
  patient:
    profile: retry-only
    workers: 8
    pg-client: {connect-timeout: 500ms, read-timeout: 1s}
    resilience4j:
      retry: {max-attempts: 2, wait-duration: 200ms}
  quick: {profile: retry-only, workers: 8, pg-client: {read-timeout: 200ms},
          resilience4j: {retry: {max-attempts: 1}}}
gates:
  - name: patient answers within 1 s in the outage
    expr: "patient.payments.p95[outage] <= 1s"
    abort: true
  - name: quick answers within 1 s in the outage
    expr: "quick.payments.p95[outage] <= 1s"
    abort: true
  - "patient.payments.p95[recovery] <= 1s"
"""


@pytest.mark.integration
def test_a_build_past_an_abort_gate_stops_after_its_phase_and_the_next_runs(
    tmp_path: Path,
) -> None:
    (tmp_path / "abort.yaml").write_text(SCENARIO)
    results, junit = tmp_path / "results", tmp_path / "gates.xml"
    args = ["--results", str(results), "--junit", str(junit)]
    done = run_harness(["run", str(tmp_path / "abort.yaml"), *args])
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-4000:]
    assert "build patient aborted" in output
    assert "gate 'patient answers within 1 s in the outage' failed after phase 'outage'" in output
    run_dir = only_run(results)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    patient, quick = manifest["builds"]["patient"], manifest["builds"]["quick"]
    assert patient["status"] == "aborted" and quick["status"] == "completed"
    abort = patient["abort"]
    assert abort["gate"] == "patient answers within 1 s in the outage"
    assert abort["phase"] == "outage" and abort["value"] > 1.0 and abort["limit"] == 1.0
    assert 8.0 <= abort["at_s"] < 14.0  # checked at 8 s; the window runs to 24 s

    def last_intended(build: str) -> float:
        samples = pd.read_parquet(run_dir / build / "samples.parquet")
        return float(samples["intended_start"].max()) - manifest["builds"][build]["t0"]

    # the load stopped there (within the final scrape's two reads, 1 s each at most, that
    # come before the generator is told to stop; unstopped it would run to 24 s)
    assert last_intended("patient") < abort["at_s"] + 2.0
    assert last_intended("quick") > 23.0  # the build that passed ran to the end
    report = json.loads((run_dir / "report.json").read_text())
    built = report["builds"]["patient"]
    assert built["status"] == "aborted" and built["abort"]["phase"] == "outage"
    assert list(built["phases"]) == ["outage"] and "phases.recovery" in built["not_measured"]
    assert built["phases"]["outage"]["endpoints"]["payments"]["latency_s"]["p95"] > 1.0
    assert list(report["builds"]["quick"]["phases"]) == ["outage", "recovery"]
    markdown = (run_dir / "report.md").read_text()
    assert "## patient (retry-only, aborted)" in markdown and "aborted at" in markdown
    assert junit_verdicts(junit) == {
        "patient answers within 1 s in the outage": "failure",
        "quick answers within 1 s in the outage": "pass",
        "patient.payments.p95[recovery] <= 1s": "error",  # not measured: not a 0 that passes
    }
    assert_nothing_left(run_dir)
