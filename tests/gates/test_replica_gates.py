"""Per-replica figures and breaker opens in gates: grammar, checks at validate, verdicts.

The grammar and the checks are run the way a user meets them (``harness
validate`` on a file: file:line, exit 2), and verdicts on the quickstart run of
the test data as written before these figures existed. Verdicts on a real run
with replicas: ``test_integration_replica_gates``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.analysis.model import read_report
from harness.cli import app
from harness.gates.evaluate import evaluate
from harness.scenario.gates import GateSyntaxError, Metric, parse_gate
from tests.conftest import ROOT

V1 = ROOT / "tests" / "data" / "run-quickstart-v1"

SCENARIO = """\
name: g
duration: 60s
traffic:
  payments: {method: POST, path: /api/payments, rate: 5, calls-gateway: true}
  stock: {path: /stock, rate: 1}
pg:
  phases:
    - {name: outage, start: 10s, duration: 30s, fault: {type: timeout}}
builds:
  one: {profile: retry-circuit-breaker}
  scaled: {profile: retry-circuit-breaker, replicas: 3, workers: 8}
  side: {command: [s, '{port}']}
gates:
"""


def test_a_replica_is_picked_by_index_min_or_max() -> None:
    gate = parse_gate(
        "scaled.replicas.2.breaker.open_pct[outage] >= scaled.replicas.min.max_workers"
    )
    assert gate.left == Metric("scaled", ("breaker", "open_pct"), "outage", replica="2")
    assert gate.right == Metric("scaled", ("max_workers",), replica="min")
    assert str(gate.left) == "scaled.replicas.2.breaker.open_pct[outage]"
    assert str(parse_gate("baseline.s.replicas.007.time_to_open < 1").left) == (
        "baseline.s.replicas.7.time_to_open"
    )
    # Names may contain "-": a build called replicas-3 is a build, not a replica.
    assert parse_gate("replicas-3.replicas.max.breaker.opens < 3").left == Metric(
        "replicas-3", ("breaker", "opens"), replica="max"
    )
    # Not an index nor min/max: a plain path, as the grammar reads it (a scenario refuses an
    # endpoint named replicas, whose .max would read as a replica: test_reserved_names).
    assert parse_gate("one.replicas.p95 < 1").left == Metric("one", ("replicas", "p95"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("scaled.replicas.0 < 1", "a replica's figure is written build.replicas.I.figure"),
        ("scaled.replicas.0breaker.opens < 1", "cannot read '.0breaker.opens < 1'"),
        ("scaled.replicas.1234567.breaker.opens < 1", "replica 1234567 is out of range"),
    ],
)
def test_a_malformed_replica_reference_is_a_syntax_error(text: str, message: str) -> None:
    with pytest.raises(GateSyntaxError, match=message):
        parse_gate(text)


def _validate(tmp_path: Path, gates: list[str]) -> tuple[int, str]:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO + "".join(f"  - {g}\n" for g in gates))
    result = CliRunner().invoke(app, ["validate", str(path)])
    return result.exit_code, result.output


def test_validate_accepts_every_replica_figure_and_opens(tmp_path: Path) -> None:
    gates = [
        '"scaled.replicas.0.breaker.open_pct[outage] >= 50"',
        '"scaled.replicas.2.breaker.opens[outage] <= one.breaker.opens[outage]"',
        '"scaled.replicas.max.time_to_open - scaled.replicas.min.time_to_open >= 2s"',
        '"scaled.replicas.1.blocked.total + scaled.replicas.1.blocked.per_s[outage] > 0"',
        '"scaled.replicas.min.busy_workers.p50[outage] <= scaled.replicas.0.max_workers"',
        '"scaled.replicas.max.busy_workers.max + scaled.replicas.max.busy_workers.mean > 0"',
        '"scaled.replicas.0.pg.retries >= 0"',
        '"one.stock.p95 < 2s"',
        '{name: flaps, expr: "one.breaker.opens >= 3", seed: "flapped"}',
        "{expr: \"one.breaker.opens >= 3\", seed: '80%'}",
    ]
    code, output = _validate(tmp_path, gates)
    assert code == 0, output


@pytest.mark.parametrize(
    ("gate", "message"),
    [
        (
            '"scaled.replicas.3.breaker.open_pct >= 50"',
            "build 'scaled' has replicas 0..2 (replicas: 3), not 3",
        ),
        (
            '"one.replicas.0.time_to_open < 3s"',
            "build 'one' runs one process (replicas: 1); per-replica figures need",
        ),
        ('"side.replicas.max.breaker.opens < 3"', "build 'side' runs one process (a command"),
        ('"scaled.replicas.1.payments.p95 < 2"', "'payments.p95' is not a figure of one replica"),
        ('"scaled.replicas.0.pg.calls < 2"', "'pg.calls' is not a figure of one replica"),
        ('"scaled.replicas.0.time_to_open[outage] < 2"', "figure 'time_to_open' is not cut"),
        ('"scaled.replicas.0.max_workers[outage] < 2"', "figure 'max_workers' is not cut"),
        ('"scaled.replicas.avg.breaker.opens < 2"', "a replica's figure: build.replicas.I"),
        ('"nope.replicas.0.breaker.opens < 2"', "unknown build 'nope'"),
        ('"one.breaker.opens[nope] < 2"', "unknown phase 'nope'"),
        ('{expr: "one.breaker.opens < 2", seed: 0.8}', 'quote it, e.g. seed: "0.8"'),
        ('{expr: "one.breaker.opens < 2", seed: 80}', "not int 80"),
        ('{expr: "one.breaker.opens < 2", seed: [1, 2]}', "seed is the seed's own figure"),
        ('{expr: "one.breaker.opens < 2", seed: ""}', "at least 1 character"),
    ],
)
def test_validate_refuses_bad_values_at_their_line(tmp_path: Path, gate: str, message: str) -> None:
    code, output = _validate(tmp_path, ['"one.breaker.opens >= 0"', gate])
    assert code == 2, output
    line = SCENARIO.count("\n") + 2  # the second gate's line
    flat = " ".join(output.split())
    assert f"s.yaml:{line}:" in flat, output
    assert "gates.1" in flat
    assert message in flat, output
    assert "1 problem(s) found" in flat  # only this gate, only once (not "a valid string")


def test_an_old_report_lacks_opens_and_replicas_and_says_so() -> None:
    report = read_report(V1 / "report.json")
    for build in report["builds"].values():  # as written before breaker.opens existed
        build["breaker"].pop("opens")
        for window in build["phases"].values():
            window["breaker"].pop("opens")
    opens = evaluate(parse_gate("after.breaker.opens >= 0"), report)
    assert opens.verdict == "error" and "no such figure in the report" in opens.detail
    phase = evaluate(parse_gate("after.breaker.opens[outage] >= 0"), report)
    assert phase.verdict == "error" and "no such figure in the report" in phase.detail
    replica = evaluate(parse_gate("after.replicas.0.breaker.opens >= 0"), report)
    assert replica.verdict == "error"
    assert "build 'after' has no per-replica figures in this run" in replica.detail
    # The figures every gate names are kept beside the verdict, None when missing.
    both = evaluate(parse_gate("after.products.p95 <= after.breaker.opens"), report)
    assert both.figures == (
        (
            "after.products.p95",
            report["builds"]["after"]["endpoints"]["products"]["latency_s"]["p95"],
        ),
        ("after.breaker.opens", None),
    )
