"""The ``jar`` target before any JVM starts: the file it hands the jar, the command, the
checks of java and Maven; and the look at a started process's listening sockets."""

from __future__ import annotations

import os
import re
import socket
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness.core.errors import InputError, RunError
from harness.run.health import misplaced, wait_healthy
from harness.run.kinds.command.target import CommandTarget
from harness.run.kinds.jar.maven import stale
from harness.run.kinds.jar.target import JAR_RECORD, JarTarget
from harness.run.listening import listening_in_session
from harness.run.processes import ProcessGroup
from harness.run.targets import PreflightContext, TargetContext
from harness.scenario.builds import CommandBuild, JarBuild
from harness.scenario.loader import load_scenario_text

SCENARIO = """\
name: t
duration: 10s
traffic:
  x: {path: /x, rate: 1}
builds:
  a:
    jar: app.jar
    java-options: [-Xmx256m, "-Dlog.dir={run_dir}"]
    args: [--debug]
    properties:
      pg.base-url: "{pg_url}"
      server: {tomcat: {threads: {max: 50}}}
      list: ["{build}", 2]
"""


def _build(text: str = SCENARIO) -> JarBuild:
    build = load_scenario_text(text).scenario.builds["a"]
    assert isinstance(build, JarBuild)
    return build


def test_prepare_writes_the_properties_and_the_ports_and_starts_java_with_them(
    tmp_path: Path,
) -> None:
    (tmp_path / "app.jar").write_bytes(b"PK")
    bdir = tmp_path / "run" / "a"
    bdir.mkdir(parents=True)
    ctx = TargetContext(bdir, "http://127.0.0.1:9", "run-1", scenario_dir=tmp_path)
    launch = JarTarget(_build()).prepare(ctx)
    written = yaml.safe_load((bdir / "application.yml").read_text())
    port, mport = int(launch.url.rsplit(":", 1)[1]), written["management.server.port"]
    assert written == {
        "pg.base-url": "http://127.0.0.1:9",
        "server": {"tomcat": {"threads": {"max": 50}}},
        "list": ["a", 2],
        "server.port": port,
        "server.address": "127.0.0.1",
        "management.server.port": mport,
        "management.server.address": "127.0.0.1",
    }
    assert port != mport
    assert launch.health_urls == (f"http://127.0.0.1:{mport}/actuator/health",)
    assert launch.metrics_url == f"http://127.0.0.1:{mport}/actuator/prometheus"
    assert launch.health_timeout_s == 180
    assert dict(launch.listen_ports) == {port: "server.port", mport: "management.server.port"}
    argv = list(launch.argv)
    assert argv[1:] == [
        "-Xmx256m",
        f"-Dlog.dir={(tmp_path / 'run').resolve()}",
        "-jar",
        str((tmp_path / "app.jar").resolve()),
        f"--spring.config.additional-location=file:{(bdir / 'application.yml').resolve()}",
        "--debug",
    ]
    assert Path(argv[0]).name == "java" and launch.cwd == bdir.resolve()
    record = JAR_RECORD.read(bdir / "target.json")
    assert (record["kind"], record["argv"], record["cwd"]) == ("jar", argv, str(bdir.resolve()))
    assert record["config"] == str((bdir / "application.yml").resolve())


def test_no_java_on_path_is_said_before_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "app.jar").write_bytes(b"PK")
    monkeypatch.setenv("PATH", str(tmp_path))
    ctx = PreflightContext("a", "t", tmp_path)
    with pytest.raises(RunError, match=r"no 'java' on PATH .*name it with java:"):
        JarTarget(_build()).preflight(ctx)
    named = _build(SCENARIO.replace("jar: app.jar", "jar: app.jar\n    java: ./jdk/bin/java"))
    with pytest.raises(InputError, match=r"is not an executable \(looked for .*jdk/bin/java\)"):
        JarTarget(named).preflight(ctx)


def test_a_missing_jar_is_said_with_the_path_looked_for(tmp_path: Path) -> None:
    with pytest.raises(RunError, match=f"missing \\(looked for {tmp_path / 'app.jar'}\\)"):
        JarTarget(_build()).preflight(PreflightContext("a", "t", tmp_path))


def test_a_jar_is_rebuilt_only_when_older_than_its_sources(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "src" / "main").mkdir(parents=True)
    (project / "pom.xml").write_text("<project/>")
    (project / "src" / "main" / "App.java").write_text("class App {}")
    jar = project / "target" / "app.jar"
    assert stale(jar, project)  # missing
    jar.parent.mkdir()
    jar.write_bytes(b"PK")
    assert not stale(jar, project)
    later = time.time() + 10
    os.utime(project / "src" / "main" / "App.java", (later, later))
    assert stale(jar, project)


