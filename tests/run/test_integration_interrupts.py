"""Integration: a run interrupted, stalled or cut off at a moment of the test's choosing.

Real gateway, real shop, real Locust on loopback, through the real CLI. What was
measured must survive a Ctrl-C whichever Locust process held it (``--workers``),
at moments drawn at random (the seed is printed, so a failure can be replayed).
Cost: about 40 s of wall time.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from harness.load.plan import idempotency_key
from tests.conftest import ROOT, harness_cmd, leftover_processes
from tests.scenario_runs import run_harness

pytestmark = pytest.mark.integration

# Payments go to the gateway (a hung one after 2 s, so some are in flight at any moment);
# products do not. Long enough that every interruption falls inside the load.
TRAFFIC = """\
traffic:
  payments:
    method: POST
    path: /api/payments
    rate: 20
    timeout: 10s
    body: {amount: 1000}
    idempotency-key: true
    calls-gateway: true
  products: {path: "/api/products/{id}", params: {id: [1, 100]}, rate: 10}
"""

PAYING = (
    """\
name: paying
seed: 21
warmup: 1s
duration: 20s
drain: 1s
"""
    + TRAFFIC
    + """\
pg:
  phases:
    - {name: slow, start: 2s, duration: 18s, fault: {type: latency, delay: 1500ms}}
builds:
  b:
    profile: retry-only
    workers: 64
    pg-client: {connect-timeout: 500ms, read-timeout: 5s}
    resilience4j: {retry: {max-attempts: 1}}
"""
)


def _manifest(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "manifest.json").read_text())


def _wait_for_load(results: Path, build: str, timeout_s: float = 90) -> tuple[Path, float]:
    """Wait until the build's load has started; the run folder and the load's start time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for found in results.glob("*/*/manifest.json"):
            try:
                info = json.loads(found.read_text())["builds"].get(build, {})
            except ValueError:
                continue
            if "load_start" in info:
                return found.parent, float(info["load_start"])
        time.sleep(0.05)
    raise AssertionError("the load never started")


