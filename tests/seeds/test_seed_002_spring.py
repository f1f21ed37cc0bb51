"""Seed 002 on the real thing: spring-shop (Spring AOP, Resilience4j 2.3.0) through ``harness run``.

``scenarios/ci/seeds/002-retry-fallback-spring-short.yaml`` is seed 002's Spring scenario at
CI scale (three JVMs, ~35 s each here). On the shop the trap is code we wrote; here it is
observed, at the gateway, which the service does not write:

* the ledger (``pg.parquet``, attempts per Idempotency-Key): cb-wrong's payments reach the
  gateway once each, cb-correct's are retried;
* resilience4j#2383: the failures the breaker recorded (``breaker_failures``, from
  ``resilience4j_circuitbreaker_calls_seconds_count{kind="failed"}``) against the ledger's
  own count (every failed call with Retry outside, the default aspect order; each payment
  whose attempts all failed with the breaker outside), and per payment that met a failure
  in the flaky phase: at least one with Retry outside, almost none with the breaker outside.

The mutation check, as the shop's (tests/seeds/test_seed_002.py): each mechanism taken away
is a build the scenario already has, so the key gates are read again with it swapped in
(cb-correct with the fallback back on the breaker is cb-wrong; breaker-outside with the
default aspect order is cb-wrong too); each must then fail with a measured figure.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from tests.conftest import ROOT
from tests.scenario_runs import (
    assert_gates_fail,
    assert_nothing_left,
    run_with_passing_gates,
)
from tests.spring.conftest import needs_java, spring_jar  # noqa: F401 (the jar's fixture)

pytestmark = [pytest.mark.integration, needs_java]

SHORT = ROOT / "scenarios" / "ci" / "seeds" / "002-retry-fallback-spring-short.yaml"

SWAPPED = {
    "cb-correct.pg.retries > 0": "cb-wrong.pg.retries > 0",
    "breaker-outside.breaker.open_pct[flaky] <= 5": "cb-wrong.breaker.open_pct[flaky] <= 5",
}


def test_swaps_are_the_mutations() -> None:
    """Each swapped-in build is the original with its mechanism taken away, nothing else."""
    builds: dict[str, Any] = yaml.safe_load(SHORT.read_text())["builds"]
    text = SHORT.read_text()
    for gate in SWAPPED:
        assert gate in text, f"the key gate {gate!r} is no longer in the scenario"
    wrong = builds["cb-wrong"]
    fallback_on_breaker = copy.deepcopy(builds["cb-correct"])
    assert fallback_on_breaker["properties"]["shop.resilience"] == "cb-correct"
    fallback_on_breaker["properties"]["shop.resilience"] = "cb-wrong"
    assert fallback_on_breaker == wrong
    default_order = copy.deepcopy(builds["breaker-outside"])
    layers = default_order["properties"]["resilience4j"]
    assert (
        layers["circuitbreaker"].pop("circuit-breaker-aspect-order"),
        layers["retry"].pop("retry-aspect-order"),
    ) == (1, 2)
    assert default_order == wrong


def _payment_calls(run_dir: Path, build: str, start: float, end: float) -> pd.DataFrame:
    ledger = pd.read_parquet(run_dir / build / "pg.parquet")
    ledger = ledger[ledger["path"].astype(str) == "/v1/payments/approve"]
    return ledger[(ledger["arrival"] >= start) & (ledger["arrival"] < end)]


def _recorded(report: dict[str, Any], build: str, phase: str | None = None) -> float:
    figures = report["builds"][build]
    if phase is not None:
        figures = figures["phases"][phase]
    return float(figures["series"]["breaker_failures"]["total"])


@pytest.mark.usefixtures("spring_jar")
def test_short_seed_002_on_spring(tmp_path: Path) -> None:
    # 1. The seed's claims hold on Spring AOP.
    run_dir, report = run_with_passing_gates(SHORT, tmp_path, min_gates=5, timeout=900)
    builds = report["builds"]
    assert builds["cb-wrong"]["pg"]["retries"] == 0
    assert_nothing_left(run_dir)

    # 2. At the gateway: cb-wrong's payments once each. cb-correct's Retry retries (Resilience4j's
    # own count), the open breaker's refusals too, as the seed's does; those never reach the
    # network, so the gateway sees a payment at most max-attempts (3) times, and whether a
    # retry lands in a half-open trial is timing (a fresh CI machine saw none).
    t0 = {b: float(builds[b]["t0"]) for b in builds}
    wrong = _payment_calls(run_dir, "cb-wrong", t0["cb-wrong"], t0["cb-wrong"] + 10)
    assert len(wrong) > 0 and wrong.groupby("key").size().max() == 1
    assert builds["cb-correct"]["pg"]["retries"] > 0
    correct = _payment_calls(run_dir, "cb-correct", t0["cb-correct"], t0["cb-correct"] + 10)
    assert len(correct) > 0 and correct.groupby("key").size().max() <= 3

    # 3. resilience4j#2383. Over the window, against the ledger's own count (a scrape's worth
    # at its edges): Retry outside records each failed call, the breaker outside each payment
    # that failed all its attempts.
    for build, count in (("cb-correct", "sum"), ("breaker-outside", "all")):
        calls = _payment_calls(run_dir, build, t0[build], t0[build] + 10)
        failed = (calls["decision"] != "approved").groupby(calls["key"])
        expected = int(failed.sum().sum() if count == "sum" else failed.all().sum())
        assert _recorded(report, build) == pytest.approx(expected, abs=3), build
    # So in the flaky phase (1 s to 5 s), per payment that met a failure at the gateway:
    # every failure Retry absorbed is recorded anyway with Retry outside (at least one),
    # almost none with the breaker outside (only a payment whose 3 attempts all failed).
    per_payment = {}
    for build in ("cb-correct", "breaker-outside"):
        calls = _payment_calls(run_dir, build, t0[build] + 1, t0[build] + 5)
        met = int((calls["decision"] != "approved").groupby(calls["key"]).any().sum())
        per_payment[build] = _recorded(report, build, "flaky") / met
    assert per_payment["cb-correct"] >= 0.8, per_payment
    assert per_payment["breaker-outside"] <= 0.3, per_payment

    # 4. The mechanisms taken away: the key gates, read on the builds that lack them.
    assert_gates_fail(run_dir, list(SWAPPED.values()), tmp_path / "mutant-gates.xml")
