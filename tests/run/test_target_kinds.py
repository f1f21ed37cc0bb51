"""Command and url targets: what they fill in, where they answer, and how readiness is judged."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.core.errors import InputError, ProcessDied, RunError
from harness.run.health import check_metrics, log_tail, wait_healthy
from harness.run.kinds.command.target import CommandTarget
from harness.run.kinds.registry import check_remote, target_for
from harness.run.kinds.service import free_ports
from harness.run.kinds.url.target import UrlTarget
from harness.run.processes import ProcessGroup
from harness.run.targets import Launch, TargetContext
from harness.scenario.loader import load_scenario_text
from harness.scenario.schema import Build

HEAD = """\
name: t
duration: 10s
traffic:
  x: {path: /x, rate: 1}
pg: {port: 18089}
"""


def _build(text: str, head: str = HEAD) -> Build:
    (build,) = load_scenario_text(head + "builds:\n  b:\n" + text).scenario.builds.values()
    return build


def _ctx(tmp_path: Path) -> TargetContext:
    build_dir = tmp_path / "run-1" / "after"
    build_dir.mkdir(parents=True)
    return TargetContext(build_dir, "http://127.0.0.1:5555", "run-1", scenario_dir=tmp_path)


def test_a_command_gets_its_placeholders_filled(tmp_path: Path) -> None:
    (tmp_path / "svc").mkdir()
    build = _build(
        f"    command: [{sys.executable}, app.py, --port, '{{port}}', --pg, '{{pg_url}}']\n"
        "    cwd: svc\n"
        "    env: {METRICS_PORT: '{metrics_port}', OUT: '{run_dir}/{build}',\n"
        "          JSON: '{{\"a\": 1}}'}\n"
        "    health: {path: /ready, status: 204, timeout: 5s}\n"
    )
    target = target_for(build)
    assert isinstance(target, CommandTarget)
    ctx = _ctx(tmp_path)
    launch = target.prepare(ctx)
    port = launch.url.rsplit(":", 1)[1]
    metrics_port = launch.env["METRICS_PORT"]
    assert port != metrics_port
    assert launch.argv == (sys.executable, "app.py", "--port", port, "--pg", ctx.pg_url)
    assert launch.env["OUT"] == str(ctx.build_dir.resolve())
    assert launch.env["JSON"] == '{"a": 1}'
    assert launch.cwd == (tmp_path / "svc").resolve()
    assert launch.health_urls == (f"http://127.0.0.1:{port}/ready",)
    assert (launch.health_status, launch.health_timeout_s) == (204, 5.0)
    # It uses {metrics_port}, so that is where its metrics are.
    assert launch.metrics_url == f"http://127.0.0.1:{metrics_port}/metrics"
    assert launch.pass_fds == ()
    record = json.loads((ctx.build_dir / "target.json").read_text())
    assert record["argv"] == list(launch.argv) and record["env"] == dict(launch.env)
    assert (target.preset, dict(target.metrics_map), target.breaker) == ("none", {}, None)


def test_a_fixed_port_and_metrics_settings_carry_through(tmp_path: Path) -> None:
    build = _build(
        "    command: java -jar app.jar\n"
        "    port: 8080\n"
        "    metrics:\n"
        "      path: /actuator/prometheus\n"
        "      preset: spring-boot\n"
        "      map: {busy_workers: 'jetty_threads_busy'}\n"
        "      breaker: pg\n"
    )
    target = target_for(build)
    launch = target.prepare(_ctx(tmp_path))
    assert launch.url == "http://127.0.0.1:8080"
    assert launch.metrics_url == "http://127.0.0.1:8080/actuator/prometheus"
    assert target.preset == "spring-boot"
    assert dict(target.metrics_map) == {"busy_workers": "jetty_threads_busy"}
    assert target.breaker == "pg"


def test_no_metrics_path_means_nothing_to_scrape(tmp_path: Path) -> None:
    build = _build("    command: [sh, '{port}']\n    metrics: {path: null}\n")
    assert target_for(build).prepare(_ctx(tmp_path)).metrics_url is None


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("[no-such-program-h9, '{port}']", "'no-such-program-h9' was not found on PATH"),
        ("[./missing.sh, '{port}']", "'./missing.sh' was not found in "),
    ],
)
def test_a_command_that_is_not_there_fails_before_anything_starts(
    tmp_path: Path, command: str, message: str
) -> None:
    target = target_for(_build(f"    command: {command}\n"))
    with pytest.raises(RunError, match=message):
        target.prepare(_ctx(tmp_path))


def test_free_ports_are_distinct() -> None:
    ports = free_ports(5)
    assert len(set(ports)) == 5 and all(1024 <= p <= 65535 for p in ports)


def test_a_url_target_starts_nothing(tmp_path: Path) -> None:
    build = _build(
        "    url: http://localhost:8080/app\n"
        "    metrics-url: http://127.0.0.1:9404/metrics\n"
        "    health: {path: /actuator/health}\n"
        "    metrics: {preset: spring-boot}\n"
    )
    target = target_for(build)
    assert isinstance(target, UrlTarget)
    launch = target.prepare(_ctx(tmp_path))
    assert launch.argv == () and launch.cwd is None
    assert launch.url == "http://localhost:8080/app"
    assert launch.health_urls == ("http://localhost:8080/app/actuator/health",)
    assert launch.metrics_url == "http://127.0.0.1:9404/metrics"
    assert "start the service first" in launch.hint and "http://127.0.0.1:5555" in launch.hint
    target.collect(tmp_path)  # nothing to collect, nothing written
    assert target.preset == "spring-boot"


def test_remote_addresses_need_the_scenario_and_the_command_line() -> None:
    # Validation only: nothing is sent anywhere.
    text = HEAD + "allow-remote: true\nbuilds:\n  far: {url: 'http://10.0.0.5:8080'}\n"
    far = load_scenario_text(text).scenario
    with pytest.raises(InputError, match="the command line must too: add --allow-remote"):
        check_remote(far, ["far"], allowed=False)
    check_remote(far, ["far"], allowed=True)
    near = load_scenario_text(HEAD + "builds:\n  near: {url: 'http://127.0.0.1:8080'}\n")
    check_remote(near.scenario, ["near"], allowed=False)


# ---------------------------------------------------------------- readiness


class _Answers(BaseHTTPRequestHandler):
    routes: dict[str, tuple[int, bytes]] = {}

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        status, body = self.routes.get(self.path, (404, b"not here"))
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    _Answers.routes = {
        "/health": (200, b"UP"),
        "/starting": (503, b"wait"),
        "/metrics": (200, b"# TYPE up gauge\nup 1\n"),
        "/json": (200, b'{"status": "UP"}'),
    }
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_healthy_when_the_status_is_the_one_asked_for(server: str, tmp_path: Path) -> None:
    group = ProcessGroup("run-1", tmp_path)
    wait_healthy(Launch(url=server, health_urls=(f"{server}/health",), metrics_url=None), group)
    launch = Launch(
        url=server,
        health_urls=(f"{server}/starting",),
        metrics_url=None,
        health_timeout_s=0.5,
        hint="Is it running?",
    )
    with pytest.raises(RunError) as caught:
        wait_healthy(launch, group)
    assert str(caught.value) == (
        f"the target was not healthy within 0.5s: GET {server}/starting: answered 503, "
        "expected 200\nIs it running?"
    )
    assert log_tail(group) is None  # nothing started, no log


def test_nothing_answering_is_said_so(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    launch = Launch(
        url="x", health_urls=(f"http://127.0.0.1:{port}/health",), metrics_url=None,
        health_timeout_s=0.3,
    )  # fmt: skip
    with pytest.raises(RunError, match="connection refused"):
        wait_healthy(launch, ProcessGroup("run-1", tmp_path))


def test_a_process_that_exits_fails_at_once_with_its_log(tmp_path: Path) -> None:
    group = ProcessGroup("run-1", tmp_path)
    lines = "; ".join(f"print('line {i}')" for i in range(40))
    group.start("target", [sys.executable, "-c", f"{lines}; raise SystemExit(4)"])
    launch = Launch(url="x", health_urls=("http://127.0.0.1:9/health",), metrics_url=None)
    try:
        with pytest.raises(ProcessDied) as caught:
            wait_healthy(launch, group)
    finally:
        group.stop_all()
    message = str(caught.value)
    assert message.startswith("the target exited with code 4 before it answered at ")
    assert "Last 30 lines of" in message
    assert "line 39" in message and "line 10" in message and "line 9\n" not in message
    tail = log_tail(group)
    assert tail is not None and tail.splitlines()[0] == "line 10"


def test_metrics_must_be_prometheus_text(server: str) -> None:
    check_metrics(f"{server}/metrics")
    with pytest.raises(RunError, match=r"answered 404, so there are no Prometheus metrics"):
        check_metrics(f"{server}/nope")
    with pytest.raises(RunError, match="is not Prometheus text"):
        check_metrics(f"{server}/json")


def test_a_spring_boot_404_on_actuator_prometheus_names_the_exposure_property(
    server: str,
) -> None:
    """Only a spring-boot build's 404 on .../prometheus is Actuator's exposure; any other
    is the generic message."""
    url = f"{server}/actuator/prometheus"
    with pytest.raises(RunError) as spring:
        check_metrics(url, preset="spring-boot")
    assert str(spring.value).startswith(f"metrics: GET {url} answered 404. Spring Boot's actuator")
    assert "management.endpoints.web.exposure.include=health,prometheus" in str(spring.value)
    for other in ("shop", None):
        with pytest.raises(RunError) as generic:
            check_metrics(url, preset=other)
        assert "answered 404, so there are no Prometheus metrics" in str(generic.value)
        assert "exposure" not in str(generic.value)
    with pytest.raises(RunError, match="answered 404, so there are no Prometheus"):
        check_metrics(f"{server}/nope", preset="spring-boot")


def test_the_tiny_service_fixture_starts_and_stops(tmp_path: Path) -> None:
    """The service the integration tests run as a command build (tests/run/tiny_service.py)."""
    (port,) = free_ports(1)
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("tiny_service.py")), "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(f"tiny service on 127.0.0.1:{port}")
        launch = Launch(url="x", health_urls=(f"http://127.0.0.1:{port}/health",), metrics_url=None)
        wait_healthy(launch, ProcessGroup("run-1", tmp_path))
        check_metrics(f"http://127.0.0.1:{port}/metrics")
    finally:
        proc.terminate()
        code = proc.wait(timeout=10)
        assert proc.stdout is not None
        rest = proc.stdout.read()
        proc.stdout.close()
    assert code == 0 and "tiny service stopped" in rest


def test_every_build_off_this_machine_is_said_in_one_refusal() -> None:
    """Two url builds (one with a remote metrics-url too) without --allow-remote: one error
    naming each address, not the first build alone (issue 32, item 11)."""
    text = HEAD + (
        "allow-remote: true\nbuilds:\n"
        "  far: {url: 'http://10.0.0.5:8080'}\n"
        "  near: {url: 'http://127.0.0.1:8080'}\n"
        "  farther: {url: 'http://10.0.0.6:8080', metrics-url: 'http://10.0.0.7:9/metrics'}\n"
    )
    scenario = load_scenario_text(text).scenario
    with pytest.raises(InputError) as caught:
        check_remote(scenario, ["far", "near", "farther"], allowed=False)
    said = str(caught.value)
    for address in ("10.0.0.5:8080", "10.0.0.6:8080", "10.0.0.7:9"):
        assert address in said, said
    assert "'near'" not in said and "add --allow-remote" in said
