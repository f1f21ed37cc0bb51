"""``harness tune --screen`` on the CI sweep through the real CLI: the simulator first, then
real shop builds, real gateway and Locust. Its recommendation must be the brute-force
answer computed here from the same candidates' own ``report.json`` figures (the best by the
objective of the feasible candidates on the front), the early stop must have stopped a
candidate, and ``--check`` must pass on the recommendation. About 3
minutes (7 candidates simulated in ~25 s, then run for real, ~20 s each)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.scenario_runs import assert_nothing_left, run_harness

pytestmark = pytest.mark.integration

CI = ROOT / "scenarios" / "ci" / "tune-short.yaml"


def _figures(build: dict[str, Any]) -> tuple[float | None, float, float]:
    """The objective and both constraints' figures, read straight from a build's report (an
    aborted build has no outage: its load stopped after calm, when a constraint failed)."""
    phases = build["phases"]
    outage = phases.get("outage")
    return (
        None if outage is None else outage["endpoints"]["products"]["latency_s"]["p99"],
        build["timeline"]["blocked_pct_healthy"],
        phases["calm"]["endpoints"]["payments"]["success_pct"],
    )


def test_the_tune_recommends_the_brute_force_answer(tmp_path: Path) -> None:
    done = run_harness(["tune", str(CI), "--results", str(tmp_path), "--screen"], 600)
    out = done.stdout + done.stderr
    (folder,) = (tmp_path / "tune-short").glob("tune-*")
    assert (folder / "tune.json").is_file(), out
    result = json.loads((folder / "tune.json").read_text())
    assert result["complete"], out
    figures: dict[str, tuple[float | None, float, float]] = {}
    aborted = set()
    for run_dir in (folder / "runs" / "tune-short").iterdir():
        assert_nothing_left(run_dir)
        report = json.loads((run_dir / "report.json").read_text())
        for name, build in report["builds"].items():
            assert build["status"] in ("completed", "aborted")
            figures[name] = _figures(build)
            if build["status"] == "aborted":  # the early stop: its constraint failed
                aborted.add(name)
                assert build["abort"]["phase"] in ("calm", "outage")
    assert len(figures) == 7 and "current" in figures
    # The early stop: the breaker that never opens stops after the outage (its reads wait).
    assert "fr90-w60" in aborted, out
    # The screen simulated all 7 first and, 7 being few, ran all for real: the simulator's
    # error is measured against every one.
    assert "screened: 7 candidates simulated; 7 run for real" in out
    assert sorted(r["name"] for r in result["simulator_error"]) == sorted(figures)
    assert "simulator vs measured, current:" in out
    feasible = {
        n: (f[0], f[1], f[2])
        for n, f in figures.items()
        if f[0] is not None and f[0] <= 0.7 and f[1] <= 25 and f[2] >= 50 and n not in aborted
    }
    by_name = {c["name"]: c for c in result["candidates"]}
    assert {n for n, c in by_name.items() if c["feasible"]} == set(feasible)
    if not feasible:  # nothing meets the constraints: nothing recommended, exit 1
        assert result["recommended"] is None and done.returncode == 1, out
        return
    # The recommendation: the best by the objective (then the name) of the feasible ones
    # on the front of [blocked_pct_healthy, products p99 in the outage].
    points = {n: (f[1], f[0]) for n, f in feasible.items()}
    front = {
        n
        for n, (x, y) in points.items()
        if not any(a <= x and b <= y and (a, b) != (x, y) for a, b in points.values())
    }
    assert set(result["front"]) == front, result["front"]
    best = min(front, key=lambda n: (feasible[n][0], n))
    assert result["recommended"] == best and done.returncode == 0, out
    assert by_name[best]["objective"] == figures[best][0]
    assert by_name["current"]["origin"] == "current"
    assert (folder / "front.png").stat().st_size > 1000
    assert f"recommended: {best}" in done.stdout
    check = run_harness(["tune", "--report", str(folder), "--check", best], 120)
    assert check.returncode == 0, check.stdout + check.stderr  # it passes its own check
