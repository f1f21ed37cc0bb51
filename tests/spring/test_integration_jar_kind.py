"""Integration: ``jar:`` builds, the Spring Boot jar run with each build's own properties.

The spring-shop jar (``targets/spring-shop``) run as any Boot jar would be: two builds
whose only difference is their ``properties`` (a block shared by an anchor and a merge
key, seed 000's ``resilience4j:`` pasted verbatim, nested and dotted names), and figures
that show each build's properties were the ones Spring took. Then the start-up faults,
each before any load and with nothing left running, on a tiny jar that is no Spring app
(``tiny/Tiny.java``: it listens where its arguments say, and can fork): a JVM that
forks, an app that ignores the ports it was given, a JVM that exits during start-up, and
a Maven build that fails. Cost here (2 cores, load ~15): about 4 minutes, most of it the
three Spring JVMs' start-up; on an idle machine about half.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from tests.conftest import leftover_processes
from tests.scenario_runs import run_harness
from tests.spring.conftest import needs_java, needs_jdk

pytestmark = [pytest.mark.integration, needs_java, needs_jdk]

HEAD = """\
name: {name}
seed: 19
warmup: {warmup}
duration: {duration}
drain: 3s
traffic:
  payments: {{method: POST, path: /api/payments, rate: 20, timeout: 10s, body: {{amount: 15000}},
             idempotency-key: true, calls-gateway: true}}
  products: {{path: "/api/products/{{id}}", params: {{id: [1, 1000]}}, rate: 5, timeout: 10s}}
pg:
  phases:
{phases}
"""

# Warm-up 5 s: enough for the JIT to take the request path out of its slowest start (the
# spring-shop tests saw the payments' median settle within ~7.5 s of load at 30/s; here no
# latency is asserted, only counts and gauges). The outage: the gateway hangs 10 s, the
# client gives up after 1 s (the nested read-timeout), twice (seed 000's max-attempts 2):
# a retry-only payment holds its Tomcat thread ~2.1 s, ~42 of them at 20/s.
PHASES = """\
    - {name: baseline, start: 0s, duration: 3s, fault: {type: healthy}}
    - {name: outage, start: 3s, duration: 10s, fault: {type: timeout}}
    - {name: recovery, start: 13s, duration: 3s, fault: {type: healthy}}"""

BUILDS = """\
builds:
  retry-only:
    jar: {jar}
    java-options: [-XX:TieredStopAtLevel=1, -Xmx512m]  # C1 only: half the CPU to start
    health: {{timeout: 300s}}       # a JVM on a loaded 2-core machine took over 120 s to start
    properties: &common
      pg.base-url: "{{pg_url}}"
      shop.resilience: retry-only
      server.tomcat.threads.max: 64
      spring:
        cloud:
          openfeign:
            client:
              config:
                default:
                  read-timeout: 1000
      # seed 000's application.yml, verbatim
      resilience4j:
        retry:
          instances:
            pgClient:
              max-attempts: 2
        circuitbreaker:
          instances:
            pgClient:
              sliding-window-type: COUNT_BASED
              sliding-window-size: 10
              minimum-number-of-calls: 10
              failure-rate-threshold: 50
              wait-duration-in-open-state: 10s
              permitted-number-of-calls-in-half-open-state: 3
              automatic-transition-from-open-to-half-open-enabled: true
  breaker:
    jar: {jar}
    java-options: [-XX:TieredStopAtLevel=1, -Xmx512m]  # C1 only: half the CPU to start
    health: {{timeout: 300s}}
    properties:
      <<: *common
      shop.resilience: retry-circuit-breaker
      server.tomcat.threads.max: 100
