"""Seed claims: gates with ``seed:`` in report.json, report.md and report.html.

On a copy of the quickstart run of the test data whose scenario gets gates
with ``seed:`` and is re-rendered with ``harness report``. On a run made for
the tests: ``test_integration_seed_claims``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.analysis.model import Report, read_report
from harness.cli import app
from harness.report.claims import figure_unit, seed_claims
from harness.report.page import render_html
from harness.report.tables import markdown
from harness.scenario.loader import load_scenario, load_scenario_text
from tests.analysis.test_model import _conforms
from tests.conftest import ROOT

V1 = ROOT / "tests" / "data" / "run-quickstart-v1"

SEED_GATES = """\
  - name: "product reads | protected (seed 000)"
    expr: "after.products.p95[outage] <= 0.5 * before.products.p95[outage]"
    seed: "7.21 s before | 2.54 s after"   # seed 000, result 3
  - name: pool saturated before
    expr: "before.busy_workers.max[outage] >= before.max_workers"
    seed: "200 of 200"
  - name: against a baseline run
    expr: "after.products.p99 <= baseline.after.products.p99"
    seed: "<script>no figure</script>"
"""


def _with_seeds(text: str) -> str:
    assert text.rstrip().endswith('"after.pg.amplification[outage] <= 1.0"')
    return text.rstrip() + "\n" + SEED_GATES


def test_claims_carry_the_seeds_figure_ours_and_the_verdict() -> None:
    report = read_report(V1 / "report.json")
    scenario = load_scenario_text(_with_seeds((V1 / "scenario.yaml").read_text())).scenario
    claims = seed_claims(scenario, report)
    assert [c["gate"] for c in claims] == [
        "product reads | protected (seed 000)",
        "pool saturated before",
        "against a baseline run",
    ]
    first = claims[0]
    after = report["builds"]["after"]["phases"]["outage"]["endpoints"]["products"]["latency_s"]
    before = report["builds"]["before"]["phases"]["outage"]["endpoints"]["products"]["latency_s"]
    assert first["seed"] == "7.21 s before | 2.54 s after"
    assert first["figures"] == {
        "after.products.p95[outage]": after["p95"],
        "before.products.p95[outage]": before["p95"],
    }
    assert first["measured"] == after["p95"] and first["op"] == "<="
    assert first["limit"] == pytest.approx(0.5 * (before["p95"] or 0))
    assert first["verdict"] == "pass" and first["detail"] == ""
    # Without a baseline run a baseline figure is not measured: an error, saying why.
    third = claims[2]
    assert third["verdict"] == "error" and "needs a baseline run" in third["detail"]
    assert third["figures"]["baseline.after.products.p99"] is None
    assert third["figures"]["after.products.p99"] is not None
    # Gates without seed: are not claims; a scenario without any has none.
    plain = load_scenario(V1 / "scenario.yaml").scenario
    assert seed_claims(plain, report) == []


@pytest.mark.parametrize(
    ("name", "unit"),
    [
        ("after.products.p95[outage]", "s"),
        ("after.time_to_open", "s"),
        ("s.replicas.0.time_to_open", "s"),
        ("after.products.max_lateness_s", "s"),
        ("after.breaker.open_pct[outage]", "%"),
        ("after.products.kept_pct", "%"),
        ("after.breaker.opens", ""),
        ("after.pg.amplification", ""),
        ("after.max_workers", ""),
        ("before.busy_workers.max[outage]", ""),  # threads, though latency has a .max too
        ("s.replicas.max.busy_workers.p50", ""),
        ("after.products.max", "s"),
        ("naive.blocked_pct_healthy", "%"),
    ],
)
def test_figures_are_shown_with_their_unit(name: str, unit: str) -> None:
    assert figure_unit(name) == unit


@pytest.fixture(scope="module")
def rerendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The quickstart run of the test data, its scenario given seed gates, re-rendered."""
    run_dir = tmp_path_factory.mktemp("claims") / "run"
    shutil.copytree(V1, run_dir)
    (run_dir / "scenario.yaml").write_text(_with_seeds((V1 / "scenario.yaml").read_text()))
    result = CliRunner().invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 0, result.output
    return run_dir


def test_harness_report_writes_the_claims_into_every_format(rerendered: Path) -> None:
    data: dict[str, Any] = json.loads((rerendered / "report.json").read_text())
    assert _conforms(data, Report, "report") == []
    assert [c["verdict"] for c in data["seed_claims"]] == ["pass", "pass", "error"]
    md = (rerendered / "report.md").read_text()
    section = md.split("## Seed claims", 1)[1].split("\n## ", 1)[0]
    assert "2/3 hold." in section
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert rows[0] == "| claim (gate) | seed | ours | measured vs limit | verdict |"
    # A | in a name or a seed figure is escaped, so every row keeps five cells.
    assert rows[1].startswith(r"| product reads \| protected (seed 000) | 7.21 s before \| 2.54 s")
    assert all(row.replace(r"\|", "").count("|") == 6 for row in rows), rows
    assert "after.products.p95[outage] = " in rows[1] and " ms" in rows[1]
    assert "| pass |" in rows[1]
    assert rows[2].startswith("| pool saturated before | 200 of 200 | before.busy_workers.max")
    assert "error (baseline.after.products.p99 needs a baseline run (--baseline))" in rows[3]
    # The claims sit after the headline table, before the per-build tables.
    assert md.index("| figure |") < md.index("## Seed claims") < md.index("## before (")
    html = (rerendered / "report.html").read_text()
    assert '<section id="seed-claims">' in html and "2/3 hold." in html
    assert "&lt;script&gt;no figure&lt;/script&gt;" in html and "<script>" not in html
    assert 'class="text verdict-error"' in html and 'class="text verdict-pass"' in html


def test_a_report_without_seed_gates_has_no_claims_section() -> None:
    report = read_report(V1 / "report.json")
    assert "seed_claims" not in report
    assert "Seed claims" not in markdown(report)
    assert "seed-claims" not in render_html(report, {})
