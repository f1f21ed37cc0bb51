"""Integration: spring-shop as a ``docker:`` build, the one of seed 002's Spring scenario.

``scenarios/retry-fallback-spring-docker.yaml``'s container build (cb-correct:
``targets/spring-shop/Dockerfile``, FROM the local base ``harness-base:bookworm`` plus Debian's
JRE, the jar copied in) run as the file writes it, at CI scale: its load and phases cut to the
short scenario's (10 s warm-up, 1 s healthy, 4 s flaky, 5 s down) and the other build left
out. Its Retry is observed at the gateway's ledger, its figures come from the container's
live ``/actuator/prometheus``, and nothing is left behind.

Needs an Engine and the base image (``bash .ci/docker-engine.sh``, as ``.ci/run`` does) and
java/mvn for the jar; skipped, saying so, without them. Cost here: the image's first build
~1 min (apt inside it; cached after), then the run ~1 min.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from tests.conftest import ROOT, leftover_processes
from tests.run.test_integration_docker import _containers, needs_engine
from tests.scenario_runs import run_harness
from tests.spring.conftest import needs_java, spring_jar  # noqa: F401 (the jar's fixture)

pytestmark = [pytest.mark.integration, needs_java, needs_engine]

SCENARIO = ROOT / "scenarios" / "retry-fallback-spring-docker.yaml"
SHORT = ROOT / "scenarios" / "ci" / "seeds" / "002-retry-fallback-spring-short.yaml"
BUILD = "cb-correct"


def _short_docker_scenario(folder: Path) -> Path:
    """The docker build as the scenario file writes it, with the short scenario's timing."""
    full: dict[str, Any] = yaml.safe_load(SCENARIO.read_text())
    short: dict[str, Any] = yaml.safe_load(SHORT.read_text())
    build = full["builds"][BUILD]
    assert "docker" in build and "command" not in build
    spec = build["docker"]
    spec["build"]["context"] = str((SCENARIO.parent / spec["build"]["context"]).resolve())
    spec["command"] = [
        a.replace("wait-duration-in-open-state=10s", "wait-duration-in-open-state=2s")
        for a in spec["command"]
    ]
    scenario = {
        **{k: short[k] for k in ("seed", "warmup", "duration", "drain", "metrics", "pg")},
        "name": "spring-docker",
        "traffic": {"payments": full["traffic"]["payments"]},
        "builds": {BUILD: build},
        "gates": [g for g in full["gates"] if g["expr"].startswith(f"{BUILD}.")],
    }
    path = folder / "spring-docker.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    return path


@pytest.mark.usefixtures("spring_jar")
def test_spring_shop_in_a_container(tmp_path: Path) -> None:
    scenario = _short_docker_scenario(tmp_path)
    junit = tmp_path / "gates.xml"
    done = run_harness(
        ["run", str(scenario), "--results", str(tmp_path / "results"), "--junit", str(junit)],
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (run_dir,) = (tmp_path / "results" / "spring-docker").iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    info = manifest["builds"][BUILD]
    assert (info["status"], info["kind"], info["preset"]) == ("completed", "docker", "spring-boot")
    assert info["image"]["built_from"]["context"] == str(ROOT / "targets" / "spring-shop")
    assert "Starting ShopApplication" in (run_dir / BUILD / "target.log").read_text()

    # Retry: counted by Resilience4j (below); at the gateway at most 3 calls a payment. A
    # retry the breaker refuses never reaches the gateway, so a key seen twice there is
    # timing (a retry landing in a half-open trial): a CI machine once saw none.
    ledger = pd.read_parquet(run_dir / BUILD / "pg.parquet")
    payments = ledger[ledger["path"].astype(str) == "/v1/payments/approve"]
    assert len(payments) > 0 and payments.groupby("key").size().max() <= 3
    figures = json.loads((run_dir / "report.json").read_text())["builds"][BUILD]
    assert figures["pg"]["retries"] > 0
    assert figures["workers"]["max_workers"] == 200  # Tomcat's, read in the container
    assert figures["series"]["breaker_failures"]["total"] > 0

    # Nothing of the run is left: no process, no container.
    assert leftover_processes(manifest["run_id"]) == []
    assert _containers(harness_run=manifest["run_id"]) == []
