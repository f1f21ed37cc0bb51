"""Comparisons of runs and builds, and repetitions with bootstrap intervals."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from harness.analysis.figures import bootstrap_ci, combine_repetitions
from harness.core.errors import InputError
from harness.report.compare import compare_builds, compare_runs
from tests.conftest import ROOT, harness_cmd, short_scenario


def _build(p95: float, ci: tuple[float, float] | None = None) -> dict[str, object]:
    b: dict[str, object] = {
        "endpoints": {
            "products": {
                "latency_s": {"p50": 0.1, "p95": p95, "p99": p95, "max": p95},
                "success_pct": 100.0,
                "achieved_rps": 10.0,
            }
        },
        "workers": {"busy_p50_fault": 20.0},
    }
    if ci is not None:
        b["ci95"] = {"products.latency_s.p95": list(ci)}
    return b


def test_compare_builds_marks_differences_beyond_noise() -> None:
    rows = {r.figure: r for r in compare_builds(_build(2.0, (1.8, 2.2)), _build(1.0, (0.9, 1.1)))}
    p95 = rows["products.latency_s.p95"]
    assert (p95.a, p95.b, p95.change_pct, p95.beyond_noise) == (2.0, 1.0, -50.0, True)
    overlapping = compare_builds(_build(2.0, (1.0, 3.0)), _build(1.5, (1.2, 1.8)))
    assert {r.figure: r for r in overlapping}["products.latency_s.p95"].beyond_noise is False
    assert rows["products.latency_s.p50"].beyond_noise is None  # no interval: not judged


def test_compare_runs_picks_builds() -> None:
    a = {"run_id": "a", "builds": {"before": _build(7.0), "after": _build(2.0)}}
    b = {"run_id": "b", "builds": {"after": _build(3.0)}}
    labels, groups = compare_runs(a, None, ["before", "after"])
    assert labels == ["before", "after"] and list(groups) == ["before vs after"]
    labels, groups = compare_runs(a, b, [])
    assert labels == ["a", "b"] and list(groups) == ["after"]
    with pytest.raises(InputError, match="exactly two builds"):
        compare_runs(a, None, ["after"])
    with pytest.raises(InputError, match="not in both runs"):
        compare_runs(a, b, ["before"])


def test_bootstrap_interval_contains_the_mean_and_shrinks_with_agreement() -> None:
    rng = np.random.default_rng(0)
    wide = bootstrap_ci([1.0, 5.0, 9.0], rng)
    narrow = bootstrap_ci([4.9, 5.0, 5.1], rng)
    assert wide[0] < 5.0 < wide[1] and narrow[0] < 5.0 < narrow[1]
    assert (narrow[1] - narrow[0]) < (wide[1] - wide[0]) / 10


def test_repetitions_are_averaged_with_intervals() -> None:
    reps = [_build(p) for p in (1.0, 2.0, 3.0)]
    combined = combine_repetitions(reps)  # type: ignore[arg-type]
    assert combined["repetitions"] == 3
    assert combined["endpoints"]["products"]["latency_s"]["p95"] == 2.0
    low, high = combined["ci95"]["products.latency_s.p95"]
    assert 1.0 <= low < 2.0 < high <= 3.0


@pytest.mark.integration
def test_compare_command_and_repeats(short_run: Path, tmp_path: Path) -> None:
    within = subprocess.run(
        harness_cmd(
            "compare",
            str(short_run),
            "--build",
            "before",
            "--build",
            "after",
            "--markdown",
            str(tmp_path / "cmp.md"),
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert within.returncode == 0, within.stderr
    assert "before vs after" in within.stdout
    assert "| products.latency_s.p95 |" in (tmp_path / "cmp.md").read_text()

    results = tmp_path / "results"
    repeated = subprocess.run(
        harness_cmd(
            "run",
            str(short_scenario(tmp_path, "8s", "5s")),
            "--results",
            str(results),
            "--repeat",
            "2",
            "--build",
            "after",
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert repeated.returncode in (0, 1), repeated.stdout + repeated.stderr
    (run_dir,) = (results / "short").iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert list(manifest["builds"]) == ["after.r1", "after.r2"]
    report = json.loads((run_dir / "report.json").read_text())
    after = report["builds"]["after"]
    assert after["repetitions"] == 2 and "products.latency_s.p95" in after["ci95"]

    across = subprocess.run(
        harness_cmd("compare", str(short_run), str(run_dir)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert across.returncode == 0, across.stderr
    assert "products.latency_s.p95" in across.stdout
    bad = subprocess.run(
        harness_cmd("compare", str(short_run), "--build", "after"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "exactly two builds" in bad.stderr
