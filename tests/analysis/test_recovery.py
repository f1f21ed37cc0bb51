"""The recovered/stuck verdict (``recovery:``) on synthetic samples: recovered, stuck,
recovered late, not measurable; with client retries counted once per request."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.analysis.figures import build_figures
from harness.analysis.recovery import per_second, recovery_verdict
from harness.core.errors import InputError
from harness.gates.evaluate import evaluate
from harness.report.tables import headline_rows, verdict_text
from harness.results.io import LEDGER_DTYPES, METRICS_COLUMNS, empty_frame
from harness.results.model import BuildResult
from harness.scenario.gates import parse_gate
from harness.scenario.loader import load_scenario_text
from harness.scenario.schema import Scenario
from tests.analysis.frames import sample_frame

T0 = 1_800_000_000.0
SCENARIO = """\
name: verdict
duration: 60s
warmup: 2s
recovery: RECOVERY
traffic:
  payments:
    {method: POST, path: /api/payments, rate: 20, calls-gateway: true}
  products:
    {path: /api/products/1, rate: 10}
pg:
  phases:
  - {name: baseline, start: 0s, duration: 10s, fault: {type: healthy}}
  - name: drop
    start: 10s
    duration: 10s
    fault: {type: timeout}
  - {name: after, start: 20s, duration: 40s, fault: {type: healthy}}
builds:
  b: {profile: retry-only}
