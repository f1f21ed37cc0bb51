"""What a build kind can do is declared on the kind and read from there: every kind declares
the language ``harness tune`` recommends it in and how ``harness simulate`` models it, every
declared language is rendered, and neither reader guesses a kind from its keys (a docker
build was once recommended as a shop's ``resilience4j:`` block)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from harness.run.kinds.registry import KINDS
from harness.scenario.builds import SETTINGS, BuildSettings, kind_settings
from harness.scenario.builds.base import Recommendation, SimulatorModel
from harness.scenario.loader import load_scenario_text
from harness.simulate.services import NotModelled, service_of
from harness.tune.candidates import Candidate
from harness.tune.recommend import recommended_config, render

BUILDS: dict[str, tuple[dict[str, Any], list[str]]] = {
    "shop": (
        {"profile": "retry-circuit-breaker", "resilience4j": {"retry": {"max-attempts": 2}}},
        ["resilience4j.retry.max-attempts"],
    ),
    "command": (
        {
            "command": ["node", "server.js"],
            "cwd": "targets/node-gateway",
            "env": {"PORT": "{port}", "CB_TIMEOUT_MS": "800"},
            "simulate-as": "node-gateway",
        },
        ["env.CB_TIMEOUT_MS"],
    ),
    "jar": (
        {
            "jar": "app.jar",
            "properties": {"server.tomcat.threads.max": 16},
            "simulate-as": "spring-shop",
        },
        ["properties.server.tomcat.threads.max"],
    ),
    "docker": (
        {"docker": {"image": "svc:1", "env": {"PORT": "{port}", "N": "4"}}},
        ["docker.env.N"],
    ),
    "url": ({"url": "http://127.0.0.1:9000"}, ["url"]),
}
"""One build of each kind and the axis a sweep would vary on it (a jar or command build that
says which of our reference services it runs, which the simulator models)."""

SCENARIO = """\
name: kinds
duration: 5s
pg: {port: 18080}
traffic:
  x: {path: /x, rate: 1}
"""


def _candidate(kind: str) -> Candidate:
    build, axes = BUILDS[kind]
    return Candidate(kind, "grid", {axis: None for axis in axes}, build)


def _validated(kind: str) -> BuildSettings:
    scenario = yaml.safe_load(SCENARIO) | {"builds": {kind: BUILDS[kind][0]}}
    build = load_scenario_text(yaml.safe_dump(scenario)).scenario.builds[kind]
    assert isinstance(build, BuildSettings)
    return build


def test_every_kind_declares_its_language_and_its_model() -> None:
    kinds = {settings.kind for settings in SETTINGS}
    assert kinds == set(BUILDS), "add a build of the new kind to BUILDS"
    assert {kind.settings for kind in KINDS} <= set(SETTINGS)
    for settings in SETTINGS:
        assert isinstance(getattr(settings, "recommendation", None), Recommendation), (
            f"{settings.__name__} declares no recommendation (harness tune's language)"
        )
        assert isinstance(getattr(settings, "simulator_model", None), SimulatorModel), (
            f"{settings.__name__} declares no simulator_model"
        )
        assert kind_settings(BUILDS[settings.kind][0]) is settings


@pytest.mark.parametrize("language", list(Recommendation), ids=lambda r: r.value)
def test_every_language_is_rendered(language: Recommendation) -> None:
    for settings in SETTINGS:
        if settings.recommendation is language:
            build, axes = BUILDS[settings.kind]
            highlighting, text = render(language, build, axes)
            assert highlighting in ("yaml", "sh") and text.strip(), settings.kind
            return
    pytest.fail(f"no kind declares {language}: remove it or declare it on its kind")


@pytest.mark.parametrize("kind", sorted(BUILDS))
def test_each_kind_is_recommended_in_its_declared_language(kind: str) -> None:
    candidate = _candidate(kind)
    declared = kind_settings(candidate.build).recommendation
    assert recommended_config(candidate, BUILDS[kind][1]) == render(
        declared, candidate.build, BUILDS[kind][1]
    )


def test_builds_of_no_language_of_their_own_are_their_swept_keys() -> None:
    assert recommended_config(_candidate("docker"), ["docker.env.N"]) == (
        "yaml",
        "docker.env.N: '4'\n",
    )
    language, text = recommended_config(_candidate("url"), ["url"])
    assert (language, text) == ("yaml", "url: http://127.0.0.1:9000\n")
    assert "resilience4j" not in text


@pytest.mark.parametrize("kind", sorted(BUILDS))
def test_the_simulator_models_each_kind_as_it_declares(kind: str) -> None:
    build = _validated(kind)
    model = type(build).simulator_model
    if model is SimulatorModel.NONE:
        with pytest.raises(NotModelled, match=f"a {kind} build has no model"):
            service_of(kind, build)
    else:
        assert service_of(kind, build).kind == kind


@pytest.mark.parametrize("kind", ["command", "jar"])
def test_a_build_that_does_not_say_it_is_ours_is_not_modelled_as_ours(kind: str) -> None:
    """A kind's model is of our reference service (``SimulatorModel``), not of every build
    of the kind: without ``simulate-as`` the build is another service (issue 30, item 6)."""
    build = _validated(kind).model_copy(update={"simulate_as": None})
    with pytest.raises(NotModelled, match=f"a {kind} build has no model unless it says"):
        service_of(kind, build)
