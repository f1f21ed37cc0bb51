"""The ``jar`` build kind's settings: defaults, Spring's names as Spring reads them, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.core.errors import ScenarioError
from harness.scenario.builds import JarBuild
from harness.scenario.builds.spring_properties import elements, filled
from harness.scenario.loader import load_scenario, load_scenario_text

HEAD = """\
name: t
duration: 10s
traffic:
  x: {path: /x, rate: 1}
"""


def _builds(text: str) -> dict[str, JarBuild]:
    builds = dict(load_scenario_text(HEAD + text).scenario.builds)
    assert all(isinstance(b, JarBuild) for b in builds.values())
    return builds  # type: ignore[return-value]


def _problems(text: str) -> list[str]:
    with pytest.raises(ScenarioError) as caught:
        load_scenario_text(HEAD + text, "s.yaml")
    return [str(p) for p in caught.value.problems]


def test_a_jar_build_with_every_default_is_actuator_on_the_management_port() -> None:
    (build,) = _builds("builds:\n  a: {jar: app.jar}\n").values()
    assert (build.kind, build.jar, build.maven, build.java) == ("jar", "app.jar", None, "java")
    assert (build.java_options, build.args, build.properties) == ([], [], {})
    h = build.health
    assert (h.path, h.port, h.status, h.timeout) == ("/actuator/health", "{metrics_port}", 200, 180)
    m = build.metrics
    assert (m.path, m.port, m.preset) == ("/actuator/prometheus", "{metrics_port}", "spring-boot")
    assert build.metrics_on_side_port
    told = {"port": "server.port", "metrics_port": "management.server.port"}
    assert build.ports_to_listen() == told


def test_partial_health_and_metrics_keep_the_jar_s_defaults() -> None:
    (build,) = _builds(
        "builds:\n  a: {jar: app.jar, health: {timeout: 300s}, metrics: {breaker: pg}}\n"
    ).values()
    assert (build.health.path, build.health.port, build.health.timeout) == (
        "/actuator/health",
        "{metrics_port}",
        300,
    )
    assert (build.metrics.preset, build.metrics.breaker) == ("spring-boot", "pg")


def test_properties_nested_and_dotted_are_kept_as_written() -> None:
    (build,) = _builds(
        """\
builds:
  a:
    jar: app.jar
    java-options: [-Xmx512m]
    args: [--debug]
    properties:
      pg.base-url: "{pg_url}"
      server.tomcat.threads.max: 200
      resilience4j:
        circuitbreaker:
          instances:
            pgClient:
              sliding-window-size: 10
              ignore-exceptions: [feign.FeignException$FeignClientException]
