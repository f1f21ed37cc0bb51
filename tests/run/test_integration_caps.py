"""Integration: a phase's CPU cap on a real build, applied and lifted on the phase clock.

A ``command`` build (``busy_service.py``: a child spinning on a core) runs in a
cgroup of its own; a ``docker`` build (node with a spinning worker thread) is
updated live through the Engine. Each is capped to 0.1 CPU for 5 s of a 12 s
run, measured by what the kernel counted: the command's child by its own CPU
time (``/proc/<pid>/stat``), the container by the Engine's stats (the
``container`` scrape source, ``container_cpu_percent`` in metrics.parquet).
About 25 s for the command build, 30 s for the docker one (skipped without an
Engine), 15 s for a capped run killed with kill -9, whose empty cgroup
`harness clean` removes; no cgroup is left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from harness.run.caps.cgroups import PREFIX
from harness.run.caps.leftovers import CGROUPS
from tests.conftest import ROOT, harness_cmd
from tests.run.test_integration_docker import BASE_IMAGE, ENGINE_PROBLEM, needs_engine
from tests.scenario_runs import run_harness

pytestmark = pytest.mark.integration

BUSY = ROOT / "tests" / "run" / "busy_service.py"
CAP_CPUS = 0.1
CAP_START_S, CAP_END_S = 3.0, 8.0

SCENARIO = """\
name: caps
warmup: 1s
duration: 12s
drain: 1s
traffic:
  x: {{path: /x, rate: 4, timeout: 2s}}
pg:
  phases:
    - name: squeeze
      start: 3s
      duration: 5s
      target: {{cpus: 0.1, memory: 512MiB}}
builds:
  busy:
{build}
    metrics: {{path: null}}
"""

COMMAND = f"""\
    command: [{sys.executable}, {BUSY}, --port, "{{port}}", --out, "{{run_dir}}/busy.cpu"]
"""

# A worker thread spins; the main thread answers HTTP. (Braces doubled: the harness fills
# {placeholders} in a container's command.)
NODE = (
    "const W=require('worker_threads').Worker;"
    "new W('for(;;);',{{eval:true}});"
    "require('http').createServer((q,s)=>s.end('ok')).listen(process.env.PORT,'127.0.0.1')"
)
DOCKER = f"""\
    docker:
      image: {BASE_IMAGE}
      command: [node, -e, "{NODE}"]
      env: {{PORT: "{{port}}"}}
