"""The jar starter (``harness init --jar``) leaves the jar's own settings in force (issue 30,
item 11): its shared properties set only what the harness needs to read the service, and
the gate that divides by max workers reads the jar's own pool from Tomcat's gauge."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from harness.analysis.figures import analyse
from harness.gates.evaluate import evaluate
from harness.results.io import METRICS_COLUMNS
from harness.results.model import BuildResult, RunResult
from harness.scenario.builds import JarBuild
from harness.scenario.gates import parse_gate
from harness.scenario.loader import load_scenario_text
from harness.scenario.schema import Scenario
from harness.scenario.starter import starter_scenario
from tests.analysis.frames import sample_frame

HARNESS_NEEDS = {
    "pg.base-url",  # where the fault gateway is
    "server.tomcat.mbeanregistry.enabled",  # Tomcat's thread gauges
    "management.endpoints.web.exposure.include",  # health and prometheus
}
T0 = 1_800_000_000.0
JAR_THREADS = 64
"""The jar's own server.tomcat.threads.max (its application.yml), not Tomcat's 200."""


def _starter(tmp_path: Path) -> tuple[str, Scenario]:
    (tmp_path / "app.jar").write_bytes(b"PK")
    text = starter_scenario("spring-boot", jar="app.jar")
    return text, load_scenario_text(text, "starter.yaml", base_dir=tmp_path).scenario


def test_the_jar_starter_sets_only_what_the_harness_needs(tmp_path: Path) -> None:
    text, scenario = _starter(tmp_path)
    before, after = scenario.builds["before"], scenario.builds["after"]
    assert isinstance(before, JarBuild) and isinstance(after, JarBuild)
    assert set(before.properties) == HARNESS_NEEDS
    assert "threads.max" not in text  # not even as an example that would read as advice
    assert set(after.properties) == HARNESS_NEEDS | {"resilience4j"}  # only the change
    assert "A property here\n    # replaces the jar's own" in text  # and says why


def test_max_workers_is_the_jars_own_pool_read_from_tomcat(tmp_path: Path) -> None:
    """The starter's gate 'breaker frees the workers' divides by max workers: without the
    starter's 200 it is what the jar's Tomcat says it has."""
    _, scenario = _starter(tmp_path)
    rows = []
    for t in T0 - 20 + np.arange(145.0):
        rows.append((t, "target", "tomcat_threads_config_max_threads", "{}", float(JAR_THREADS)))
        rows.append((t, "target", "tomcat_threads_busy_threads", "{}", 12.0))
    metrics = pd.DataFrame(rows, columns=METRICS_COLUMNS)
    start = T0 + np.arange(1200) / 10
    samples = pd.concat(
        sample_frame(name, start, np.full(1200, 0.01), np.full(1200, 200))
        for name in scenario.traffic
    )
    builds = {
        name: BuildResult(
            name, samples, metrics, {"t0": T0, "kind": "jar", "preset": "spring-boot"}
        )
        for name in scenario.builds
    }
    report = analyse(RunResult(tmp_path, {"run_id": "r", "status": "completed"}, builds), scenario)
    assert report["builds"]["after"]["workers"]["max_workers"] == JAR_THREADS
    [frees] = [g for g in scenario.gate_specs() if g.name == "breaker frees the workers"]
    result = evaluate(parse_gate(frees.expr), report)
    assert (result.left, result.right, result.verdict) == (12.0, JAR_THREADS / 4, "pass")
