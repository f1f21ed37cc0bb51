"""A scenario's numbers are numbers, each key has one spelling, and a typo gets the right key
(issue 18, frictions 8 and 9), all errors in the file's order."""

from __future__ import annotations

import pytest

from harness.core.errors import ScenarioError
from harness.scenario.loader import load_scenario_text
from tests.conftest import ROOT

BASE = """\
name: t
seed: 7
duration: 60s
traffic:
  payments: {method: POST, path: /api/payments, rate: 5, idempotency-key: true}
pg:
  phases:
    - {name: outage, start: 5s, duration: 10s, fault: {type: timeout}, repeat: {every: 2s, for: 1s}}
builds:
  before:
    profile: retry-only
    workers: 20
    pg-client: {read-timeout: 3s}
  svc:
    command: [s, '{port}']
    health: {path: /health}
"""


def _problems(text: str) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, "s.yaml")
    return [str(p) for p in info.value.problems]


def _one(old: str, new: str) -> str:
    assert old in BASE
    (problem,) = _problems(BASE.replace(old, new, 1))
    return problem


def test_base_is_valid() -> None:
    s = load_scenario_text(BASE, "s.yaml").scenario
    assert s.seed == 7 and s.traffic["payments"].rate == 5
    assert s.pg.phases[0].repeat is not None and s.pg.phases[0].repeat.for_ == 1


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("rate: 5", "rate: true", "s.yaml:5:55: traffic.payments.rate: expected a number, got t"),
        ("rate: 5", "rate: yes", "traffic.payments.rate: `yes` is true in YAML 1.1"),
        ("rate: 5", "rate: on", "traffic.payments.rate: `on` is true in YAML 1.1"),
        ("seed: 7", "seed: true", "s.yaml:2:7: seed: expected an integer (a whole number), got"),
        ("workers: 20", "workers: 010", "s.yaml:12:14: builds.before.workers: `010` is 8 (octal)"),
        ("workers: 20", "workers: 1_000", "builds.before.workers: `1_000` is 1000 in YAML 1.1"),
        ("workers: 20", "workers: '20'", "builds.before.workers: expected an integer"),
        ("key: true", "key: 1", "traffic.payments.idempotency-key: expected true or false, got 1"),
        ("key: true", "key: yes", "traffic.payments.idempotency-key: `yes` is true in YAML 1.1"),
        ("duration: 60s", "duration: 1:00", "s.yaml:3:11: duration: `1:00` is 60 (base 60)"),
    ],
)  # fmt: skip
def test_a_value_means_what_it_says(old: str, new: str, expected: str) -> None:
    problem = _one(old, new)
    assert expected in problem, problem


@pytest.mark.parametrize(
    ("old", "new", "suggested"),
    [
        ("read-timeout", "read_timeout", "builds.before.pg-client.read_timeout: unknown key; "
         "did you mean `read-timeout`?"),
        ("idempotency-key", "idempotency_key", "did you mean `idempotency-key`?"),
        ("pg-client", "pg_client", "before.pg_client: unknown key; did you mean `pg-client`?"),
        ("for: 1s", "for_: 1s", "pg.phases.0.repeat.for_: unknown key; did you mean `for`?"),
        ("health:", "helth:", "s.yaml:16:5: builds.svc.helth: unknown key; did you mean `health`"),
        ("path: /health", "pth: /health", "svc.health.pth: unknown key; did you mean `path`?"),
        ("type: timeout", "type: timeout, probabilty: 1", "did you mean `probability`?"),
        ("duration: 60s", "duraton: 60s", "s.yaml:3:1: duraton: unknown key; did you mean `dur"),
    ],
)  # fmt: skip
def test_one_spelling_per_key_and_the_closest_suggested(old: str, new: str, suggested: str) -> None:
    problems = _problems(BASE.replace(old, new, 1))
    assert any(suggested in p for p in problems), problems


def test_a_key_far_from_every_key_gets_no_guess() -> None:
    problem = _one("seed: 7", "seed: 7\nxyzzy: 1")
    assert problem == "s.yaml:3:1: xyzzy: unknown key (check the spelling; see docs/scenario.md)"


def test_every_problem_of_a_file_in_line_order() -> None:
    # Model errors, a gate's, a build check's and the stages' come from different passes.
    text = (
        BASE.replace("seed: 7", "seed: true")
        .replace("rate: 5", "rate: -1")
        .replace("workers: 20", "workers: 20\n    wrokers: 1")
        .replace("command: [s, '{port}']", "command: [s]")
        + "gates:\n  - before.nope.p99 < 1\n"
    )
    problems = _problems(text)
    lines = [int(p.split(":")[1]) for p in problems]
    assert lines == sorted(lines) and len(problems) >= 4, problems
    assert [p.split(": ")[1] for p in problems[:3]] == [
        "seed",
        "traffic.payments.rate",
        "builds.before.wrokers",
    ]


def test_every_shipped_and_test_scenario_still_validates() -> None:
    # What people run, what the docs show and the run folders kept in tests/data.
    files = sorted(
        [*(ROOT / "scenarios").rglob("*.yaml"), *(ROOT / "tests" / "data").rglob("scenario.yaml")]
    )
    assert len(files) >= 10
    for path in files:
        load_scenario_text(path.read_text(), str(path))
