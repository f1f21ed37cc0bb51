"""Build kinds in a scenario: shop, command, docker and url, and what each refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import ScenarioError
from harness.scenario.builds import CommandBuild, DockerBuild, ShopBuild, UrlBuild
from harness.scenario.builds.service import PRESET_NAMES
from harness.scenario.loader import load_scenario, load_scenario_text
from harness.scenario.placeholders import PLACEHOLDERS, fill, placeholders_in
from harness.scenario.schema import Scenario

HEAD = """\
name: t
duration: 10s
traffic:
  x: {path: /x, rate: 1}
"""


def _builds(text: str, head: str = HEAD) -> dict[str, object]:
    return dict(load_scenario_text(head + text).scenario.builds)


def _problems(text: str, head: str = HEAD) -> list[str]:
    with pytest.raises(ScenarioError) as caught:
        load_scenario_text(head + text, "s.yaml")
    return [str(p) for p in caught.value.problems]


def test_a_shop_build_is_what_it_was() -> None:
    builds = _builds(
        "builds:\n  a: {profile: retry-only}\n  b: {target: shop, profile: retry-circuit-breaker}\n"
    )
    a, b = builds["a"], builds["b"]
    assert isinstance(a, ShopBuild) and isinstance(b, ShopBuild)
    assert (a.kind, a.target, a.profile, a.workers) == ("shop", "shop", "retry-only", 200)
    assert b.resilience4j.circuitbreaker is not None  # defaults filled, as before


def test_a_command_build_with_every_default() -> None:
    (build,) = _builds(
        "builds:\n  c:\n    command: node server.js --port {port}\n"
        "    env: {PG_URL: '{pg_url}', N: 5, FLAG: true}\n"
    ).values()
    assert isinstance(build, CommandBuild)
    assert build.command == ["node", "server.js", "--port", "{port}"]
    assert build.env == {"PG_URL": "{pg_url}", "N": "5", "FLAG": "true"}
    assert (build.cwd, build.port, build.kind, build.profile) == (".", None, "command", "command")
    assert (build.health.path, build.health.status, build.health.timeout) == ("/health", 200, 60)
    m = build.metrics
    assert (m.path, m.port, m.preset, m.map, m.breaker) == ("/metrics", None, "none", {}, None)
    assert not build.metrics_on_side_port


def test_a_command_string_is_split_like_a_shell_would() -> None:
    (build,) = _builds(
        """builds:\n  c: {command: "java -jar 'my app.jar' --server.port={port}"}\n"""
    ).values()
    assert isinstance(build, CommandBuild)
    assert build.command == ["java", "-jar", "my app.jar", "--server.port={port}"]


def test_metrics_follow_the_command_to_a_side_port() -> None:
    builds = _builds(
        "builds:\n"
        "  side: {command: [s, '{port}', '{metrics_port}']}\n"
        "  main: {command: [s, '{port}', '{metrics_port}'], metrics: {port: '{port}'}}\n"
        "  fixed: {command: [s, '{port}'], metrics: {port: 9404, path: /actuator/prometheus}}\n"
    )
    assert [b.metrics_on_side_port for b in builds.values()] == [True, False, False]  # type: ignore[attr-defined]


def test_placeholders_are_filled_and_braces_escaped() -> None:
    values = {"port": "8080", "pg_url": "http://127.0.0.1:1"}
    assert fill("--port={port} {pg_url}/x", values) == "--port=8080 http://127.0.0.1:1/x"
    assert fill('{{"port": {port}}}', values) == '{"port": 8080}'
    assert placeholders_in('{{"a": {port}}} {build}') == ["port", "build"]
    assert PLACEHOLDERS == ("build", "metrics_port", "pg_url", "port", "run_dir")


def test_placeholder_misuse_is_located() -> None:
    problems = _problems(
        "builds:\n"
        "  c:\n"
        "    command: [s, '{port}', '{prot}']\n"
        "    env:\n"
        "      '{port}': x\n"
        "      PG: {pg_url}\n"
    )
    assert problems == [
        "s.yaml:7:28: builds.c.command.2: unknown placeholder {prot}; known: {build}, "
        "{metrics_port}, {pg_url}, {port}, {run_dir}, {dep.NAME.url|address|host|port} "
        "(write {{ and }} for literal braces) (got '{prot}')",
        "s.yaml:9:17: builds.c.env.{port}: environment variable name '{port}' uses a "
        "placeholder; placeholders are filled in values, not in names",
        's.yaml:10:11: builds.c.env.PG: write "{pg_url}" in quotes: unquoted, YAML reads '
        "{pg_url} as a mapping",
    ]


def test_a_placeholder_is_not_filled_in_cwd() -> None:
    (problem,) = _problems("builds:\n  c: {command: [s, '{port}'], cwd: '{run_dir}'}\n")
    assert "builds.c.cwd: placeholders are filled in command and env only" in problem


def test_a_started_service_must_be_told_its_port_or_have_a_fixed_one() -> None:
    (problem,) = _problems("builds:\n  c: {command: node server.js}\n")
    assert problem.startswith("s.yaml:6:6: builds.c: the service is never told where to listen")
    (build,) = _builds("builds:\n  c: {command: java -jar app.jar, port: 8080}\n").values()
    assert isinstance(build, CommandBuild) and build.port == 8080


def test_a_build_is_exactly_one_kind() -> None:
    problems = _problems(
        "builds:\n"
        "  two: {profile: retry-only, command: [s, '{port}']}\n"
        "  none: {workers: 3}\n"
        "  three: {command: [s, '{port}'], url: 'http://127.0.0.1:1'}\n"
    )
    assert problems == [
        "s.yaml:6:8: builds.two: a build is exactly one kind, but this one gives profile and "
        "command: keep one",
        "s.yaml:7:9: builds.none: a build needs one of: profile (the reference shop), command "
        "(a process the harness starts), jar (a Spring Boot jar it runs), docker (an image it "
        "runs) or url (a service already running)",
        "s.yaml:8:10: builds.three: a build is exactly one kind, but this one gives command and "
        "url: keep one",
    ]


def test_an_environment_name_yaml_reads_as_a_boolean_gets_a_hint() -> None:
    (problem,) = _problems("builds:\n  c: {command: [s, '{port}'], env: {true: 1}}\n")
    assert "YAML read this variable's name as the boolean true" in problem


def test_an_environment_name_yaml_1_1_read_as_a_boolean_is_its_name() -> None:
    # YAML 1.2: ON, off, yes are text; a key is a name, so it is what was written.
    (build,) = _builds("builds:\n  c: {command: [s, '{port}'], env: {ON: 1, off: x}}\n").values()
    assert isinstance(build, CommandBuild) and build.env == {"ON": "1", "off": "x"}


def test_keys_of_another_kind_are_unknown_at_their_line() -> None:
    (problem,) = _problems("builds:\n  c:\n    command: [s, '{port}']\n    workers: 3\n")
    assert problem.startswith("s.yaml:8:5: builds.c.workers: unknown key")


def test_metrics_settings_are_checked() -> None:
    problems = _problems(
        "builds:\n"
        "  c:\n"
        "    command: [s, '{port}']\n"
        "    metrics:\n"
        "      preset: micrometer\n"
        "      port: '{prot}'\n"
        "      map: {blocked: x, pg_calls: 'circuit{event=fire}'}\n"
    )
    assert [p.split(": ", 2)[1] for p in problems] == [  # in the file's order
        "builds.c.metrics.preset",
        "builds.c.metrics.port",
        "builds.c.metrics.map.blocked",
        "builds.c.metrics.map.pg_calls",
    ]
    assert "'micrometer'" in problems[0]
    assert "'blocked' is not a canonical series" in problems[2]
    assert "expected a double-quoted label value" in problems[3]


def test_a_metrics_map_and_breaker_are_carried() -> None:
    (build,) = _builds(
        "builds:\n"
        "  c:\n"
        "    command: [s, '{port}']\n"
        "    metrics:\n"
        "      preset: spring-boot\n"
        "      map: {busy_workers: 'jetty_threads_busy{pool=\"main\"}'}\n"
        "      breaker: pg\n"
    ).values()
    assert isinstance(build, CommandBuild)
    assert build.metrics.map == {"busy_workers": 'jetty_threads_busy{pool="main"}'}
    assert build.metrics.breaker == "pg"


def test_preset_names_are_the_analysis_presets() -> None:
    from harness.analysis.series import PRESETS

    assert set(PRESET_NAMES) == set(PRESETS)


def test_a_docker_build_runs_an_image_or_builds_one(tmp_path: Path) -> None:
    builds = _builds(
        "builds:\n"
        "  img: {docker: {image: 'shop:after', env: {PORT: '{port}'}}}\n"
        "  built:\n"
        "    docker:\n"
        "      build: {context: ., args: {NODE_VERSION: 20}}\n"
        "      command: node server.js --port {port}\n"
        "    metrics: {preset: opossum}\n"
    )
    img, built = builds["img"], builds["built"]
    assert isinstance(img, DockerBuild) and isinstance(built, DockerBuild)
    assert (img.docker.image, img.docker.network, img.docker.build) == ("shop:after", "host", None)
    assert built.docker.build is not None
    assert (built.docker.build.context, built.docker.build.dockerfile) == (".", "Dockerfile")
    assert built.docker.build.args == {"NODE_VERSION": "20"}
    assert built.docker.command == ["node", "server.js", "--port", "{port}"]


def test_a_docker_build_names_one_image_source_and_maps_ports_only_when_bridged() -> None:
    problems = _problems(
        "builds:\n"
        "  both: {docker: {image: x, build: {context: .}, env: {P: '{port}'}}}\n"
        "  neither: {docker: {env: {P: '{port}'}}}\n"
        "  ports: {docker: {image: x, ports: {8080: '{port}'}}}\n"
    )
    assert [p.split(": ", 2)[1:] for p in problems] == [
        [
            "builds.both.docker",
            "give exactly one of image (an image to run) or build (a folder to build it from)",
        ],
        [
            "builds.neither.docker",
            "give exactly one of image (an image to run) or build (a folder to build it from)",
        ],
        [
            "builds.ports.docker",
            "ports apply with network: bridge only; with host networking the service listens "
            "on the host's ports itself (pass it {port})",
        ],
    ]
    (bridged,) = _builds(
        "builds:\n  b: {docker: {image: x, network: bridge, ports: {8080: '{port}'}}}\n"
    ).values()
    assert isinstance(bridged, DockerBuild) and bridged.docker.ports == {"8080": "{port}"}


def test_folders_are_relative_to_the_scenario_file(tmp_path: Path) -> None:
    (tmp_path / "svc").mkdir()
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "Dockerfile").write_text("FROM scratch\n")
    good = tmp_path / "good.yaml"
    good.write_text(
        HEAD + "builds:\n"
        "  c: {command: [s, '{port}'], cwd: svc}\n"
        "  d: {docker: {build: {context: img}, env: {P: '{port}'}}}\n"
    )
    load_scenario(good, check_folders=True)
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        HEAD + "builds:\n"
        "  c: {command: [s, '{port}'], cwd: nowhere}\n"
        "  d: {docker: {build: {context: svc}, env: {P: '{port}'}}}\n"
        "  e: {docker: {build: {context: gone}, env: {P: '{port}'}}}\n"
    )
    load_scenario(bad)  # a run's own copy is read back without looking for folders
    with pytest.raises(ScenarioError) as caught:
        load_scenario(bad, check_folders=True)
    assert [str(p).split(": ", 2)[1:] for p in caught.value.problems] == [
        ["builds.c.cwd", f"'nowhere' is not a folder (looked for {tmp_path / 'nowhere'})"],
        ["builds.d.docker.build.dockerfile", f"no Dockerfile in {tmp_path / 'svc'}"],
        [
            "builds.e.docker.build.context",
            f"'gone' is not a folder (looked for {tmp_path / 'gone'})",
        ],
    ]


def test_a_url_build_needs_a_fixed_gateway_port() -> None:
    (problem,) = _problems("builds:\n  u: {url: 'http://127.0.0.1:8080'}\n")
    assert problem.startswith("s.yaml:6:12: builds.u.url: a url build needs pg.port:")
    assert "point the service's gateway URL at http://127.0.0.1:N" in problem
    (build,) = _builds(
        "pg: {port: 18089}\nbuilds:\n  u: {url: 'http://localhost:8080/'}\n"
    ).values()
    assert isinstance(build, UrlBuild)
    assert (build.url, build.scrape_url) == (
        "http://localhost:8080",
        "http://localhost:8080/metrics",
    )


def test_a_url_build_is_loopback_only_unless_the_scenario_allows_more() -> None:
    text = (
        "pg: {port: 18089}\n"
        "builds:\n"
        "  u:\n"
        "    url: http://10.0.0.5:8080\n"
        "    metrics-url: http://example.com/metrics\n"
    )
    problems = _problems(text)
    assert [p.split(": ", 2)[1] for p in problems] == ["builds.u.url", "builds.u.metrics-url"]
    assert (
        "only loopback addresses (127.0.0.0/8, ::1, localhost) unless the scenario says "
        in (problems[0])
    )
    # Validation only: no test ever sends traffic off this machine.
    scenario = load_scenario_text(HEAD + "allow-remote: true\n" + text).scenario
    assert scenario.allow_remote


def test_a_url_is_http_with_a_host() -> None:
    problems = _problems(
        "pg: {port: 18089}\nbuilds:\n"
        "  a: {url: 'ftp://127.0.0.1/'}\n"
        "  b: {url: 'http://127.0.0.1:8080/?x=1'}\n"
        "  c: {url: 'http://127.0.0.1:8080', metrics: {port: 9000}}\n"
    )
    assert "expected an http:// or https:// URL with a host" in problems[0]
    assert "no query, fragment or credentials here" in problems[1]
    assert "metrics.port is for builds the harness starts; give metrics-url" in problems[2]


def test_the_json_schema_offers_every_kind() -> None:
    schema = Scenario.model_json_schema(by_alias=True)
    kinds = schema["properties"]["builds"]["additionalProperties"]["oneOf"]
    assert [k["$ref"].rsplit("/", 1)[1] for k in kinds] == [
        "ShopBuild",
        "CommandBuild",
        "JarBuild",
        "DockerBuild",
        "UrlBuild",
    ]


NUL = "\\0"  # YAML's escape in double quotes: a NUL character in the value
_CMD = "    command: [python3, serve.py, '{port}']\n"
_DENV = ', env: {P: "{port}"}'


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (f'    command: [python3, "serve{NUL}.py", "{{port}}"]\n', "command.1"),
        (f'    command: "python3 serve{NUL}.py {{port}}"\n', "command"),
        (f'{_CMD}    env: {{A: "x{NUL}y"}}\n', "env.A"),
        (f'{_CMD}    cwd: "sub{NUL}dir"\n', "cwd"),
        (f'    jar: "app{NUL}.jar"\n', "jar"),
        (f'    jar: app.jar\n    maven: "pro{NUL}ject"\n', "maven"),
        (f'    jar: app.jar\n    java: "ja{NUL}va"\n', "java"),
        (f'    jar: app.jar\n    java-options: ["-Xmx1g{NUL}"]\n', "java-options.0"),
        (f'    jar: app.jar\n    args: [--debug, "--x{NUL}"]\n', "args.1"),
        (f'    jar: app.jar\n    properties: {{a.b: "x{NUL}"}}\n', "properties.a.b"),
        (f'    jar: app.jar\n    properties: {{a: {{b: ["x{NUL}"]}}}}\n', "properties.a.b.0"),
        (f'    jar: app.jar\n    properties: {{"a{NUL}b": 1}}\n', "properties.a\x00b"),
        (f'    docker: {{image: "img{NUL}", env: {{PORT: "{{port}}"}}}}\n', "docker.image"),
        (f'    docker: {{image: i, env: {{PORT: "{{port}}", A: "{NUL}"}}}}\n', "docker.env.A"),
        (f'    docker: {{image: i, command: [s, "{{port}}{NUL}"]}}\n', "docker.command.1"),
        (
            f'    docker: {{build: {{context: "c{NUL}"}}, env: {{PORT: "{{port}}"}}}}\n',
            "docker.build.context",
        ),
        (
            f'    docker: {{build: {{context: c, dockerfile: "D{NUL}"}}{_DENV}}}\n',
            "docker.build.dockerfile",
        ),
        (
            f'    docker: {{build: {{context: c, args: {{V: "1{NUL}"}}}}{_DENV}}}\n',
            "docker.build.args.V",
        ),
    ],
)
def test_a_nul_character_in_what_reaches_a_process_is_refused_at_its_line(
    build: str, field: str
) -> None:
    """A NUL (a ``\\0`` escape) can be in no program argument, environment value or file
    name: refused at its line by validate, never ``ValueError: embedded null byte`` in the
    run (issue 32, item 6)."""
    problems = _problems("builds:\n  a:\n" + build)
    assert len(problems) == 1, problems
    line = 7 + build.count("\n") - 1
    assert problems[0].startswith(f"s.yaml:{line}:"), problems
    assert f"builds.a.{field}:" in problems[0] and "NUL" in problems[0], problems


def test_harness_validate_refuses_a_nul_in_an_environment_value_exit_2(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from harness.cli import app

    path = tmp_path / "s.yaml"
    path.write_text(HEAD + f'builds:\n  a:\n{_CMD}    env: {{A: "x{NUL}y"}}\n')
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert "s.yaml:8:" in result.output and "NUL" in result.output