def _disturbed(
    scenario: Path, results: Path, disturb: Callable[[subprocess.Popen[str]], None], *args: str
) -> tuple[int, str, str]:
    """Run ``scenario``, ``disturb`` the run while it goes; its exit code, stdout and stderr."""
    proc = subprocess.Popen(
        harness_cmd("run", str(scenario), "--results", str(results), *args),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A shell's background job ignores SIGINT, and its children with it: not this run.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        disturb(proc)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "Traceback" not in err, err
    return proc.returncode, out, err


def _interrupted_run(tmp_path: Path, scenario: Path, at_s: float, *args: str) -> Path:
    """Run ``scenario``, send SIGINT ``at_s`` into its load; the run folder after its exit."""
    results = tmp_path / "results"

    def interrupt(proc: subprocess.Popen[str]) -> None:
        _, load_start = _wait_for_load(results, "b")
        time.sleep(max(0.0, load_start + at_s - time.time()))
        proc.send_signal(signal.SIGINT)

    code, out, err = _disturbed(scenario, results, interrupt, *args)
    assert code == 130, out + err
    return _wait_for_load(results, "b")[0]


def test_ctrl_c_under_workers_loses_no_request_the_gateway_saw(tmp_path: Path) -> None:
    seed = random.randrange(10**6)
    rng = random.Random(seed)
    moments = sorted(rng.uniform(1.5, 6.0) for _ in range(3))
    print(f"interruption moments (seed {seed}): {moments}")
    for trial, at_s in enumerate(moments):
        began = time.monotonic()
        where = tmp_path / f"trial-{trial}"
        where.mkdir()
        scenario = where / "paying.yaml"
        scenario.write_text(PAYING)
        run_dir = _interrupted_run(where, scenario, at_s, "--workers", "2")
        manifest = _manifest(run_dir)
        assert manifest["status"] == "interrupted"
        assert leftover_processes(manifest["run_id"]) == []
        samples = pd.read_parquet(run_dir / "b" / "samples.parquet")
        keys = list(zip(samples["endpoint"], samples["index"], strict=True))
        assert len(keys) == len(set(keys)), "a request was recorded twice"
        recorded = {idempotency_key(21, name, int(i)) for name, i in keys if name == "payments"}
        ledger = pd.read_parquet(run_dir / "b" / "pg.parquet")
        assert len(ledger) > 10, f"trial at {at_s:.2f}s: the gateway saw too little"
        missing = set(ledger["key"]) - recorded
        assert not missing, (
            f"trial at {at_s:.2f}s: {len(missing)} of {ledger['key'].nunique()} payments the "
            f"gateway saw have no sample row"
        )
        # Every request sent before the interruption has its row, finished or not.
        sent = sum(
            sum(w["sent"].values()) for w in manifest["builds"]["b"]["load_workers"].values()
        )
        assert len(samples[samples["error"] != "Dropped"]) >= sent
        assert set(samples["worker"]) == {0, 1}
        print(f"trial {trial}: {time.monotonic() - began:.1f}s")


TINY = Path(__file__).with_name("tiny_service.py")

# A command build that answers at once: the run is over in seconds.
QUICK = """\
name: quick
seed: 5
warmup: 1s
duration: 3s
traffic:
  products: {{path: "/api/products/{{id}}", params: {{id: [1, 100]}}, rate: 20}}
builds:
  b:
    command: {python} {tiny} --port {{port}}
    metrics: {{path: null}}
gates:
  - "b.products.success_pct >= 99"
"""


def _quick(tmp_path: Path) -> Path:
    scenario = tmp_path / "quick.yaml"
    scenario.write_text(QUICK.format(python=sys.executable, tiny=TINY))
    return scenario


def test_a_closed_stdout_stops_the_printing_not_the_run(tmp_path: Path) -> None:
    scenario, results = _quick(tmp_path), tmp_path / "results"
    run = " ".join(
        shlex.quote(a) for a in harness_cmd("run", str(scenario), "--results", str(results))
    )
    piped = subprocess.run(
        ["bash", "-c", f"{run} 2>{tmp_path / 'err.txt'} | head -2; exit ${{PIPESTATUS[0]}}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    err = (tmp_path / "err.txt").read_text()
    assert piped.returncode == 0, piped.stdout + err  # the gate passed: exit by the gates
    assert len(piped.stdout.splitlines()) == 2
    assert "Traceback" not in err
    (manifest_path,) = results.glob("*/*/manifest.json")
    manifest = json.loads(manifest_path.read_text())
    assert manifest["status"] == "completed", manifest
    assert (manifest_path.parent / "report.json").exists()
    assert (manifest_path.parent / "report.html").exists()
    assert leftover_processes(manifest["run_id"]) == []


def test_ctrl_c_while_the_report_is_written_says_what_to_do(tmp_path: Path) -> None:
    scenario, results = _quick(tmp_path), tmp_path / "results"

    def interrupt_the_report(proc: subprocess.Popen[str]) -> None:
        deadline = time.monotonic() + 90
        manifest: dict[str, Any] = {}
        while time.monotonic() < deadline and manifest.get("status") in (None, "running"):
            time.sleep(0.02)
            for found in results.glob("*/*/manifest.json"):
                with contextlib.suppress(ValueError):
                    manifest = json.loads(found.read_text())
        assert manifest.get("status") == "completed", manifest
        proc.send_signal(signal.SIGINT)  # the builds are done: the report is being made

    code, out, err = _disturbed(scenario, results, interrupt_the_report)
    assert code == 130, out + err
    (found,) = results.glob("*/*/manifest.json")
    run_dir = found.parent
    assert "interrupted while writing the report" in err, err
    assert f"harness report {run_dir}" in err.replace("\n", ""), err
    assert _manifest(run_dir)["status"] == "completed"  # the measurements are whole
    assert (run_dir / "b" / "samples.parquet").exists()


def test_a_process_that_leaves_the_builds_group_does_not_outlive_the_run(tmp_path: Path) -> None:
    # The build's command starts a daemon in a session of its own (setsid), as build
    # daemons do: the orphan guard's process group no longer holds it.
    text = QUICK.format(python=sys.executable, tiny=TINY).replace(
        "    command: ", '    command: /bin/sh -c \'setsid sleep 300 & exec "$0" "$@"\' '
    )
    scenario, results = tmp_path / "daemon.yaml", tmp_path / "results"
    scenario.write_text(text)
    done = run_harness(["run", str(scenario), "--results", str(results)], 120)
    assert done.returncode == 0, done.stdout + done.stderr
    (manifest_path,) = results.glob("*/*/manifest.json")
    run_id = json.loads(manifest_path.read_text())["run_id"]
    try:
        assert leftover_processes(run_id) == []
        assert "left the build's process group" in done.stderr, done.stderr
    finally:
        for pid in leftover_processes(run_id):
            os.kill(pid, signal.SIGKILL)


# Busy workers are read from the scrapes (a second apart); the gates refuse a stalled run.
STALLED = (
    """\
name: stalled
seed: 8
warmup: 1s
duration: 16s
"""
    + TRAFFIC
    + """\
pg:
  phases:
    - {name: baseline, start: 0s, duration: 4s, fault: {type: healthy}}
    - {name: slow, start: 4s, duration: 12s, fault: {type: latency, delay: 2s}}
builds:
  b:
    profile: retry-only
    workers: 64
    pg-client: {connect-timeout: 500ms, read-timeout: 5s}
    resilience4j: {retry: {max-attempts: 1}}
gates:
  - "b.generator.max_lateness_s <= 0.5"
  - "b.scrape.gap_max_s <= 3"
"""
)


@pytest.fixture(scope="module")
def stalled_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A run whose Locust is stopped 3 s (at +3 s) and whose orchestrator 5 s (at +9 s)."""
    where = tmp_path_factory.mktemp("stalled")
    scenario, results = where / "stalled.yaml", where / "results"
    scenario.write_text(STALLED)
    found: list[Path] = []

    def stall(proc: subprocess.Popen[str]) -> None:
        run_dir, load_start = _wait_for_load(results, "b")
        found.append(run_dir)
        locust = _manifest(run_dir)["builds"]["b"]["processes"]["load"]
        time.sleep(max(0.0, load_start + 1 + 3 - time.time()))
        os.killpg(locust, signal.SIGSTOP)
        time.sleep(3)
        os.killpg(locust, signal.SIGCONT)
        time.sleep(max(0.0, load_start + 1 + 9 - time.time()))
        proc.send_signal(signal.SIGSTOP)
        time.sleep(5)
        proc.send_signal(signal.SIGCONT)

    code, out, err = _disturbed(scenario, results, stall)
    (run_dir,) = found
    assert code == 1, out + err  # the run completed; the validity gates failed
    return out + err, run_dir


def test_a_stalled_orchestrator_is_a_said_gap_not_a_silent_hole(
    stalled_run: tuple[str, Path],
) -> None:
    out, run_dir = stalled_run
    b = json.loads((run_dir / "report.json").read_text())["builds"]["b"]
    assert b["status"] == "completed"
    (gap,) = b["validity"]["scrape_gaps"]
    assert 3.5 <= gap[1] - gap[0] <= 9 and 6 <= gap[0] <= 12, gap
    assert b["workers"]["busy_max_fault"] is None  # the gap falls in the fault window
    assert "scrape gap" in b["not_measured"]["workers.busy_max_fault"]
    assert b["phases"]["baseline"]["workers"]["busy_max"] is not None
    assert "no scrape of the target for" in out.replace("\n", " ")
    assert "scrape.gap_max_s <= 3" in out


def test_a_stalled_load_generator_is_warned_and_gated(stalled_run: tuple[str, Path]) -> None:
    out, run_dir = stalled_run
    b = json.loads((run_dir / "report.json").read_text())["builds"]["b"]
    assert 2.5 <= b["validity"]["generator_max_lateness_s"] <= 6
    text = " ".join(out.split())
    assert "the load generator sent requests up to" in text, out
    assert "the load generator sent requests up to" in (run_dir / "report.md").read_text()
    assert "generator.max_lateness_s <= 0.5" in out
