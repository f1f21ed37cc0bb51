"""Starter scenarios and the scenario's JSON Schema (``harness.scenario.starter``)."""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from harness.core.durations import parse_duration
from harness.core.errors import InputError
from harness.scenario.builds import CommandBuild, DockerBuild, ShopBuild, UrlBuild
from harness.scenario.loader import load_scenario_text
from harness.scenario.starter import (
    PG_PORT,
    SCHEMA_DIALECT,
    SCHEMA_FILE,
    STARTER_PRESETS,
    scenario_json_schema,
    schema_text,
    starter_kind,
    starter_name,
    starter_scenario,
)

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "scenarios").glob("*.yaml"))

KIND_OPTIONS: dict[str, dict[str, str]] = {
    "default": {},
    "command": {"command": "java -jar build/libs/app.jar --server.port={port}"},
    "image": {"image": "shop:before"},
    "url": {"url": "http://127.0.0.1:8080"},
}
COMBINATIONS = list(itertools.product(STARTER_PRESETS, KIND_OPTIONS))

MINIMAL: dict[str, Any] = {
    "name": "x",
    "duration": "60s",
    "traffic": {"a": {"path": "/a", "rate": 1}},
    "builds": {"b": {"profile": "retry-only"}},
}


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = scenario_json_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)  # a well-formed schema of the dialect it names
    return cls(schema)


def errors(validator: jsonschema.protocols.Validator, doc: object) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]


def with_(path: tuple[str | int, ...], value: object) -> dict[str, Any]:
    """``MINIMAL`` with the value at ``path`` set."""
    doc = copy.deepcopy(MINIMAL)
    node: Any = doc
    for key in path[:-1]:
        node = node.setdefault(key, {}) if isinstance(key, str) else node[key]
    node[path[-1]] = value
    return doc


# ---------------------------------------------------------------- the schema


def test_schema_names_its_dialect_and_title() -> None:
    schema = scenario_json_schema()
    assert schema["$schema"] == SCHEMA_DIALECT
    assert schema["title"] == "harness scenario"
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"name", "duration", "traffic", "builds"}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_schema_accepts_the_shipped_scenarios(
    validator: jsonschema.protocols.Validator, path: Path
) -> None:
    assert errors(validator, yaml.safe_load(path.read_text())) == []


def test_there_are_shipped_scenarios() -> None:
    assert len(SHIPPED) >= 3


def test_schema_accepts_the_minimal_scenario(validator: jsonschema.protocols.Validator) -> None:
    assert errors(validator, MINIMAL) == []
    load_scenario_text(yaml.safe_dump(MINIMAL))  # and so does the model


@pytest.mark.parametrize("spelling", ["30s", 5, 2.5, "500ms", "1m30s", "1m 30s", "3m", "1h", "45"])
def test_schema_accepts_durations_as_text_or_seconds(
    validator: jsonschema.protocols.Validator, spelling: object
) -> None:
    for path in [("duration",), ("warmup",), ("traffic", "a", "timeout"), ("drain",)]:
        assert errors(validator, with_(path, spelling)) == [], path


@pytest.mark.parametrize("spelling", ["30 parsecs", "s30", "fast", "", -1, True, None, [30]])
def test_schema_rejects_what_is_no_duration(
    validator: jsonschema.protocols.Validator, spelling: object
) -> None:
    assert errors(validator, with_(("duration",), spelling))


def test_schema_keeps_a_durations_bounds_for_numbers(
    validator: jsonschema.protocols.Validator,
) -> None:
    # Endpoint.timeout: gt=0, le=600; drain (Duration | None): ge=0, le=600.
    assert errors(validator, with_(("traffic", "a", "timeout"), 0))
    assert errors(validator, with_(("traffic", "a", "timeout"), 601))
    assert errors(validator, with_(("drain",), 601))
    assert errors(validator, with_(("drain",), -1))
    assert errors(validator, with_(("drain",), None)) == []


def test_no_pydantic_only_bound_keywords_are_left() -> None:
    found: list[str] = []

    def walk(node: object, where: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("gt", "ge", "lt", "le") and not where.endswith("/properties"):
                    found.append(f"{where}/{key}")
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}/{i}")

    walk(scenario_json_schema(), "")
    assert found == []


