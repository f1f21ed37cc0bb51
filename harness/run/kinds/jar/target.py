"""The ``jar`` target: a Spring Boot jar started with the build's own Spring properties.

``prepare`` writes ``<build>/application.yml``: the build's ``properties`` (placeholders
in values filled) and what the harness sets (``server.port`` and
``management.server.port``: loopback ports it picked; both addresses 127.0.0.1), and
starts ``java <java-options> -jar <jar> --spring.config.additional-location=file:<it>
<args>`` in the build's folder. A file named there outranks the jar's own
``application.yml``, so the build's properties win over the jar's defaults, and only the
command line and system properties (refused at validation) outrank it. The process is
a ``command`` build's in every other way: its own process group (a JVM that forks is
stopped whole), its output in ``target.log``, ``target.json`` recording what was
started (``harness.run.kinds.service``). Before the run (``preflight``): the java it
names, and the jar, built first by Maven when ``maven:`` is given (``maven``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypedDict

import yaml

from harness.core.errors import InputError, RunError
from harness.core.handoff import Handoff
from harness.core.net import LOOPBACK
from harness.results.io import write_text_atomic
from harness.run.caps.leftovers import CGROUPS
from harness.run.kinds.jar.maven import build_jar
from harness.run.kinds.service import ServiceTarget, find_program, placeholder_values
from harness.run.targets import Kind, Launch, PreflightContext, TargetContext
from harness.scenario.builds.jar import JarBuild
from harness.scenario.builds.spring_properties import filled
from harness.scenario.placeholders import fill

CONFIG_FILE = "application.yml"


class JarRecord(TypedDict):
    """A jar build's ``target.json``: the JVM as it was started (for people, as a command
    build's: no child reads it) and the file of properties it was handed."""

    kind: str
    argv: list[str]
    cwd: str
    jar: str
    config: str


JAR_RECORD: Handoff[JarRecord] = Handoff("jar-record", 1)
"""A jar build's ``target.json`` (``harness.core.handoff``)."""

HINT = (
    "A jar build is healthy when Actuator answers health.path (/actuator/health) on the "
    "management port (management.server.port): the jar needs spring-boot-starter-actuator; "
    'for another check give health: {path: ..., port: "{port}"}.'
)


def application_yml(build: JarBuild, values: dict[str, str]) -> str:
    """The file the jar is handed: the build's properties, then what the harness sets."""
    document: dict[str, Any] = filled(build.properties, values)
    document.update(
        {
            "server.port": int(values["port"]),
            "server.address": LOOPBACK,
            "management.server.port": int(values["metrics_port"]),
            "management.server.address": LOOPBACK,
        }
    )
    head = (
        f"# Written by the harness for build {values['build']}: its properties, then the ports\n"
        "# the harness picked (handed over with --spring.config.additional-location).\n"
    )
    return head + yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)


class JarTarget(ServiceTarget[JarBuild]):
    """A ``jar`` build: ``java -jar`` with the build's properties in a file of their own."""

    def _java(self, scenario_dir: Path) -> str:
        java = find_program(self.build.java, scenario_dir, os.environ)
        if java is not None:
            return java
        if "/" in self.build.java:
            raise InputError(
                f"java: {self.build.java!r} is not an executable (looked for "
                f"{scenario_dir / self.build.java})"
            )
        raise RunError(
            f"no {self.build.java!r} on PATH ({os.environ.get('PATH', os.defpath)}): a jar "
            "build needs a Java runtime (17 or later for Spring Boot 3); install one, or name "
            "it with java: /path/to/bin/java"
        )

    def preflight(self, ctx: PreflightContext) -> None:
        """The java to run it with, and the jar (built by Maven first, with ``maven:``):
        ``InputError`` (exit 2) for a ``java:`` path that is none, ``RunError`` (exit 3)
        for what the machine lacks (no java on PATH, a Maven build that fails)."""
        self._java(ctx.scenario_dir)
        jar = (ctx.scenario_dir / self.build.jar).resolve()
        if self.build.maven is not None:
            build_jar(jar, (ctx.scenario_dir / self.build.maven).resolve())
        if not jar.is_file():
            raise RunError(f"build {ctx.build!r}: the jar {self.build.jar!r} is missing "
                           f"(looked for {jar})")  # fmt: skip

    def prepare(self, ctx: TargetContext) -> Launch:
        build = self.build
        values = placeholder_values(ctx, None)
        jar = (ctx.scenario_dir / build.jar).resolve()
        config = (ctx.build_dir / CONFIG_FILE).resolve()
        write_text_atomic(config, application_yml(build, values))
        argv = [
            self._java(ctx.scenario_dir),
            *(fill(option, values) for option in build.java_options),
            "-jar",
            str(jar),
            f"--spring.config.additional-location=file:{config}",
            *(fill(arg, values) for arg in build.args),
        ]
        cwd = ctx.build_dir.resolve()
        record: JarRecord = {
            "kind": build.kind,
            "argv": argv,
            "cwd": str(cwd),
            "jar": str(jar),
            "config": str(config),
        }
        write_text_atomic(ctx.build_dir / "target.json", JAR_RECORD.text(record))
        return self.started(values, argv=tuple(argv), cwd=cwd, hint=HINT)

    def collect(self, build_dir: Path) -> None:
        """Nothing to collect: its log is already ``target.log``."""


KIND = Kind("jar", JarBuild, JarTarget, leftovers=CGROUPS)
"""A Spring Boot jar, run with each build's own properties."""
