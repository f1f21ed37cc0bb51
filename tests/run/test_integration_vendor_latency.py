"""Integration: seed 003 (vendor latency) through the real ``harness run``, and a mutation.

``scenarios/ci/vendor-latency-short.yaml`` is ``scenarios/vendor-latency.yaml``
at CI scale (~45 s per build): the Node gateway of ``targets/node-gateway``
started as ``command`` builds, ``before`` (30 s timeout, 2 immediate retries)
against ``after`` (the real opossum breaker), a vendor that waits 2 s then
fails for 20 s. Its gates are the seed's claims; they must pass. Then the same
scenario with the ``after`` build's breaker switched off (``BREAKER=0``) must
fail the key gate, the vendor load during the fault (the seed's "0.2x normal,
open"), with a measured value rather than a missing one: the gates are not
passing by accident.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.scenario_runs import (
    assert_nothing_left,
    junit_verdicts,
    only_run,
    run_harness,
    run_with_passing_gates,
)

pytestmark = pytest.mark.integration

NODE_GATEWAY = ROOT / "targets" / "node-gateway"
SHORT = ROOT / "scenarios" / "ci" / "vendor-latency-short.yaml"
KEY_GATE = "seed: vendor QPS during the fault at most 0.3x normal after"
KEY_EXPR = "after.pg.calls[outage] / 20s <= 0.3 * after.pg.calls[baseline] / 6s"

needs_node = pytest.mark.skipif(
    shutil.which("node") is None or not (NODE_GATEWAY / "node_modules" / "opossum").is_dir(),
    reason="needs node and targets/node-gateway/node_modules "
    "(`make node-deps`, or `npm ci --prefix targets/node-gateway`)",
)


@needs_node
def test_short_vendor_latency_gates_pass_and_a_breakerless_after_fails(tmp_path: Path) -> None:
    assert KEY_EXPR in SHORT.read_text(), "the key gate's text changed; update KEY_EXPR"

    # 1. The seed's claims hold: before saturates its cap and storms the vendor, after does not.
    run_dir, report = run_with_passing_gates(SHORT, tmp_path, min_gates=9)
    after = report["builds"]["after"]
    assert after["breaker"]["blocked_total"] > 0  # opossum's event="reject", read by the preset
    assert report["builds"]["before"]["breaker"]["blocked_total"] is None  # no breaker: "-", not 0
    assert_nothing_left(run_dir)

    # 2. Mutation: the same scenario, the after build without its breaker. Only that
    #    build is run; gates naming `before` then have no figures (errors), so the
    #    key gate is checked to be a measured failure, and alone through `harness gate`.
    text = SHORT.read_text()
    mutated = text.replace("cwd: ../../targets/node-gateway", f"cwd: {NODE_GATEWAY}")
    mutated = mutated.replace("PROFILE: after,", "PROFILE: after, BREAKER: 0,")
    assert mutated.count("BREAKER: 0") == 1 and str(NODE_GATEWAY) in mutated
    mutant = tmp_path / "vendor-latency-mutant.yaml"
    mutant.write_text(mutated)
    mutant_results = tmp_path / "mutant-results"
    mutant_junit = tmp_path / "mutant-gates.xml"
    done = run_harness(
        [
            "run",
            str(mutant),
            "--build",
            "after",
            "--results",
            str(mutant_results),
            "--junit",
            str(mutant_junit),
        ]
    )
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-4000:]
    mutant_dir = only_run(mutant_results)
    assert junit_verdicts(mutant_junit)[KEY_GATE] == "failure"
    mutant_after = json.loads((mutant_dir / "report.json").read_text())["builds"]["after"]
    fault_calls = mutant_after["phases"]["outage"]["pg"]["calls"]
    baseline_calls = mutant_after["phases"]["baseline"]["pg"]["calls"]
    assert fault_calls / 20 > 0.3 * baseline_calls / 6  # every verification reached the vendor
    assert_nothing_left(mutant_dir)

    alone = ["--no-scenario-gates", "-g", KEY_EXPR]
    assert run_harness(["gate", str(mutant_dir), *alone], timeout=120).returncode == 1
    assert run_harness(["gate", str(run_dir), *alone], timeout=120).returncode == 0
