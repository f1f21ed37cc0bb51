"""Integration: command and url builds through the real ``harness run``, and how they fail.

Real gateway, real Locust, and a real service of the user's kind: the Node
gateway of ``targets/node-gateway`` (opossum) started as a ``command`` build
and, started by the test itself, as a ``url`` build; a small standard-library
service (``tiny_service.py``) for the rest. Each failure must end before any
load, with exit 3 (or 2 for what the scenario says wrong), a message that
says what happened, and nothing of the run left running.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

from tests.conftest import ROOT, harness_cmd, leftover_processes

pytestmark = pytest.mark.integration

NODE_GATEWAY = ROOT / "targets" / "node-gateway"
TINY = Path(__file__).with_name("tiny_service.py")

needs_node = pytest.mark.skipif(
    shutil.which("node") is None or not (NODE_GATEWAY / "node_modules" / "opossum").is_dir(),
    reason="needs node and `cd targets/node-gateway && npm ci`",
)

HEAD = """\
name: kinds
seed: 5
warmup: 2s
duration: 10s
traffic:
  verify:
    method: POST
    path: {pay_path}
    rate: 10
    timeout: 3s
    body: {{amount: 100}}
    idempotency-key: true
    calls-gateway: true
  products: {{path: "/api/products/{{id}}", params: {{id: [1, 50]}}, rate: 5, timeout: 3s}}
pg:
  {pg_port}phases:
    - {{name: baseline, start: 0s, duration: 3s, fault: {{type: healthy}}}}
    - {{name: outage, start: 3s, duration: 5s, fault: {{type: timeout}}}}
    - {{name: recovery, start: 8s, duration: 2s, fault: {{type: healthy}}}}
builds:
"""

# opossum settings small enough for a 10 s run: open once half of the last 2 s
# failed (at least 5 calls), probe after 2 s. With opossum's default 10 s window
# the 5 s of warmup and baseline successes kept the breaker shut until about
# 5 s into the 5 s outage: on a loaded machine it opened too late to refuse
# anything (a CI failure).
NODE_ENV = """\
      PG_URL: "{pg_url}"
      PROFILE: after
      CB_VOLUME_THRESHOLD: 5
      CB_TIMEOUT_MS: 300
      CB_RESET_TIMEOUT_MS: 2000
      CB_ROLLING_COUNT_TIMEOUT_MS: 2000
      CB_ROLLING_COUNT_BUCKETS: 2
