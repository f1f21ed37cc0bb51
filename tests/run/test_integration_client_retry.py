"""Integration: clients that retry (issue 21, item 2), through the real ``harness run``.

Real Locust (a master and two workers) sends payments straight to the real
gateway (a ``url`` build at ``pg.port``), whose phases answer half the calls
503 with ``Retry-After: 1`` and then hang a third of them past the client's
timeout. The client retries on 5xx and timeouts. Checked against the
gateway's ledger: every attempt is one row of ``samples.parquet`` and one
ledger call with its request's Idempotency-Key and attempt number; retries
wait the Retry-After (honoured) or at most ``max-backoff``; the report counts
each request once from its first intended start, and the offered, admitted
and retried load apart. About 20 s.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from harness.load.plan import idempotency_key
from harness.results.attempts import requests_of
from harness.results.io import ledger_from_csv
from harness.run.loadgen import free_port, plan_for
from harness.scenario.loader import load_scenario
from tests.conftest import leftover_processes
from tests.scenario_runs import junit_verdicts, only_run, run_harness

pytestmark = pytest.mark.integration

SCENARIO = """\
name: client-retry
seed: 7
warmup: 1s
duration: 4s
drain: 2s
traffic:
  pay:
    method: POST
    path: /v1/payments/approve
    rate: 30
    timeout: 400ms
    body: {{amount: 7}}
    idempotency-key: true
    calls-gateway: true
    retry: {{max-attempts: 3, backoff: 50ms, multiplier: 2, max-backoff: 200ms, on: [timeout, 5xx]}}
pg:
  port: {port}
  phases:
    - {{name: flaky, start: 0s, duration: 2s,
       fault: {{type: error, status: 503, retry-after: 1s, probability: 0.5}}}}
    - {{name: hang, start: 2s, duration: 2s, fault: {{type: timeout, probability: 0.3}}}}
builds:
  direct: {{url: "http://127.0.0.1:{port}", metrics: {{path: null}}}}
gates:
  - direct.pay.retried_pct > 0
  - direct.pay.attempts <= 3
"""


def test_every_attempt_is_recorded_once_and_is_one_gateway_call(tmp_path: Path) -> None:
    scenario = tmp_path / "retry.yaml"
    scenario.write_text(SCENARIO.format(port=free_port()))
    results, junit = tmp_path / "results", tmp_path / "gates.xml"
    done = run_harness(
        ["run", str(scenario), "--results", str(results), "--workers", "2", "--junit", str(junit)]
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert set(junit_verdicts(junit).items()) == {
        ("direct.pay.retried_pct > 0", "pass"), ("direct.pay.attempts <= 3", "pass"),
    }  # fmt: skip
    run_dir = only_run(results)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert leftover_processes(manifest["run_id"]) == []
    samples = pd.read_parquet(run_dir / "direct" / "samples.parquet")

    # Every attempt once, with its own index; every planned request has its first attempt.
    assert not samples.duplicated(["endpoint", "index"]).any()
    plan = plan_for(load_scenario(scenario).scenario, "http://127.0.0.1:1", tmp_path)
    first = samples[samples["attempt"] == 1]
    assert sorted(first["request"]) == list(range(plan.planned_count("pay")))
    assert (first["request"] == first["index"]).all()
    retries = samples[samples["attempt"] > 1].sort_values(["request", "attempt"])
    assert len(retries) > 10, "the faults made no retries"
    assert samples["attempt"].max() <= 3
    t0 = manifest["builds"]["direct"]["t0"]
    assert retries["intended_start"].max() <= t0 + 4 + 2  # none due after the load + drain
    # A request's attempts are numbered 1..k, all sent by the worker of its first.
    for _, rows in samples.groupby("request"):
        assert sorted(rows["attempt"]) == list(range(1, len(rows) + 1))
        assert rows["worker"].nunique() == 1

    # Each retry follows a retryable failure, after its wait: Retry-After (1 s) or backoff.
    by_attempt = samples.set_index(["request", "attempt"])
    for r in retries.itertuples():
        before = by_attempt.loc[(r.request, r.attempt - 1)]
        assert before["status"] == 503 or before["error"] == "TimeoutError"
        wait = r.intended_start - before["end"]
        if before["status"] == 503:
            assert wait == pytest.approx(1.0, abs=1e-4)  # Retry-After: 1, honoured
        else:
            assert -1e-4 <= wait <= 0.2 + 1e-4  # full jitter, within max-backoff
        assert r.actual_start >= r.intended_start - 1e-4

    # Against the gateway's ledger: each attempt sent is one call, with its request's key
    # and the attempt number the gateway counted for that key.
    ledger = ledger_from_csv(run_dir / "direct" / "pg-ledger.csv")
    sent = samples[samples["error"] != "Dropped"]
    assert len(ledger) == len(sent)
    calls = set(zip(ledger["key"], ledger["attempt"], strict=True))
    assert len(calls) == len(ledger)
    expected = {
        (idempotency_key(7, "pay", int(s.request)), int(s.attempt)) for s in sent.itertuples()
    }
    assert calls == expected

    # The report: per request from the first intended start, the load offered vs admitted.
    report = json.loads((run_dir / "report.json").read_text())
    build = report["builds"]["direct"]
    figures = build["endpoints"]["pay"]
    requests = requests_of(samples)
    assert build["t0"] == t0
    window = requests[
        (requests["intended_start"] >= t0 - 1e-5) & (requests["intended_start"] < t0 + 4 - 1e-5)
    ]
    latency = (window["end"] - window["intended_start"]).dropna()
    assert figures["requests"] == len(window)
    assert figures["latency_s"]["max"] == pytest.approx(latency.max(), abs=1e-3)
    assert figures["latency_s"]["max"] > 1.0  # a 503, 1 s of Retry-After, and the retry
    attempts = int(window["attempts"].sum())
    assert figures["attempts"] == pytest.approx(attempts / len(window), abs=1e-3)
    assert figures["retried_pct"] == pytest.approx(100 * (window["attempts"] > 1).mean(), abs=0.01)
    assert figures["offered_rps"] == 30
    assert figures["admitted_rps"] == pytest.approx(attempts / 4, abs=1e-3) and attempts > 120
    load = build["load"]
    assert len(load["offered"]) == 4 and sum(load["offered"]) == 120
    started = sent["actual_start"]
    in_window = (started >= t0 - 1e-5) & (started < t0 + 4 - 1e-5)
    assert sum(load["admitted"]) == int(in_window.sum())
    assert sum(load["retried"]) == int((in_window & (sent["attempt"] > 1)).sum()) > 0
    progress = json.loads((run_dir / "direct" / "progress.json").read_text())
    assert sum(progress["sent"].values()) == len(sent)
    assert sum(progress["retried"].values()) == len(retries)
    table = (run_dir / "report.md").read_text()
    assert "pay admitted rps, attempts sent" in table and "pay requests retried" in table
