"""Replicas: a shop build with ``replicas: 3`` runs as three shops behind a real nginx.

The real CLI, a real gateway that hangs (timeout fault), three real shops
under gunicorn and Debian's nginx in front of them, all on loopback. Each
replica's breaker opens on its own (seed 002: the state lives in each
instance), requests are spread round robin, and ``report.json`` has each
replica's figures with the build's figures their sums. Without nginx the run
stops before anything starts (exit 3); ``replicas: 0`` is refused with its line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from harness.analysis.model import Report
from harness.analysis.replicas import target_series
from harness.core.errors import RunError
from harness.results.manifest import build_record
from harness.run.experiment import Experiment
from harness.run.kinds.replicas import balancer
from harness.scenario.loader import load_scenario
from tests.analysis.test_model import _conforms
from tests.conftest import ROOT, harness_cmd, leftover_processes

NGINX = shutil.which("nginx", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"]))
needs_nginx = pytest.mark.skipif(
    NGINX is None, reason="nginx is not installed (apt-get install nginx-light; .ci/run does)"
)

REPLICAS = 3
WORKERS = 8

# 9 payments/s spread over 3 replicas: 3/s each. Against the hung gateway every payment
# is two 0.8 s attempts, each recorded in the breaker of the replica that made it, so
# each replica's window of 10 fills with failures about 3 s into the outage: it opens on
# its own calls alone.
SCENARIO = f"""\
name: replicas
seed: 5
warmup: 2s
duration: 16s
traffic:
  payments:
    method: POST
    path: /api/payments
    rate: 9
    timeout: 8s
    body: {{amount: 1000}}
    idempotency-key: true
    calls-gateway: true
  products: {{path: "/api/products/{{id}}", params: {{id: [1, 100]}}, rate: 3, timeout: 8s}}
pg:
  phases:
    - {{name: baseline, start: 0s, duration: 3s, fault: {{type: healthy}}}}
    - {{name: outage, start: 3s, duration: 13s, fault: {{type: timeout}}}}
