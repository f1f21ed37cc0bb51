"""The registry is the one list of build kinds: every kind sub-package is in it, every
scenario kind is run by one of its kinds, and the orchestration never names a kind."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import harness.run.kinds
from harness.run.caps.leftovers import CGROUPS
from harness.run.kinds.docker.cleanup import CONTAINERS
from harness.run.kinds.registry import KINDS, kind_of, leftovers_named, leftovers_of
from harness.scenario.builds import SETTINGS
from harness.scenario.loader import load_scenario_text

ROOT = Path(__file__).resolve().parents[2]

ORCHESTRATION = [
    *sorted((ROOT / "harness" / "run").glob("*.py")),
    *sorted(p for p in (ROOT / "harness" / "cli").glob("*.py") if p.name != "scenario.py"),
]
"""Modules that run builds of every kind: they ask a kind what it can do, never its name.
(``harness/cli/scenario.py`` is left out: ``harness init``'s stacks are metric presets,
one of them named ``shop``.)"""

SCENARIO = """\
name: kinds
duration: 5s
pg: {port: 18080}
traffic:
  x: {path: /x, rate: 1}
builds:
  alone: {profile: retry-only}
  scaled: {profile: retry-only, replicas: 2}
  cmd: {command: "serve --port {port}"}
  boot: {jar: app.jar, properties: {shop.resilience: retry-only}}
  box: {docker: {image: "svc:1", env: {PORT: "{port}"}}}
  there: {url: "http://127.0.0.1:9000"}
"""


def _kind_packages() -> list[str]:
    path = harness.run.kinds.__path__
    return sorted(m.name for m in pkgutil.iter_modules(path) if m.ispkg)


def test_every_kind_package_is_registered_once() -> None:
    packages = _kind_packages()
    assert packages == sorted(kind.name for kind in KINDS)
    for name in packages:
        module = importlib.import_module(f"harness.run.kinds.{name}.target")
        assert module.KIND in KINDS, f"harness.run.kinds.{name}.target.KIND is not in KINDS"


def test_every_scenario_kind_is_run_and_every_kind_runs_a_scenario_kind() -> None:
    assert {kind.settings for kind in KINDS} == set(SETTINGS)


def test_each_build_is_run_by_exactly_one_kind() -> None:
    builds = load_scenario_text(SCENARIO).scenario.builds
    picked = {name: kind_of(build).name for name, build in builds.items()}
    assert picked == {
        "alone": "shop",
        "scaled": "replicas",
        "cmd": "command",
        "boot": "jar",
        "box": "docker",
        "there": "url",
    }
    for build in builds.values():
        assert sum(isinstance(build, k.settings) and k.runs(build) for k in KINDS) == 1


def test_docker_builds_leave_containers_and_started_builds_cgroups() -> None:
    """A container may outlive a kill -9; so may the cgroup of a build whose processes the
    harness starts (``harness.run.caps``); a url build leaves nothing."""
    builds = load_scenario_text(SCENARIO).scenario.builds
    assert leftovers_of(builds.values()) == [CGROUPS, CONTAINERS]
    assert leftovers_of(b for n, b in builds.items() if n != "box") == [CGROUPS]
    assert leftovers_of([builds["there"]]) == []
    assert leftovers_named(["shop", "docker", "docker", "url"]) == [CGROUPS, CONTAINERS]
    assert leftovers_named(["url"]) == []


def _string_literals(path: Path) -> set[str]:
    """Every string constant of a module but its docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    }


@pytest.mark.parametrize("path", ORCHESTRATION, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_orchestration_never_names_a_kind(path: Path) -> None:
    names = {kind.name for kind in KINDS} | {kind.settings.kind for kind in KINDS}
    named = sorted(names & _string_literals(path))
    assert not named, f"{path.relative_to(ROOT)} matches kind(s) {named} by name: ask the Kind"
