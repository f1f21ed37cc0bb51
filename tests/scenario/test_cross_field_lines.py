"""Cross-field problems are located at the field's own line (issue 22, item 21): "phase ends
after the run's duration" was said at file:2:1, the scenario's first key, and so were the
load's bounds; now each is said where it is written, with the rest of the file checked too."""

from __future__ import annotations

from tests.scenario.problems import problems_of

BASE = """\
name: t
duration: 60s
traffic:
  products: {path: /p, rate: 5}
  payments: {method: POST, path: /pay, rate: 5}
pg:
  phases:
    - {name: warm, start: 0s, duration: 10s, fault: {type: healthy}}
    - name: outage
      start: 20s
      duration: 30s
      fault: {type: timeout}
builds:
  before: {profile: retry-only}
"""


def test_a_phase_past_the_duration_is_said_at_the_phase() -> None:
    (problem,) = problems_of(BASE.replace("duration: 30s", "duration: 50s"))
    assert problem.startswith("s.yaml:11:17: pg.phases.1.duration: phase 'outage' ends at 70s"), (
        problem
    )


def test_phases_out_of_order_are_located_in_the_files_order() -> None:
    text = BASE.replace("start: 0s, duration: 10s", "start: 55s, duration: 10s")
    text = text.replace("start: 20s", "start: 0s")
    (problem,) = problems_of(text)
    assert problem.startswith("s.yaml:8:42: pg.phases.0.duration: phase 'warm' ends at 65s"), (
        problem
    )


def test_the_loads_bounds_are_said_at_the_traffic_and_the_gates_are_checked_too() -> None:
    text = BASE.replace("rate: 5}", "rate: 9000}").replace("duration: 60s", "duration: 1h")
    problems = problems_of(text + "gates: ['before.prodcts.p95 < 1s']\n")
    assert any(p.startswith("s.yaml:4:3: traffic: each build would send") for p in problems), (
        problems
    )
    assert any(p.startswith("s.yaml:15:9: gates.0: unknown figure") for p in problems), problems
