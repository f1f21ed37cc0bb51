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
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.endpoints import endpoint_stats
from harness.load.plan import (
    DROPPED,
    PROTOCOL,
    EndpointPlan,
    LoadPlan,
    idempotency_key,
)
from harness.run.loadgen import locust_argv, read_progress
from harness.scenario.client_retry import ClientRetry
from harness.scenario.outcomes import Outcomes
from tests.conftest import ROOT
from tests.load.locust_process import go_when_ready, start_locust
from tests.load.test_plan import _plan

pytestmark = pytest.mark.integration

SERVER = Path(__file__).with_name("scripted_server.py")
LABELLED = Outcomes(label="X-Outcome").resolved()
"""Any service's classes, each answer named by the scripted server's ``X-Outcome``."""


def _run_plan(tmp_path: Path, endpoints: dict[str, EndpointPlan], duration_s: float) -> LoadPlan:
    """Start the scripted server and one Locust process, send the plan, wait for the end."""
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
            duration_s=duration_s,
            drain_s=1.0,
            endpoints=endpoints,
            samples_path=str(tmp_path / "samples.csv"),
            progress_path=str(tmp_path / "progress.json"),
            go_path=str(tmp_path / "go.json"),
        )
        proc = start_locust(plan, tmp_path)
        try:
            go_when_ready(proc, plan)
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
    return plan


