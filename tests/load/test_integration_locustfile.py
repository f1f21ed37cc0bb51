"""Integration: the locustfile, as ``harness run`` starts it, against a real server on loopback.

One Locust process sends a short plan to ``scripted_server.py``: reads that
succeed, payments answered 503 with an outcome header, reads that time out,
and reads still unanswered when the drain bound runs out. Every planned
request must be in ``samples.csv`` exactly once, with its fate, and must have
reached the server exactly once, with its Idempotency-Key.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from harness.load.plan import EndpointPlan, LoadPlan, idempotency_key
from harness.run.loadgen import locust_argv, read_progress
from tests.conftest import ROOT

pytestmark = pytest.mark.integration

SERVER = Path(__file__).with_name("scripted_server.py")


def test_every_planned_request_is_sent_and_recorded_once_with_its_fate(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    log.touch()
    server = subprocess.Popen(
        [sys.executable, str(SERVER), str(log)], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    try:
        port = int(server.stdout.readline())
        plan = LoadPlan(
            base_url=f"http://127.0.0.1:{port}",
            seed=5,
            warmup_s=0.0,
            duration_s=2.0,
            drain_s=1.0,
            endpoints={
                "read": EndpointPlan("GET", "/cl", 50.0, 5.0),
                "pay": EndpointPlan(
                    "POST", "/status/503", 20.0, 5.0, body={"amount": 7}, idempotency_key=True
                ),
                "slow": EndpointPlan("GET", "/hang", 5.0, 0.3),
                "stuck": EndpointPlan("GET", "/hang", 5.0, 30.0),
            },
            samples_path=str(tmp_path / "samples.csv"),
            progress_path=str(tmp_path / "progress.json"),
            go_path=str(tmp_path / "go.json"),
        )
        plan.write(tmp_path / "plan.json")
        with open(tmp_path / "load.log", "wb") as out:
            proc = subprocess.Popen(
                locust_argv(plan),
                cwd=ROOT,
                env={**os.environ, "HARNESS_LOAD_PLAN": str(tmp_path / "plan.json")},
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            deadline = time.monotonic() + 60
            while read_progress(Path(plan.progress_path)).get("state") != "ready":
                assert proc.poll() is None and time.monotonic() < deadline, "never got ready"
                time.sleep(0.05)
            (tmp_path / "go.json").write_text(json.dumps({"start_at": time.time() + 0.2}))
            code = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        server.kill()
        server.wait()
        server.stdout.close()
    assert code == 0, (tmp_path / "load.log").read_text()
    assert read_progress(Path(plan.progress_path))["state"] == "finished"
    with open(plan.samples_path, newline="") as f:
        rows = list(csv.DictReader(f))
    keys = [(r["endpoint"], int(r["index"])) for r in rows]
    assert len(keys) == len(set(keys)), "a request was recorded twice"
    planned = {(n, i) for n in plan.endpoints for i in range(plan.planned_count(n))}
    assert set(keys) == planned
    fates = Counter((r["endpoint"], r["status"], r["error"], r["outcome"]) for r in rows)
    assert fates == {
        ("read", "200", "", "cl"): 100,
        ("pay", "503", "HTTP503", "scripted"): 40,
        ("slow", "0", "TimeoutError", ""): 10,
        ("stuck", "0", "Unfinished", ""): 10,
    }
    for r in rows:
        assert float(r["actual_start"]) >= float(r["intended_start"])
        assert (r["end"] == "") == (r["error"] == "Unfinished")
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    assert Counter(s["path"] for s in seen) == {"/cl": 100, "/status/503": 40, "/hang": 20}
    pays = [s for s in seen if s["method"] == "POST"]
    assert sorted(s["headers"]["idempotency-key"] for s in pays) == sorted(
        idempotency_key(5, "pay", i) for i in range(40)
    )
    assert {s["body"] for s in pays} == {json.dumps({"amount": 7})}