"""


def _only_run(results: Path) -> Path:
    (run_dir,) = [p for p in results.glob("*/*") if p.is_dir()]
    return run_dir


def _manifest(run_dir: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((run_dir / "manifest.json").read_text())
    return manifest


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory: pytest.TempPathFactory, spring_jar: Path) -> Path:
    folder = tmp_path_factory.mktemp("jar-kind")
    scenario = folder / "jar-kind.yaml"
    head = HEAD.format(name="jar-kind", warmup="5s", duration="16s", phases=PHASES)
    scenario.write_text(head + BUILDS.format(jar=spring_jar))
    done = run_harness(["run", str(scenario), "--results", str(folder / "results")], 900)
    assert done.returncode == 0, done.stdout + done.stderr
    return _only_run(folder / "results")


def test_each_build_is_handed_its_own_properties_and_the_ports(two_builds: Path) -> None:
    manifest = _manifest(two_builds)
    for build in ("retry-only", "breaker"):
        info = manifest["builds"][build]
        assert (info["status"], info["kind"], info["preset"]) == ("completed", "jar", "spring-boot")
        written = yaml.safe_load((two_builds / build / "application.yml").read_text())
        port = int(info["target_url"].rsplit(":", 1)[1])
        management = int(re.findall(r":(\d+)/", info["target_metrics_url"])[0])
        assert info["target_metrics_url"].endswith("/actuator/prometheus")
        assert (written["server.port"], written["management.server.port"]) == (port, management)
        assert written["pg.base-url"] == info["pg_url"]
        assert (
            written["resilience4j"]["circuitbreaker"]["instances"]["pgClient"][
                "sliding-window-size"
            ]
            == 10
        )
        record = json.loads((two_builds / build / "target.json").read_text())
        assert record["argv"][-1] == f"--spring.config.additional-location=file:{record['config']}"
    assert leftover_processes(manifest["run_id"]) == []


def test_the_figures_show_the_properties_spring_took(two_builds: Path) -> None:
    report = json.loads((two_builds / "report.json").read_text())
    retry, breaker = report["builds"]["retry-only"], report["builds"]["breaker"]
    # server.tomcat.threads.max, dotted, per build (the jar's own default is 200)
    assert retry["workers"]["max_workers"] == 64
    assert breaker["workers"]["max_workers"] == 100
    # shop.resilience, overridden through the merge key: only one build has a breaker
    assert retry["breaker"]["blocked_total"] == 0
    assert breaker["breaker"]["blocked_total"] > 0
    # the nested read-timeout (1 s, not the jar's 4 s): an outage payment of the retry-only
    # build is two attempts of 1 s and a 0.1 s wait, ~2.1 s (with 4 s it would be ~8.1 s)
    samples = pd.read_parquet(two_builds / "retry-only" / "samples.parquet")
    t0 = float(retry["t0"])
    outage = samples[
        (samples["endpoint"] == "payments")
        & (samples["intended_start"] >= t0 + 4)  # the outage's first second left out
        & (samples["intended_start"] < t0 + 12)
    ]
    held = (outage["end"] - outage["actual_start"]).median()
    assert len(outage) > 100 and 1.9 <= held <= 3.5, (len(outage), held)


def test_the_spring_boot_jar_starter_runs(tmp_path: Path, spring_jar: Path) -> None:
    """``harness init --preset spring-boot --jar`` as written, its times cut to seconds
    (and one build run) so that the test stays short."""
    scenario = tmp_path / "starter.yaml"
    written = run_harness(
        ["init", str(scenario), "--preset", "spring-boot", "--jar", str(spring_jar)], 900
    )
    assert written.returncode == 0, written.stderr
    text = scenario.read_text()
    for long, short in [
        ("warmup: 10s", "warmup: 3s"),
        ("duration: 120s", "duration: 6s"),
        ("start: 0s,  duration: 20s", "start: 0s,  duration: 2s"),
        ("start: 20s, duration: 60s", "start: 2s, duration: 2s"),
        ("start: 80s, duration: 40s", "start: 4s, duration: 2s"),
    ]:
        assert long in text
        text = text.replace(long, short)
    scenario.write_text(text[: text.index("# Checked after the run")])  # its gates need both
    done = run_harness(
        ["run", str(scenario), "--build", "after", "--results", str(tmp_path / "r")], 900
    )
    assert done.returncode == 0, done.stdout + done.stderr
    info = _manifest(_only_run(tmp_path / "r"))["builds"]["after"]
    assert (info["status"], info["kind"]) == ("completed", "jar")


# ---------------------------------------------------------------- start-up faults

TINY = """\
name: tiny
warmup: 1s
duration: 3s
traffic:
  products: {{path: /api/products/1, rate: 5, timeout: 5s}}
pg:
  phases:
    - {{name: healthy, start: 0s, duration: 3s, fault: {{type: healthy}}}}
builds:
  jar:
    jar: {jar}
    args: {args}
    metrics: {metrics}
