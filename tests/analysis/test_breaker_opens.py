"""Breaker opens: every transition to open (``breaker.opens``), and the times it left closed
(``breaker.opens_from_closed``, seed 004's flaps): the rules on hand-made state series, every
edge of them.

The same figures on a real run: ``test_integration_opens``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from harness.analysis.cuts import count_opens, count_opens_from_closed
from harness.analysis.figures import analyse
from harness.analysis.presets import BREAKER_STATES
from harness.gates.evaluate import evaluate
from harness.report.tables import markdown
from harness.results.io import METRICS_COLUMNS
from harness.results.model import BuildResult, RunResult
from harness.scenario.gates import parse_gate
from harness.scenario.loader import load_scenario_text
from tests.analysis.frames import sample_frame

CLOSED, OPEN, HALF = BREAKER_STATES["closed"], BREAKER_STATES["open"], BREAKER_STATES["half_open"]
FORCED = BREAKER_STATES["forced_open"]


def _states(*codes: int, start: float = 100.0) -> pd.Series:
    return pd.Series([float(c) for c in codes], index=[start + i for i in range(len(codes))])


# ---------------------------------------------------------------- every transition to open


def test_a_breaker_sent_back_to_open_from_half_open_four_times_opened_five_times() -> None:
    """Issue 30, item 10: opened once from closed, then four failed trials sent it back from
    half-open; that is five opens, not one."""
    states = _states(CLOSED, OPEN, HALF, OPEN, HALF, OPEN, HALF, OPEN, HALF, OPEN, HALF, CLOSED)
    assert count_opens([states], 100.0, 112.0) == 5.0
    assert count_opens_from_closed([states], 100.0, 112.0) == 1.0


def test_opens_count_transitions_to_open_not_open_scrapes() -> None:
    # closed, open, open, half-open, open (a failed trial: an open), open, closed, open:
    # three opens, five open scrapes.
    states = _states(CLOSED, OPEN, OPEN, HALF, OPEN, OPEN, CLOSED, OPEN)
    assert count_opens([states], 100.0, 108.0) == 3.0
    assert count_opens([states], 101.5, 108.0) == 2.0  # the open at 101 is before the window
    # The scrape before the window counts as "before": open at 101 then open at 102 is none.
    assert count_opens([states], 102.0, 104.0) == 0.0
    assert count_opens([states], 104.0, 105.0) == 1.0  # half-open -> open: a failed trial
    assert count_opens([states], 107.0, 108.0) == 1.0  # closed -> open
    # Half-open seen after closed: the open fell between the two scrapes. Half-open seen
    # twice in a row, or open then forced open, is no new open that a scrape can tell.
    assert count_opens([_states(CLOSED, HALF, HALF, CLOSED)], 100.0, 104.0) == 1.0
    assert count_opens([_states(CLOSED, OPEN, FORCED, OPEN)], 100.0, 104.0) == 1.0
    assert count_opens([_states(OPEN, OPEN, CLOSED)], 100.0, 103.0) == 1.0  # it starts closed


def test_opens_of_windows_add_up_to_the_whole() -> None:
    states = _states(CLOSED, OPEN, HALF, OPEN, HALF, CLOSED, OPEN, OPEN, HALF, CLOSED, HALF)
    edges = [100.0, 102.0, 103.0, 106.0, 111.0]
    parts = [count_opens([states], a, b) for a, b in zip(edges, edges[1:], strict=False)]
    assert sum(p or 0.0 for p in parts) == count_opens([states], 100.0, 111.0) == 4.0
    assert count_opens([_states(CLOSED, CLOSED)], 200.0, 300.0) is None  # no scrape in it
    assert count_opens([pd.Series(dtype=float)], 0.0, 1e12) is None  # no breaker at all


def test_opens_of_several_replicas_are_summed_and_unordered_scrapes_sorted() -> None:
    a = _states(CLOSED, OPEN, HALF, OPEN)
    b = _states(OPEN, CLOSED, CLOSED, CLOSED, start=100.5)
    shuffled = a.iloc[[3, 0, 2, 1]]
    assert count_opens([shuffled, b], 100.0, 104.0) == 3.0
    assert count_opens([a, pd.Series(dtype=float)], 100.0, 104.0) == 2.0


T0 = 1_800_000_000.0
SCENARIO = """\
name: flaps
seed: 1
warmup: 2s
duration: 20s
metrics: {interval: 1s}
traffic:
  orders: {method: POST, path: /orders, rate: 10, calls-gateway: true}
pg:
  phases:
    - {name: baseline, start: 0s, duration: 5s, fault: {type: healthy}}
    - {name: outage, start: 5s, duration: 10s, fault: {type: error}}
    - {name: healed, start: 15s, duration: 5s, fault: {type: healthy}}
builds:
  b: {profile: retry-circuit-breaker}
