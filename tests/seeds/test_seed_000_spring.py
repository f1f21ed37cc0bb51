"""Seed 000 on the real spring-shop jar (Spring Boot, Tomcat, Resilience4j), and a mutation.

``scenarios/seeds/000-pg-timeout-spring.yaml`` is the seed on its own stack, full length
(~10 min: not a CI test); ``scenarios/ci/seeds/000-pg-timeout-spring-short.yaml`` is it
at the short shop version's scale, run here with the real jar. As in test_seed_000.py,
the mutation check needs no second run: the builds differ by the breaker alone
(checked below), so ``after`` without its breaker is ``before``, and the key gates read
again with ``before`` in place of ``after`` must fail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT
from tests.scenario_runs import assert_mutants_fail, assert_nothing_left, run_with_passing_gates
from tests.seeds.test_seed_000 import MUTATION_VERDICTS
from tests.spring.conftest import needs_java, spring_jar  # noqa: F401 (a fixture)

FULL = ROOT / "scenarios" / "seeds" / "000-pg-timeout-spring.yaml"
SHORT = ROOT / "scenarios" / "ci" / "seeds" / "000-pg-timeout-spring-short.yaml"
SHOP_FULL = ROOT / "scenarios" / "seeds" / "000-pg-timeout.yaml"
SHOP_SHORT = ROOT / "scenarios" / "ci" / "seeds" / "000-pg-timeout-short.yaml"
BREAKER = "resilience4j.circuitbreaker.instances.pgClient."
SEED_BREAKER = {
    "sliding-window-type": "COUNT_BASED",
    "sliding-window-size": "10",
    "minimum-number-of-calls": "10",
    "failure-rate-threshold": "50",
    "wait-duration-in-open-state": "10s",
    "permitted-number-of-calls-in-half-open-state": "3",
    "automatic-transition-from-open-to-half-open-enabled": "true",
}
"""Seed 000's circuitbreaker block ("Resilience4j 설정"), as Spring properties."""
SPRING_MUTATION_VERDICTS = {
    **MUTATION_VERDICTS,
    # Spring's retry-only build still exposes the breaker's series (its registry holds the
    # configured pgClient; only the annotation is unused): nothing refused reads as 0.
    "seed: breaker refuses about the payment rate": "fail",
}
"""The short shop version's mutation verdicts, as the real jar gives them."""


def properties(build: dict[str, Any]) -> dict[str, str]:
    """A jar build's Spring properties, dotted, each value as Spring reads its text."""
    found: dict[str, str] = {}

    def walk(prefix: str, value: object) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), inner)
        else:
            found[prefix] = str(value).lower() if isinstance(value, bool) else str(value)

    walk("", build["properties"])
    return found


@pytest.mark.parametrize("path", [FULL, SHORT], ids=["full", "short"])
def test_the_spring_builds_keep_the_seeds_settings_and_differ_by_the_breaker_alone(
    path: Path,
) -> None:
    builds = yaml.safe_load(path.read_text())["builds"]
    before, after = properties(builds["before"]), properties(builds["after"])
    assert {k[len(BREAKER) :]: v for k, v in after.items() if k.startswith(BREAKER)} == SEED_BREAKER
    assert (before["shop.resilience"], after["shop.resilience"]) == (
        "retry-only",
        "retry-circuit-breaker",
    )
    assert before["resilience4j.retry.instances.pgClient.max-attempts"] == "2"
    # "두 테스트에 동일한 부하와 자원 설정": everything else the same, one read timeout included.
    same = {k: v for k, v in after.items() if not k.startswith(BREAKER)}
    assert {**same, "shop.resilience": ""} == {**before, "shop.resilience": ""}
    for key in ("jar", "maven", "java-options", "health"):  # the same jar, JVM and start
        assert builds["before"][key] == builds["after"][key], key
    assert "spring.cloud.openfeign.client.config.default.read-timeout" in before


@pytest.mark.parametrize(
    ("spring", "shop"), [(FULL, SHOP_FULL), (SHORT, SHOP_SHORT)], ids=["full", "short"]
)
def test_spring_and_the_shop_run_the_same_load_settings_and_gates(spring: Path, shop: Path) -> None:
    """The Spring scenario is the shop's on the other stack: what the seed does not give is
    chosen once, for both (so the two compare figure by figure)."""
    ours, theirs = yaml.safe_load(spring.read_text()), yaml.safe_load(shop.read_text())
    for key in ("pg", "duration", "seed"):
        assert ours[key] == theirs[key], key
    # The shop's builds read answers by the x-outcome preset by their kind; the Spring
    # builds (jar kind) are told so on each endpoint: the same reading on both stacks.
    assert {ep.pop("outcomes", None) for ep in ours["traffic"].values()} == {"x-outcome"}
    assert ours["traffic"] == {
        name: with_warm_up(ours["traffic"][name], endpoint)
        for name, endpoint in theirs["traffic"].items()
    }
    sprung, shop_build = properties(ours["builds"]["after"]), theirs["builds"]["after"]
    timeouts = shop_build["pg-client"]
    assert sprung["spring.cloud.openfeign.client.config.default.read-timeout"] == str(
        int(float(timeouts["read-timeout"].rstrip("s")) * 1000)
    )
    assert sprung["server.tomcat.threads.max"] == str(shop_build["workers"])
    retry = shop_build["resilience4j"]["retry"]
    assert sprung["resilience4j.retry.instances.pgClient.wait-duration"] == retry["wait-duration"]
    if "db-pool" in shop_build:
        pool = shop_build["db-pool"]
        size = sprung["spring.datasource.hikari.maximum-pool-size"]
        assert size == str(pool["maximum-pool-size"])
        assert sprung["shop.db.query-time"] == pool["query-time"]
    shop_gates = {g["name"]: g["expr"] for g in theirs["gates"]}
    for gate in ours["gates"]:
        if gate["name"] in shop_gates:
            assert gate["expr"] == shop_gates[gate["name"]], gate["name"]


def with_warm_up(spring: dict[str, Any], shop: dict[str, Any]) -> dict[str, Any]:
    """The shop's endpoint, but for the one way a Spring one may differ: a lighter load
    during the JVM's warm-up (``start-rate``), then a 1 s ramp to the shop's constant rate."""
    if "stages" not in spring:
        return shop
    assert spring["stages"] == [{"duration": "1s", "target": shop["rate"]}]
    assert spring["start-rate"] < shop["rate"]
    rest = {key: value for key, value in shop.items() if key != "rate"}
    return {**rest, "start-rate": spring["start-rate"], "stages": spring["stages"]}


@pytest.mark.integration
@needs_java
@pytest.mark.usefixtures("spring_jar")
def test_short_spring_seed_000_gates_pass_and_fail_without_the_breaker(tmp_path: Path) -> None:
    # 1. The seed's claims hold at CI scale on the real jar.
    run_dir, report = run_with_passing_gates(SHORT, tmp_path, min_gates=7, timeout=900)
    assert report["builds"]["after"]["breaker"]["blocked_total"] > 0
    assert report["builds"]["before"]["workers"]["busy_max_fault"] == 16  # Tomcat's threads
    assert_nothing_left(run_dir)

    # 2. Mutation: the key gates with the breakerless build in place of `after`.
    assert_mutants_fail(SHORT, report, SPRING_MUTATION_VERDICTS)
