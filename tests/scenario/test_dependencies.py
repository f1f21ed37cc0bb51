"""Named dependencies in a scenario (issue 29): every bad input said at its line before any
load, through the real loader (``harness validate`` reads the same), and the time line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.core.errors import ScenarioError
from harness.scenario.loader import load_scenario, load_scenario_text
from tests.conftest import harness_cmd

HEAD = """\
name: deps
duration: 10s
traffic:
  owner: {path: /owners/1, rate: 5}
"""
OWNERS = """\
  owners:
    routes:
      - request: {method: GET, path: "/api/owners/{id}"}
        response: {body: {id: "{{request.path.id}}"}}
"""
BUILD = """\
builds:
  app:
    command: [svc, "{port}"]
    env: {OWNERS_URL: "{dep.owners.url}"}
"""


def problems(text: str, base_dir: Path | None = None) -> list[str]:
    try:
        load_scenario_text(text, "s.yaml", base_dir=base_dir)
    except ScenarioError as exc:
        return str(exc).splitlines()
    return []


def test_a_scenario_with_named_dependencies_plays_them_and_not_pg() -> None:
    loaded = load_scenario_text(HEAD + "dependencies:\n" + OWNERS + BUILD, "s.yaml")
    s = loaded.scenario
    assert [d.name for d in s.played()] == ["owners"]
    assert not s.has_pg
    assert s.played()[0].ledger_file == "dep-owners-ledger.csv"
    with_pg = load_scenario_text(HEAD + "pg: {}\ndependencies:\n" + OWNERS + BUILD, "s.yaml")
    assert [d.name for d in with_pg.scenario.played()] == ["pg", "owners"]


def test_a_placeholder_naming_no_dependency_and_a_dependency_nobody_calls() -> None:
    text = HEAD + "dependencies:\n" + OWNERS + BUILD.replace("dep.owners.url", "dep.ownres.url")
    said = problems(text)
    assert any("{dep.ownres.url} names no dependency (dependencies: owners)" in p for p in said)
    assert any(
        p.startswith("s.yaml:7:") and "no build points at dependency 'owners'" in p for p in said
    ), said


def test_pg_url_without_pg_is_refused() -> None:
    text = (
        HEAD
        + "dependencies:\n"
        + OWNERS
        + BUILD.replace(
            '{OWNERS_URL: "{dep.owners.url}"}', '{OWNERS_URL: "{dep.owners.url}", PG: "{pg_url}"}'
        )
    )
    assert any("{pg_url} is the payment gateway's URL" in p for p in problems(text))


@pytest.mark.parametrize(
    ("dependency", "said"),
    [
        ("  pg:\n    forward: http://127.0.0.1:9\n", "'pg' is the payment gateway's name"),
        ("  Owners2:\n    forward: http://127.0.0.1:9\n", "lower-case letters"),
        ("  x:\n    phases: []\n", "a dependency needs its API"),
        ("  x:\n    forward: http://10.1.2.3:80\n", "traffic stays on this machine"),
        ("  x:\n    forward: ftp://127.0.0.1:21\n", "is not an http(s) URL"),
    ],
)
def test_bad_dependencies_are_said_at_their_line(dependency: str, said: str) -> None:
    found = problems(HEAD + "dependencies:\n" + OWNERS + dependency + BUILD)
    assert any(said in p for p in found), found
    assert all(p.startswith("s.yaml:") for p in found), found


def test_routes_naming_a_missing_parameter_or_shadowing_are_said_at_the_route() -> None:
    text = HEAD + "dependencies:\n" + OWNERS.replace("request.path.id", "request.path.ownerId")
    found = problems(text + BUILD)
    assert any(
        p.startswith("s.yaml:9:") and "routes.0.response.body.id" in p and "ownerId" in p
        for p in found
    ), found
    text = HEAD + "dependencies:\n" + OWNERS
    text += '      - request: {method: GET, path: "/api/owners/{id}"}\n'
    text += "        response: {status: 500}\n" + BUILD
    found = problems(text)
    assert any("dependencies.owners.routes.1" in p and "never answered" in p for p in found), found


def test_phases_of_two_dependencies_may_not_overlap() -> None:
    text = HEAD + "dependencies:\n" + OWNERS
    text += "    phases: [{name: a, start: 2s, duration: 4s, fault: {type: timeout}}]\n"
    text += "  visits:\n    forward: http://127.0.0.1:9\n"
    text += "    phases: [{name: b, start: 5s, duration: 2s, fault: {type: timeout}}]\n"
    text += BUILD.replace('"{dep.owners.url}"}', '"{dep.owners.url}", V: "{dep.visits.url}"}')
    found = problems(text)
    assert any("phase 'b' of 'visits' overlaps phase 'a' of 'owners'" in p for p in found), found
    fixed = text.replace("start: 5s", "start: 6s")
    s = load_scenario_text(fixed, "s.yaml").scenario
    assert [p.name for p in s.phases] == ["a", "b"]
    assert s.fault_window() == (2.0, 8.0)
    assert s.phase_dependency("b") == "visits"


def test_a_gate_on_a_dependency_that_does_not_exist_is_refused() -> None:
    text = HEAD + "dependencies:\n" + OWNERS + BUILD
    assert problems(text + 'gates: ["app.dependencies.owners.errors == 0"]\n') == []
    found = problems(text + 'gates: ["app.dependencies.ownres.errors == 0"]\n')
    assert any("dependencies.ownres.errors" in p for p in found), found


def test_a_mappings_folder_that_is_not_json_is_said_with_its_file(tmp_path: Path) -> None:
    mappings = tmp_path / "wm" / "mappings"
    mappings.mkdir(parents=True)
    (mappings / "ok.json").write_text(
        json.dumps({"request": {"method": "GET", "url": "/x"}, "response": {"status": 200}})
    )
    (mappings / "broken.json").write_text("{not json")
    text = HEAD + "dependencies:\n  owners:\n    mappings: wm/mappings\n" + BUILD
    (tmp_path / "s.yaml").write_text(text)
    found = problems(text, base_dir=tmp_path)
    assert found[0].startswith("s.yaml:7:") and "dependencies.owners.mappings" in found[0]
    assert any("broken.json" in p and "not a JSON file" in p for p in found), found
    done = subprocess.run(
        harness_cmd("validate", str(tmp_path / "s.yaml")),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 2 and "broken.json" in done.stderr + done.stdout
    assert "Traceback" not in done.stderr
    (mappings / "broken.json").unlink()
    assert load_scenario(tmp_path / "s.yaml", check_folders=True).scenario.dependencies
