"""Integration: the load generator stops, and says why, when it cannot write its samples.

Real Locust, sending to a closed loopback port (every request fails fast, and
is recorded). The samples file may grow only so far (RLIMIT_FSIZE: EFBIG, as a
quota or a full disk would say ENOSPC): Locust must stop at once with exit
code 3 and the reason in progress.json, not send the whole schedule unrecorded.
"""

from __future__ import annotations

import resource
import socket
import time
from pathlib import Path

import pytest

from harness.load.plan import EndpointPlan, LoadPlan
from harness.run.loadgen import read_progress
from tests.load.locust_process import go_when_ready, start_locust

pytestmark = pytest.mark.integration


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_locust_stops_with_exit_3_when_its_samples_cannot_be_written(tmp_path: Path) -> None:
    plan = LoadPlan(
        base_url=f"http://127.0.0.1:{_closed_port()}",
        seed=1,
        warmup_s=0.0,
        duration_s=60.0,
        drain_s=1.0,
        endpoints={"x": EndpointPlan("GET", "/x", 200.0, 1.0)},
        samples_path=str(tmp_path / "samples.csv"),
        progress_path=str(tmp_path / "progress.json"),
        go_path=str(tmp_path / "go.json"),
    )
    proc = start_locust(plan, tmp_path)
    try:
        resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (20_000, 20_000))
        go_when_ready(proc, plan)
        started = time.monotonic()
        code = proc.wait(timeout=30)
        stopped_after_s = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    progress = read_progress(Path(plan.progress_path))
    assert code == 3, (tmp_path / "load.log").read_text()
    assert stopped_after_s < 10, f"sent for {stopped_after_s:.0f} s of a 60 s plan unrecorded"
    assert progress["state"] == "failed"
    assert "samples.csv: File too large" in progress["error"]
    assert not list(tmp_path.glob("*.tmp"))