builds:
  scaled:
    profile: retry-circuit-breaker
    replicas: {REPLICAS}
    workers: {WORKERS}
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
"""


def _scenario(tmp_path: Path, text: str = SCENARIO) -> Path:
    path = tmp_path / "replicas.yaml"
    path.write_text(text)
    return path


def _group_members(pgid: int) -> list[int]:
    """Live processes of process group ``pgid`` (nginx's workers clear their environment,
    so the run's marker does not find them: their group does)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if fields[0] != b"Z" and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def replicated_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real run of the scenario through the CLI (about 40 s)."""
    if NGINX is None:
        pytest.skip("nginx is not installed (apt-get install nginx-light; .ci/run does)")
    tmp = tmp_path_factory.mktemp("replicas")
    results = tmp / "results"
    done = subprocess.run(  # a relative --results, as `make seeds` and most users give it
        harness_cmd("run", str(_scenario(tmp)), "--results", "results"),
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    (run_dir,) = (results / "replicas").iterdir()
    return run_dir


def _report(run_dir: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((run_dir / "report.json").read_text())
    return report


@pytest.mark.integration
@needs_nginx
def test_every_process_ran_under_the_run_and_stopped_with_it(replicated_run: Path) -> None:
    manifest = json.loads((replicated_run / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    info = manifest["builds"]["scaled"]
    assert info["replicas"] == REPLICAS
    names = {*(f"target.{i}" for i in range(REPLICAS)), "nginx", "pg", "load"}
    assert set(info["processes"]) == names
    # The load went through nginx, not to a replica directly.
    assert info["target_url"] not in info["replica_urls"]
    bdir = replicated_run / "scaled"
    conf = (bdir / "nginx.conf").read_text()
    assert "daemon off;" in conf and "worker_processes 1;" in conf
    assert all(f"server {url.removeprefix('http://')} " in conf for url in info["replica_urls"])
    for i in range(REPLICAS):
        assert (bdir / f"replica-{i}" / "shop.sqlite").exists()
        assert (bdir / f"target.{i}.log").exists()
    assert leftover_processes(manifest["run_id"]) == []
    # Each child led a process group of its own (its guard's): nothing of any is left.
    assert all(_group_members(pid) == [] for pid in info["processes"].values())


@pytest.mark.integration
@needs_nginx
def test_each_replica_has_its_own_breaker(replicated_run: Path) -> None:
    metrics = pd.read_parquet(replicated_run / "scaled" / "metrics.parquet")
    sources = [f"target.{i}" for i in range(REPLICAS)]
    assert set(metrics["source"]) == {*sources, "pg"}
    state = metrics[
        (metrics["series"] == "resilience4j_circuitbreaker_state") & (metrics["value"] == 1.0)
    ]
    state = state.assign(state=state["labels"].map(lambda s: json.loads(s)["state"]))
    opened_at = {}
    for source in sources:
        mine = state[state["source"] == source].sort_values("t")
        assert set(mine["state"]) >= {"closed", "open"}, source  # it opened, by itself
        opened_at[source] = float(mine.loc[mine["state"] == "open", "t"].iloc[0])
    # Each read its own calls: every replica refused some, and recorded its own transitions.
    build = _report(replicated_run)["builds"]["scaled"]
    replicas = build["replicas"]
    t0 = build["t0"]
    for i, source in enumerate(sources):
        breaker = replicas[str(i)]["breaker"]
        assert breaker["present"] and breaker["blocked_total"] > 0, breaker
        assert breaker["time_to_open_s"] is not None
        # Its time to open is its own first open scrape, counted from the outage's start.
        assert abs(breaker["time_to_open_s"] - (opened_at[source] - t0 - 3.0)) < 0.01
    assert build["timeline"]["time_to_open_s"] == min(
        r["breaker"]["time_to_open_s"] for r in replicas.values()
    )


@pytest.mark.integration
@needs_nginx
def test_requests_are_spread_round_robin(replicated_run: Path) -> None:
    bdir = replicated_run / "scaled"
    payments = pd.read_parquet(bdir / "payments.parquet")
    assert str(payments["replica"].dtype) == "int64"
    counts = payments["replica"].value_counts().sort_index()
    assert list(counts.index) == list(range(REPLICAS))
    total = int(counts.sum())
    assert total > 100
    for n in counts:
        assert abs(n / total - 1 / REPLICAS) < 0.08, counts  # each served about a third
    assert payments["idempotency_key"].is_unique  # no request reached two replicas
    replicas = _report(replicated_run)["builds"]["scaled"]["replicas"]
    assert [replicas[str(i)]["payments_recorded"] for i in range(REPLICAS)] == list(counts)
    # Every answer was a replica's, passed on: nginx answered none itself (a 502 or 504 of
    # its own carries no X-Outcome), and the client always gave up before nginx would.
    samples = pd.read_parquet(bdir / "samples.parquet")
    own = samples[samples["status"].isin([500, 502, 503, 504]) & (samples["outcome"] == "")]
    assert own.empty, own
    products = samples[samples["endpoint"] == "products"]
    assert (products["status"] == 200).all()


@pytest.mark.integration
@needs_nginx
def test_the_report_sums_the_replicas(replicated_run: Path) -> None:
    report = _report(replicated_run)
    assert _conforms(report, Report, "report") == []
    build = report["builds"]["scaled"]
    replicas = [build["replicas"][str(i)] for i in range(REPLICAS)]

    def total(section: str, key: str) -> float:
        return sum(r[section][key] for r in replicas)

    assert [r["workers"]["max_workers"] for r in replicas] == [WORKERS] * REPLICAS
    assert build["workers"]["max_workers"] == total("workers", "max_workers") == 24
    for key in ("blocked_total", "blocked_fault"):
        assert build["breaker"][key] == total("breaker", key) > 0, key
    assert build["pg"]["target_calls"] == total("pg", "target_calls") > 0
    assert build["pg"]["retries"] == total("pg", "retries") > 0
    # Busy workers are summed per scrape round: the sum's peak is at most the peaks' sum.
    peaks = [r["workers"]["busy_max_fault"] for r in replicas]
    assert max(peaks) <= build["workers"]["busy_max_fault"] <= sum(peaks)
    shares = [r["breaker"]["open_pct_fault"] for r in replicas]
    assert build["breaker"]["open_pct_fault"] == pytest.approx(sum(shares) / REPLICAS, abs=0.1)
    # Everything measured but the service's time to recover: the run ends in its outage, so
    # no request was intended after the fault for any endpoint to recover in.
    assert set(build.get("not_measured", {})) <= {"timeline.service_recover_s"}, build
    # Phases add up the same way: the outage's blocked calls are the replicas' sum.
    outage = build["phases"]["outage"]["breaker"]["blocked"]
    assert outage == build["breaker"]["blocked_fault"]
    markdown = (replicated_run / "report.md").read_text()
    assert "max workers" in markdown
    assert (replicated_run / "charts" / "breaker_state.png").stat().st_size > 10_000


def test_replicated_series_are_summed_per_scrape_round() -> None:
    """The build's series: at each of the last replica's scrapes, every replica's latest."""
    rows = []
    for t, source, busy, blocked in [
        (10.0, "target.0", 2, 0),
        (10.1, "target.1", 3, 1),
        (11.0, "target.0", 4, 2),
        (11.1, "target.1", 5, 5),
        (12.0, "target.0", 6, 2),  # target.1's scrape of this round failed
        (13.0, "target.0", 1, 3),
        (13.1, "target.1", 1, 9),
    ]:
        rows.append((t, source, "shop_workers_busy", "{}", float(busy)))
        rows.append((t, source, "shop_workers_max", "{}", 8.0))
        rows.append((t, source, "resilience4j_circuitbreaker_not_permitted_calls_total",
                     '{"name":"pg"}', float(blocked)))  # fmt: skip
    metrics = pd.DataFrame(rows, columns=["t", "source", "series", "labels", "value"])
    target = target_series(metrics, build_record("scaled", {"replicas": 2}))
    assert list(target.series["busy_workers"].items()) == [(10.1, 5.0), (11.1, 9.0), (13.1, 2.0)]
    assert list(target.series["max_workers"]) == [16.0, 16.0, 16.0]
    assert list(target.series["blocked_calls"]) == [1.0, 7.0, 12.0]
    assert [list(r["busy_workers"]) for r in target.replicas] == [[2, 4, 6, 1], [3, 5, 1]]
    # The state gauge is missing from both: not measured, naming a replica.
    assert target.missing["breaker_state"].startswith("target.0: ")
    alone = metrics[metrics["source"] == "target.0"].assign(source="target")
    one = target_series(alone, build_record("one", {}))
    assert one.replicas == [] and list(one.series["busy_workers"]) == [2, 4, 6, 1]


def test_replicas_zero_is_refused_with_its_line(tmp_path: Path) -> None:
    path = _scenario(tmp_path, SCENARIO.replace(f"replicas: {REPLICAS}", "replicas: 0"))
    line = next(
        n for n, text in enumerate(path.read_text().splitlines(), 1) if "replicas: 0" in text
    )
    done = subprocess.run(
        harness_cmd("validate", str(path)), cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{path}:{line}:" in done.stderr + done.stdout
    assert "builds.scaled.replicas" in done.stderr + done.stdout


def test_without_nginx_the_run_stops_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(balancer, "SEARCH_PATH", ())
    results = tmp_path / "results"
    with pytest.raises(RunError, match="nginx is not installed.*apt-get install nginx-light"):
        Experiment(load_scenario(_scenario(tmp_path)), results)
    assert not results.exists()  # no run folder, no process
