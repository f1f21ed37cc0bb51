"""Repetitions combined: means, bootstrap intervals, and figures flattened for comparison."""

from __future__ import annotations

from typing import cast

import numpy as np

from harness.analysis.combine import bootstrap_ci, change_pct, combine_repetitions, flatten
from harness.analysis.model import BuildFigures


def _build(p95: float) -> BuildFigures:
    """A partial build section, as older or hand-written reports may have."""
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
    return cast(BuildFigures, b)


def test_bootstrap_interval_contains_the_mean_and_shrinks_with_agreement() -> None:
    rng = np.random.default_rng(0)
    wide = bootstrap_ci([1.0, 5.0, 9.0], rng)
    narrow = bootstrap_ci([4.9, 5.0, 5.1], rng)
    assert wide[0] < 5.0 < wide[1] and narrow[0] < 5.0 < narrow[1]
    assert (narrow[1] - narrow[0]) < (wide[1] - wide[0]) / 10


def test_repetitions_are_averaged_with_intervals() -> None:
    reps = [_build(p) for p in (1.0, 2.0, 3.0)]
    combined = combine_repetitions(reps)
    assert combined["repetitions"] == 3
    assert combined["endpoints"]["products"]["latency_s"]["p95"] == 2.0
    low, high = combined["ci95"]["products.latency_s.p95"]
    assert 1.0 <= low < 2.0 < high <= 3.0


def test_flatten_names_figures_by_section_and_phase() -> None:
    build = _build(2.0)
    build["phases"] = {"outage": _build(3.0)}  # type: ignore[typeddict-item]
    build["breaker"] = {"present": True, "blocked_total": 7}  # type: ignore[typeddict-item]
    flat = flatten(build)
    assert flat["products.latency_s.p95"] == 2.0
    assert flat["products.latency_s.p95[outage]"] == 3.0
    assert flat["workers.busy_p50_fault"] == 20.0
    assert flat["breaker.blocked_total"] == 7.0
    assert "breaker.present" not in flat  # booleans are not figures


def test_change_pct() -> None:
    assert change_pct(7.21, 2.54) == -64.8
    assert change_pct(0, 5) is None
    assert change_pct(None, 5) is None


def test_a_warning_of_any_repetition_is_kept_once() -> None:
    first, second, third = _build(1.0), _build(2.0), _build(3.0)
    first["warnings"] = ["the breaker opened again"]
    third["warnings"] = ["the breaker opened again", "another"]
    combined = combine_repetitions([first, second, third])
    assert combined["warnings"] == ["the breaker opened again", "another"]
    assert "warnings" not in combine_repetitions([_build(1.0), _build(2.0)])
