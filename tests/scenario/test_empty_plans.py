"""Plans that send nothing, or too briefly to measure, are refused at validate (issue 22,
item 11): ``rate: 0.000000001`` on every endpoint "completed" in 3.6 s with an empty table
and exit 0, and ``duration: 1ms`` validated."""

from __future__ import annotations

import pytest

from harness.scenario.bounds import MIN_EXPECTED_REQUESTS, MIN_SCRAPES
from harness.scenario.loader import load_scenario_text
from tests.scenario.problems import problems_of

BASE = """\
name: t
duration: 10s
traffic:
  products: {path: /p, rate: 5}
  ramp:
    path: /r
    stages: [{duration: 5s, target: 2}]
builds:
  before: {profile: retry-only}
"""


def test_the_floors() -> None:
    assert (MIN_EXPECTED_REQUESTS, MIN_SCRAPES) == (1, 3)
    load_scenario_text(BASE.replace("rate: 5", "rate: 0.1"), "s.yaml")  # one request: enough


def test_an_endpoint_that_would_send_nothing_is_refused_at_its_rate() -> None:
    (problem,) = problems_of(BASE.replace("rate: 5", "rate: 0.000000001"))
    assert problem.startswith("s.yaml:4:30: traffic.products.rate: "), problem
    assert "expects 1e-08 requests in the measured window" in problem, problem
    assert "at least 1" in problem, problem


def test_stages_that_send_nothing_in_the_window_are_refused_at_the_stages() -> None:
    text = BASE.replace("target: 2}]", "target: 0.01}]")
    (problem,) = problems_of(text)
    assert problem.startswith("s.yaml:7:13: traffic.ramp.stages: "), problem
    assert "expects 0.075 requests" in problem, problem


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [("duration: 10s", "duration: 1ms", "duration 1ms is shorter than 3 scrapes (3s"),
     ("duration: 10s", "duration: 10s\nmetrics: {interval: 5s}",
      "duration 10s is shorter than 3 scrapes (15s: metrics.interval 5s)")],
)  # fmt: skip
def test_a_window_too_short_to_measure_is_refused_at_the_duration(
    old: str, new: str, said: str
) -> None:
    problems = problems_of(
        BASE.replace("stages: [{duration: 5s", "stages: [{duration: 1ms").replace(old, new)
    )
    assert any(p.startswith("s.yaml:2:11: duration: ") and said in p for p in problems), problems
