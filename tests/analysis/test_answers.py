"""Outcomes read from the service's own answers (issue 30, item 1), on recorded samples.

A stranger's gateway (Spring Cloud Gateway with a breaker and a fallback): its fallback
answers 200 with owners whose pets carry no visits, its breaker keeps refusing calls
for 6 s after the dependency heals, and nothing of ours (no ``X-Outcome``) is in its
answers. Samples are classed as the load generator classes them (the endpoint's
``outcomes`` rules over each answer's status, headers and body); every figure is read
from the class. Before the classes, success read 100 %, time to recover 0 s and
blocked when healthy 0 % on such a service.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

from harness.analysis.endpoints import endpoint_stats
from harness.analysis.figures import build_figures
from harness.load.plan import CLASS, endpoint_outcomes
from harness.results.io import LEDGER_DTYPES, METRICS_COLUMNS, empty_frame
from harness.results.model import BuildResult
from harness.scenario.loader import load_scenario_text
from harness.scenario.outcomes import headers_of
from harness.scenario.schema import Scenario
from tests.analysis.frames import sample_frame
from tests.conftest import ROOT

T0 = 1_800_000_000.0
SCENARIO = """\
name: stranger
seed: 1
warmup: 2s
duration: 40s
traffic:
  owners:
    path: /owners
    rate: 10
    calls-gateway: true
    outcomes:
      degraded:
        status: 2xx
        body: {path: "$[*].pets[*].visits", empty: true}
  visits:
    path: /visits
    rate: 10
    outcomes:
      fallback: {body: {path: "$.source", equal: fallback}}
pg:
  port: 18081
  phases:
    - {name: baseline, start: 0s, duration: 10s, fault: {type: healthy}}
    - {name: outage, start: 10s, duration: 10s, fault: {type: timeout}}
    - {name: recovery, start: 20s, duration: 20s, fault: {type: healthy}}
builds:
  gateway: {url: "http://127.0.0.1:8080"}
