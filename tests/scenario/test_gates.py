"""The gate language: grammar, precedence, units, and names checked against the scenario."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.core.errors import ScenarioError
from harness.scenario.gates import BinOp, GateSyntaxError, Metric, Number, check_gate, parse_gate
from harness.scenario.loader import load_scenario_text
from tests.conftest import ROOT

SCENARIO = """\
name: g
duration: 60s
traffic:
  payments: {method: POST, path: /api/payments, rate: 5, calls-gateway: true}
  products: {path: /p, rate: 5}
pg:
  phases:
    - {name: outage, start: 10s, duration: 30s, fault: {type: timeout}}
builds:
  before: {profile: retry-only}
  after: {profile: retry-circuit-breaker}
"""


def test_precedence_units_and_phases() -> None:
    gate = parse_gate("after.products.p95[outage] <= 0.5 * before.products.p95[outage] + 200ms")
    assert gate.op == "<="
    assert gate.left == Metric("after", ("products", "p95"), "outage")
    assert isinstance(gate.right, BinOp) and gate.right.op == "+"
    assert gate.right.right == Number(0.2)
    assert isinstance(gate.right.left, BinOp) and gate.right.left.op == "*"
    assert parse_gate("after.products.p99 < 2m").right == Number(120.0)
    assert parse_gate("baseline.after.pg.calls >= 1").left == Metric(
        "after", ("pg", "calls"), None, baseline=True
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("after.products.p95 <", "ends too early"),
        ("after.products.p95 1", "expected a comparison"),
        ("after < 1", "a figure is written build.figure"),
        ("after.products.p95 < 1 2", "unexpected"),
        ("after.products.p95 <= (1 + 2", "expected ')'"),
        ("after.products.p95 <= __import__('os')", "cannot read"),
        ("after.products.p95[1] < 2", "expected a phase name"),
    ],
)
def test_syntax_errors_say_what_was_expected(text: str, message: str) -> None:
    with pytest.raises(GateSyntaxError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_gate(text)


def test_names_are_checked_against_the_scenario() -> None:
    scenario = load_scenario_text(SCENARIO).scenario
    assert check_gate(parse_gate("after.products.p95[outage] < 1"), scenario) == []
    assert "unknown build 'aftr'" in check_gate(parse_gate("aftr.products.p95 < 1"), scenario)[0]
    assert (
        "unknown phase 'outag'"
        in check_gate(parse_gate("after.products.p95[outag] < 1"), scenario)[0]
    )
    assert (
        "unknown figure 'products.p96'"
        in check_gate(parse_gate("after.products.p96 < 1"), scenario)[0]
    )
    assert (
        "not cut by phase" in check_gate(parse_gate("after.time_to_open[outage] < 1"), scenario)[0]
    )


def test_scenario_gates_are_validated_with_lines() -> None:
    text = (
        SCENARIO
        + 'gates:\n  - "after.products.p95 < 1s"\n  - {name: typo, expr: "after.prods.p95 < 1"}\n'
    )
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, "g.yaml")
    (problem,) = info.value.problems
    assert str(problem).startswith("g.yaml:14:")
    assert "gates.1" in str(problem) and "unknown figure 'prods.p95'" in str(problem)


# ---------------------------------------------------------------- a bounded parser (issue 12)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # 5,000 of these raised RecursionError, in `harness validate` and `harness gate -g`.
        ("(" * 5000 + "after.pg.calls" + ")" * 5000 + " < 1", "at most 1000 characters"),
        ("-" * 5000 + "after.pg.calls < 1", "at most 1000 characters"),
        ("(" * 50 + "after.pg.calls" + ")" * 50 + " < 1", "nested more than 32 deep"),
        ("-" * 50 + "after.pg.calls < 1", "nested more than 32 deep"),
        ("after.pg.calls < " + " + ".join(["1"] * 150), "at most 200 numbers"),
        ("after.pg.calls < " + "1" * 2000, "at most 1000 characters"),
        ("after.pg.calls < " + "9" * 400, "is too large"),
        ("after.pg.calls\x0b < 1", "control character"),
        ("after.pg.calls < 1\udcff", "control character"),
    ],
)
def test_the_parser_is_bounded(text: str, message: str) -> None:
    with pytest.raises(GateSyntaxError, match=message):
        parse_gate(text)


def test_a_gate_at_the_bounds_parses() -> None:
    nested = "(" * 32 + "after.pg.calls" + ")" * 32 + " < " + " + ".join(["1"] * 60)
    assert parse_gate(nested).metrics() == [Metric("after", ("pg", "calls"))]


def test_unknown_names_are_listed_briefly() -> None:
    endpoints = "".join(f"  e{i}: {{path: /e, rate: 1}}\n" for i in range(98))
    scenario = load_scenario_text(SCENARIO.replace("traffic:\n", "traffic:\n" + endpoints))
    (problem,) = check_gate(parse_gate("after.nope < 1"), scenario.scenario)
    assert "more; see docs/scenario.md" in problem and len(problem) < 1500


@pytest.mark.parametrize(
    ("depth", "message"), [(50, "nested more than 32 deep"), (5000, "at most 1000 characters")]
)
def test_harness_gate_refuses_a_deep_extra_gate(depth: int, message: str) -> None:
    run = ROOT / "tests" / "data" / "run-quickstart-v1"
    deep = "(" * depth + "after.products.p95" + ")" * depth + " < 1"
    result = CliRunner().invoke(app, ["gate", str(run), "-g", deep])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not isinstance(result.exception, RecursionError)


# ---------------------------------------------------------------- not worse than (issue 31)


def test_not_worse_than_is_parsed() -> None:
    gate = parse_gate("after.products.p99[outage] not worse than before by 10%")
    assert gate.left == Metric("after", ("products", "p99"), "outage")
    assert gate.right == Metric("before", ("products", "p99"), "outage")
    assert gate.judged is not None and gate.judged.allowed_pct == 10.0
    own = parse_gate("after.products.p99 not worse than baseline")
    assert own.right == Metric("after", ("products", "p99"), None, baseline=True)
    assert own.judged is not None and own.judged.allowed_pct is None
    other = parse_gate("after.products.success_pct not worse than baseline.before by 2%")
    assert other.right == Metric("before", ("products", "success_pct"), None, baseline=True)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("after.products.p99 not worse than 2s", "a build, 'baseline' or 'baseline.BUILD'"),
        ("after.products.p99 not worse than before by 10", "'by' takes a percentage"),
        ("after.products.p99 not better than before", "expected 'worse'"),
        ("2 * after.products.p99 not worse than before", "compares one figure of a build"),
        ("after.products.p99 not worse than before by 10% and", "unexpected 'and'"),
    ],
)
def test_not_worse_than_syntax_errors(text: str, message: str) -> None:
    with pytest.raises(GateSyntaxError, match=message):
        parse_gate(text)


def test_not_worse_than_names_are_checked() -> None:
    scenario = load_scenario_text(SCENARIO).scenario
    assert check_gate(parse_gate("after.products.p99 not worse than before"), scenario) == []
    (unknown,) = check_gate(parse_gate("after.products.p99 not worse than befor"), scenario)
    assert "unknown build 'befor'" in unknown
    figure = check_gate(parse_gate("after.prods.p99 not worse than before"), scenario)
    assert "unknown figure 'prods.p99'" in figure[0]
    (judged,) = check_gate(parse_gate("after.busy_workers.p50 not worse than before"), scenario)
    assert "the judge ('not worse than') does not know the figure 'busy_workers.p50'" in judged
    text = SCENARIO + 'gates:\n  - "after.prods.p99 not worse than before by 5%"\n'
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, "g.yaml")
    assert str(info.value.problems[0]).startswith("g.yaml:13:")
