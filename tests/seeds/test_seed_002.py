"""Seed 002 through the real ``harness run``: its claims hold, and fail with the mechanism gone.

``scenarios/ci/seeds/002-retry-fallback-short.yaml`` is the full scenario at CI scale:
five shop builds (three shops behind nginx, and one behind the same nginx) against a
gateway that is flaky for 4 s, then down for 5 s. Its gates are the seed's claims and must all pass.

The mutation check needs no second run: each mechanism taken away gives a build the
scenario already has, so the key gates are read again with the build swapped for it:

* ``cb-correct`` with its fallback moved back onto the breaker is ``cb-wrong``: Retry
  never retries;
* ``breaker-outside`` with Retry moved outside the breaker is ``cb-correct``: every attempt
  fills the window, so it opens in the flaky phase;
* ``replicas-3`` with one replica is ``replicas-1`` (a build only this check reads): one
  breaker behind the same load balancer, no more gateway calls than ``cb-correct``.

Each must then fail with a measured figure (a JUnit ``failure``, not an ``error`` for a
figure that is missing): the gates are able to fail. :func:`test_swaps_are_the_mutations`
checks that each swapped-in build is the mutated one, setting for setting.
"""

from __future__ import annotations

import copy
import shutil
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

SHORT = ROOT / "scenarios" / "ci" / "seeds" / "002-retry-fallback-short.yaml"

# Key gate as written in the scenario -> the same gate read on the build without the mechanism.
SWAPPED = {
    "cb-correct.pg.retries > 0": "cb-wrong.pg.retries > 0",
    "breaker-outside.breaker.open_pct[flaky] <= 5": "cb-correct.breaker.open_pct[flaky] <= 5",
    "replicas-3.pg.calls[outage] >= 2 * cb-correct.pg.calls[outage]": (
        "replicas-1.pg.calls[outage] >= 2 * cb-correct.pg.calls[outage]"
    ),
}

needs_nginx = pytest.mark.skipif(
    shutil.which("nginx", path="/usr/sbin:/usr/bin:/sbin:/bin") is None,
    reason="replicas need nginx (apt-get install nginx-light)",
)


def test_swaps_are_the_mutations() -> None:
    """Each build swapped in by ``SWAPPED`` is the original build with its mechanism taken
    away, and nothing else changed."""
    builds: dict[str, Any] = yaml.safe_load(SHORT.read_text())["builds"]
    text = SHORT.read_text()
    for gate in SWAPPED:
        assert gate in text, f"the key gate {gate!r} is no longer in the scenario"

    inside = copy.deepcopy(builds["cb-correct"])  # the fallback moved back onto the breaker
    layers = inside["resilience4j"]
    layers["circuitbreaker"] = {**layers["circuitbreaker"], "fallback": layers.pop("fallback")}
    assert inside == builds["cb-wrong"]

    retry_outside = copy.deepcopy(builds["breaker-outside"])
    assert retry_outside["resilience"] == ["circuit-breaker", "retry"]
    retry_outside["resilience"] = ["retry", "circuit-breaker"]
    assert retry_outside == builds["cb-correct"]

    one = copy.deepcopy(builds["replicas-3"])
    assert one["replicas"] == 3
    one["replicas"] = 1
    assert one == builds["replicas-1"]
    del one["replicas"]
    assert one == builds["cb-correct"]


@needs_nginx
def test_short_seed_002_gates_pass_and_fail_without_the_mechanism(tmp_path: Path) -> None:
    # 1. The seed's claims hold.
    run_dir, report = run_with_passing_gates(SHORT, tmp_path, min_gates=7)
    builds = report["builds"]
    assert builds["cb-wrong"]["pg"]["retries"] == 0
    assert builds["cb-correct"]["pg"]["retries"] > 0
    replicas = builds["replicas-3"]["replicas"]
    assert sorted(replicas) == ["0", "1", "2"]
    for replica in replicas.values():  # three breakers, each opened on its own calls
        assert replica["breaker"]["present"] and replica["breaker"]["time_to_open_s"] is not None
    assert_nothing_left(run_dir)

    # 2. The mechanisms taken away: the key gates, read on the builds that lack them.
    assert_gates_fail(run_dir, list(SWAPPED.values()), tmp_path / "mutant-gates.xml")
