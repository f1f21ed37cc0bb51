"""``harness tune`` on a jar build: the real spring-shop jar, one JVM a candidate, each
handed its own ``resilience4j:`` properties (``scenarios/ci/tune-spring-short.yaml``: the
seed's breaker with its open wait swept, 10 s, 5 s, 2 s). The properties must reach each
JVM (its ``application.yml``, and a behaviour only the open wait explains: 10 s is still
open when the gateway heals, 2 s lets payments back in), the recommendation must be the
brute-force answer over the candidates' own reports, and it is printed as an
``application.yml`` block. About 4 minutes (3 JVMs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.scenario_runs import assert_nothing_left, run_harness
from tests.spring.conftest import needs_java, spring_jar  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.integration, needs_java, pytest.mark.usefixtures("spring_jar")]

SWEEP = ROOT / "scenarios" / "ci" / "tune-spring-short.yaml"
OPEN_WAIT = {"after": "10s", "open5s": "5s", "open2s": "2s"}


def test_a_jar_sweep_hands_each_jvm_its_settings_and_recommends_the_best(tmp_path: Path) -> None:
    done = run_harness(["tune", str(SWEEP), "--results", str(tmp_path)], 1200)
    out = done.stdout + done.stderr
    (folder,) = (tmp_path / "tune-spring-short").glob("tune-*")
    result = json.loads((folder / "tune.json").read_text())
    assert result["complete"], out
    errors: dict[str, float] = {}
    protected: dict[str, float] = {}
    aborted: set[str] = set()
    for run_dir in (folder / "runs" / "tune-spring-short").iterdir():
        assert_nothing_left(run_dir)
        report = json.loads((run_dir / "report.json").read_text())
        for name, build in report["builds"].items():
            # the JVM was handed this candidate's open wait, and nothing else differs
            written = yaml.safe_load((run_dir / name / "application.yml").read_text())
            breaker = written["resilience4j"]["circuitbreaker"]["instances"]["pgClient"]
            assert breaker["wait-duration-in-open-state"] == OPEN_WAIT[name]
            assert breaker["sliding-window-size"] == 10
            if build["status"] == "aborted":  # stopped early past its outage constraint
                aborted.add(name)
                continue
            assert build["status"] == "completed", out
            phases = build["phases"]
            # error_pct is a figure of the gate grammar: 100 - success_pct
            errors[name] = 100 - phases["recovery"]["endpoints"]["payments"]["success_pct"]
            protected[name] = phases["outage"]["endpoints"]["products"]["latency_s"]["p95"]
            assert build["breaker"]["blocked_total"] > 0, name  # every candidate opened
    assert set(errors) | aborted == set(OPEN_WAIT), out
    by_name = {c["name"]: c for c in result["candidates"]}
    # A candidate stopped early (its products p95 in the outage past 1 s: a loaded machine
    # can starve the 16 threads) is infeasible; the comparisons below are of the others.
    assert not any(by_name[name]["feasible"] for name in aborted), result
    # Only the open wait explains this: 10 s reopens on its failed probes in the outage and
    # is still open when the gateway heals; 2 s probes again within the recovery phase.
    if {"open2s", "after"} <= set(errors):
        assert errors["open2s"] < errors["after"], errors
    feasible = {name: errors[name] for name in errors if protected[name] <= 1.0}
    assert {n for n, c in by_name.items() if c["feasible"]} == set(feasible), protected
    if not feasible:
        assert result["recommended"] is None and done.returncode == 1, out
        return
    # The best by the objective (then the name) of the feasible candidates on the front of
    # [payments error % in the recovery, products p95 in the outage]: the objective is one
    # of the front's scores, and ties at 0 % went to the first name though another
    # candidate had the better p95 (issue 30, item 7).
    points = {n: (feasible[n], protected[n]) for n in feasible}
    front = {
        n
        for n, (x, y) in points.items()
        if not any(a <= x and b <= y and (a, b) != (x, y) for a, b in points.values())
    }
    best = min(front, key=lambda n: (feasible[n], n))
    assert result["recommended"] == best and done.returncode == 0, out
    assert by_name[best]["objective"] == pytest.approx(errors[best], abs=0.01)
    # the recommendation in Spring's own language: an application.yml resilience4j: block
    assert f"recommended: {best}" in done.stdout
    assert "resilience4j:" in done.stdout and "pgClient:" in done.stdout
    assert f"wait-duration-in-open-state: {OPEN_WAIT[best]}" in done.stdout
