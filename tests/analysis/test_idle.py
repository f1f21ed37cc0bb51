"""Resilience the fault never set off (issue 30, item 8): a Retry that made no retry and a
breaker that never opened while the gateway failed the service's calls are warned of, in
report.json, report.md, report.html and the terminal; retries are a row of the headline
table; and nothing is said where the harness cannot know (a counter exposed whether or not
the service retries, no failed call in the ledger, a Retry set to one attempt)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from harness.analysis.figures import analyse
from harness.analysis.model import Report
from harness.analysis.presets import BREAKER_STATES
from harness.report.page import render_html
from harness.report.tables import headline_rows, markdown
from harness.results.io import LEDGER_DTYPES, METRICS_COLUMNS
from harness.results.model import BuildResult, RunResult
from harness.scenario.loader import load_scenario_text
from tests.analysis.frames import sample_frame

T0 = 1_800_000_000.0
SCENARIO = """\
name: order
seed: 1
warmup: 2s
duration: 30s
traffic:
  orders: {method: POST, path: /api/orders, rate: 10, calls-gateway: true}
  catalogue: {method: GET, path: /api/items, rate: 10}
pg:
  port: 18080
  phases:
    - {name: steady, start: 0s, duration: 10s, fault: {type: healthy}}
    - {name: outage, start: 10s, duration: 10s, fault: {type: timeout}}
    - {name: healed, start: 20s, duration: 10s, fault: {type: healthy}}
builds:
  retrying: {profile: retry-only}
  idle-retry: {profile: retry-only}
  idle-breaker: {profile: retry-circuit-breaker}
  one-attempt: {profile: retry-only, resilience4j: {retry: {max-attempts: 1}}}
  spring: {url: "http://127.0.0.1:18081", metrics: {preset: spring-boot}}
  node: {url: "http://127.0.0.1:18082", metrics: {preset: opossum}}
