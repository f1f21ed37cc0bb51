"""Seed 004 through the real ``harness run``: its claims hold, and fail with the mechanism gone.

``scenarios/ci/seeds/004-thresholds-short.yaml`` is the full scenario at CI scale: a naive
breaker and rate-based ones against a gateway that blips for 1 s, then fails 90 % of calls
for 8 s, with payments and product-detail reads through the same breaker. Its gates are
the seed's claims and must all pass.

The mutation check needs no second run: each mechanism taken away gives a build the
scenario already has, so the key gates are read again with the build swapped for it:

* ``naive`` given the rate-based breaker's settings is ``probe-5``: the blip blocks nothing;
* ``probe-5`` with 1 half-open trial call instead of 5 needing 3 is ``probe-1``: it flaps;
* ``cached`` without its cached fallback is ``probe-5``: the reads are lost.

Each must then fail with a measured figure (a JUnit ``failure``, not an ``error``).
:func:`test_swaps_are_the_mutations` checks that each swapped-in build is the mutated one,
setting for setting.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT
from tests.scenario_runs import (
    assert_gates_fail,
    assert_nothing_left,
    run_with_passing_gates,
)

pytestmark = pytest.mark.integration

SHORT = ROOT / "scenarios" / "ci" / "seeds" / "004-thresholds-short.yaml"

# Key gate as written in the scenario -> the same gate read on the build without the mechanism.
SWAPPED = {
    "naive.blocked_pct_healthy >= 50": "probe-5.blocked_pct_healthy >= 50",
    "probe-5.breaker.opens_from_closed[flaky] <= 4": (
        "probe-1.breaker.opens_from_closed[flaky] <= 4"
    ),
    "cached.detail.kept_pct[flaky] >= 40": "probe-5.detail.kept_pct[flaky] >= 40",
}


def test_swaps_are_the_mutations() -> None:
    """Each build swapped in by ``SWAPPED`` is the original build with its mechanism taken
    away, and nothing else changed."""
    builds: dict[str, Any] = yaml.safe_load(SHORT.read_text())["builds"]
    text = SHORT.read_text()
    for gate in SWAPPED:
        assert gate in text, f"the key gate {gate!r} is no longer in the scenario"

    rate_based = copy.deepcopy(builds["naive"])  # the naive policy replaced by the rate-based
    assert rate_based["resilience4j"]["circuitbreaker"]["type"] == "naive"
    rate_based["resilience4j"]["circuitbreaker"] = builds["probe-5"]["resilience4j"][
        "circuitbreaker"
    ]
    assert rate_based == builds["probe-5"]

    one_probe = copy.deepcopy(builds["probe-5"])
    breaker = one_probe["resilience4j"]["circuitbreaker"]
    assert breaker["permitted-number-of-calls-in-half-open-state"] == 5
    breaker["permitted-number-of-calls-in-half-open-state"] = 1
    assert one_probe == builds["probe-1"]

    no_cache = copy.deepcopy(builds["cached"])
    assert no_cache["resilience4j"].pop("fallback")["kind"] == "cached"
    assert no_cache == builds["probe-5"]


def test_short_seed_004_gates_pass_and_fail_without_the_mechanism(tmp_path: Path) -> None:
    # 1. The seed's claims hold.
    run_dir, report = run_with_passing_gates(SHORT, tmp_path, min_gates=8)
    builds = report["builds"]
    flaky = builds["cached"]["phases"]["flaky"]["endpoints"]["detail"]
    assert flaky["cached_pct"] > 0  # what was kept came from the cache
    assert builds["probe-5"]["phases"]["flaky"]["endpoints"]["detail"]["cached_pct"] == 0
    assert_nothing_left(run_dir)

    # 2. The mechanisms taken away: the key gates, read on the builds that lack them.
    assert_gates_fail(run_dir, list(SWAPPED.values()), tmp_path / "mutant-gates.xml")