def _serve(*ports: int) -> list[str]:
    """A Python process that listens on ``ports`` (0: one the OS picks) until stopped."""
    code = (
        "import socket, sys, time\n"
        "socks = []\n"
        "for p in sys.argv[1:]:\n"
        "    s = socket.socket(); s.bind(('127.0.0.1', int(p))); s.listen(); socks.append(s)\n"
        "    print(s.getsockname()[1], flush=True)\n"
        "time.sleep(60)\n"
    )
    return [sys.executable, "-c", code, *map(str, ports)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(group: ProcessGroup, count: int) -> set[tuple[str, int]]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = listening_in_session(group.children[0].popen.pid) or set()
        if len(found) >= count:
            return found
        time.sleep(0.1)
    raise AssertionError("the child never listened")


def test_a_process_tree_listening_elsewhere_is_said_with_the_port_it_was_given(
    tmp_path: Path,
) -> None:
    given, other = _free_port(), _free_port()
    with ProcessGroup("t", tmp_path) as group:
        child = group.start("target", _serve(other))
        assert _wait_listening(group, 1) == {("127.0.0.1", other)}
        said = misplaced(child, {given: "server.port"}, none_open=True)
        assert said == (
            f"listens on 127.0.0.1:{other}, not on the port it was given (server.port={given})"
        )


def test_a_process_on_its_given_ports_or_on_none_is_fine(tmp_path: Path) -> None:
    given, metrics = _free_port(), _free_port()
    with ProcessGroup("t", tmp_path) as group:
        child = group.start("target", _serve(given, metrics))
        _wait_listening(group, 2)
        ports = {given: "server.port", metrics: "management.server.port"}
        assert misplaced(child, ports, none_open=False) is None
    with ProcessGroup("t", tmp_path) as group:  # listens nowhere (yet): nothing to say
        child = group.start("target", [sys.executable, "-c", "import time; time.sleep(60)"])
        assert misplaced(child, {given: "server.port"}, none_open=False) is None


def test_one_port_of_two_open_is_said_only_once_the_health_check_passed(tmp_path: Path) -> None:
    """A JVM opens its ports seconds apart: during the health wait, one of two open is not
    yet a fault; after it passed, the other is the app's own (8080 hardcoded)."""
    given, metrics = _free_port(), _free_port()
    with ProcessGroup("t", tmp_path) as group:
        child = group.start("target", _serve(metrics, 0))
        found = _wait_listening(group, 2)
        (own,) = {port for _, port in found} - {metrics}
        ports = {given: "server.port", metrics: "management.server.port"}
        assert misplaced(child, ports, none_open=True) is None
        assert misplaced(child, ports, none_open=False) == (
            f"listens on 127.0.0.1:{own}, not on the port it was given (server.port={given})"
        )


def test_listening_sockets_of_a_forked_child_count(tmp_path: Path) -> None:
    """The session is the process tree: a socket held by a grandchild is the build's."""
    port = _free_port()
    script = f"import subprocess, sys, time\nsubprocess.Popen({_serve(port)!r})\ntime.sleep(60)\n"
    with ProcessGroup("t", tmp_path) as group:
        group.start("target", [sys.executable, "-c", script])
        assert _wait_listening(group, 1) == {("127.0.0.1", port)}


def test_a_command_build_that_listens_elsewhere_fails_its_health_wait_in_seconds(
    tmp_path: Path,
) -> None:
    """The same look for a ``command`` build: told ``{port}``, it listens on a port of its own."""
    code = "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
    code += "time.sleep(60)"
    text = SCENARIO.split("builds:")[0] + (
        f"builds:\n  a:\n    command: [{sys.executable}, -c, {code!r}, '{{port}}']\n"
    )
    build = load_scenario_text(text).scenario.builds["a"]
    assert isinstance(build, CommandBuild)
    bdir = tmp_path / "run" / "a"
    bdir.mkdir(parents=True)
    launch = CommandTarget(build).prepare(TargetContext(bdir, "http://127.0.0.1:9", "r"))
    (port,) = launch.listen_ports
    assert launch.listen_ports == {port: "{port}"}
    with ProcessGroup("t", bdir) as group:
        group.start("target", list(launch.argv), cwd=launch.cwd)
        started = time.monotonic()
        with pytest.raises(RunError) as caught:
            wait_healthy(launch, group)
    said = str(caught.value)
    given = rf"not on the port it was given \(\{{port\}}={port}\)"
    assert re.search(rf"listens on 127\.0\.0\.1:\d+, {given}", said), said
    assert time.monotonic() - started < 30  # not its 60 s health timeout