"""
PRESET = {"spring": "spring-boot", "node": "opossum"}
RETRIES = {
    "shop": "shop_pg_retries_total",
    "spring-boot": "resilience4j_retry_calls_total",
    "opossum": "vendor_retries_total",
}
NO_RETRY = "its Retry made no retry during outage (10–20 s), while 100 calls to the gateway"
NEVER_OPENED = "its breaker never opened during outage (10–20 s), while 100 calls to the gateway"


def _metrics(build: str, *, retried: bool, opened: bool) -> pd.DataFrame:
    """Scrapes every second: the build's retry counter (growing 5/s in the outage when
    ``retried``), and for ``idle-breaker`` its state, open through the outage when ``opened``."""
    preset = PRESET.get(build, "shop")
    rows = []
    for t in T0 - 1.5 + np.arange(33.0):
        grown = 5.0 * min(10.0, max(0.0, t - (T0 + 10))) if retried else 0.0
        if preset == "spring-boot":
            for kind in ("successful_with_retry", "failed_with_retry", "failed_without_retry"):
                labels = json.dumps({"kind": kind, "name": "pgClient"})
                value = grown if kind == "failed_with_retry" else 0.0
                rows.append((t, "target", RETRIES[preset], labels, value))
        else:
            rows.append((t, "target", RETRIES[preset], "{}", grown))
        if build == "idle-breaker":
            now = "open" if opened and T0 + 11 <= t < T0 + 20 else "closed"
            for state in BREAKER_STATES:
                labels = json.dumps({"name": "pgClient", "state": state})
                value = 1.0 if state == now else 0.0
                rows.append((t, "target", "resilience4j_circuitbreaker_state", labels, value))
    return pd.DataFrame(rows, columns=METRICS_COLUMNS)


def _ledger(failing: bool) -> pd.DataFrame:
    """The gateway's calls, 10/s: in the outage each times out (its client hangs up first)
    when ``failing``, else each is answered."""
    arrival = T0 + np.arange(300) / 10
    out = (arrival >= T0 + 10) & (arrival < T0 + 20) & failing
    frame = pd.DataFrame(
        {
            "arrival": arrival,
            "key": [f"k{i}" for i in range(300)],
            "attempt": 1,
            "phase": np.where(out, "outage", "steady"),
            "fault": np.where(out, "timeout", "healthy"),
            "status": np.where(out, 0, 200),
            "decision": np.where(out, "none", "approved"),
            "duration_s": 0.01,
            "client_gone": out,
            "path": "/v1/approve",
            "method": "POST",
            "route": "",
            "queue_s": 0.0,
            "service_s": np.nan,
            "abandoned": False,
            "rejected": False,
        }
    )
    return frame.astype(LEDGER_DTYPES)


def _report(
    tmp_path: Path, *, retried: set[str], opened: bool = False, failing: bool = True
) -> Report:
    scenario = load_scenario_text(SCENARIO).scenario
    start = T0 + np.arange(300) / 10
    samples = pd.concat(
        [
            sample_frame(name, start, np.full(300, 0.01), np.full(300, 200))
            for name in ("orders", "catalogue")
        ]
    )
    builds = {
        name: BuildResult(
            name,
            samples,
            _metrics(name, retried=name in retried, opened=opened),
            {
                "t0": T0,
                "preset": PRESET.get(name, "shop"),
                "kind": "url" if name in PRESET else "shop",
            },
            ledger=_ledger(failing),
        )
        for name in scenario.builds
    }
    run = RunResult(tmp_path, {"run_id": "r", "status": "completed"}, builds)
    return analyse(run, scenario)


def _warnings(report: Report, build: str) -> list[str]:
    return report["builds"][build].get("warnings", [])


def test_a_retry_that_never_retried_and_a_breaker_that_never_opened_are_warned(
    tmp_path: Path,
) -> None:
    report = _report(tmp_path, retried={"retrying", "idle-breaker"})
    assert _warnings(report, "retrying") == []
    [retry] = _warnings(report, "idle-retry")
    assert retry.startswith(NO_RETRY + " failed then (timeout: 100): ")
    assert "retry-exceptions" in retry
    [breaker] = _warnings(report, "idle-breaker")  # it retried: only its breaker is idle
    assert breaker.startswith(NEVER_OPENED + " failed then (timeout: 100): ")
    assert "record-exceptions" in breaker
    # Resilience4j's binder registers a Retry's counters only where there is a Retry.
    [spring] = _warnings(report, "spring")
    assert spring.startswith(NO_RETRY)
    # Said where people read it: report.md, report.html, the terminal's lines (the same list).
    md, page = markdown(report), render_html(report, {})
    for build, text in (("idle-retry", retry), ("idle-breaker", breaker)):
        assert f"**Warning**: {build}: {text}" in md
        assert f"Warning: {build}: {text}".replace("'", "&#x27;") in page


def test_nothing_is_said_where_the_harness_cannot_know(tmp_path: Path) -> None:
    report = _report(tmp_path, retried=set())
    # node-gateway's vendor_retries_total is exposed at 0 whether or not it retries.
    assert _warnings(report, "node") == []
    # max-attempts 1: the shop exposes its counter, but this build does not retry.
    assert _warnings(report, "one-attempt") == []
    # No call failed in the ledger: nothing for a Retry or a breaker to do.
    quiet = _report(tmp_path, retried=set(), failing=False)
    assert all(not _warnings(quiet, b) for b in quiet["builds"])


def test_a_breaker_that_opened_is_not_warned(tmp_path: Path) -> None:
    report = _report(tmp_path, retried={"idle-breaker"}, opened=True)
    assert _warnings(report, "idle-breaker") == []


def test_retries_are_a_row_of_the_headline_table(tmp_path: Path) -> None:
    report = _report(tmp_path, retried={"retrying"})
    rows = {r[0]: r[1:] for r in headline_rows(report)}
    retries = rows["service retries (all phases)"]
    builds = list(report["builds"])
    assert retries[builds.index("retrying")] == "50"
    assert retries[builds.index("idle-retry")] == "0"
    assert '<th scope="row">service retries (all phases)</th>' in render_html(report, {})
