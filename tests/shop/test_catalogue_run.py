"""Integration: seed 004's cached fallback through the real ``harness run``.

Two shop builds read product details through the gateway's catalogue, the same
retry and breaker, one with a ``cached`` fallback and one without. Reads in
the warmup and the healthy baseline fill the cache (ids 1-50, about 56 reads:
some two thirds of the ids); then the gateway hangs. The build with the
fallback keeps serving the products it read before, stale; the other serves
none. Seed 004 reports about 60% of product-detail reads served during its
outage: the direction is the claim, not the number.
"""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import ROOT, harness_cmd, leftover_processes

pytestmark = pytest.mark.integration

BREAKER = """\
      retry: {max-attempts: 1}
      circuitbreaker:
        sliding-window-size: 10
        minimum-number-of-calls: 5
        failure-rate-threshold: 50
        wait-duration-in-open-state: 30s
"""

SCENARIO = f"""\
name: detail-kept
seed: 4
warmup: 2s
duration: 16s
traffic:
  detail:
    path: "/api/products/{{id}}/detail"
    params: {{id: [1, 50]}}
    rate: 8
    timeout: 5s
    idempotency-key: true
    calls-gateway: true
pg:
  phases:
    - {{name: baseline, start: 0s, duration: 5s, fault: {{type: healthy}}}}
    - {{name: outage, start: 5s, duration: 11s, fault: {{type: timeout}}}}
builds:
  none:
    profile: retry-circuit-breaker
    workers: 16
    pg-client: {{connect-timeout: 500ms, read-timeout: 500ms}}
    resilience4j:
{BREAKER}
  cached:
    profile: retry-circuit-breaker
    workers: 16
    pg-client: {{connect-timeout: 500ms, read-timeout: 500ms}}
    resilience4j:
{BREAKER}\
      fallback: {{kind: cached, ttl: 1m}}
gates:
  # seed 004: "a cached fallback kept about 60% of product detail reads served during an outage"
  - name: a cached fallback keeps product details served during the outage
    expr: "cached.detail.kept_pct[outage] >= none.detail.kept_pct[outage] + 30"
  - "cached.detail.cached_pct[outage] >= 30"
  - "none.detail.cached_pct[outage] == 0"
  - "cached.detail.kept_pct[baseline] == 100"
"""


def _verdicts(junit: Path) -> dict[str, str]:
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error")]
        out[case.get("name", "")] = kinds[0] if kinds else "pass"
    return out


def test_a_cached_fallback_keeps_product_details_served_during_an_outage(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "detail-kept.yaml"
    scenario.write_text(SCENARIO)
    results, junit = tmp_path / "results", tmp_path / "gates.xml"
    done = subprocess.run(
        harness_cmd("run", str(scenario), "--results", str(results), "--junit", str(junit)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "Traceback" not in done.stderr
    (run_dir,) = [p for p in results.glob("*/*") if (p / "manifest.json").is_file()]
    assert set(_verdicts(junit).values()) == {"pass"}, _verdicts(junit)
    assert leftover_processes(json.loads((run_dir / "manifest.json").read_text())["run_id"]) == []

    report = json.loads((run_dir / "report.json").read_text())
    builds = report["builds"]
    outage = {b: builds[b]["phases"]["outage"]["endpoints"]["detail"] for b in builds}
    none, cached = outage["none"], outage["cached"]
    assert none["kept_pct"] <= 5.0 and none["cached_pct"] == 0.0
    assert 40.0 <= cached["kept_pct"] <= 95.0  # the products read before; never a new one
    assert cached["cached_pct"] >= cached["kept_pct"] - 10.0  # kept mostly from the cache
    assert "not_permitted" in none["errors"]  # the breaker opened: misses fail fast
    # report.md shows it, per phase.
    markdown = (run_dir / "report.md").read_text()
    assert "## Service kept" in markdown and "| outage | cached |" in markdown

    # Every read reached the gateway's ledger with its path and the request's key; reads
    # count in pg.calls, and the ledger's payment figures have no payment to look at.
    for name in ("none", "cached"):
        ledger = pd.read_parquet(run_dir / name / "pg.parquet")
        assert len(ledger) > 0
        assert ledger["path"].str.match(r"^/v1/catalogue/products/\d+$").all()
        assert ledger["key"].str.match(r"^product-\d+/.+").all()
        assert report["builds"][name]["ledger"] is None
        assert report["builds"][name]["pg"]["calls"] > 0
    # The same requests met the same fates: the healthy baseline served all in both builds.
    base = {b: builds[b]["phases"]["baseline"]["endpoints"]["detail"] for b in builds}
    assert base["none"]["kept_pct"] == base["cached"]["kept_pct"] == 100.0
