"""Shared helpers for tests that start real processes on loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]


def leftover_processes(run_id: str) -> list[int]:
    """PIDs of live processes whose environment carries this run's HARNESS_RUN_ID."""
    marker = f"HARNESS_RUN_ID={run_id}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                status = (entry / "status").read_text()
                if "\nState:\tZ" not in status:
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def harness_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "harness", *args]


class PgServer:
    """A real PG fault server process on a free loopback port."""

    def __init__(self, scenario: Path, t0: float | None = None) -> None:
        sock = socket.create_server(("127.0.0.1", 0), backlog=4096)
        sock.set_inheritable(True)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        argv = [
            sys.executable,
            "-m",
            "harness.pg",
            "--scenario",
            str(scenario),
            "--fd",
            str(sock.fileno()),
        ]
        if t0 is not None:
            argv += ["--t0", str(t0)]
        self.proc = subprocess.Popen(argv, pass_fds=(sock.fileno(),), cwd=ROOT)
        sock.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("PG server did not start")

    def metric(self, name: str, **labels: str) -> float:
        from prometheus_client.parser import text_string_to_metric_families

        total = 0.0
        text = httpx.get(f"{self.url}/metrics", timeout=5).text
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                    total += s.value
        return total

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def pg_scenario(tmp_path: Path, fault: str, name: str = "pg") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"""\
name: {name}
seed: 1
duration: 1h
traffic:
  x: {{path: /x, rate: 1}}
pg:
  phases:
    - {{name: only, start: 0s, duration: 1h, fault: {fault}}}
builds:
  b: {{profile: retry-only}}
"""
    )
    return path


@pytest.fixture
def pg_factory(tmp_path: Path) -> Iterator[object]:
    servers: list[PgServer] = []

    def start(fault: str) -> PgServer:
        server = PgServer(pg_scenario(tmp_path, fault, f"pg{len(servers)}"), t0=time.time())
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never need a proxy; make sure none redirects loopback traffic."""
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    os.environ.setdefault("PYTHONUNBUFFERED", "1")


# 8 threads; a payment meeting the hung gateway holds one for 2 x 0.8 s + 0.1 s,
# so 8 payments/s need ~14 threads: the retry-only pool must saturate.
SHORT = """\
name: short
seed: 3
warmup: 2s
duration: {duration}
traffic:
  payments:
    method: POST
    path: /api/payments
    rate: 8
    timeout: 8s
    body: {{amount: 1000}}
    idempotency-key: true
    calls-gateway: true
  products: {{path: "/api/products/{{id}}", params: {{id: [1, 100]}}, rate: 4, timeout: 8s}}
pg:
  phases:
    - {{name: baseline, start: 0s, duration: 3s, fault: {{type: healthy}}}}
    - {{name: outage, start: 3s, duration: {outage}, fault: {{type: timeout}}}}
builds:
  before:
    profile: retry-only
    workers: 8
    pg-client: {{connect-timeout: 500ms, read-timeout: 800ms}}
    resilience4j: {{retry: {{max-attempts: 2, wait-duration: 100ms}}}}
  after:
    profile: retry-circuit-breaker
    workers: 8
    pg-client: {{connect-timeout: 500ms, read-timeout: 800ms}}
    resilience4j:
      retry: {{max-attempts: 2, wait-duration: 100ms}}
      circuitbreaker:
        sliding-window-size: 10
        minimum-number-of-calls: 10
        failure-rate-threshold: 50
        wait-duration-in-open-state: 5s
        permitted-number-of-calls-in-half-open-state: 3
        automatic-transition-from-open-to-half-open-enabled: true
gates:
  - name: product reads protected
    expr: "after.products.p95[outage] <= 0.5 * before.products.p95[outage]"
  - "after.busy_workers.p50[outage] <= 0.5 * after.max_workers"
  - "after.pg.amplification[outage] <= 1.0"
  # Must fail: a breaker cannot make payments succeed against a dead gateway.
  - name: payments succeed during the outage
    expr: "after.payments.success_pct[outage] >= 50"
"""


def short_scenario(tmp_path: Path, duration: str = "21s", outage: str = "18s") -> Path:
    """A short before/after experiment (about 30 s per build) in ``tmp_path``."""
    path = tmp_path / "short.yaml"
    path.write_text(SHORT.format(duration=duration, outage=outage))
    return path


@pytest.fixture(scope="session")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real short experiment through the real CLI, shared by every test that reads a run.

    Real PG server, real target under gunicorn, real Locust; ~70 s, made once per session.
    """
    tmp = tmp_path_factory.mktemp("short-run")
    results = tmp / "results"
    junit = tmp / "gates.xml"
    done = subprocess.run(
        harness_cmd(
            "run", str(short_scenario(tmp)), "--results", str(results), "--junit", str(junit)
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # Exit 1: the run completed and its gate that must fail (payments cannot succeed
    # against a dead gateway, breaker or not) failed; the others passed.
    assert done.returncode == 1, done.stdout + done.stderr
    assert junit.exists()
    (tmp / "run-output.txt").write_text(done.stdout)
    assert "Traceback" not in done.stderr
    runs = sorted((results / "short").iterdir())
    assert len(runs) == 1
    return runs[0]