"""


def _run(tmp_path: Path, build: str) -> tuple[Path, dict[str, Any], str]:
    scenario = tmp_path / "caps.yaml"
    scenario.write_text(SCENARIO.format(build=build))
    done = run_harness(["run", str(scenario), "--results", str(tmp_path / "results")], 180)
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = (tmp_path / "results" / "caps").iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    return run_dir, manifest["builds"]["busy"], manifest["run_id"]


def _cap_record(info: dict[str, Any], slack_s: float = 0.3) -> dict[str, Any]:
    (cap,) = info["caps"]
    assert isinstance(cap, dict)
    t0 = info["t0"]
    assert cap["phase"] == "squeeze" and cap["cpus"] == CAP_CPUS
    assert cap["memory_bytes"] == 512 * 1024**2
    # On the phase clock: applied and lifted within ``slack_s`` of t0 + the phase's edges.
    assert cap["due_at"] == pytest.approx(t0 + CAP_START_S)
    assert CAP_START_S <= cap["applied_at_s"] < CAP_START_S + slack_s
    assert CAP_END_S <= cap["lifted_at_s"] < CAP_END_S + slack_s
    assert "error" not in cap
    return cap


def _share(samples: pd.DataFrame, start: float, end: float) -> float:
    """CPU seconds per second between two unix times, from cumulative samples."""
    inside = samples[(samples["t"] >= start) & (samples["t"] <= end)]
    first, last = inside.iloc[0], inside.iloc[-1]
    return float((last["cpu"] - first["cpu"]) / (last["t"] - first["t"]))


def test_a_command_build_capped_for_a_phase_by_its_cgroup(tmp_path: Path) -> None:
    run_dir, info, run_id = _run(tmp_path, COMMAND)
    cap = _cap_record(info)
    assert cap["by"].startswith("cgroup v") and info["cgroup"] == cap["by"]
    lines = (run_dir / "busy.cpu").read_text().splitlines()
    # The spinning child (forked by the service) was born in the build's cgroup.
    assert f"{PREFIX}{run_id}-busy" in lines[0]
    rows = [line.split() for line in lines[1:]]
    samples = pd.DataFrame({"t": [float(r[0]) for r in rows], "cpu": [float(r[1]) for r in rows]})
    t0 = info["t0"]
    before = _share(samples, t0 + 0.5, t0 + CAP_START_S - 0.2)
    during = _share(samples, t0 + CAP_START_S + 0.3, t0 + CAP_END_S - 0.1)
    after = _share(samples, t0 + CAP_END_S + 0.5, t0 + 11.5)
    # The quota is 10 ms of CPU every 100 ms for the whole cgroup: the child gets at most
    # that (the service's own threads take a little of it). Uncapped it takes what the
    # machine gives it (a core when idle; under a loaded CI machine less, still well over).
    print(f"command build, CPU cores: before {before:.3f} during {during:.3f} after {after:.3f}")
    assert during <= CAP_CPUS * 1.1 + 0.02, (before, during, after)
    # (Measured: 0.25-0.43 uncapped with six other sessions on two cores, 0.097 capped.)
    assert before > 1.5 * CAP_CPUS and after > 1.5 * CAP_CPUS, (before, during, after)
    # The memory cap, as the target's own cgroup shows it: in force for the phase only.
    limits = {round(float(r[0]) - t0, 1): r[2] for r in rows if r[2] != "-" and float(r[0]) > t0}
    capped = {t for t, v in limits.items() if v == str(512 * 1024**2)}
    assert capped and min(capped) >= CAP_START_S and max(capped) <= CAP_END_S + 0.3, limits
    assert any(t > CAP_END_S + 0.5 for t in limits) and all(
        v != str(512 * 1024**2) for t, v in limits.items() if t > CAP_END_S + 0.5
    )
    # The build's cgroup is gone with it.
    assert not [g for g in CGROUPS._groups() if run_id in g.name]


@needs_engine
def test_a_docker_build_capped_live_by_the_engine(tmp_path: Path) -> None:
    assert ENGINE_PROBLEM is None
    run_dir, info, _ = _run(tmp_path, DOCKER)
    # 1 s: each edge is four Engine round trips, the last through runc (the CPU windows
    # below skip 1.5 s after each edge)
    cap = _cap_record(info, slack_s=1.0)
    assert cap["by"] == f"docker update of container {info['container']}"
    assert "no CPU quota" in cap["lifted_to"] and "Engine's whole memory" in cap["lifted_to"]
    metrics = pd.read_parquet(run_dir / "busy" / "metrics.parquet")
    cpu = metrics[
        (metrics["source"] == "container") & (metrics["series"] == "container_cpu_percent")
    ]
    t0 = info["t0"]

    def mean_pct(start: float, end: float) -> float:
        window = cpu[(cpu["t"] >= t0 + start) & (cpu["t"] <= t0 + end)]
        assert len(window) >= 2, (start, end, cpu)
        return float(window["value"].mean())

    # The Engine's stats are one sample a second, each over the second before it, and the
    # scrape reads the latest one, up to a second old: a sample is wholly capped from 2 s
    # after the cap was in force (timed from when it was, not from the phase's edge: the
    # update lands up to 1 s late, and a sample half uncapped read 14 % once, beside an
    # uncapped 99 %), and wholly capped up to the phase's end (the lift is never early).
    during = mean_pct(cap["applied_at_s"] + 2.2, CAP_END_S)
    after = mean_pct(CAP_END_S + 1.5, 12.0)
    print(f"docker build, cpu_pct: during {during:.1f} after {after:.1f}")
    assert during <= CAP_CPUS * 100 * 1.15 + 2, (during, after)
    assert after > 1.5 * CAP_CPUS * 100, (during, after)  # measured 28-40 on a loaded machine


def test_a_killed_capped_run_leaves_its_cgroup_empty_and_clean_removes_it(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "caps.yaml"
    scenario.write_text(SCENARIO.format(build=COMMAND))
    results = tmp_path / "results"
    proc = subprocess.Popen(
        harness_cmd("run", str(scenario), "--results", str(results)),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # until the cap is in force
            found = list(results.glob("caps/*/manifest.json"))
            caps = json.loads(found[0].read_text())["builds"].get("busy", {}) if found else {}
            if caps.get("t0") and time.time() > caps["t0"] + CAP_START_S + 0.5:
                break
            time.sleep(0.2)
        run_id = json.loads(found[0].read_text())["run_id"]
        (group,) = [g for g in CGROUPS._groups() if run_id in g.name]
        assert len(group.pids()) >= 3  # the guard, the service and its spinning child
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        killed_at = time.monotonic()
        while group.pids() and time.monotonic() - killed_at < 10:
            time.sleep(0.1)
        assert group.pids() == [], "the build's processes outlived the run by 10 s"
        assert any(folder.exists() for folder in group.dirs.values())  # what the kill left
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    clean = run_harness(["clean", "--results", str(results)], 120)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert f"removed cgroup(s) {group.name}" in clean.stdout
    assert not any(folder.exists() for folder in group.dirs.values())
