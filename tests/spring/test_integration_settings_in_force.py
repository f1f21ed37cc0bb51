"""Integration: the settings in force read back from the real spring-shop jar (issue 30 item 4).

The build sets ``resilience4j.circuitbreaker.configs.default.failure-rate-threshold: 30``;
the jar's own ``application.yml`` gives its breaker ``pgClient`` a threshold of its own
(50), which outranks ``configs.default``: the build's setting does nothing. The run reads
the breaker's threshold back from ``/actuator/circuitbreakers`` (and where the 50 comes
from, from ``/actuator/configprops``) after health, and warns naming the setting. One JVM,
a few seconds of load; about a minute here, most of it the JVM's start-up.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.scenario_runs import only_run, run_harness
from tests.spring.conftest import needs_java

pytestmark = [pytest.mark.integration, needs_java]

SCENARIO = """\
name: settings-in-force
seed: 30
warmup: 1s
duration: 3s
drain: 2s
traffic:
  products: {{path: "/api/products/{{id}}", params: {{id: [1, 100]}}, rate: 5, timeout: 5s}}
pg:
  phases:
    - {{name: baseline, start: 0s, duration: 3s, fault: {{type: healthy}}}}
builds:
  breaker:
    jar: {jar}
    java-options: [-XX:TieredStopAtLevel=1, -Xmx384m]
    health: {{timeout: 300s}}
    properties:
      pg.base-url: "{{pg_url}}"
      shop.resilience: retry-circuit-breaker
      management.endpoints.web.exposure.include: health,prometheus,configprops,circuitbreakers
      management.endpoint.configprops.show-values: always
      resilience4j.circuitbreaker.configs.default.failure-rate-threshold: 30
"""

SETTING = "resilience4j.circuitbreaker.configs.default.failure-rate-threshold"
BREAKER = "resilience4j.circuitbreaker.instances.pgClient"


def test_a_default_setting_the_instance_overrides_is_warned(
    tmp_path: Path, spring_jar: Path
) -> None:
    scenario = tmp_path / "settings.yaml"
    scenario.write_text(SCENARIO.format(jar=spring_jar))
    done = run_harness(["run", str(scenario), "--results", str(tmp_path / "r")], 900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    run_dir = only_run(tmp_path / "r")
    info = json.loads((run_dir / "manifest.json").read_text())["builds"]["breaker"]
    found = info["settings_in_force"]
    assert found["sources"]["actuator/configprops"] == "read"
    assert found["sources"]["actuator/circuitbreakers"] == "read"
    held = found["settings"][f"{BREAKER}.failure-rate-threshold"]
    assert (held["value"], held["source"]) == (50.0, "actuator/circuitbreakers")
    assert "spring-shop.jar" in held["origin"]  # the jar's own application.yml
    assert "circuitbreaker" in found["instances"] and "pgClient" in found["instances"]["retry"]
    (said,) = [d for d in found["differences"] if d.startswith(SETTING)]
    assert "the build set 30, the service reports 50.0 for circuitbreaker pgClient" in said
    assert "overridden by the instance's own" in said
    # said while it ran, and in the report beside the build's other warnings
    assert SETTING in done.stdout + done.stderr
    report = json.loads((run_dir / "report.json").read_text())
    assert said in report["builds"]["breaker"]["warnings"]