def test_every_planned_request_is_sent_and_recorded_once_with_its_fate(tmp_path: Path) -> None:
    plan = _run_plan(
        tmp_path,
        {
            "read": EndpointPlan("GET", "/cl", 50.0, 5.0, outcomes=LABELLED),
            "pay": EndpointPlan(
                "POST",
                "/status/503",
                20.0,
                5.0,
                body={"amount": 7},
                idempotency_key=True,
                outcomes=LABELLED,
            ),
            "slow": EndpointPlan("GET", "/hang", 5.0, 0.3),
            "stuck": EndpointPlan("GET", "/hang", 5.0, 30.0),
        },
        duration_s=2.0,
    )
    log = tmp_path / "requests.jsonl"
    with open(plan.samples_path, newline="") as f:
        rows = list(csv.DictReader(f))
    keys = [(r["endpoint"], int(r["index"])) for r in rows]
    assert len(keys) == len(set(keys)), "a request was recorded twice"
    planned = {(n, i) for n in plan.endpoints for i in range(plan.planned_count(n))}
    assert set(keys) == planned
    fates = Counter(
        (r["endpoint"], r["status"], r["error"], r["outcome"], r["class"]) for r in rows
    )
    assert fates == {
        ("read", "200", "", "cl", "success"): 100,
        ("pay", "503", "HTTP503", "scripted", "refused"): 40,
        ("slow", "0", "TimeoutError", "", "failure"): 10,
        ("stuck", "0", "Unfinished", "", "failure"): 10,
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


def test_max_in_flight_drops_what_finds_the_cap_full_and_counts_it_apart(tmp_path: Path) -> None:
    # /hang answers nothing: each capped request holds its slot for its 0.5 s timeout, so of
    # 40/s for 2 s at most 3 x (2 / 0.5 + 1) = 15 can be sent; the uncapped reads all go.
    plan = _run_plan(
        tmp_path,
        {
            "capped": EndpointPlan("GET", "/hang", 40.0, 0.5, max_in_flight=3),
            "read": EndpointPlan("GET", "/cl", 20.0, 5.0),
        },
        duration_s=2.0,
    )
    with open(plan.samples_path, newline="") as f:
        rows = list(csv.DictReader(f))
    keys = [(r["endpoint"], int(r["index"])) for r in rows]
    assert len(keys) == len(set(keys)) and set(keys) == {
        (n, i) for n in plan.endpoints for i in range(plan.planned_count(n))
    }
    capped = [r for r in rows if r["endpoint"] == "capped"]
    sent = [r for r in capped if r["error"] != DROPPED]
    dropped = [r for r in capped if r["error"] == DROPPED]
    assert {r["error"] for r in sent} == {"TimeoutError"}
    assert 3 <= len(sent) <= 15 and len(sent) + len(dropped) == 80
    assert all(r["end"] == "" and r["status"] == "0" for r in dropped)
    assert read_progress(Path(plan.progress_path))["dropped"] == {"capped": len(dropped)}
    # never more than 3 open at once: every start sees fewer than 3 others still open
    spans = [(float(r["actual_start"]), float(r["end"])) for r in sent]
    for start, _ in spans:
        assert sum(s < start < e for s, e in spans) < 3
    # the server saw exactly the requests that were sent
    seen = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert Counter(s["path"] for s in seen) == {"/hang": len(sent), "/cl": 40}
    assert Counter(r["error"] for r in rows if r["endpoint"] == "read") == {"": 40}

    # The figures: dropped counts apart; requests, success and latency are the sent ones.
    samples = pd.read_csv(plan.samples_path, keep_default_na=False, na_values={"end": [""]})
    t0 = float(samples["intended_start"].min())
    stats = endpoint_stats(samples[samples["endpoint"] == "capped"], t0, t0 + 2.0, 40.0)
    assert stats["dropped"] == len(dropped) and stats["requests"] == len(sent)
    assert stats["success_pct"] == 0.0 and stats["errors"] == {"TimeoutError": len(sent)}
    assert stats["latency_s"]["p50"] is not None and stats["latency_s"]["p50"] >= 0.5
    read = endpoint_stats(samples[samples["endpoint"] == "read"], t0, t0 + 2.0, 20.0)
    assert read["dropped"] == 0 and read["requests"] == 40 and read["success_pct"] == 100.0


def test_a_plan_of_another_harness_version_is_refused_with_exit_3(tmp_path: Path) -> None:
    plan = _plan(tmp_path, p=EndpointPlan("GET", "/p", 1.0, 1.0))
    newer = json.loads(plan.handoff()) | {"schema": f"harness.load-plan/{PROTOCOL + 1}"}
    (tmp_path / "plan.json").write_text(json.dumps(newer))
    done = subprocess.run(
        locust_argv(plan),
        cwd=ROOT,
        env={**os.environ, "HARNESS_LOAD_PLAN": str(tmp_path / "plan.json")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert (
        f"load generator: {tmp_path / 'plan.json'}: written by a newer harness "
        f"(harness.load-plan/{PROTOCOL + 1}), and this one reads harness.load-plan/{PROTOCOL}"
    ) in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "samples.csv").exists()


def test_retries_are_attempts_of_their_own_in_one_process(tmp_path: Path) -> None:
    # /status/503 always fails: each request is sent max-attempts times, each retry its wait
    # (no jitter) after the attempt before; a 404 is final; a retry due while max-in-flight
    # is full is Dropped, never sent; an endpoint without retry sends each request once.
    never = ClientRetry(max_attempts=3, backoff=0.02, max_backoff=0.05, jitter="none", on=["5xx"])
    plan = _run_plan(
        tmp_path,
        {
            "flaky": EndpointPlan("GET", "/status/503", 20.0, 1.0, retry=never),
            "final": EndpointPlan(
                "GET",
                "/status/404",
                10.0,
                1.0,
                retry=ClientRetry(max_attempts=3, backoff=0.0, multiplier=1.0, max_backoff=0.0),
            ),
            "capped": EndpointPlan(
                "GET",
                "/hang",
                20.0,
                0.2,
                max_in_flight=2,
                retry=ClientRetry(
                    max_attempts=2, backoff=0.0, multiplier=1.0, max_backoff=0.0, on=["timeout"]
                ),
            ),  # fmt: skip
            "read": EndpointPlan("GET", "/cl", 10.0, 1.0),
        },
        duration_s=1.0,
    )
    samples = pd.read_csv(plan.samples_path, keep_default_na=False, na_values={"end": [""]})
    assert not samples.duplicated(["endpoint", "index"]).any()
    count = {n: plan.planned_count(n) for n in plan.endpoints}
    flaky = samples[samples["endpoint"] == "flaky"].set_index(["request", "attempt"])
    assert len(flaky) == 3 * count["flaky"] and set(flaky["status"]) == {503}
    for r in range(count["flaky"]):
        assert [flaky.loc[(r, a), "index"] for a in (1, 2, 3)] == [r, r + 20, r + 40]
        for a, wait in ((2, 0.02), (3, 0.04)):
            gap = flaky.loc[(r, a), "intended_start"] - flaky.loc[(r, a - 1), "end"]
            assert gap == pytest.approx(wait, abs=2e-6)
    final = samples[samples["endpoint"] == "final"]
    assert set(final["attempt"]) == {1} and len(final) == count["final"]
    read = samples[samples["endpoint"] == "read"]
    assert set(read["attempt"]) == {1} and (read["request"] == read["index"]).all()
    capped = samples[samples["endpoint"] == "capped"]
    retried = capped[capped["attempt"] == 2]
    assert set(capped["attempt"]) == {1, 2} and len(retried) > 0
    # a retry follows a timeout of its own request, sent or dropped for the cap
    assert set(retried["request"]) <= set(capped.loc[capped["error"] == "TimeoutError", "request"])
    assert set(retried["error"]) <= {"TimeoutError", DROPPED, "Unfinished"}
    # the server saw exactly the attempts sent
    seen = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    sent = samples[samples["error"] != DROPPED]
    assert Counter(s["path"] for s in seen) == {
        path: int((sent["endpoint"] == name).sum())
        for name, path in (("flaky", "/status/503"), ("final", "/status/404"),
                           ("capped", "/hang"), ("read", "/cl"))
    }  # fmt: skip
    progress = read_progress(Path(plan.progress_path))
    assert progress["retried"] == {
        "flaky": 2 * count["flaky"],
        "capped": int(((sent["endpoint"] == "capped") & (sent["attempt"] == 2)).sum()),
    }