"""
_NAMES = ("closed", "open", "half_open", "disabled", "forced_open", "metrics_only")


def _scraped(states: dict[float, str]) -> pd.DataFrame:
    """Resilience4j's state gauge scraped every second from -2 s to +21 s, the breaker in
    the state given from each second on (closed before the first)."""
    rows, now = [], "closed"
    for t in np.arange(-2.0, 22.0):
        now = states.get(float(t), now)
        for name in _NAMES:
            labels = json.dumps({"name": "pg", "state": name})
            value = 1.0 if name == now else 0.0
            rows.append(
                (T0 + t + 0.5, "target", "resilience4j_circuitbreaker_state", labels, value)
            )
    return pd.DataFrame(rows, columns=METRICS_COLUMNS)


def test_the_report_counts_both_for_the_build_and_each_phase_and_shows_both(
    tmp_path: Path,
) -> None:
    """A breaker that opened in the outage and failed two half-open trials there has opened
    3 times, once from closed; its report, gates and tables say both."""
    start = T0 - 2.0 + np.arange(220) / 10
    samples = sample_frame("orders", start, np.full(220, 0.01), np.full(220, 200))
    flapping = {6.0: "open", 7.0: "half_open", 8.0: "open", 9.0: "half_open", 10.0: "open"}
    metrics = _scraped({**flapping, 13.0: "half_open", 14.0: "closed"})
    build = BuildResult("b", samples, metrics, {"t0": T0, "preset": "shop"})
    run = RunResult(tmp_path, {"run_id": "r", "status": "completed"}, {"b": build})
    report = analyse(run, load_scenario_text(SCENARIO).scenario)
    breaker = report["builds"]["b"]["breaker"]
    assert (breaker.get("opens"), breaker.get("opens_from_closed")) == (3.0, 1.0)
    phases = report["builds"]["b"]["phases"]
    outage = phases["outage"]["breaker"]
    assert (outage.get("opens"), outage.get("opens_from_closed")) == (3.0, 1.0)
    assert phases["healed"]["breaker"].get("opens") == 0.0
    assert evaluate(parse_gate("b.breaker.opens[outage] == 3"), report).verdict == "pass"
    assert evaluate(parse_gate("b.breaker.opens_from_closed == 1"), report).verdict == "pass"
    text = markdown(report)
    assert "| breaker opens | opens from closed |" in text
    assert text.split("| breaker opens | opens from closed |")[1].count("| 3 | 1 |") == 1


def test_opens_from_closed_count_the_times_the_breaker_left_closed_not_open_scrapes() -> None:
    # closed, open, open, half-open, open (a failed trial: not a new open), open, closed, open:
    # two opens, five open scrapes.
    states = _states(CLOSED, OPEN, OPEN, HALF, OPEN, OPEN, CLOSED, OPEN)
    assert count_opens_from_closed([states], 100.0, 108.0) == 2.0
    assert (
        count_opens_from_closed([states], 101.5, 108.0) == 1.0
    )  # the open at 101 is before the window
    # The scrape before the window counts as "before": open at 101 then open at 102 is none.
    assert count_opens_from_closed([states], 102.0, 104.0) == 0.0
    assert (
        count_opens_from_closed([states], 104.0, 105.0) == 0.0
    )  # half-open -> open: the same open
    assert count_opens_from_closed([states], 107.0, 108.0) == 1.0  # closed -> open


def test_a_failed_half_open_trial_is_not_an_open_from_closed_however_often_seen() -> None:
    """Seed 004: 5 probes needing 3 keep the breaker half-open long enough for scrapes to
    land in every failed trial; 1 probe is half-open too briefly to be seen. Counting each
    return to open would rank the careful breaker as the flapping one."""
    careful = _states(CLOSED, OPEN, HALF, OPEN, HALF, OPEN, HALF, OPEN, HALF, CLOSED)
    flapping = _states(CLOSED, OPEN, CLOSED, OPEN, CLOSED, OPEN, CLOSED, OPEN, CLOSED, CLOSED)
    assert count_opens_from_closed([careful], 100.0, 110.0) == 1.0
    assert count_opens_from_closed([flapping], 100.0, 110.0) == 4.0
    # Leaving closed for half-open (the open itself fell between two scrapes) counts too.
    assert count_opens_from_closed([_states(CLOSED, HALF, CLOSED)], 100.0, 103.0) == 1.0


def test_opens_from_closed_of_windows_add_up_to_the_whole() -> None:
    states = _states(CLOSED, OPEN, HALF, OPEN, HALF, CLOSED, OPEN, OPEN, HALF, CLOSED, HALF)
    edges = [100.0, 102.0, 103.0, 106.0, 111.0]
    parts = [
        count_opens_from_closed([states], a, b) for a, b in zip(edges, edges[1:], strict=False)
    ]
    assert sum(p or 0.0 for p in parts) == count_opens_from_closed([states], 100.0, 111.0) == 3.0


def test_a_breaker_seen_open_first_leaves_closed_once_and_none_without_scrapes() -> None:
    assert (
        count_opens_from_closed([_states(OPEN, OPEN, CLOSED)], 100.0, 103.0) == 1.0
    )  # it starts closed
    assert (
        count_opens_from_closed([_states(CLOSED, CLOSED)], 200.0, 300.0) is None
    )  # no scrape in the window
    assert count_opens_from_closed([pd.Series(dtype=float)], 0.0, 1e12) is None  # no breaker at all
    assert (
        count_opens_from_closed([_states(CLOSED, CLOSED, CLOSED)], 100.0, 103.0) == 0.0
    )  # measured: never opened


def test_opens_from_closed_of_replicas_are_summed_and_unordered_scrapes_sorted() -> None:
    a = _states(CLOSED, OPEN, HALF, OPEN)
    b = _states(OPEN, CLOSED, CLOSED, CLOSED, start=100.5)
    shuffled = a.iloc[[3, 0, 2, 1]]
    assert count_opens_from_closed([shuffled, b], 100.0, 104.0) == 2.0
    assert count_opens_from_closed([a, pd.Series(dtype=float)], 100.0, 104.0) == 1.0
