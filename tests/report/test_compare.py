"""Comparisons of runs and builds: rows, noise, and which builds are compared."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.errors import InputError
from harness.report.compare import compare_builds, compare_runs, markdown


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


def test_markdown_rows_use_the_shared_number_format() -> None:
    rows = compare_builds(_build(2.0, (1.8, 2.2)), _build(1.0, (0.9, 1.1)))
    text = markdown(["before", "after"], {"before vs after": rows})
    assert "| figure | before | after | change | beyond noise | verdict |" in text
    # Each repeated side with its 95% interval.
    assert "| products.latency_s.p95 | 2 [1.8, 2.2] | 1 [0.9, 1.1] | -50.0% | yes |" in text
    assert "| products.latency_s.p50 | 0.1 | 0.1 | +0.0% | n/a | not enough data |" in text


def test_the_verdict_column_is_the_judges() -> None:
    rng = np.random.default_rng(5)
    base = [0.02 * v for v in rng.lognormal(0.0, 0.1, 12)]
    slow, same = _build(2.0), _build(2.0)
    before = _build(2.0)
    before["blocks"] = {"products.latency_s.p95": base}
    slow["blocks"] = {"products.latency_s.p95": [v * 1.5 for v in base]}
    same["blocks"] = {"products.latency_s.p95": base[::-1]}
    rows = {r.figure: r for r in compare_builds(before, slow)}
    assert rows["products.latency_s.p95"].verdict.startswith("worse (+50%, p=")
    assert rows["products.latency_s.p99"].verdict == "not enough data"  # no blocks for it
    assert rows["workers.busy_p50_fault"].verdict == "-"  # a figure the judge does not know
    same_rows = {r.figure: r for r in compare_builds(before, same)}
    assert same_rows["products.latency_s.p95"].verdict.startswith("within noise")
    text = markdown(["before", "after"], {"before vs after": compare_builds(before, slow)})
    assert "| products.latency_s.p95 | 2 | 2 | +0.0% | n/a | worse (+50%, p=" in text