"""
FULL = json.dumps([{"name": "Ann", "pets": [{"name": "Rex", "visits": [{"id": 1}]}]}])
EMPTY = json.dumps([{"name": "Ann", "pets": [{"name": "Rex", "visits": []}]}])
STAND_IN = json.dumps({"source": "fallback", "visits": []})


def _scenario() -> Scenario:
    return load_scenario_text(SCENARIO).scenario


def _classed(scenario: Scenario, name: str, answers: list[tuple[int, str]]) -> list[str]:
    """Each answer's class by the endpoint's outcomes, as the load generator reads it."""
    classifier = endpoint_outcomes(scenario, name).classifier()
    head, lower = headers_of({"Content-Type": "application/json"})
    return [classifier.classify(s, head, lower, body.encode()) for s, body in answers]


def _build(scenario: Scenario, refusing_s: float = 6.0) -> BuildResult:
    """Owners: full answers while healthy; the fallback's degraded 200 in the outage and for
    ``refusing_s`` after it (the breaker still open), then full again. Visits: the fallback's
    200 in the outage, its own answer otherwise. No answer has an outcome header."""
    start = T0 - 2.0 + np.arange(420) / 10
    t = start - T0
    stood_in = (t >= 10) & (t < 20 + refusing_s)
    owners = [(200, EMPTY if s else FULL) for s in stood_in]
    visits = [(200, STAND_IN if (10 <= x < 20) else "[]") for x in t]
    frames = []
    for name, answers in (("owners", owners), ("visits", visits)):
        frame = sample_frame(name, start, np.full(len(t), 0.02), np.full(len(t), 200))
        frame[CLASS] = pd.Series(_classed(scenario, name, answers), dtype="string")
        frames.append(frame)
    samples = pd.concat(frames, ignore_index=True)
    metrics = pd.DataFrame(columns=METRICS_COLUMNS)
    return BuildResult("gateway", samples, metrics, {"t0": T0}, empty_frame(LEDGER_DTYPES))


def test_a_fallback_answering_200_is_degraded_or_fallback_not_success() -> None:
    scenario = _scenario()
    assert _classed(scenario, "owners", [(200, FULL), (200, EMPTY), (200, "[]"), (200, "<x>")]) == [
        "success",
        "degraded",
        "degraded",  # no owner at all: nothing found is empty
        "success",  # not JSON: a body rule holds for none
    ]
    assert _classed(scenario, "visits", [(200, STAND_IN), (200, "[]"), (503, "")]) == [
        "fallback",
        "success",
        "refused",  # the default's 503, kept beside the endpoint's own fallback rule
    ]
    build = _build(scenario)
    owners = build.samples[build.samples["endpoint"] == "owners"]
    outage = endpoint_stats(owners, T0 + 10, T0 + 20, 10.0)
    assert outage["success_pct"] == 0.0 and outage["kept_pct"] == 0.0
    whole = build_figures(scenario, build)
    # 100 s of 400 served: 10 s healthy before, 14 s after the breaker let go
    assert whole["endpoints"]["owners"]["success_pct"] == 60.0
    assert whole["endpoints"]["visits"]["success_pct"] == 75.0
    assert whole["endpoints"]["visits"]["kept_pct"] == 75.0


def test_time_to_recover_and_blocked_when_healthy_come_from_the_classes() -> None:
    scenario = _scenario()
    timeline = build_figures(scenario, _build(scenario, refusing_s=6.0))["timeline"]
    assert timeline["time_to_recover_s"] == 6.0  # owners, the gateway endpoint: 6 s refusing
    assert timeline["endpoints_recover_s"] == {"owners": 6.0, "visits": 0.0}
    assert timeline["service_recover_s"] == 6.0
    # healthy: 30 s of owners (300 requests), 60 of them the fallback's stand-ins
    assert timeline["blocked_pct_healthy"] == 20.0
    at_once = build_figures(scenario, _build(scenario, refusing_s=0.0))["timeline"]
    assert at_once["time_to_recover_s"] == 0.0 and at_once["blocked_pct_healthy"] == 0.0


def test_a_503_without_any_outcome_header_is_refused() -> None:
    scenario = _scenario()
    assert _classed(scenario, "owners", [(503, ""), (429, ""), (500, ""), (200, FULL)]) == [
        "refused",
        "refused",
        "failure",
        "success",
    ]
    build = _build(scenario, refusing_s=0.0)
    samples = build.samples
    late = (samples["endpoint"] == "owners") & (samples["intended_start"] >= T0 + 25)
    samples.loc[late, "status"] = 503
    samples.loc[late, CLASS] = "refused"  # the breaker's 503, as the generator classes it
    timeline = build_figures(scenario, build)["timeline"]
    # 15 s of 503s in the healthy tail: 150 of 300 healthy owners requests refused
    assert timeline["blocked_pct_healthy"] == 50.0


def test_the_reference_shop_header_is_named_only_by_its_preset() -> None:
    """No figure or label of the analysis or the report reads the shop's ``X-Outcome``
    header or its words: only the preset's declaration (``harness.scenario.outcomes``)."""
    shop_words = re.compile(r"x-outcome|\bnot_permitted\b", re.IGNORECASE)
    named = [
        f"{path.relative_to(ROOT)}:{n}"
        for package in ("analysis", "report")
        for path in sorted((ROOT / "harness" / package).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if shop_words.search(line)
    ]
    assert named == []
    declared = (ROOT / "harness" / "scenario" / "outcomes.py").read_text(encoding="utf-8")
    assert '"x-outcome": Outcomes' in declared


def test_samples_written_before_the_classes_read_as_they_always_did() -> None:
    """A run's samples without the ``class`` column: the shop's ``X-Outcome`` as recorded
    then (``outcome``) gives its figures, exactly as before."""
    start = T0 + np.arange(6) / 10
    frame = sample_frame("owners", start, np.full(6, 0.01), np.array([200, 200, 503, 200, 503, 0]))
    frame["outcome"] = pd.Series(
        ["fresh", "cached", "not_permitted", "not_permitted", "timeout", ""], dtype="string"
    )
    assert CLASS not in frame.columns
    stats = endpoint_stats(frame, T0, T0 + 1, 6.0)
    assert stats["success_pct"] == 50.0  # the 200s, the refused one served a value included
    assert stats["kept_pct"] == 50.0
    assert round(stats["cached_pct"] or 0, 2) == 16.67
    assert stats["errors"] == {"": 1, "not_permitted": 1, "timeout": 1}
