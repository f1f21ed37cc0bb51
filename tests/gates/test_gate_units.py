"""A gate's units must fit its figures' (issue 22, item 15): ``before.products.p95 <= 99%``
and ``success_pct >= 3s`` passed, comparing seconds with percent. Refused at validate, at
the gate's line, with what does not fit; a bare number fits any unit."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.core.errors import ScenarioError
from harness.scenario.loader import load_scenario_text
from tests.conftest import ROOT

SCENARIO = """\
name: g
duration: 60s
traffic:
  products: {path: /p, rate: 5}
pg:
  phases:
    - {name: outage, start: 10s, duration: 30s, fault: {type: timeout}}
builds:
  before: {profile: retry-only}
  after: {profile: retry-circuit-breaker, replicas: 2}
gates:
"""


def _problems(gate: str) -> list[str]:
    try:
        load_scenario_text(SCENARIO + f"  - {gate!r}\n", "s.yaml")
    except ScenarioError as exc:
        return [str(p) for p in exc.problems]
    return []


@pytest.mark.parametrize(
    ("gate", "said"),
    [
        ("before.products.p95 <= 99%", "before.products.p95 is in seconds, 99% is a percentage"),
        ("after.products.success_pct >= 3s", "is a percentage, 3s is in seconds"),
        ("after.products.error_pct < 200ms", "200ms is in seconds"),
        ("after.busy_workers.max[outage] <= 2s", "is a count or ratio, without a unit"),
        ("after.breaker.open_pct >= after.time_to_open", "after.time_to_open is in seconds"),
        ("after.products.p95 <= 0.5 * before.products.p95 + 10%", "+"),
        ("after.replicas.0.time_to_open >= 50%", "after.replicas.0.time_to_open is in seconds"),
        ("after.pg.amplification <= 150%", "a count or ratio"),
        ("-after.products.p99 > -1%", "is in seconds"),
    ],
)
def test_a_unit_that_does_not_fit_is_refused_at_the_gates_line(gate: str, said: str) -> None:
    (problem,) = _problems(gate)
    assert problem.startswith("s.yaml:12:5: gates.0: units do not fit: "), problem
    assert said in problem, problem


@pytest.mark.parametrize(
    "gate",
    [
        "after.products.p95 <= 500ms",
        "after.products.p99[outage] < 2m",
        "after.products.success_pct >= 99.5%",
        "after.products.success_pct >= 99.5",
        "after.busy_workers.p50[outage] <= 0.25 * after.max_workers",
        "after.products.p95[outage] <= 0.5 * before.products.p95[outage] + 200ms",
        "after.products.p95 / before.products.p95 <= 0.5",
        "after.products.p95 * after.products.achieved_rps <= 10",
        "after.replicas.max.time_to_open - after.replicas.min.time_to_open >= 2s",
        "after.products.requests >= 100",
        "after.breaker.open_pct[outage] >= 50",
        "(after.products.p95) <= -(-1s)",
    ],
)
def test_fitting_units_and_bare_numbers_pass(gate: str) -> None:
    assert _problems(gate) == []


def test_harness_gate_g_checks_units_too() -> None:
    run = ROOT / "tests" / "data" / "run-quickstart-v1"
    done = CliRunner().invoke(app, ["gate", str(run), "-g", "after.products.p95 <= 99%"])
    assert done.exit_code == 2, done.output
    assert "units do not fit" in done.output and "Traceback" not in done.output