"""


def _tiny(
    tmp_path: Path, jar: Path, args: list[str], metrics: str = "{path: null}"
) -> tuple[subprocess.CompletedProcess[str], float]:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(TINY.format(jar=jar, args=json.dumps(args), metrics=metrics))
    started = time.monotonic()
    done = run_harness(["run", str(scenario), "--results", str(tmp_path / "results")], 300)
    return done, time.monotonic() - started


def _failed_before_load(tmp_path: Path, done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    manifest = _manifest(_only_run(tmp_path / "results"))
    info = manifest["builds"]["jar"]
    assert info["status"] == "failed" and "load_start" not in info
    assert leftover_processes(manifest["run_id"]) == []
    return " ".join(done.stderr.split())  # rich folds long lines


def test_a_jvm_that_forks_is_stopped_with_its_whole_tree(tmp_path: Path, tiny_jar: Path) -> None:
    done, _ = _tiny(tmp_path, tiny_jar, ["--listen={port}", "--listen={metrics_port}", "--fork"])
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = _only_run(tmp_path / "results")
    (child,) = re.findall(r"forked (\d+)", (run_dir / "jar" / "target.log").read_text())
    assert (
        not Path(f"/proc/{child}").exists()
        or "\nState:\tZ" in Path(f"/proc/{child}/status").read_text()
    )
    assert leftover_processes(_manifest(run_dir)["run_id"]) == []


def test_an_app_that_listens_on_a_port_of_its_own_is_said_before_the_health_timeout(
    tmp_path: Path, tiny_jar: Path
) -> None:
    done, took = _tiny(tmp_path, tiny_jar, ["--listen=0"])
    error = _failed_before_load(tmp_path, done)
    said = r"the target listens on 127\.0\.0\.1:\d+, not on the ports it was given"
    assert re.search(said, error), error
    assert re.search(r"\bserver\.port=\d+", error) and "management.server.port=" in error, error
    assert took < 90  # not the 180 s health timeout


def test_an_app_that_ignores_server_port_but_not_the_management_port_is_said(
    tmp_path: Path, tiny_jar: Path
) -> None:
    """Healthy on the management port, but its requests would go nowhere: a Spring app
    whose own code sets its port (8080), told apart before any load."""
    done, _ = _tiny(tmp_path, tiny_jar, ["--listen={metrics_port}", "--listen=0"])
    error = _failed_before_load(tmp_path, done)
    assert re.search(
        r"listens on 127\.0\.0\.1:\d+, not on the port it was given \(server\.port=\d+\)", error
    ), error


def test_a_jvm_that_exits_during_start_up_shows_its_last_lines(
    tmp_path: Path, tiny_jar: Path
) -> None:
    done, _ = _tiny(tmp_path, tiny_jar, ["--listen=not-a-port"])
    error = _failed_before_load(tmp_path, done)
    assert "the target exited with code 1 before it answered" in error
    assert "NumberFormatException" in error


def test_an_actuator_without_its_prometheus_endpoint_names_the_property(
    tmp_path: Path, tiny_jar: Path
) -> None:
    done, _ = _tiny(tmp_path, tiny_jar, ["--listen={port}", "--listen={metrics_port}"], "{}")
    error = _failed_before_load(tmp_path, done)
    assert "answered 404. Spring Boot's actuator does not expose its prometheus" in error, error
    assert "management.endpoints.web.exposure.include=health,prometheus" in error


def test_a_failing_maven_build_is_its_log_s_end_before_the_run(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "src").mkdir(parents=True)
    (project / "pom.xml").write_text("<project><modelVersion>4.0.0</modelVersion>\n")  # cut off
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(
        TINY.format(jar="proj/target/app.jar", args="[]", metrics="{}").replace(
            "    args: []", "    args: []\n    maven: proj"
        )
    )
    done = run_harness(["run", str(scenario), "--results", str(tmp_path / "results")], 300)
    assert done.returncode == 3, done.stdout + done.stderr
    error = " ".join(done.stderr.split())
    assert "`mvn -q -B -DskipTests package` in" in error and "failed (exit 1)" in error, error
    assert "pom.xml" in error  # Maven's own words, from the end of its output
    assert not (tmp_path / "results").exists() or not list((tmp_path / "results").glob("*/*"))
