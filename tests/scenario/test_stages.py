"""Traffic shapes: ``rate`` or ``stages`` (k6's ramping arrival rate), ``arrivals``, and what
``harness validate`` says about a bad shape, at its line."""

from __future__ import annotations

import pytest

from harness.core.errors import ScenarioError
from harness.scenario.loader import load_scenario_text

BASE = """\
name: t
warmup: 5s
duration: 60s
traffic:
  products:
    path: /p
{shape}
builds:
  b: {{profile: retry-only}}
"""


def _problems(shape: str) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(BASE.format(shape=shape), "s.yaml")
    return [str(p) for p in info.value.problems]


def test_a_ramp_a_step_and_a_spike() -> None:
    shape = """\
    start-rate: 10
    arrivals: poisson
    stages:
      - {duration: 20s, target: 10}     # hold 10/s
      - {duration: 100ms, target: 50}   # step to 50/s
      - {duration: 20s, target: 50}
      - {duration: 5s, target: 200}     # a spike...
      - {duration: 5s, target: 50}      # ...and back"""
    s = load_scenario_text(BASE.format(shape=shape)).scenario
    ep = s.traffic["products"]
    assert ep.rate is None and ep.arrivals == "poisson" and len(ep.stages or ()) == 5
    profile = s.rate_profile("products")
    assert profile.rate_at(-3) == 10  # the warmup runs at start-rate
    assert profile.rate_at(20.05) == pytest.approx(30)
    assert profile.rate_at(45.1) == 200
    assert profile.rate_at(59) == 50  # the last target holds to the window's end
    assert ep.shape() == "stages 10 -> 10 -> 50 -> 50 -> 200 -> 50/s, poisson"


@pytest.mark.parametrize(
    ("shape", "where", "fragment"),
    [
        (
            "    rate: 5\n    stages: [{duration: 5s, target: 10}]",
            "s.yaml:6:5: traffic.products:",
            "rate and stages both given",
        ),
        (
            "    stages:\n      - {duration: 5s, target: -1}",
            "s.yaml:8:32: traffic.products.stages.0.target:",
            "greater than or equal to 0",
        ),
        (
            "    stages:\n      - {duration: 0s, target: 10}",
            "s.yaml:8:20: traffic.products.stages.0.duration:",
            "greater than 0",
        ),
        (
            "    stages:\n      - {duration: 50s, target: 10}\n      - {duration: 11s, target: 1}",
            "s.yaml:8:7: traffic.products.stages:",
            "the stages last 61s, longer than the measured window (duration 1m)",
        ),
        ("    start-rate: 3\n    rate: 4", "s.yaml:6:5: traffic.products:", "start-rate applies"),
        ("    method: GET", "s.yaml:6:5: traffic.products:", "give rate"),
        (
            "    stages: [{duration: 5s, target: 0}]",
            "s.yaml:6:5: traffic.products:",
            "nothing is sent",
        ),
        (
            "    stages: [{duration: 5s, target: 10001}]",
            "traffic.products.stages.0.target:",
            "10000",
        ),
        ("    rate: 1\n    arrivals: exponential", "traffic.products.arrivals:", "'poisson'"),
        ("    stages: []", "traffic.products.stages:", "at least 1"),
    ],
)
def test_bad_shapes_are_refused_at_their_line(shape: str, where: str, fragment: str) -> None:
    problems = _problems(shape)
    assert any(where in p and fragment in p for p in problems), problems


def test_the_bounds_count_a_ramp_by_its_peak_and_its_integral() -> None:
    peak = "    stages: [{duration: 10s, target: 10000}]\n  more: {path: /m, rate: 10000}"
    many = "\n".join(f"  e{i}: {{path: /e, rate: 9000}}" for i in range(10))
    assert any("add up to 110000/s" in p for p in _problems(peak + "\n" + many))
    # A ramp up and a ramp down side by side peak together at 10,000/s, not 20,000/s.
    crossing = (
        "    stages: [{duration: 10s, target: 10000}]\n"
        "  down: {path: /d, start-rate: 10000, stages: [{duration: 10s, target: 0}]}\n"
        + "\n".join(f"  e{i}: {{path: /e, rate: 8500}}" for i in range(10))
    )
    load_scenario_text(BASE.replace("warmup: 5s", "warmup: 0s").format(shape=crossing))
    # A ramp counts what it sends: 0 -> 10,000/s over 24 h is 432 M requests, too many.
    long = BASE.replace("duration: 60s", "duration: 24h").format(
        shape="    stages: [{duration: 24h, target: 10000}]"
    )
    with pytest.raises(ScenarioError, match="432,000,000 requests"):
        load_scenario_text(long)
