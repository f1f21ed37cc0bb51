"""Seed 003, the shop side (scale out vs separate), through the real ``harness run``; mutation.

``scenarios/ci/seeds/003-scale-out-short.yaml`` is ``scenarios/seeds/003-scale-out.yaml``
at CI scale (~20 s per build): a vendor that turns slow then fails, one shop,
two shops behind a real nginx (``replicas: 2``), and one shop whose vendor calls
run in a thread-pool bulkhead. Its gates are the seed's claims; they must pass.
The mutation check needs no second run: ``two`` with ``replicas: 1`` and
``separated`` without its bulkhead are exactly ``one`` (checked below), so the
key gates are evaluated again with ``one`` in their place and must fail on
measured figures: the gates are known to be able to fail.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

from harness.gates.evaluate import evaluate
from harness.scenario.gates import parse_gate
from harness.scenario.loader import load_scenario
from tests.conftest import ROOT
from tests.scenario_runs import (
    assert_nothing_left,
    run_with_passing_gates,
)

SHORT = ROOT / "scenarios" / "ci" / "seeds" / "003-scale-out-short.yaml"
FULL = ROOT / "scenarios" / "seeds" / "003-scale-out.yaml"
MUTATIONS = {
    "seed: scaling out 2x raised the calls to the vendor (about 2x)": "two",
    "seed: separated vendor workers keep unrelated reads under 300 ms": "separated",
    "seed: separation cuts unrelated reads' p99 at least 5x (p95 at this scale)": "separated",
}
"""Key gate of the short scenario -> the build whose mechanism it is about."""

NGINX = shutil.which("nginx", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"]))
needs_nginx = pytest.mark.skipif(
    NGINX is None, reason="nginx is not installed (apt-get install nginx-light; .ci/run does)"
)


@pytest.mark.parametrize("path", [FULL, SHORT], ids=["full", "short"])
def test_the_seed_003_builds_differ_by_one_mechanism_each(path: Path) -> None:
    """``two`` is ``one`` scaled out, ``separated`` is ``one`` with a bulkhead: nothing else."""
    builds = yaml.safe_load(path.read_text())["builds"]
    one, two, separated = builds["one"], builds["two"], builds["separated"]
    assert "replicas" not in one and two["replicas"] == 2
    assert {**two, "replicas": 1} == {**one, "replicas": 1}
    bulkhead = separated["resilience4j"].pop("thread-pool-bulkhead")
    assert separated == one
    # The separated workers hold fewer request threads than the pool has: reads keep some.
    assert bulkhead["max-thread-pool-size"] + bulkhead["queue-capacity"] < one["workers"]
    # The day's retries ("재시도는 실패 시 즉시 2회"): 3 attempts, no wait.
    assert one["resilience4j"]["retry"] == {"max-attempts": 3, "wait-duration": "0s"}


@pytest.mark.integration
@needs_nginx
def test_short_seed_003_gates_pass_and_fail_without_replicas_or_separation(
    tmp_path: Path,
) -> None:
    # 1. The seed's claims hold at CI scale.
    run_dir, report = run_with_passing_gates(SHORT, tmp_path, min_gates=7, timeout=400)
    assert report["builds"]["two"]["workers"]["max_workers"] == 12  # 2 shops x 6, summed
    assert len(report["builds"]["two"]["replicas"]) == 2
    assert_nothing_left(run_dir)

    # 2. Mutation: the key gates with one shop in place of the mechanism's build.
    gates = {g.name: g.expr for g in load_scenario(SHORT).scenario.gate_specs()}
    for name, build in MUTATIONS.items():
        expr = gates[name]
        assert evaluate(parse_gate(expr), report).verdict == "pass", name
        mutant = re.sub(rf"\b{build}\.", "one.", expr)
        assert mutant != expr
        assert evaluate(parse_gate(mutant), report).verdict == "fail", (name, mutant)
