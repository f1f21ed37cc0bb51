"""Integration: the requests a real client sends (issue 29, part 6), through the real
``harness run``.

A ``url`` build is ``tests/load/scripted_server.py``, which logs every request it
receives (method, path, headers, body) to a file outside the run folder. The
endpoint sends a weighted mix of a GET and a templated POST, rows of a CSV file,
a query string and an ``Authorization`` header whose token is read from the
environment ``harness run`` is started with. Checked: the server received
exactly the requests ``harness.load.requests`` builds for the seed (the token
included), and the token's value is in no file of the run folder. About 15 s.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from harness.load.plan import LoadPlan
from harness.load.requests import Requests
from harness.run.loadgen import free_port
from tests.conftest import leftover_processes
from tests.scenario_runs import only_run, run_harness

pytestmark = pytest.mark.integration

SERVER = Path(__file__).resolve().parents[1] / "load" / "scripted_server.py"

SCENARIO = """\
name: client-requests
seed: 11
warmup: 0s
duration: 3s
drain: 2s
traffic:
  api:
    rate: 20
    timeout: 2s
    params: {{id: [1, 500]}}
    idempotency-key: true
    headers:
      Authorization: {{env: HARNESS_TEST_TOKEN, prefix: "Bearer "}}
      X-User: "{{{{ user }}}}"
    query: {{page: "{{{{ random_int(1, 4) }}}}", lang: en}}
    data: {{file: users.csv}}
    requests:
      - {{weight: 2, path: "/items/{{id}}"}}
      - weight: 1
        method: POST
        path: /orders
        body: {{user: "{{{{ user }}}}", seq: "{{{{ seq }}}}", ref: "{{{{ uuid }}}}",
               plan: "{{{{ plan }}}}"}}
pg:
  port: {pg_port}
builds:
  direct: {{url: "http://127.0.0.1:{port}", metrics: {{path: null}}}}
"""
USERS = "user,plan\nann,gold\nben,free\ncid,pro\n"


def test_the_server_receives_the_planned_requests_and_the_secret_is_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = f"tok-{uuid.uuid4().hex}"
    log = tmp_path / "received.jsonl"
    log.touch()
    server = subprocess.Popen(
        [sys.executable, str(SERVER), str(log)], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    try:
        port = int(server.stdout.readline())
        scenario = tmp_path / "requests.yaml"
        scenario.write_text(SCENARIO.format(port=port, pg_port=free_port()))
        (tmp_path / "users.csv").write_text(USERS)
        results = tmp_path / "results"
        monkeypatch.setenv("HARNESS_TEST_TOKEN", secret)
        done = run_harness(["run", str(scenario), "--results", str(results)], timeout=120)
    finally:
        server.kill()
        server.wait()
        server.stdout.close()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert secret not in done.stdout + done.stderr
    run_dir = only_run(results)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert leftover_processes(manifest["run_id"]) == []

    # The secret's value is in no file the run wrote; its name is (the scenario, the plan).
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert len(files) > 5
    holding = [str(p.relative_to(run_dir)) for p in files if secret.encode() in p.read_bytes()]
    assert holding == []
    assert b"HARNESS_TEST_TOKEN" in (run_dir / "direct" / "plan.json").read_bytes()

    # What the server received is what the seed makes: every request, one each.
    received = [json.loads(line) for line in log.read_text().splitlines()]
    received = [r for r in received if r["path"].startswith(("/items/", "/orders"))]
    samples = pd.read_parquet(run_dir / "direct" / "samples.parquet")
    assert len(received) == len(samples) == 60 and (samples["status"] == 200).all()
    plan = LoadPlan.read(run_dir / "direct" / "plan.json")
    requests = Requests(plan.seed, "api", plan.endpoints["api"], {"HARNESS_TEST_TOKEN": secret})
    kinds = [requests.kinds[0].method, requests.kinds[1].method]
    expected = []
    for i in range(plan.planned_count("api")):
        built = requests.build(i)
        headers = dict(
            line.split(": ", 1) for line in built.headers.split("\r\n") if line
        )  # Idempotency-Key and X-User
        expected.append(
            (
                kinds[built.variant],
                built.path,
                headers["Idempotency-Key"],
                headers["X-User"],
                (built.body or b"").decode(),
            )
        )
    got = [
        (
            r["method"],
            r["path"],
            r["headers"]["idempotency-key"],
            r["headers"]["x-user"],
            r["body"],
        )
        for r in received
    ]
    assert Counter(got) == Counter(expected)
    assert {r["headers"]["authorization"] for r in received} == {f"Bearer {secret}"}
    posts = [r for r in received if r["method"] == "POST"]
    assert 8 <= len(posts) <= 35  # a weight of 1 in 3
    assert all(r["headers"]["content-type"] == "application/json" for r in posts)
    body = json.loads(posts[0]["body"])
    assert isinstance(body["seq"], int) and body["user"] in ("ann", "ben", "cid")
    assert {p.partition("?")[2].split("&")[1] for p in (r["path"] for r in received)} == {"lang=en"}
