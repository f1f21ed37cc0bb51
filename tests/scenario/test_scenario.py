"""Scenario validation: typed models, every problem reported at once with file, line and field."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.core.errors import ScenarioError
from harness.scenario.loader import load_scenario, load_scenario_text
from tests.conftest import ROOT

VALID = """\
name: t
duration: 30s
traffic:
  products: {path: "/api/products/{id}", params: {id: [1, 10]}, rate: 5}
pg:
  phases:
    - {name: outage, start: 5s, duration: 10s, fault: {type: timeout}}
builds:
  before: {profile: retry-only}
"""


@pytest.mark.parametrize("name", ["quickstart.yaml", "pg-sustained-timeout.yaml"])
def test_shipped_scenarios_are_valid(name: str) -> None:
    loaded = load_scenario(ROOT / "scenarios" / name)
    assert set(loaded.scenario.builds) == {"before", "after"}
    assert loaded.scenario.builds["after"].resilience4j.circuitbreaker is not None


def test_seed_scenario_matches_seed_000() -> None:
    s = load_scenario(ROOT / "scenarios" / "pg-sustained-timeout.yaml").scenario
    assert s.traffic["payments"].rate == 35 and s.traffic["products"].rate == 10
    outage = next(p for p in s.pg.phases if p.fault.type == "timeout")
    assert outage.duration == 180
    assert all(b.workers == 200 for b in s.builds.values())
    assert all(b.resilience4j.retry.max_attempts == 2 for b in s.builds.values())
    cb = s.builds["after"].resilience4j.circuitbreaker
    assert cb is not None
    assert (cb.sliding_window_size, cb.minimum_number_of_calls, cb.failure_rate_threshold) == (
        10,
        10,
        50,
    )
    assert cb.wait_duration_in_open_state == 10
    assert cb.permitted_number_of_calls_in_half_open_state == 3
    assert cb.automatic_transition_from_open_to_half_open_enabled


def test_durations_and_defaults() -> None:
    s = load_scenario_text(VALID).scenario
    assert s.duration == 30.0
    assert s.pg.phases[0].start == 5.0
    assert s.fault_window() == (5.0, 15.0)
    assert s.drain_s == 12.0  # client timeout 10 s + 2 s


def test_breaker_profile_gets_resilience4j_defaults() -> None:
    text = VALID.replace("before: {profile: retry-only}", "after: {profile: retry-circuit-breaker}")
    cb = load_scenario_text(text).scenario.builds["after"].resilience4j.circuitbreaker
    assert cb is not None and cb.sliding_window_size == 100 and cb.wait_duration_in_open_state == 60


def _problems(text: str) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, "s.yaml")
    return [str(p) for p in info.value.problems]


def test_every_problem_is_reported_at_once_with_line_and_field() -> None:
    text = """\
name: t
duration: 3 minutes
traffic:
  products: {path: /p, rate: -1}
builds:
  after:
    profile: retry-circuit-breaker
    resilience4j:
      circuitbreaker:
        failure-rate-threshold: 150
        sliding-windw-size: 10
"""
    problems = _problems(text)
    assert len(problems) == 4, problems
    joined = "\n".join(problems)
    assert "s.yaml:2:11: duration: expected a duration" in joined
    assert "s.yaml:4:30: traffic.products.rate: Input should be greater than 0" in joined
    assert "s.yaml:10:33: builds.after.resilience4j.circuitbreaker.failure-rate-threshold" in joined
    assert (
        "s.yaml:11:9: builds.after.resilience4j.circuitbreaker.sliding-windw-size: unknown key"
        in joined
    )


def test_missing_keys_name_the_key() -> None:
    problems = _problems("name: t\ntraffic: {}\n")
    joined = "\n".join(problems)
    assert "duration: required key is missing" in joined
    assert "builds: required key is missing" in joined


def test_fault_fields_are_located_through_the_union() -> None:
    text = VALID.replace("fault: {type: timeout}", "fault: {type: latency, distribution: uniform}")
    problems = _problems(text)
    assert any("pg.phases.0.fault" in p and "needs min, max" in p for p in problems), problems


def test_unknown_fault_type() -> None:
    problems = _problems(VALID.replace("type: timeout", "type: meltdown"))
    assert any("pg.phases.0.fault" in p and "healthy" in p for p in problems), problems


def test_duplicate_keys_are_errors() -> None:
    problems = _problems(VALID + "name: again\n")
    assert any(p.startswith("s.yaml:10:1: name: duplicate key") for p in problems), problems


def test_cross_field_rules() -> None:
    overlap = VALID.replace(
        "    - {name: outage",
        "    - {name: a, start: 0s, duration: 6s, fault: {type: healthy}}\n    - {name: outage",
    )
    assert any("starts before phase 'a' ends" in p for p in _problems(overlap))
    too_long = VALID.replace("duration: 10s", "duration: 100s")
    assert any("after the run's duration" in p for p in _problems(too_long))
    breaker_without_profile = VALID.replace(
        "before: {profile: retry-only}",
        "before: {profile: retry-only, resilience4j: {circuitbreaker: {}}}",
    )
    assert any("has no circuit breaker" in p for p in _problems(breaker_without_profile))
    missing_param = VALID.replace(", params: {id: [1, 10]}", "")
    assert any("gives no range" in p for p in _problems(missing_param))


def test_yaml_syntax_error_has_a_line() -> None:
    problems = _problems("name: t\nbuilds: [\n")
    assert (
        len(problems) == 1
        and problems[0].startswith("s.yaml:3:")
        and "not valid YAML" in problems[0]
    )


def test_cli_validate_exit_codes(tmp_path: Path) -> None:
    runner = CliRunner()
    good = tmp_path / "good.yaml"
    good.write_text(VALID)
    result = runner.invoke(app, ["validate", str(good)])
    assert result.exit_code == 0, result.output
    bad = tmp_path / "bad.yaml"
    bad.write_text(VALID.replace("rate: 5", "rate: fast"))
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}:4:" in result.output and "traffic.products.rate" in result.output
    assert "Traceback" not in result.output
    missing = runner.invoke(app, ["validate", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 2 and "cannot read" in missing.output
