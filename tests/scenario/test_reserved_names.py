"""Names a gate could not tell from its own words are refused where they are written
(issue 22, item 2): an endpoint called ``busy_workers`` would shadow the busy-worker
figure, a build called ``baseline`` could never be named, a phase ``1st`` never cut."""

from __future__ import annotations

import pytest

from harness.scenario.loader import load_scenario_text
from harness.scenario.names import RESERVED_BUILD_NAMES, reserved_endpoint_names
from tests.conftest import ROOT
from tests.scenario.problems import problems_of

BASE = """\
name: t
duration: 60s
traffic:
  products: {path: /p, rate: 5}
pg:
  phases:
    - {name: outage, start: 10s, duration: 30s, fault: {type: timeout}}
builds:
  before: {profile: retry-only}
  after: {profile: retry-circuit-breaker}
gates:
  - after.busy_workers.max[outage] <= 20
"""


def test_the_base_is_valid() -> None:
    load_scenario_text(BASE, "s.yaml")


@pytest.mark.parametrize(
    "name",
    ["busy_workers", "max_workers", "breaker", "blocked", "pg", "time_to_open",
     "time_to_recover", "blocked_pct_healthy", "db_active", "db_max", "replicas"],
)  # fmt: skip
def test_an_endpoint_named_like_a_figure_is_refused_at_its_line(name: str) -> None:
    text = BASE.replace("  products: {path: /p, rate: 5}", f"  {name}: {{path: /p, rate: 5}}")
    (problem,) = problems_of(text)
    assert problem.startswith(f"s.yaml:4:3: traffic.{name}: "), problem
    assert "collides with the gate" in problem and "rename the endpoint" in problem, problem


def test_the_endpoint_vocabulary_comes_from_the_catalogue() -> None:
    reserved = reserved_endpoint_names()
    assert {"busy_workers", "breaker", "pg", "db_timeouts", "replicas"} <= reserved
    assert "products" not in reserved and "p95" not in reserved


def test_a_build_named_baseline_is_refused_at_its_line() -> None:
    assert RESERVED_BUILD_NAMES == ("baseline",)
    text = BASE.replace("  after: {profile: retry-circuit-breaker}", "  baseline: {profile: x}")
    text = text.replace("  - after.busy", "  - before.busy")
    problems = problems_of(text.replace("{profile: x}", "{profile: retry-circuit-breaker}"))
    (problem,) = problems
    assert problem.startswith("s.yaml:10:3: builds.baseline: "), problem
    assert "--baseline" in problem, problem


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        ("  products: {", "  3ds: {", "s.yaml:4:3: traffic.3ds: "),
        ("  before: {", "  2x: {", "s.yaml:9:3: builds.2x: "),
        ("{name: outage,", "{name: 1st,", "s.yaml:7:8: pg.phases.0.name: "),
        ("{name: outage,", "{name: a.1b,", "s.yaml:7:8: pg.phases.0.name: "),
    ],
)
def test_a_name_the_gate_grammar_cannot_write_is_refused(old: str, new: str, where: str) -> None:
    text = BASE.replace("[outage]", "").replace(old, new)
    (problem,) = problems_of(text)
    assert problem.startswith(where), problem
    assert "a gate could not name it" in problem, problem


def test_a_phase_may_share_a_figure_word_inside_brackets() -> None:
    # [phase] is read only as a phase: no collision with the figures.
    text = BASE.replace("name: outage", "name: busy_workers").replace("[outage]", "[busy_workers]")
    load_scenario_text(text, "s.yaml")


def test_docs_list_every_reserved_word() -> None:
    row = next(
        line
        for line in (ROOT / "docs" / "scenario.md").read_text().splitlines()
        if line.startswith("| build and endpoint names |")
    )
    missing = [
        w for w in (*reserved_endpoint_names(), *RESERVED_BUILD_NAMES) if f"`{w}`" not in row
    ]
    assert not missing, f"docs/scenario.md does not list {missing}"


def test_a_phase_out_of_the_files_order_is_located_at_its_own_line() -> None:
    # pg.phases are sorted by start: the problem is said where the file writes the phase.
    text = BASE.replace("[outage]", "").replace(
        "    - {name: outage,",
        "    - {name: 2nd, start: 50s, duration: 5s, fault: {type: healthy}}\n    - {name: outage,",
    )
    (problem,) = problems_of(text)
    assert problem.startswith("s.yaml:7:8: pg.phases.0.name: phase '2nd'"), problem