@pytest.mark.parametrize(
    "spelling",
    ["30s", "1m30s", " 2m ", "1m 30s", "0.5s", "45", "1.5h", "30 s", "30S", "30sec", "1d",
     "3m2", "m", ".5s", "5.s", "1e3", "-5s", "30s30s"],
)  # fmt: skip
def test_duration_pattern_agrees_with_the_parser(
    validator: jsonschema.protocols.Validator, spelling: str
) -> None:
    try:
        parse_duration(spelling)
        parsed = True
    except ValueError:
        parsed = False
    assert (errors(validator, with_(("duration",), spelling)) == []) == parsed


def test_schema_rejects_an_unknown_key(validator: jsonschema.protocols.Validator) -> None:
    assert errors(validator, with_(("durationn",), "60s"))
    assert errors(validator, with_(("traffic", "a", "rates"), 5))
    assert errors(validator, with_(("builds", "b", "workerz"), 5))
    assert errors(validator, with_(("builds", "b"), {"command": "x {port}", "workers": 5}))


def test_schema_rejects_a_wrong_type(validator: jsonschema.protocols.Validator) -> None:
    assert errors(validator, with_(("traffic", "a", "rate"), "fast"))
    assert errors(validator, with_(("seed",), "forty-two"))
    assert errors(validator, with_(("traffic", "a", "method"), "FETCH"))
    assert errors(validator, with_(("builds", "b", "profile"), "retry-forever"))
    assert errors(validator, with_(("traffic",), ["a"]))


def test_schema_accepts_commands_and_env_as_the_model_does(
    validator: jsonschema.protocols.Validator,
) -> None:
    build = {
        "command": "node server.js",  # a string, split like a shell would
        "env": {"PORT": "{port}", "THREADS": 200, "DEBUG": False, "RATIO": 0.5},
        "metrics": {"preset": "opossum", "port": "{metrics_port}"},
    }
    doc = with_(("builds", "b"), build)
    assert errors(validator, doc) == []
    load_scenario_text(yaml.safe_dump(doc))
    as_list = with_(("builds", "b"), {**build, "command": ["node", "server.js", 8080]})
    assert errors(validator, as_list) == []
    load_scenario_text(yaml.safe_dump(as_list))


def test_schema_tells_the_build_kinds_apart(validator: jsonschema.protocols.Validator) -> None:
    docker = {"docker": {"image": "shop:after", "env": {"PORT": "{port}"}}}
    url = {"url": "http://127.0.0.1:8080", "metrics-url": "http://127.0.0.1:8081/metrics"}
    assert errors(validator, with_(("builds", "b"), docker)) == []
    assert errors(validator, with_(("builds", "b"), url)) == []
    assert errors(validator, with_(("builds", "b"), {**docker, "url": "http://127.0.0.1:1"}))


def test_schema_text_is_the_schema_as_json() -> None:
    import json

    text = schema_text()
    assert text.endswith("}\n")
    assert json.loads(text) == scenario_json_schema()


# ---------------------------------------------------------------- starters


def starter(preset: str, kind: str, **extra: str) -> str:
    return starter_scenario(preset, **KIND_OPTIONS[kind], **extra)


@pytest.mark.parametrize(("preset", "kind"), COMBINATIONS)
def test_every_starter_validates(
    validator: jsonschema.protocols.Validator, preset: str, kind: str
) -> None:
    text = starter(preset, kind)
    loaded = load_scenario_text(text, "starter.yaml", base_dir=ROOT)
    assert errors(validator, yaml.safe_load(text)) == []
    s = loaded.scenario
    assert text.splitlines()[0] == f"# yaml-language-server: $schema={SCHEMA_FILE}"
    assert list(s.builds) == ["before", "after"]
    assert [p.name for p in s.pg.phases] == ["baseline", "outage", "recovery"]
    assert [p.fault.type for p in s.pg.phases] == ["healthy", "timeout", "healthy"]
    # one endpoint calls the dependency, one does not (the protected one)
    assert sorted(e.calls_gateway for e in s.traffic.values()) == [False, True]
    assert len(s.gate_specs()) >= 3
    expected = {
        "default": ShopBuild if preset == "shop" else CommandBuild,
        "command": CommandBuild,
        "image": DockerBuild,
        "url": UrlBuild,
    }[kind]
    for build in s.builds.values():
        assert isinstance(build, expected)
        if not isinstance(build, ShopBuild):
            assert build.metrics.preset == preset
    # every line is commented or short enough to read
    assert all(len(line) <= 100 for line in text.splitlines())