"""
    ).values()
    assert build.properties["server.tomcat.threads.max"] == 200
    cb = build.properties["resilience4j"]["circuitbreaker"]["instances"]["pgClient"]
    assert cb["ignore-exceptions"] == ["feign.FeignException$FeignClientException"]
    assert build.uses("pg_url")
    values = {"pg_url": "http://127.0.0.1:9"}
    assert filled(build.properties, values)["pg.base-url"] == "http://127.0.0.1:9"


def test_properties_that_are_not_a_mapping_are_refused_at_their_line() -> None:
    problems = _problems("builds:\n  a:\n    jar: app.jar\n    properties: [server.port]\n")
    assert len(problems) == 1
    assert problems[0].startswith("s.yaml:8:")
    assert "builds.a.properties" in problems[0] and "a mapping" in problems[0]


@pytest.mark.parametrize(
    "written",
    [
        "server.port: 8080",
        "server.PORT: 8080",
        "Server.Port: 8080",
        "server.po_rt: 8080",
        "server[port]: 8080",
        "server: {port: 8080}",
        "server: {Port: 8080}",
        "management.server.port: 9",
        "management: {server: {port: 9}}",
        "management.server: {port: 9}",
        "managementServer.port: 9",  # not this one: see below
        "server.address: 0.0.0.0",
        "management.server.address: 0.0.0.0",
        "management.server.ADDRESS: 0.0.0.0",
    ],
)
def test_what_the_harness_sets_is_refused_in_any_spelling_spring_binds(written: str) -> None:
    text = f"builds:\n  a:\n    jar: app.jar\n    properties:\n      {written}\n"
    if written.startswith("managementServer"):
        # one element "managementserver": Spring binds it to nothing the harness sets
        assert _builds(text)
        return
    problems = _problems(text)
    assert len(problems) == 1, problems
    assert problems[0].startswith("s.yaml:9:")
    assert "which the harness sets" in problems[0]


def test_names_that_only_look_like_the_ports_are_spring_s_other_names() -> None:
    assert elements("management.server-port") == ("management", "serverport")
    assert elements("server.tomcat.threads.max") == ("server", "tomcat", "threads", "max")
    assert elements("logging.level[org.Example]") == ("logging", "level", "org.Example")
    (build,) = _builds(
        "builds:\n  a:\n    jar: app.jar\n    properties:\n"
        "      management.server-port: 9\n      server.portal: x\n      local.server.port: 1\n"
    ).values()
    assert len(build.properties) == 3


def test_a_name_given_twice_in_two_spellings_is_refused_at_the_second() -> None:
    problems = _problems(
        "builds:\n  a:\n    jar: app.jar\n    properties:\n"
        "      server.tomcat.threads.max: 200\n"
        "      server:\n        tomcat: {threads: {Max: 50}}\n"
    )
    assert len(problems) == 1
    assert problems[0].startswith("s.yaml:11:")
    assert "already given as server.tomcat.threads.max" in problems[0]


def test_arguments_and_jvm_options_may_not_set_the_ports_either() -> None:
    problems = _problems(
        "builds:\n  a:\n    jar: app.jar\n"
        "    java-options: [-Xmx1g, -Dserver.port=8080]\n"
        "    args: [--debug, --management.server.port=1, '--spring.config.additional-location=x']\n"
    )
    assert len(problems) == 3, problems
    assert "builds.a.java-options.1" in problems[0] and "which the harness sets" in problems[0]
    assert "builds.a.args.1" in problems[1]
    assert "builds.a.args.2" in problems[2] and "the harness passes" in problems[2]


def test_an_unknown_placeholder_in_a_property_is_located() -> None:
    problems = _problems(
        "builds:\n  a:\n    jar: app.jar\n    properties:\n      pg:\n        urls: ['{pg}']\n"
    )
    assert len(problems) == 1 and problems[0].startswith("s.yaml:10:")
    assert "unknown placeholder {pg}" in problems[0]


def test_a_value_yaml_1_1_reads_otherwise_is_refused_as_everywhere() -> None:
    # Spring's SnakeYAML is YAML 1.1: `on` would be true there, "on" here.
    problems = _problems(
        "builds:\n  a:\n    jar: app.jar\n    properties:\n      feature.enabled: on\n"
    )
    assert len(problems) == 1 and problems[0].startswith("s.yaml:9:")


def test_an_anchor_shares_a_properties_block_and_a_merge_key_extends_it() -> None:
    builds = _builds(
        """\
builds:
  before:
    jar: app.jar
    properties: &common
      pg.base-url: "{pg_url}"
      server.tomcat.threads.max: 200
      shop.resilience: retry-only
  after:
    jar: app.jar
    properties:
      <<: *common
      shop.resilience: retry-circuit-breaker
  same:
    jar: app.jar
    properties: *common
"""
    )
    assert builds["same"].properties == builds["before"].properties
    assert builds["after"].properties == {
        "pg.base-url": "{pg_url}",
        "server.tomcat.threads.max": 200,
        "shop.resilience": "retry-circuit-breaker",
    }


def test_a_refused_name_inside_a_shared_block_is_said_at_the_anchor_s_line() -> None:
    problems = _problems(
        """\
builds:
  before:
    jar: app.jar
    properties: &common
      server.port: 1
  after:
    jar: app.jar
    properties: *common