"""


def _scenario(recovery: str = "{goodput: 90%, within: 30s, hold: 5s}") -> Scenario:
    return load_scenario_text(SCENARIO.replace("RECOVERY", recovery)).scenario


def _samples(back_at: float | None, share: float = 1.0) -> pd.DataFrame:
    """Payments 20/s: fail from 10 s until ``back_at`` (None: never), then ``share`` of them
    succeed; products always succeed (they do not count: they never call the gateway)."""
    start = T0 - 2.0 + np.arange(62 * 20) / 20
    t = start - T0
    ok = (t < 10) | (
        (t >= (back_at if back_at is not None else 1e9)) & (np.arange(len(t)) % 20 < share * 20)
    )
    pays = sample_frame("payments", start, np.full(len(t), 0.05), np.where(ok, 200, 503))
    reads_start = T0 - 2.0 + np.arange(62 * 10) / 10
    reads = sample_frame(
        "products", reads_start, np.full(len(reads_start), 0.01), np.full(len(reads_start), 200)
    )
    return pd.concat([pays, reads], ignore_index=True)


def _build(samples: pd.DataFrame) -> BuildResult:
    return BuildResult(
        "b",
        samples,
        pd.DataFrame(columns=METRICS_COLUMNS),
        {"t0": T0},  # type: ignore[typeddict-item]
        empty_frame(LEDGER_DTYPES),
    )


def test_recovered_at_once_and_recovered_late() -> None:
    scenario = _scenario()
    at_once = recovery_verdict(scenario, _samples(20.0), T0)
    assert at_once is not None and at_once.figures == {"recovered": 1.0, "recovered_after_s": 0.0}
    late = recovery_verdict(scenario, _samples(37.0), T0)
    assert late is not None and late.figures == {"recovered": 1.0, "recovered_after_s": 17.0}
    assert late.unreached == {} and late.missing == {}


def test_stuck_never_and_stuck_below_the_share() -> None:
    scenario = _scenario()
    never = recovery_verdict(scenario, _samples(None), T0)
    assert never is not None and never.figures == {"recovered": 0.0, "recovered_after_s": None}
    assert never.unreached == {"timeline.recovered_after_s": 30.0}
    # back at 20 s, but only 85% of payments succeed: below 90% every second
    partial = recovery_verdict(scenario, _samples(20.0, share=0.85), T0)
    assert partial is not None and partial.recovered == 0.0
    # 45 s is past within (30 s after the trigger's end): stuck, though it came back later
    too_late = recovery_verdict(scenario, _samples(51.0), T0)
    assert too_late is not None and too_late.recovered == 0.0


def test_a_brief_good_spell_shorter_than_hold_is_not_recovery() -> None:
    samples = _samples(22.0)
    t = samples["intended_start"] - T0
    relapse = (samples["endpoint"] == "payments") & (t >= 25) & (t < 40)
    samples.loc[relapse, "status"] = 503  # good for 3 s (22-25), then failing until 40
    verdict = recovery_verdict(_scenario(), samples, T0)
    assert verdict is not None and verdict.figures["recovered_after_s"] == 20.0


def test_not_measurable_without_requests_after_the_trigger() -> None:
    samples = _samples(20.0)
    samples = samples[samples["intended_start"] < T0 + 20.0]
    verdict = recovery_verdict(_scenario(), samples, T0)
    assert verdict is not None and verdict.figures == {"recovered": None, "recovered_after_s": None}
    assert "no request was due after trigger 'drop'" in verdict.missing["timeline.recovered"]
    assert (
        recovery_verdict(
            load_scenario_text(SCENARIO.replace("recovery: RECOVERY\n", "")).scenario, samples, T0
        )
        is None
    )


def test_client_retries_count_each_request_once_by_its_final_answer() -> None:
    """A request that failed and then succeeded on its retry is goodput in the second its
    first attempt was due; the retry is not offered load, and it shows as retried."""
    scenario = _scenario()
    first = _samples(20.0)
    first = first[first["endpoint"] == "payments"].reset_index(drop=True)
    first["attempt"] = 1
    first["request"] = first["index"]
    failed = first[first["status"] == 503]
    retry = failed.copy()
    retry["index"] = retry["index"] + 100_000
    retry["attempt"] = 2
    retry["intended_start"] = retry["intended_start"] + 0.5
    retry["status"] = 200
    samples = pd.concat([first, retry], ignore_index=True)
    seconds = per_second(scenario, samples, T0, 10.0, 20.0)
    assert seconds.offered.tolist() == [20.0] * 10  # first attempts only
    assert seconds.goodput.tolist() == [20.0] * 10  # every request answered on its retry
    assert seconds.retried.sum() == len(retry[retry["intended_start"] < T0 + 20.0])


def test_figures_gates_and_tables() -> None:
    scenario = _scenario()
    stuck = build_figures(scenario, _build(_samples(None)))
    quick = build_figures(scenario, _build(_samples(23.0)))
    assert stuck["timeline"]["recovered"] == 0.0
    assert stuck["not_reached"]["timeline.recovered_after_s"] == 30.0
    assert quick["timeline"]["recovered_after_s"] == 3.0
    report = {"builds": {"before": stuck, "after": quick}}
    for text, verdict in (
        ("before.recovered == 0", "pass"),
        ("after.recovered == 1", "pass"),
        ("after.recovered_after_s <= 20s", "pass"),
        ("before.recovered_after_s <= 20s", "fail"),  # the bound: > 30 s
    ):
        assert evaluate(parse_gate(text), report).verdict == verdict, text  # type: ignore[arg-type]
    assert verdict_text(stuck) == "stuck (> 30.00 s)"  # type: ignore[arg-type]
    assert verdict_text(quick) == "recovered after 3.00 s"  # type: ignore[arg-type]
    full = {
        "builds": {
            "before": {**stuck, "profile": "retry-only", "status": "ok"},
            "after": {**quick, "profile": "retry-only", "status": "ok"},
        },
        "baseline": "before",
        "endpoints": {"payments": {"calls_gateway": True}, "products": {"calls_gateway": False}},
        "phases": [],
        "fault_window_s": [10.0, 20.0],
    }
    rows = {r[0]: r[1:3] for r in headline_rows(full)}  # type: ignore[arg-type]
    assert rows["recovered"] == ["stuck", "recovered"]
    assert rows["recovered after"] == ["> 30.00 s", "3.00 s"]


def test_bad_recovery_settings_are_refused_at_their_line() -> None:
    with pytest.raises(InputError, match="no phase 'outage'"):
        _scenario("{trigger: outage}")
    with pytest.raises(InputError, match="need the measured window to last 65"):
        _scenario("{within: 40s}")
    with pytest.raises(InputError, match="a percentage"):
        _scenario("{goodput: 0.9x}")
    text = SCENARIO.replace("RECOVERY", "{}").replace(
        "fault: {type: timeout}", "fault: {type: healthy}"
    )
    with pytest.raises(InputError, match="no phase has a fault"):
        load_scenario_text(text)


def test_a_build_aborted_before_within_and_hold_is_not_measured() -> None:
    """A stuck build whose load stopped 10 s after the trigger (a gate with abort: true) was
    not watched for within + hold: no verdict, not a stuck one; a recovery seen before the
    stop still counts."""
    scenario = _scenario()
    cut = recovery_verdict(scenario, _samples(None), T0, until=30.0)
    assert cut is not None and cut.figures == {"recovered": None, "recovered_after_s": None}
    assert "aborted" in cut.missing["timeline.recovered"]
    early = recovery_verdict(scenario, _samples(21.0), T0, until=30.0)
    assert early is not None and early.figures["recovered_after_s"] == 1.0
