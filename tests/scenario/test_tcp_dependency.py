"""A TCP dependency in the scenario (``dependencies.<name>.tcp``, issue 29 part 4): the
model, its toxic phases on the run's one time line, and the placeholders a build may use."""

from __future__ import annotations

import pytest

from harness.scenario.loader import load_scenario_text
from harness.scenario.placeholders import fill
from tests.scenario.problems import problems_of

BASE = """\
name: t
duration: 10s
traffic:
  q: {path: /q, rate: 5}
dependencies:
  db:
    tcp: 127.0.0.1:5432
    phases:
      - {name: db-slow, start: 2s, duration: 3s, toxics: [{type: latency, latency: 200ms}]}
builds:
  app:
    command: [x, "{port}"]
    env: {DB: "jdbc:postgresql://{dep.db.address}/app", H: "{dep.db.host}", P: "{dep.db.port}"}
"""


def test_a_tcp_dependency_is_played_by_the_proxy_with_toxic_phases() -> None:
    scenario = load_scenario_text(BASE, "s.yaml").scenario
    (db,) = scenario.played()
    assert (db.name, db.api, db.source, db.tcp_upstream) == (
        "db",
        "tcp",
        "dep-db",
        "127.0.0.1:5432",
    )
    assert not db.has_ledger and db.placeholder == "dep.db.address"
    (phase,) = scenario.phases
    assert phase.toxics[0].type == "latency" and phase.toxics[0].latency == 0.2
    assert phase.fault.type == "healthy" and phase.faulty  # no HTTP fault, yet it breaks
    assert phase.label == "tcp latency"
    assert scenario.fault_window() == (2.0, 5.0)


def test_localhost_is_spelled_as_given_and_ipv6_bracketed() -> None:
    for given, kept in (("localhost:6379", "localhost:6379"), ('"[::1]:6379"', "[::1]:6379")):
        scenario = load_scenario_text(BASE.replace("127.0.0.1:5432", given), "s.yaml").scenario
        assert scenario.dependencies["db"].tcp == kept


@pytest.mark.parametrize(
    ("address", "said"),
    [("10.0.0.7:5432", "only loopback addresses are allowed"),
     ("db.internal:5432", "only loopback addresses are allowed"),
     ("127.0.0.1", "expected HOST:PORT"),
     ("127.0.0.1:0", "port out of range")],
)  # fmt: skip
def test_the_upstream_must_be_a_loopback_host_and_port(address: str, said: str) -> None:
    (problem,) = problems_of(BASE.replace("127.0.0.1:5432", address))
    assert problem.startswith("s.yaml:7:10: dependencies.db.tcp: ")
    assert said in problem and "traffic stays on this machine" in problem


def test_http_keys_on_a_tcp_dependency_are_refused() -> None:
    text = BASE.replace(
        "    tcp: 127.0.0.1:5432\n", "    tcp: 127.0.0.1:5432\n    forward: http://127.0.0.1:9\n"
    )
    (problem,) = problems_of(text)
    assert "dependencies.db: " in problem and "not HTTP calls: drop forward" in problem


def test_a_url_placeholder_names_no_tcp_dependency() -> None:
    (problem,) = problems_of(BASE.replace("{dep.db.address}", "{dep.db.url}"))
    assert problem.startswith("s.yaml:12:5: builds.app: {dep.db.url}: 'db' is a TCP dependency")
    assert "{dep.db.address}, {dep.db.host}, {dep.db.port}" in problem


def test_an_unknown_part_is_an_unknown_placeholder() -> None:
    (problem,) = problems_of(BASE.replace("{dep.db.port}", "{dep.db.socket}"))
    assert "unknown placeholder {dep.db.socket}" in problem
    assert "{dep.NAME.url|address|host|port}" in problem


def test_a_tcp_dependency_no_build_points_at_is_named_by_its_address() -> None:
    text = BASE.replace(
        '    env: {DB: "jdbc:postgresql://{dep.db.address}/app", H: "{dep.db.host}", '
        'P: "{dep.db.port}"}\n',
        "",
    )
    (problem,) = problems_of(text)
    assert "no build points at dependency 'db'" in problem and '"{dep.db.address}"' in problem


def test_an_http_dependency_gives_address_host_and_port_too() -> None:
    text = BASE.replace("    tcp: 127.0.0.1:5432\n", "    forward: http://127.0.0.1:9000\n")
    text = text.replace("toxics: [{type: latency, latency: 200ms}]", "fault: {type: timeout}")
    scenario = load_scenario_text(text, "s.yaml").scenario
    assert scenario.played()[0].api == "forward"
    values = {"dep.db.address": "127.0.0.1:4000", "dep.db.host": "127.0.0.1", "dep.db.port": "4000"}
    assert fill("jdbc:postgresql://{dep.db.address}/app", values) == (
        "jdbc:postgresql://127.0.0.1:4000/app"
    )


def test_http_faults_on_a_tcp_phase_and_toxics_on_an_http_one_are_refused() -> None:
    (problem,) = problems_of(
        BASE.replace("toxics: [{type: latency, latency: 200ms}]", "fault: {type: timeout}")
    )
    assert "dependencies.db.phases.0.fault: 'db' is a TCP dependency (tcp:)" in problem
    assert "not HTTP faults" in problem
    http = BASE.replace("    tcp: 127.0.0.1:5432\n", "    forward: http://127.0.0.1:9000\n")
    (problem,) = problems_of(http)
    assert "dependencies.db.phases.0.toxics: toxics are a TCP dependency's faults" in problem


def test_a_tcp_phase_has_no_blips_and_no_two_toxics_of_a_type_on_a_stream() -> None:
    blips = BASE.replace("duration: 3s,", "duration: 3s, repeat: {every: 1s, for: 200ms},")
    (problem,) = problems_of(blips)
    assert "dependencies.db.phases.0.repeat: " in problem and "several short phases" in problem
    two = BASE.replace(
        "[{type: latency, latency: 200ms}]",
        "[{type: latency, latency: 200ms}, {type: latency, latency: 1s, stream: both}]",
    )
    (problem,) = problems_of(two)
    assert "two latency toxics on the downstream stream" in problem
    both = BASE.replace(
        "toxics: [{type: latency, latency: 200ms}]",
        "fault: {type: timeout}, toxics: [{type: latency, latency: 200ms}]",
    )
    assert any("not both" in p for p in problems_of(both))


def test_a_tcp_phase_shares_the_run_time_line_with_the_other_dependencies() -> None:
    text = BASE.replace(
        "builds:",
        "  visits:\n"
        "    routes: [{request: {path: /v}, response: {body: ok}}]\n"
        "    phases: [{name: visits-hang, start: 4s, duration: 2s, fault: {type: timeout}}]\n"
        "builds:",
    ).replace('P: "{dep.db.port}"', 'P: "{dep.db.port}", V: "{dep.visits.url}"')
    (problem,) = problems_of(text)
    assert "phase 'visits-hang' of 'visits' overlaps phase 'db-slow' of 'db'" in problem
    apart = load_scenario_text(text.replace("start: 4s", "start: 6s"), "s.yaml").scenario
    assert [p.name for p in apart.phases] == ["db-slow", "visits-hang"]
    assert apart.fault_window() == (2.0, 8.0)
    assert apart.phase_dependency("db-slow") == "db"