"""
    )
    assert problems and all(p.startswith("s.yaml:9:") for p in problems), problems


def test_the_jar_or_its_maven_project_must_exist(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(HEAD + "builds:\n  a: {jar: app.jar}\n  b: {jar: t/app.jar, maven: proj}\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(scenario, check_folders=True)
    text = [str(p) for p in caught.value.problems]
    assert len(text) == 2
    assert "builds.a.jar" in text[0] and f"looked for {tmp_path / 'app.jar'}" in text[0]
    assert "builds.b.maven" in text[1] and "no pom.xml" in text[1]
    (tmp_path / "app.jar").write_bytes(b"PK")
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "pom.xml").write_text("<project/>")
    assert load_scenario(scenario, check_folders=True)  # a missing jar maven will build is fine


def test_health_port_is_for_builds_the_harness_starts() -> None:
    problems = _problems(
        "builds:\n  u: {url: 'http://127.0.0.1:8080', health: {port: 8081}}\npg: {port: 9000}\n"
    )
    assert any("health.port is for builds the harness starts" in p for p in problems)
    problems = _problems(
        "builds:\n  c: {command: 'app --port {port}', health: {port: '{metrics_port}'}}\n"
    )
    assert any("never told that port" in p for p in problems)


def test_the_written_properties_are_yaml_spring_reads_as_written() -> None:
    """PyYAML writes YAML 1.1, as Spring's SnakeYAML reads it: text that 1.1 would read
    as something else is quoted."""
    (build,) = _builds(
        "builds:\n  a:\n    jar: app.jar\n    properties:\n"
        "      a: 'on'\n      b: '010'\n      c: 1.5\n      d: [x, 'yes']\n"
    ).values()
    assert yaml.safe_load(yaml.safe_dump(build.properties)) == {
        "a": "on",
        "b": "010",
        "c": 1.5,
        "d": ["x", "yes"],
    }


@pytest.mark.parametrize(
    "option",
    ["-jar", "-cp", "-classpath", "--class-path", "--class-path=lib/*", "-m", "--module",
     "--module=app/app.Main"],
)  # fmt: skip
def test_a_java_option_that_changes_what_runs_is_refused_at_its_line(option: str) -> None:
    """``java-options: [-jar, other.jar]`` ran another jar (issue 32, item 11)."""
    problems = _problems(
        f"builds:\n  a:\n    jar: app.jar\n    java-options:\n      - -Xmx1g\n      - '{option}'\n"
        "      - other.jar\n"
    )
    assert len(problems) == 1, problems
    assert problems[0].startswith("s.yaml:10:"), problems
    assert "builds.a.java-options.1" in problems[0] and "jar:" in problems[0]


def test_java_options_that_leave_what_runs_alone_are_kept() -> None:
    (build,) = _builds(
        "builds:\n  a:\n    jar: app.jar\n"
        "    java-options: [-Xmx1g, -XX:+UseG1GC, -Dfoo=bar, --add-opens=java.base/x=ALL-UNNAMED,"
        " -ea, -verbose:gc]\n"
    ).values()
    assert len(build.java_options) == 6


@pytest.mark.parametrize(
    "written",
    [
        "spring.config.import: optional:file:./other.yml",
        "spring.config.import: [a.yml, b.yml]",
        "spring.config.import[0]: a.yml",
        "spring: {config: {import: a.yml}}",
        "spring.config: {import: a.yml}",
        "spring.config.location: file:/etc/app/",
        "spring: {config: {location: file:/etc/app/}}",
        "spring.config.additional-location: file:/etc/app/",
        "spring.config.additionalLocation: file:/etc/app/",
        "spring: {config: {additional-location: file:/etc/app/}}",
        "spring.config.name: other",
        "Spring.Config.Name: other",
        "spring: {config: {name: other}}",
    ],
)
def test_spring_config_names_that_outrank_the_harness_s_file_are_refused(written: str) -> None:
    """What Spring reads its files from, and files imported over the harness's (issue 32,
    item 11), refused as ``server.port`` is."""
    problems = _problems(f"builds:\n  a:\n    jar: app.jar\n    properties:\n      {written}\n")
    assert len(problems) == 1, problems
    assert problems[0].startswith("s.yaml:9:"), problems
    assert "spring.config" in problems[0] and "remove it" in problems[0], problems


def test_spring_config_names_in_arguments_are_refused_too() -> None:
    problems = _problems(
        "builds:\n  a:\n    jar: app.jar\n"
        "    java-options: [-Dspring.config.import=file:x.yml]\n"
        "    args: [--spring.config.location=file:/etc/, --spring.config.name=other]\n"
    )
    assert len(problems) == 3, problems
    assert "java-options.0" in problems[0] and "args.0" in problems[1]
    assert "args.1" in problems[2]


def test_other_spring_config_names_are_kept() -> None:
    (build,) = _builds(
        "builds:\n  a:\n    jar: app.jar\n    properties:\n"
        "      spring.config.activate.on-profile: x\n      spring.application.name: shop\n"
    ).values()
    assert len(build.properties) == 2
