"""Integration: ``docker`` builds through a real Docker Engine and the real ``harness run``.

The node-gateway target (seed 003's opossum breaker) is built by the harness
from ``targets/node-gateway/Dockerfile`` (FROM the local base image
``harness-base:bookworm``: no registry is reachable) and run with host
networking against the real gateway and Locust. Then what must not happen:
a container left behind by a ``kill -9``, by an image that is not there, or
by an Engine that does not answer.

Needs an Engine and the base image: ``.ci/run`` starts them (``bash
.ci/docker-engine.sh``); without them these tests are skipped, saying so.
Every container a test's runs start is removed at its end, whatever happened.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from harness.core.errors import RunError
from harness.run.kinds.docker.engine import connect
from harness.run.kinds.docker.runner import cpu_percent, memory_bytes
from tests.conftest import ROOT, harness_cmd, leftover_processes

NODE_GATEWAY = ROOT / "targets" / "node-gateway"
BASE_IMAGE = "harness-base:bookworm"


def _engine_problem() -> str | None:
    """Why the Docker tests cannot run here; None when they can."""
    try:
        import docker  # noqa: F401
    except ImportError:
        return "the Docker SDK for Python is not installed (pip install docker)"
    try:
        # The harness's own connect: it knocks on a unix socket first (the SDK leaks the
        # socket of a refused connect, a stale socket file left by an Engine that died).
        client = connect(timeout_s=10)
    except RunError as exc:
        return str(exc)
    try:
        client.images.get(BASE_IMAGE)
    except Exception:
        return f"the base image {BASE_IMAGE} is missing: bash .ci/docker-engine.sh builds it"
    finally:
        client.close()
    return None


ENGINE_PROBLEM = _engine_problem()
needs_engine = pytest.mark.skipif(ENGINE_PROBLEM is not None, reason=str(ENGINE_PROBLEM))


def _containers(**labels: str) -> list[Any]:
    import docker

    client = docker.from_env(timeout=30)
    try:
        wanted = ["harness.run"] + [f"{k.replace('_', '.')}={v}" for k, v in labels.items()]
        return list(client.containers.list(all=True, filters={"label": wanted}))
    finally:
        client.close()


def _ours(tmp_path: Path) -> list[Any]:
    """Containers of runs whose results are under ``tmp_path`` (this test's)."""
    return [
        c for c in _containers() if c.labels.get("harness.run-dir", "").startswith(str(tmp_path))
    ]


@pytest.fixture
def no_leftovers(tmp_path: Path) -> Iterator[None]:
    """Whatever a test did, no container of its runs outlives it."""
    yield
    if ENGINE_PROBLEM is None:
        for container in _ours(tmp_path):
            container.remove(force=True)


# opossum scaled to seconds, as scenarios/ci/vendor-latency-short.yaml does: a cap of
# 10, 1 s timeouts, open after 3 calls in a 2 s window, a half-open probe after 5 s.
SCENARIO = """\
name: docker-kind
seed: 7
warmup: 2s
duration: {duration}
drain: 2s
traffic:
  verify:
    method: POST
    path: /api/verify
    rate: 6
    timeout: 4s
    body: {{purpose: signup}}
    idempotency-key: true
    calls-gateway: true
  cart: {{path: /api/cart, rate: 5, timeout: 2s}}
pg:
  phases:
    - {{name: baseline, start: 0s, duration: 3s, fault: {{type: healthy}}}}
    - name: outage
      start: 3s
      duration: 8s
      faults:
        - {{type: latency, distribution: fixed, delay: 2s}}
        - {{type: error, status: 504}}
    - {{name: recovery, start: 11s, duration: 3s, fault: {{type: healthy}}}}
builds:
  after:
    docker:
      {source}
      env: {{PORT: "{{port}}", METRICS_PORT: "{{metrics_port}}", PG_URL: "{{pg_url}}",
            PROFILE: after, MAX_CONCURRENCY: 10, VENDOR_TIMEOUT_MS: 1000, CB_TIMEOUT_MS: 1000,
            CB_VOLUME_THRESHOLD: 3, CB_RESET_TIMEOUT_MS: 5000,
            CB_ROLLING_COUNT_TIMEOUT_MS: 2000, CB_ROLLING_COUNT_BUCKETS: 2}}
    health: {{path: /health, timeout: 30s}}
    metrics: {{preset: opossum}}
"""

BUILD = f"build: {{context: {NODE_GATEWAY}}}"


def _scenario(tmp_path: Path, source: str = BUILD, duration: str = "14s") -> Path:
    path = tmp_path / "docker-kind.yaml"
    path.write_text(SCENARIO.format(source=source, duration=duration))
    return path


def _run(
    scenario: Path, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        harness_cmd("run", str(scenario), "--results", str(scenario.parent / "results")),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def _manifest(run_dir: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((run_dir / "manifest.json").read_text())
    return manifest


def test_cpu_and_memory_from_a_stats_sample() -> None:
    """As ``docker stats`` computes them, from one sample of the Engine's stats stream."""
    sample = {
        "cpu_stats": {
            "cpu_usage": {"total_usage": 3_000_000_000},
            "system_cpu_usage": 110_000_000_000,
            "online_cpus": 2,
        },
        "precpu_stats": {
            "cpu_usage": {"total_usage": 2_500_000_000},
            "system_cpu_usage": 100_000_000_000,
        },
        "memory_stats": {"usage": 50_000_000, "stats": {"total_inactive_file": 8_000_000}},
    }
    assert cpu_percent(sample) == pytest.approx(0.5 / 10 * 2 * 100)  # 10% of one core
    assert memory_bytes(sample) == 42_000_000  # cgroup v1 less its inactive page cache
    v2 = {"memory_stats": {"usage": 50_000_000, "stats": {"inactive_file": 10_000_000}}}
    assert memory_bytes(v2) == 40_000_000
    first = {"cpu_stats": sample["cpu_stats"], "precpu_stats": {}}  # no previous sample yet
    assert cpu_percent(first) is None and memory_bytes({}) is None


@needs_engine
@pytest.mark.integration
def test_the_node_gateway_as_a_docker_build(tmp_path: Path, no_leftovers: None) -> None:
    done = _run(_scenario(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = (tmp_path / "results" / "docker-kind").iterdir()
    manifest = _manifest(run_dir)
    run_id, info = manifest["run_id"], manifest["builds"]["after"]
    assert (info["status"], info["kind"], info["preset"]) == ("completed", "docker", "opossum")

    # The image the harness built, as the manifest records it: no digest, and why.
    image = info["image"]
    assert image["id"].startswith("sha256:")
    assert f"harness-docker-kind-after:{image['id'][7:19]}" in image["tags"]
    assert image["digest"] is None and "never pushed to or pulled from" in image["digest_note"]
    assert image["built_from"]["context"] == str(NODE_GATEWAY)
    assert (run_dir / "after" / "docker-build.log").read_text().strip()

    # The container's output is the build's log, from its start to its removal.
    log = (run_dir / "after" / "target.log").read_text()
    assert f"profile after on {info['target_url']}" in log and "breaker vendor: open" in log
    assert f"container {info['container']} removed" in log
    samples = pd.read_parquet(run_dir / "after" / "samples.parquet")
    assert len(samples) > 100

    # CPU and memory from the Engine's stats: scraped, and in the report.
    metrics = pd.read_parquet(run_dir / "after" / "metrics.parquet")
    container = metrics[metrics["source"] == "container"]
    assert {"container_cpu_percent", "container_memory_bytes"} <= set(container["series"])
    assert info["scrape_failures"]["container"] == 0
    report = json.loads((run_dir / "report.json").read_text())
    figures = report["builds"]["after"]
    resources = figures["resources"]
    assert 1e6 < resources["memory_bytes_max"] < 2e9  # node: tens of MB
    assert resources["cpu_pct_max"] > 0 and resources["cpu_pct_mean_fault"] is not None
    assert "container memory MiB max" in done.stdout

    # The opossum preset's figures against what the gateway's ledger saw. Every
    # verification either reached the vendor once (no retries in `after`) or was refused
    # by the breaker (event="reject", answered 503 VENDOR_OPEN).
    blocked, payments = figures["breaker"]["blocked_total"], figures["pg"]["payments"]
    ledger_calls = figures["pg"]["calls"]
    assert figures["pg"]["source"] == "ledger"
    assert blocked > 10
    assert abs(ledger_calls + blocked - payments) <= 3 + 0.05 * payments
    refused = samples[(samples["endpoint"] == "verify") & (samples["status"] == 503)]
    window = refused[
        (refused["intended_start"] >= info["t0"]) & (refused["intended_start"] < info["t0"] + 14)
    ]
    assert abs(len(window) - blocked) <= 3
    outage = figures["phases"]["outage"]
    assert outage["pg"]["calls"] <= 0.5 * outage["pg"]["payments"]  # the breaker held most
    assert outage["breaker"]["blocked"] > 0.4 * outage["pg"]["payments"]

    # Nothing of the run is left: no process, no container.
    assert leftover_processes(run_id) == []
    assert _containers(harness_run=run_id) == []


def _wait_for_load(results: Path, timeout_s: float = 120) -> Path:
    """The run folder, once its build's load has started and written a few samples."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for csv in results.glob("*/*/after/samples.csv"):
            if csv.read_text().count("\n") > 20:
                return csv.parent.parent
        time.sleep(0.2)
    raise AssertionError("the docker build's load never started")


def _start(scenario: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        harness_cmd("run", str(scenario), "--results", str(scenario.parent / "results")),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@needs_engine
@pytest.mark.integration
def test_kill_9_of_harness_run_and_its_runner_then_harness_clean_removes_the_container(
    tmp_path: Path, no_leftovers: None
) -> None:
    """The worst case: every process of the run killed at once (a cancelled CI job)."""
    proc = _start(_scenario(tmp_path, duration="40s"))
    try:
        run_dir = _wait_for_load(tmp_path / "results")
        manifest = _manifest(run_dir)
        run_id, runner_group = (
            manifest["run_id"],
            manifest["builds"]["after"]["processes"]["target"],
        )
        # Frozen first, so it cannot see its target die and stop the build itself.
        os.kill(proc.pid, signal.SIGSTOP)
        os.killpg(runner_group, signal.SIGKILL)  # the runner and its guard: nobody removes it
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    (left,) = _containers(harness_run=run_id)  # the leftover a crash like this makes
    assert left.labels["harness.build"] == "after"

    clean = subprocess.run(
        harness_cmd("clean", "--results", str(tmp_path / "results")),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert f"{run_dir}: crashed" in clean.stdout
    assert f"removed container(s) {left.name}" in clean.stdout
    assert _containers(harness_run=run_id) == []
    deadline = time.monotonic() + 10
    while leftover_processes(run_id) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftover_processes(run_id) == []
    assert _manifest(run_dir)["status"] == "crashed"


@needs_engine
@pytest.mark.integration
def test_kill_9_of_harness_run_alone_its_runner_removes_the_container(
    tmp_path: Path, no_leftovers: None
) -> None:
    """The orphan guard stops the runner, which removes the container: no clean needed."""
    proc = _start(_scenario(tmp_path, duration="40s"))
    try:
        run_id = _manifest(_wait_for_load(tmp_path / "results"))["run_id"]
        assert len(_containers(harness_run=run_id)) == 1
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 10
    while (_containers(harness_run=run_id) or leftover_processes(run_id)) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.2)
    assert _containers(harness_run=run_id) == [], "the container outlived harness run by 10 s"
    assert leftover_processes(run_id) == []


@needs_engine
@pytest.mark.integration
def test_an_image_the_engine_does_not_have_is_exit_2_before_anything(
    tmp_path: Path, no_leftovers: None
) -> None:
    done = _run(_scenario(tmp_path, source='image: "harness-no-such-image-h9:nope"'))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "docker.image 'harness-no-such-image-h9:nope': no such image" in done.stderr
    assert "never pulls" in done.stderr
    assert not (tmp_path / "results").exists()  # refused before the run folder
    assert _ours(tmp_path) == []


@needs_engine
@pytest.mark.integration
def test_a_failing_image_build_is_exit_3_with_the_end_of_its_log(
    tmp_path: Path, no_leftovers: None
) -> None:
    context = tmp_path / "broken"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\nRUN echo compiling-h9 && exit 7\n")
    done = _run(_scenario(tmp_path, source=f"build: {{context: {context}}}"))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "docker build of" in done.stderr and "returned a non-zero code: 7" in done.stderr
    assert "compiling-h9" in done.stderr  # the build's own output, from its log's tail
    assert not (tmp_path / "results").exists()
    assert _ours(tmp_path) == []


@needs_engine
@pytest.mark.integration
def test_bridge_networking_on_an_engine_without_a_bridge_is_exit_3_before_anything(
    tmp_path: Path, no_leftovers: None
) -> None:
    import docker

    client = docker.from_env(timeout=10)
    try:
        if client.networks.list(names=["bridge"]):
            pytest.skip("this Engine has a bridge network (the Engines here run --bridge=none)")
    finally:
        client.close()
    source = f'image: "{BASE_IMAGE}"\n      network: bridge\n      ports: {{3000: "{{port}}"}}'
    done = _run(_scenario(tmp_path, source=source))
    assert done.returncode == 3, done.stdout + done.stderr
    said = " ".join(done.stderr.split())
    assert "docker.network bridge: the Docker Engine at" in said and "has no bridge" in said
    assert "Use network: host" in said and "Traceback" not in done.stderr
    assert not (tmp_path / "results").exists()
    assert _ours(tmp_path) == []


@pytest.mark.integration
def test_no_engine_answering_is_exit_3_saying_how_to_start_one(tmp_path: Path) -> None:
    dead = tmp_path / "dead.sock"  # nothing listens there
    done = _run(_scenario(tmp_path), env={"DOCKER_HOST": f"unix://{dead}"})
    assert done.returncode == 3, done.stdout + done.stderr
    said = " ".join(done.stderr.split())
    assert f"no Docker Engine answers at unix://{dead}" in said
    assert "sudo dockerd --iptables=false --bridge=none &" in said
    assert "bash .ci/docker-engine.sh" in said
    assert not (tmp_path / "results").exists()


def test_a_container_is_over_only_when_its_harness_run_is_gone_from_this_host() -> None:
    import socket

    from harness.run.kinds.docker.cleanup import container_run_alive
    from harness.run.manifest import process_identity

    here = socket.gethostname()
    alive = json.dumps(process_identity())
    gone = json.dumps({**process_identity(), "start_ticks": -1})  # this pid, another start
    labels = {"harness.run": "r", "harness.host": here}
    assert container_run_alive({**labels, "harness.orchestrator": alive}) == (
        "its run is still going"
    )
    assert container_run_alive({**labels, "harness.orchestrator": gone}) is None
    elsewhere = {**labels, "harness.host": "other-h9", "harness.orchestrator": gone}
    assert container_run_alive(elsewhere) == "started from another host (other-h9)"
    assert container_run_alive(labels) == "its labels do not name its orchestrator"
