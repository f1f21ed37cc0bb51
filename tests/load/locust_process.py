"""One real Locust process sending a plan, as ``harness run`` starts it, for the load tests."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from harness.load.plan import LoadPlan
from harness.run.loadgen import locust_argv, read_progress
from tests.conftest import ROOT


def start_locust(plan: LoadPlan, folder: Path) -> subprocess.Popen[bytes]:
    """Write ``plan`` to ``folder/plan.json`` and start Locust on it, its output in
    ``folder/load.log``; it waits for the go file (:func:`go_when_ready`)."""
    plan.write(folder / "plan.json")
    with open(folder / "load.log", "wb") as out:
        return subprocess.Popen(
            locust_argv(plan),
            cwd=ROOT,
            env={**os.environ, "HARNESS_LOAD_PLAN": str(folder / "plan.json")},
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def go_when_ready(proc: subprocess.Popen[bytes], plan: LoadPlan, within_s: float = 60) -> None:
    """Wait until Locust says it is ready, then tell it to start 0.2 s from now."""
    deadline = time.monotonic() + within_s
    while read_progress(Path(plan.progress_path)).get("state") != "ready":
        assert proc.poll() is None and time.monotonic() < deadline, "Locust never got ready"
        time.sleep(0.05)
    Path(plan.go_path).write_text(json.dumps({"start_at": time.time() + 0.2}))
