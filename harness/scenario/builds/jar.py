"""The ``jar`` kind's settings: a Spring Boot jar run with the build's own Spring properties.

Any Boot jar with Actuator, nothing in it knowing the harness: the builds of one
jar differ by ``properties`` (Spring's names, nested or dotted, pasted verbatim),
which the harness writes to ``<build>/application.yml`` with the ports it picked
and hands over with ``--spring.config.additional-location``. Health and metrics
default to Actuator's on the management port. The names are read as Spring
reads them: ``harness.scenario.builds.spring_properties``. The code that runs it
is ``harness.run.kinds.jar``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BeforeValidator, Field

from harness.core.durations import Duration
from harness.scenario.builds.base import Recommendation, SimulatorModel, YamlPath
from harness.scenario.builds.service import (
    BuildMetrics,
    Health,
    PortChoice,
    PresetName,
    ServiceBuild,
)
from harness.scenario.builds.spring_properties import (
    SetSetting,
    argument_problem,
    leaves,
    property_problems,
    settings_given,
    texts,
)
from harness.scenario.placeholders import Plain, Templated

JVM_START_S = 180.0
"""A JVM's start-up, Spring's context and Tomcat on a loaded machine: the health default."""


class JarHealth(Health):
    """``health:`` of a jar build: Actuator's health on the management port by default."""

    path: str = Field("/actuator/health", pattern=r"^/", max_length=2000)
    timeout: Duration = Field(JVM_START_S, gt=0, le=3600, description="give up (exit 3) after this")
    port: PortChoice | None = Field(
        "{metrics_port}", description='default "{metrics_port}": management.server.port'
    )


class JarMetrics(BuildMetrics):
    """``metrics:`` of a jar build: Actuator's Prometheus endpoint on the management port."""

    path: Annotated[str, Field(pattern=r"^/", max_length=2000)] | None = Field(
        "/actuator/prometheus", description="null: scrape nothing"
    )
    port: PortChoice | None = Field(
        "{metrics_port}", description='default "{metrics_port}": management.server.port'
    )
    preset: PresetName = Field("spring-boot", description="the series names of a known stack")


def _a_mapping(value: object) -> object:
    if value is not None and not isinstance(value, dict):
        raise ValueError(
            "properties are Spring's own names and values, a mapping (server.tomcat.threads.max: "
            f"200, or nested as in application.yml), not {type(value).__name__}"
        )
    return {} if value is None else value


Properties = Annotated[dict[str, Any], BeforeValidator(_a_mapping)]

Path_ = Plain

LAUNCH_OPTIONS = ("-jar", "-cp", "-classpath", "--class-path", "-m", "--module")
"""Java options that choose what ``java`` runs (another jar, a class path, a module): the
harness runs the build's ``jar`` with ``-jar`` itself, after the build's options."""


def _leaves_the_jar_alone(option: str) -> str:
    name = option.split("=", 1)[0] if option.startswith("--") else option
    if name in LAUNCH_OPTIONS:
        raise ValueError(
            f"{option!r} changes what java runs; the harness runs the build's jar itself "
            "(java <java-options> -jar <jar>): give the jar as jar:, and the program's own "
            "arguments in args"
        )
    return option


JavaOption = Annotated[Templated, AfterValidator(_leaves_the_jar_alone)]


class JarBuild(ServiceBuild):
    """A Spring Boot jar the harness starts with ``java -jar`` and the build's properties."""

    kind: ClassVar[str] = "jar"
    recommendation: ClassVar[Recommendation] = Recommendation.SPRING_PROPERTIES
    simulator_model: ClassVar[SimulatorModel] = SimulatorModel.SPRING_SHOP
    jar: Path_ = Field(min_length=1, description="the jar, relative to the scenario file's folder")
    maven: Path_ | None = Field(
        None,
        min_length=1,
        description="a Maven project folder: `mvn -q -B -DskipTests package` runs there first "
        "when the jar is missing or older than its pom.xml or src/",
    )
    java: Path_ = Field("java", min_length=1, description="the java to run: on PATH, or a path")
    java_options: list[JavaOption] = Field(
        default_factory=list, description="before -jar (-Xmx512m ...)"
    )
    args: list[Templated] = Field(default_factory=list, description="after the jar")
    properties: Properties = Field(
        default_factory=dict,
        description="Spring properties, nested or dotted; placeholders filled in values",
    )
    health: JarHealth = Field(default_factory=JarHealth)
    metrics: JarMetrics = Field(default_factory=JarMetrics)
    simulate_as: Literal["spring-shop"] | None = Field(
        None,
        description="spring-shop: this jar is targets/spring-shop, the reference Spring shop, "
        "which harness simulate (and tune --screen) may model; without it a jar build is "
        "refused by the simulator",
    )

    def templated(self) -> Iterator[str]:
        yield from self.java_options
        yield from self.args
        for leaf in leaves(self.properties):
            yield from (text for _, text in texts(leaf.value, ()))

    def spring_settings(self) -> list[SetSetting]:
        return settings_given(self.properties, {}, list(self.args))

    def ports_to_listen(self) -> dict[str, str]:
        return {"port": "server.port", "metrics_port": "management.server.port"}

    def scenario_problems(
        self, at: YamlPath, *, pg_port: int | None, allow_remote: bool
    ) -> list[tuple[YamlPath, str]]:
        """Properties that set what the harness sets or are given twice; arguments that
        would set them over its file."""
        found = property_problems(self.properties, (*at, "properties"))
        for key, given, option in (
            ("java-options", self.java_options, True),
            ("args", self.args, False),
        ):
            for i, text in enumerate(given):
                said = argument_problem(text, java_option=option)
                if said is not None:
                    found.append(((*at, key, i), said))
        return found

    def folder_problems(self, at: YamlPath, base_dir: Path) -> list[tuple[YamlPath, str]]:
        if self.maven is not None:
            folder = base_dir / self.maven
            if not (folder / "pom.xml").is_file():
                return [((*at, "maven"), f"no pom.xml in {self.maven!r} (looked in {folder})")]
            return []  # the jar is built there before the run if it is missing
        jar = base_dir / self.jar
        if not jar.is_file():
            return [
                (
                    (*at, "jar"),
                    f"{self.jar!r} is not a file (looked for {jar}); build it, or give "
                    "maven: <the project's folder> to have the harness build it",
                )
            ]
        return []
