"""One real run whose breakers flap, shared by the tests of opens, replica gates and claims.

Two builds of the reference shop against a real gateway that hangs in blips
during the 11 s outage (1.5 s of every 3 s): ``one`` (one process) and
``scaled`` (``replicas: 2`` behind a real nginx). The breaker opens after 4
failed calls, waits 1.5 s, lets one probe through once the blip is over, the
probe succeeds and the breaker closes, until the next blip opens it again:
it leaves closed about every 3 s, on each replica by itself. Scraped every
500 ms, so every closed spell between two opens (1 s at the shortest) is seen at least
twice, and a stall of the orchestrator under 1.5 s (three intervals: a scrape gap beyond
that makes the breaker's figures "not measured") leaves the figures measured. The scenario's
gates carry ``seed:``, one false on purpose, so the run exits 1 (a gate
failed) with its report written: what ``make seeds`` meets.

The run happens once per test session (about 45 s), whichever test asks first.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, harness_cmd

NGINX = shutil.which("nginx", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"]))

_BREAKER = (
    "{sliding-window-size: 4, minimum-number-of-calls: 4, failure-rate-threshold: 50, "
    "wait-duration-in-open-state: 1500ms, permitted-number-of-calls-in-half-open-state: 1, "
    "automatic-transition-from-open-to-half-open-enabled: true}"
)
_SHOP = (
    "pg-client: {connect-timeout: 500ms, read-timeout: 600ms}\n"
    "    resilience4j: {retry: {max-attempts: 2, wait-duration: 100ms}, "
    f"circuitbreaker: {_BREAKER}}}"
)

SCENARIO = f"""\
name: flaps
description: A breaker that flaps through an outage, alone and as 2 replicas.
seed: 7
warmup: 2s
duration: 14s
metrics: {{interval: 500ms}}
traffic:
  payments:
    method: POST
    path: /api/payments
    rate: 10
    timeout: 8s
    body: {{amount: 1000}}
    idempotency-key: true
    calls-gateway: true
  products: {{path: "/api/products/{{id}}", params: {{id: [1, 100]}}, rate: 2, timeout: 8s}}
pg:
  phases:
    - {{name: calm, start: 0s, duration: 3s, fault: {{type: healthy}}}}
    - {{name: outage, start: 3s, duration: 11s, fault: {{type: timeout}},
       repeat: {{every: 3s, for: 1500ms}}}}
builds:
  one:
    profile: retry-circuit-breaker
    workers: 16
    {_SHOP}
  scaled:
    profile: retry-circuit-breaker
    replicas: 2
    workers: 8
    {_SHOP}
gates:
  - name: the breaker flaps in the outage
    expr: "one.breaker.opens[outage] >= 2"
    seed: "flapped"       # seed 004: half-open with 1 probe flapped
  - name: each replica flaps on its own
    expr: "scaled.replicas.min.breaker.opens[outage] >= 2"
    seed: "each instance has its own state"
  - name: never opens (false on purpose)
    expr: "scaled.breaker.opens <= 0"
    seed: "0 | none"
  - "scaled.replicas.1.time_to_open < 8s"
"""

needs_nginx = pytest.mark.skipif(
    NGINX is None, reason="nginx is not installed (apt-get install nginx-light; .ci/run does)"
)


@functools.cache
def flap_run() -> Path:
    """The run folder of the flapping scenario (run on first use; removed at exit)."""
    if NGINX is None:
        pytest.skip("nginx is not installed (apt-get install nginx-light; .ci/run does)")
    tmp = Path(tempfile.mkdtemp(prefix="harness-flaps-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    scenario = tmp / "flaps.yaml"
    scenario.write_text(SCENARIO)
    results = tmp / "results"
    done = subprocess.run(
        harness_cmd("run", str(scenario), "--results", str(results)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # 1: a gate failed (the false one), with the run completed and its report written.
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    (run_dir,) = (results / "flaps").iterdir()
    return run_dir