"""


def _scenario(
    tmp_path: Path, builds: str, pay_path: str = "/api/payments", pg_port: int | None = None
) -> Path:
    path = tmp_path / "kinds.yaml"
    port = "" if pg_port is None else f"port: {pg_port}\n  "
    path.write_text(HEAD.format(pay_path=pay_path, pg_port=port) + builds)
    return path


def _run(scenario: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        harness_cmd("run", str(scenario), "--results", str(scenario.parent / "results"), *args),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _run_dir(scenario: Path) -> Path:
    (run_dir,) = (scenario.parent / "results" / "kinds").iterdir()
    return run_dir


def _manifest(run_dir: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((run_dir / "manifest.json").read_text())
    assert leftover_processes(manifest["run_id"]) == []
    return manifest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _samples(run_dir: Path, build: str) -> pd.DataFrame:
    samples = pd.read_parquet(run_dir / build / "samples.parquet")
    assert set(samples["endpoint"]) == {"verify", "products"}
    return samples


@needs_node
def test_the_node_gateway_as_a_command_build(tmp_path: Path) -> None:
    scenario = _scenario(
        tmp_path,
        "  after:\n"
        "    command: [node, server.js]\n"
        f"    cwd: {NODE_GATEWAY}\n"
        "    env:\n"
        '      PORT: "{port}"\n'
        '      METRICS_PORT: "{metrics_port}"\n' + NODE_ENV + "    metrics: {preset: opossum}\n",
        pay_path="/api/verify",
    )
    done = _run(scenario)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = _run_dir(scenario)
    info = _manifest(run_dir)["builds"]["after"]
    assert (info["status"], info["kind"], info["preset"]) == ("completed", "command", "opossum")
    # Metrics were scraped from the side port the harness gave it, not the service port.
    assert info["target_metrics_url"] != info["target_url"] + "/metrics"
    assert len(_samples(run_dir, "after")) > 100
    metrics = pd.read_parquet(run_dir / "after" / "metrics.parquet")
    rejects = metrics[
        (metrics["source"] == "target")
        & (metrics["series"] == "circuit_total")
        & metrics["labels"].str.contains('"event":"reject"')
    ]
    assert rejects["value"].max() > 0  # opossum opened and refused calls during the outage
    log = (run_dir / "after" / "target.log").read_text()
    assert f"profile after on {info['target_url']}" in log and "breaker vendor: open" in log


def test_a_python_service_as_a_command_build(tmp_path: Path) -> None:
    (tmp_path / "svc").mkdir()
    shutil.copy(TINY, tmp_path / "svc" / "tiny_service.py")
    scenario = _scenario(
        tmp_path,
        "  tiny:\n"
        f"    command: {sys.executable} tiny_service.py --port {{port}} --pg-url {{pg_url}}\n"
        "    cwd: svc\n"
        '    env: {OUT: "{run_dir}/{build}"}\n'
        "    metrics:\n"
        "      map: {busy_workers: tiny_in_flight, pg_calls: tiny_pg_calls_total}\n",
    )
    done = _run(scenario)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = _run_dir(scenario)
    info = _manifest(run_dir)["builds"]["tiny"]
    assert (info["kind"], info["preset"]) == ("command", "none")
    assert info["metrics_map"] == {
        "busy_workers": "tiny_in_flight",
        "pg_calls": "tiny_pg_calls_total",
    }
    record = json.loads((run_dir / "tiny" / "target.json").read_text())
    assert record["cwd"] == str((tmp_path / "svc").resolve())
    assert record["env"]["OUT"] == str((run_dir / "tiny").resolve())
    assert record["argv"][-1] == info["pg_url"]
    samples = _samples(run_dir, "tiny")
    products = samples[samples["endpoint"] == "products"]
    assert (products["status"] == 200).all()
    assert len(pd.read_parquet(run_dir / "tiny" / "pg.parquet")) > 0  # it called the gateway
    assert "received no call" not in done.stderr


def test_a_service_that_calls_another_gateway_is_warned_of(tmp_path: Path) -> None:
    """Pointed at a closed port instead of the run's gateway, the service answers its
    payments (502) and the ledger stays empty: a zero, said at the build's end and in the
    report, while the run still completes."""
    closed = _free_port()  # nothing listens there
    scenario = _scenario(
        tmp_path,
        "  tiny:\n"
        f"    command: {sys.executable} {TINY} --port {{port}} "
        f"--pg-url http://127.0.0.1:{closed}\n",
    )
    done = _run(scenario)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "build tiny: warning: the gateway received no call while" in done.stderr
    run_dir = _run_dir(scenario)
    assert len(pd.read_parquet(run_dir / "tiny" / "pg.parquet")) == 0
    report = json.loads((run_dir / "report.json").read_text())
    (warning,) = report["builds"]["tiny"]["warnings"]
    assert "requests to verify (calls-gateway) were sent" in warning
    assert "gateway received no call" in (run_dir / "report.md").read_text()


@pytest.fixture
def node_gateway(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """The Node gateway started by the test, pointed at a gateway port the scenario will fix."""
    port, pg_port = _free_port(), _free_port()
    env = {
        **os.environ,
        "PORT": str(port),
        "PG_URL": f"http://127.0.0.1:{pg_port}",
        "PROFILE": "after",
        "CB_VOLUME_THRESHOLD": "5",
        "CB_TIMEOUT_MS": "300",
        "CB_RESET_TIMEOUT_MS": "2000",
    }
    log = (tmp_path / "node.log").open("wb")
    proc = subprocess.Popen(
        ["node", "server.js"], cwd=NODE_GATEWAY, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "node did not start"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}", pg_port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@needs_node
def test_the_node_gateway_as_a_url_build(tmp_path: Path, node_gateway: tuple[str, int]) -> None:
    url, pg_port = node_gateway
    scenario = _scenario(
        tmp_path,
        f"  running:\n    url: {url}\n    metrics: {{preset: opossum}}\n",
        pay_path="/api/verify",
        pg_port=pg_port,
    )
    done = _run(scenario)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = _run_dir(scenario)
    info = _manifest(run_dir)["builds"]["running"]
    assert info["kind"] == "url" and "target" not in info["processes"]
    assert info["pg_url"] == f"http://127.0.0.1:{pg_port}"
    assert info["target_metrics_url"] == f"{url}/metrics"
    assert len(_samples(run_dir, "running")) > 100
    # The service reached the gateway on the port the scenario fixed.
    assert len(pd.read_parquet(run_dir / "running" / "pg.parquet")) > 0
    assert not (run_dir / "running" / "target.log").exists()
    assert httpx.get(f"{url}/health", timeout=2).status_code == 200  # not ours to stop


def _tiny(extra: str = "", args: str = "") -> str:
    return (
        "  tiny:\n"
        f"    command: {sys.executable} {TINY} --port {{port}}{args}\n"
        "    health: {timeout: 2s}\n" + extra
    )


@pytest.mark.parametrize(
    ("builds", "said", "logged"),
    [
        pytest.param(
            _tiny(args=" --health-status 503"),
            ["not healthy within 2s", "answered 503, expected 200", "Last 30 lines of"],
            "health answers 503",
            id="never-healthy",
        ),
        pytest.param(
            "  tiny:\n    command: [no-such-program-h9, '{port}']\n",
            ["'no-such-program-h9' was not found on PATH"],
            None,
            id="not-found",
        ),
        pytest.param(
            f"  tiny:\n    command: [{sys.executable}, -c, "
            "'print(\"boom\"); raise SystemExit(4)', '{port}']\n",
            ["the target exited with code 4 before it answered at"],
            "boom",
            id="exits-at-once",
        ),
        pytest.param(
            _tiny(extra="    metrics: {path: /nope}\n"),
            ["metrics: GET", "/nope answered 404, so there are no Prometheus metrics"],
            None,
            id="metrics-404",
        ),
        pytest.param(
            "  gone:\n    url: http://127.0.0.1:{free}\n    health: {{timeout: 1s}}\n",
            ["connection refused", "The harness does not start a url build"],
            None,
            id="url-not-answering",
        ),
    ],
)
def test_a_build_that_cannot_start_fails_before_the_load(
    tmp_path: Path, builds: str, said: list[str], logged: str | None
) -> None:
    url_build = "{free}" in builds
    builds = builds.format(free=_free_port()) if url_build else builds
    scenario = _scenario(tmp_path, builds, pg_port=_free_port() if url_build else None)
    done = _run(scenario, timeout=60)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    error = " ".join(done.stderr.split())  # rich folds long lines
    for text in said:
        assert text in error, done.stderr
    run_dir = _run_dir(scenario)
    manifest = _manifest(run_dir)
    (info,) = manifest["builds"].values()
    assert manifest["status"] == info["status"] == "failed"
    assert "load_start" not in info  # no load was sent
    if logged is not None:
        assert logged in done.stderr
        assert logged in info["log_tail"]


def test_a_busy_gateway_port_is_a_clear_failure(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as holder:
        port = holder.getsockname()[1]
        scenario = _scenario(tmp_path, _tiny(), pg_port=port)
        done = _run(scenario, timeout=60)
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"pg.port {port}: cannot listen on 127.0.0.1:{port}" in done.stderr
    _manifest(_run_dir(scenario))


@pytest.mark.parametrize(
    ("builds", "said"),
    [
        pytest.param(
            "  tiny:\n    command: [tiny, '{port}', '{prot}']\n",
            "kinds.yaml:23:31: builds.tiny.command.2: unknown placeholder {prot}",
            id="unknown-placeholder",
        ),
        pytest.param(
            "  tiny:\n    command: [tiny, '{port}']\n    env: {'{port}': x}\n",
            "kinds.yaml:24:21: builds.tiny.env.{port}: environment variable name '{port}' uses "
            "a placeholder",
            id="placeholder-in-a-key",
        ),
        pytest.param(
            "  far:\n    url: http://192.0.2.10:8080\n",
            "kinds.yaml:23:10: builds.far.url: http://192.0.2.10:8080 is not on this machine",
            id="not-loopback",
        ),
    ],
)
def test_what_the_scenario_says_wrong_is_exit_2_before_anything(
    tmp_path: Path, builds: str, said: str
) -> None:
    scenario = _scenario(tmp_path, builds, pg_port=18089)
    done = _run(scenario, "--allow-remote", timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in " ".join(done.stderr.split())
    assert not (tmp_path / "results").exists()