def test_command_starter_fills_port_and_gateway() -> None:
    s = load_scenario_text(starter("opossum", "command")).scenario
    build = s.builds["before"]
    assert isinstance(build, CommandBuild)
    assert build.command[:3] == ["java", "-jar", "build/libs/app.jar"]
    assert build.env["PORT"] == "{port}" and build.env["PG_URL"] == "{pg_url}"
    assert build.health.path == "/health"
    after = s.builds["after"]
    assert isinstance(after, CommandBuild)
    assert (build.env["PROFILE"], after.env["PROFILE"]) == ("before", "after")


def test_spring_boot_starter_speaks_actuator() -> None:
    s = load_scenario_text(starter("spring-boot", "default")).scenario
    build = s.builds["before"]
    assert isinstance(build, CommandBuild)
    assert build.command[:2] == ["java", "-jar"]
    assert build.env["SERVER_PORT"] == "{port}"
    assert (build.health.path, build.metrics.path) == ("/actuator/health", "/actuator/prometheus")


def test_a_command_with_quotes_and_braces_survives() -> None:
    command = 'sh -c "exec ./serve --port {port} --name \\"a b\\"" # é'
    s = load_scenario_text(starter_scenario("opossum", command=command)).scenario
    build = s.builds["after"]
    assert isinstance(build, CommandBuild)
    assert build.command == ["sh", "-c", 'exec ./serve --port {port} --name "a b"', "#", "é"]


def test_image_starter_derives_the_after_tag() -> None:
    s = load_scenario_text(starter("shop", "image")).scenario
    images = [b.docker.image for b in s.builds.values() if isinstance(b, DockerBuild)]
    assert images == ["shop:before", "shop:after"]
    s = load_scenario_text(starter_scenario("opossum", image="registry:5000/gw")).scenario
    images = [b.docker.image for b in s.builds.values() if isinstance(b, DockerBuild)]
    assert images == ["registry:5000/gw", "registry:5000/gw"]


def test_url_starter_fixes_the_gateway_port_and_says_where() -> None:
    text = starter("spring-boot", "url")
    s = load_scenario_text(text).scenario
    assert s.pg.port == PG_PORT
    assert f"http://127.0.0.1:{PG_PORT}" in text
    urls = [b.url for b in s.builds.values() if isinstance(b, UrlBuild)]
    assert urls == ["http://127.0.0.1:8080", "http://127.0.0.1:8081"]
    # a url build must be loopback: a remote one is the validator's to refuse
    with pytest.raises(InputError, match="not on this machine"):
        load_scenario_text(starter_scenario("shop", url="http://10.1.2.3:8080"))


def test_opossum_starter_has_no_gate_on_an_unmeasured_gauge() -> None:
    def gates(preset: str) -> list[str]:
        return [g.expr for g in load_scenario_text(starter(preset, "url")).scenario.gate_specs()]

    assert not any("busy_workers" in g for g in gates("opossum"))
    assert any("busy_workers" in g for g in gates("spring-boot"))


def test_schema_ref_and_name_are_used() -> None:
    text = starter_scenario("shop", name="checkout", schema_ref="../schemas/h.json")
    assert text.startswith("# yaml-language-server: $schema=../schemas/h.json\n")
    assert load_scenario_text(text).scenario.name == "checkout"


def test_starter_kind_refuses_two_kinds_and_unknown_presets() -> None:
    with pytest.raises(InputError, match="--command and --url"):
        starter_kind("shop", command="x", url="http://127.0.0.1:1")
    with pytest.raises(InputError, match="unknown preset"):
        starter_kind("django")
    with pytest.raises(InputError, match="--image is empty"):
        starter_kind("shop", image=" ")
    assert starter_kind("shop") == "shop"
    assert starter_kind("opossum") == "command"


@pytest.mark.parametrize(
    ("stem", "name"),
    [("checkout", "checkout"), ("scenario", "my-service"), ("my service!", "my-service"),
     ("..", "my-service"), ("-rf", "rf"), ("a..b", "a.b"), ("ü", "my-service")],
)  # fmt: skip
def test_starter_name_is_a_safe_name(stem: str, name: str) -> None:
    assert starter_name(stem) == name
    load_scenario_text(starter_scenario("shop", name=starter_name(stem)))
