"""Seed 000 (retry-only vs retry + breaker) through the real ``harness run``, and a mutation.

``scenarios/ci/seeds/000-pg-timeout-short.yaml`` is ``scenarios/seeds/000-pg-timeout.yaml``
at CI scale (~25 s per build): the real gateway hangs, the real shop runs under
gunicorn, Locust sends the load. Its gates are the seed's claims; they must pass.
The mutation check needs no second run: ``after`` with its breaker taken away is
exactly ``before`` (the builds differ by the breaker alone, checked below), so the
key gates are evaluated again with ``before`` in place of ``after``, and must fail
on measured figures (or, for the breaker's own figure, as not measured). So the
gates are known to be able to fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.scenario.loader import load_scenario
from tests.conftest import ROOT
from tests.scenario_runs import (
    assert_mutants_fail,
    assert_nothing_left,
    run_with_passing_gates,
)

SHORT = ROOT / "scenarios" / "ci" / "seeds" / "000-pg-timeout-short.yaml"
FULL = ROOT / "scenarios" / "seeds" / "000-pg-timeout.yaml"
MUTATION_VERDICTS = {
    "seed: breaker frees the pool": "fail",
    "seed: breaker cuts product p95 by at least 64.8 %": "fail",
    "seed: breaker cuts product p99 by at least 57.7 %": "fail",
    "seed: blocked calls never reach the gateway": "fail",
    # Without a breaker nothing is refused: not measured, which counts as failed.
    "seed: breaker refuses about the payment rate": "error",
}
"""The key gates of the short scenario, and their verdicts with `before` in place of `after`."""


@pytest.mark.parametrize("path", [FULL, SHORT], ids=["full", "short"])
def test_the_seed_000_builds_keep_the_seeds_own_settings(path: Path) -> None:
    """What the seed states is not scaled: its breaker, Retry's 2 attempts; and the builds
    differ by the breaker alone, which the mutation check relies on."""
    builds = yaml.safe_load(path.read_text())["builds"]
    before, after = builds["before"], builds["after"]
    assert after["resilience4j"]["circuitbreaker"] == {
        "sliding-window-type": "COUNT_BASED",
        "sliding-window-size": 10,
        "minimum-number-of-calls": 10,
        "failure-rate-threshold": 50,
        "wait-duration-in-open-state": "10s",
        "permitted-number-of-calls-in-half-open-state": 3,
        "automatic-transition-from-open-to-half-open-enabled": True,
    }
    assert before["resilience4j"]["retry"]["max-attempts"] == 2
    # The builds differ by the breaker alone ("두 테스트에 동일한 부하와 자원 설정").
    assert before["pg-client"] == after["pg-client"]
    assert before["workers"] == after["workers"]
    assert before.get("db-pool") == after.get("db-pool")
    assert before["resilience4j"]["retry"] == after["resilience4j"]["retry"]
    # One read timeout for every build, as the seed ran them (no calibrated third build).
    assert set(builds) == {"before", "after"}


def test_the_seeds_after_figures_the_shop_misses_are_gated_as_known_misses() -> None:
    """With one read timeout the shop's `after` misses the seed's absolute figures; the gates
    keep the seed's figure and state the shop's side of it (they fail the day it matches)."""
    specs = load_scenario(FULL).scenario.gate_specs()
    misses = {s.seed: s.expr for s in specs if s.name and s.name.startswith("known miss")}
    assert misses == {
        "200 busy early": "after.busy_workers.max[outage] < after.max_workers",
        "2.54 s": "after.products.p95[outage] < 0.7 * 2.54s",
        "3.28 s": "after.products.p99[outage] < 0.7 * 3.28s",
        "4.42 s": "after.products.max[outage] < 0.7 * 4.42s",
    }
    # the seed's claims that hold are gated as claims, before's figures among them
    assert any(s.expr == "before.products.p95[outage] >= 0.7 * 7.21s" for s in specs)


@pytest.mark.integration
def test_short_seed_000_gates_pass_and_fail_without_the_breaker(tmp_path: Path) -> None:
    # 1. The seed's claims hold at CI scale.
    run_dir, report = run_with_passing_gates(SHORT, tmp_path, min_gates=7)
    assert report["builds"]["after"]["breaker"]["blocked_total"] > 0
    assert report["builds"]["before"]["workers"]["busy_max_fault"] == 16
    # the cap on open payments: before's queue reaches it and drops, after's never does
    before_payments = report["builds"]["before"]["endpoints"]["payments"]
    after_payments = report["builds"]["after"]["endpoints"]["payments"]
    assert before_payments["dropped"] > 0 and after_payments["dropped"] == 0
    assert before_payments["requests"] + before_payments["dropped"] == after_payments["requests"]
    assert_nothing_left(run_dir)

    # 2. Mutation: the key gates with the breakerless build in place of `after`.
    assert_mutants_fail(SHORT, report, MUTATION_VERDICTS)
