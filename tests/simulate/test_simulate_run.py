"""``simulate_run`` and ``harness simulate``: a run folder the report and the gates read as a
real one's, the builds it refuses, and the shop's queues seen through the figures."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.core.errors import InputError
from harness.report.make import make_report
from harness.results.model import load
from harness.scenario.loader import load_scenario
from harness.simulate import modelled, simulate_run
from harness.simulate.services import service_of, spring_settings

SCENARIO = """\
name: sim
seed: 3
warmup: 1s
duration: 12s
drain: 2s
traffic:
  payments: {method: POST, path: /api/payments, rate: 10, timeout: 5s, body: {amount: 1},
             idempotency-key: true, calls-gateway: true}
  products: {path: "/api/products/{id}", params: {id: [1, 1000]}, rate: 5, timeout: 5s}
builds:
  before:
    profile: retry-only
    workers: 8
    pg-client: {read-timeout: 1s}
    db-pool: {maximum-pool-size: 4, query-time: 10ms}
    resilience4j: {retry: {max-attempts: 2, wait-duration: 100ms}}
  after:
    profile: retry-circuit-breaker
    workers: 8
    pg-client: {read-timeout: 1s}
    db-pool: {maximum-pool-size: 4, query-time: 10ms}
    resilience4j:
      retry: {max-attempts: 2, wait-duration: 100ms}
      circuitbreaker: {sliding-window-size: 10, minimum-number-of-calls: 10,
                       wait-duration-in-open-state: 20s}
gates:
  - "after.products.p99[outage] < before.products.p99[outage]"
  - "before.busy_workers.max[outage] >= before.max_workers"
pg:
  phases:
    - {name: baseline, start: 0s, duration: 3s, fault: {type: healthy}}
    - {name: outage, start: 3s, duration: 6s, fault: {type: timeout}}
    - {name: recovery, start: 9s, duration: 3s, fault: {type: healthy}}
"""


def scenario_file(tmp_path: Path, text: str = SCENARIO) -> Path:
    path = tmp_path / "sim.yaml"
    path.write_text(text)
    return path


def test_the_folder_reads_as_a_run_and_its_figures_are_the_analysis_s(tmp_path: Path) -> None:
    path = scenario_file(tmp_path)
    loaded = load_scenario(path)
    run_dir = simulate_run(loaded.scenario, tmp_path / "out", scenario_text=loaded.text)
    run = load(run_dir)
    assert run.manifest.get("simulated") is True
    assert set(run.builds) == {"before", "after"}
    report = make_report(run_dir)
    before, after = report["builds"]["before"], report["builds"]["after"]
    # retry-only: a payment holds its thread 2 x 1 s + 0.1 s; 10/s fill 8 threads at once.
    assert before["workers"]["busy_max_fault"] == 8
    assert after["breaker"]["blocked_total"] > 0
    assert after["timeline"]["time_to_open_s"] is not None
    # Ten 1 s timeouts (~1.9 s in), read at the next scrape (each second, .37 s past it).
    assert after["timeline"]["time_to_open_s"] <= 2.5
    p99 = {b: report["builds"][b]["phases"]["outage"]["endpoints"]["products"] for b in run.builds}
    assert p99["after"]["latency_s"]["p99"] < p99["before"]["latency_s"]["p99"]
    result = CliRunner().invoke(app, ["gate", str(run_dir)])
    assert result.exit_code == 0, result.output


def test_the_same_scenario_and_seed_give_the_same_frames(tmp_path: Path) -> None:
    loaded = load_scenario(scenario_file(tmp_path))
    first = load(simulate_run(loaded.scenario, tmp_path / "a", builds=["after"]))
    again = load(simulate_run(loaded.scenario, tmp_path / "b", builds=["after"]))
    other = load(simulate_run(loaded.scenario, tmp_path / "c", builds=["after"], seed=9))
    pd.testing.assert_frame_equal(first.builds["after"].samples, again.builds["after"].samples)
    pd.testing.assert_frame_equal(first.builds["after"].metrics, again.builds["after"].metrics)
    assert other.manifest["seed"] == 9
    assert not first.builds["after"].ledger["key"].equals(other.builds["after"].ledger["key"])


def test_a_db_pool_queue_slows_product_reads_and_times_out(tmp_path: Path) -> None:
    text = SCENARIO.replace(
        "db-pool: {maximum-pool-size: 4, query-time: 10ms}",
        "db-pool: {maximum-pool-size: 1, query-time: 80ms, connection-timeout: 500ms}",
    )
    loaded = load_scenario(scenario_file(tmp_path, text))
    run = load(simulate_run(loaded.scenario, tmp_path / "out", builds=["before"]))
    samples = run.builds["before"].samples
    # 15 requests/s x 80 ms x (3 statements a payment, 1 a read) > one connection: waits
    # pass the pool's 500 ms, and those requests are answered 503 db_pool_timeout.
    assert (samples["outcome"] == "db_pool_timeout").sum() > 0
    metrics = run.builds["before"].metrics
    pending = metrics[metrics["series"] == "hikaricp_connections_pending"]["value"]
    assert pending.max() >= 1


def test_a_build_it_cannot_model_is_refused_by_name(tmp_path: Path) -> None:
    text = SCENARIO.replace(
        "  before:\n    profile: retry-only",
        '  remote:\n    command: [serve, --port, "{port}"]\n  before:\n    profile: retry-only',
    )
    path = scenario_file(tmp_path, text)
    result = CliRunner().invoke(
        app, ["simulate", str(path), "--results", str(tmp_path / "out"), "--build", "remote"]
    )
    assert result.exit_code == 2
    assert "build 'remote': a command build has no model" in result.output
    result = CliRunner().invoke(app, ["simulate", str(path), "--results", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "skipped: build 'remote'" in result.output
    manifest = json.loads(next((tmp_path / "out").glob("sim/*/manifest.json")).read_text())
    assert set(manifest["builds"]) == {"before", "after"}


def test_a_jar_build_is_modelled_from_its_spring_properties() -> None:
    settings = spring_settings(
        "after",
        {
            "server.tomcat.threads.max": 16,
            "shop.resilience": "retry-circuit-breaker",
            "spring.cloud.openfeign.client.config.default": {"read-timeout": 1500},
            "resilience4j": {
                "retry": {"instances": {"pgClient": {"max-attempts": 3, "wait-duration": "200ms"}}},
                "circuitbreaker": {
                    "instances": {
                        "pgClient": {
                            "sliding-window-size": 20,
                            "wait-duration-in-open-state": "5s",
                            "failureRateThreshold": 40,
                        }
                    }
                },
            },
        },
    )
    assert settings["workers"] == 16
    assert settings["pg-client"]["read-timeout"] == 1.5
    assert settings["resilience4j"]["retry"]["max-attempts"] == 3
    assert settings["resilience4j"]["retry"]["wait-duration"] == 0.2
    breaker = settings["resilience4j"]["circuitbreaker"]
    assert (breaker["sliding-window-size"], breaker["failure-rate-threshold"]) == (20, 40)
    assert breaker["wait-duration-in-open-state"] == 5.0
    assert breaker["minimum-number-of-calls"] == 10  # the Spring shop's own application.yml


def test_a_replicated_shop_is_not_modelled() -> None:
    from harness.scenario.builds.shop import ShopBuild

    build = ShopBuild.model_validate({"profile": "retry-only", "replicas": 2})
    try:
        service_of("two", build)
    except Exception as exc:  # noqa: BLE001 - the refusal's message is what is checked
        assert "replicas: 2" in str(exc)
    else:
        raise AssertionError("a replicated shop was modelled")


def test_a_node_gateway_command_build_is_modelled_with_opossum(tmp_path: Path) -> None:
    path = Path(__file__).resolve().parents[2] / "scenarios/ci/vendor-latency-short.yaml"
    loaded = load_scenario(path)
    run_dir = simulate_run(loaded.scenario, tmp_path / "out")
    report = make_report(run_dir)
    before, after = report["builds"]["before"], report["builds"]["after"]
    assert run_dir.joinpath("manifest.json").read_text().count('"kind": "command"') == 2
    # before: 30 s vendor timeout, 2 retries: the shared cap fills and reads queue behind it.
    assert before["workers"]["busy_max_fault"] == before["workers"]["max_workers"]
    assert after["breaker"]["blocked_total"] > 0
    assert after["workers"]["busy_mean_fault"] < before["workers"]["busy_mean_fault"] / 4


FAULTS = """\
name: faults
seed: 5
warmup: 0s
duration: 8s
drain: 1s
traffic:
  payments: {method: POST, path: /api/payments, timeout: 5s, body: {amount: 1},
             idempotency-key: true, calls-gateway: true, arrivals: poisson,
             stages: [{duration: 4s, target: 20}, {duration: 4s, target: 20}]}
builds:
  shop:
    profile: retry-only
    workers: 50
    pg-client: {read-timeout: 500ms}
    resilience4j: {retry: {max-attempts: 2, wait-duration: 10ms}}
pg:
  phases:
    - {name: slow, start: 0s, duration: 2s,
       fault: {type: latency, distribution: lognormal, median: 100ms, sigma: 0.5}}
    - {name: errors, start: 2s, duration: 2s, fault: {type: error, status: 503, probability: 0.5}}
    - {name: resets, start: 4s, duration: 2s, fault: {type: reset}}
    - {name: down, start: 6s, duration: 2s, fault: {type: refuse}}
"""


def test_the_gateway_s_faults_and_the_arrivals_are_the_real_ones(tmp_path: Path) -> None:
    from harness.gateway.decide import decide_at
    from harness.load.plan import arrival_offsets
    from harness.simulate.run import ORIGIN, load_plan

    loaded = load_scenario(scenario_file(tmp_path, FAULTS))
    scenario = loaded.scenario
    build = load(simulate_run(scenario, tmp_path / "out")).builds["shop"]
    plan = load_plan(scenario)
    offsets = [ORIGIN + t for t, _ in arrival_offsets(plan, "payments")]
    assert build.samples["intended_start"].tolist() == offsets  # poisson over the stages
    ledger = build.ledger
    for row in ledger.itertuples():
        action = decide_at(scenario.pg.phases, row.arrival - ORIGIN, 5, row.key, row.attempt)
        assert row.fault == action.fault
    by_phase = ledger.groupby("phase")["status"]
    assert set(by_phase.get_group("errors")) == {200, 503}
    assert set(by_phase.get_group("resets")) == {0}
    assert "down" not in set(ledger["phase"])  # the listener is down: nothing reaches it
    slow = ledger[ledger["phase"] == "slow"]
    assert 0.08 < slow["duration_s"].median() < 0.13  # the lognormal's median, and the trip
    start = build.samples["intended_start"]
    down = build.samples[(start >= ORIGIN + 6.0) & (start < ORIGIN + 7.9)]  # retried inside it
    assert set(down["outcome"]) == {"connection_error"}
    assert set(down["status"]) == {503}


def test_clients_that_retry_are_refused_not_simulated_without_them(tmp_path: Path) -> None:
    # The model sends each request once: its figures for a retrying client would be those
    # of another load, so the scenario is refused (exit 2) rather than simulated wrongly.
    text = SCENARIO.replace(
        "rate: 5, timeout: 5s}", "rate: 5, timeout: 5s, retry: {max-attempts: 3}}"
    )
    path = scenario_file(tmp_path, text)
    result = CliRunner().invoke(app, ["simulate", str(path), "--results", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "traffic.products.retry (clients that retry)" in result.output
    assert not list((tmp_path / "out").glob("sim/*"))


def _must_not_simulate(*args: object, **kwargs: object) -> Path:
    raise AssertionError("simulate_run was called: the input should have been refused first")


def test_a_seed_beyond_64_bits_is_refused_before_a_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--seed`` past the scenario's own range ``[0, 2**63)``: exit 2 saying the range, and
    no run folder (it was made, and the error put in its copy of the scenario; issue 32,
    item 7)."""
    path = scenario_file(tmp_path)
    out = tmp_path / "out"
    for seed in (2**63, 2**64 + 5):
        result = CliRunner().invoke(
            app, ["simulate", str(path), "--results", str(out), "--seed", str(seed)]
        )
        assert result.exit_code == 2, result.output
        assert str(2**63 - 1) in result.output  # the range said
        assert not out.exists() or not any(out.rglob("*"))
    loaded = load_scenario(path)
    with pytest.raises(InputError, match="seed"):
        simulate_run(loaded.scenario, out, seed=2**64)
    assert not out.exists() or not any(out.rglob("*"))


def test_a_plan_larger_than_the_simulator_holds_is_refused_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """50 million requests a build (610,000 took 31 s and 1.07 GB): refused, exit 2, with
    the plan's size, the bound and what to do, before any folder (issue 32, item 7)."""
    text = SCENARIO.replace("rate: 10,", "rate: 10000,").replace("duration: 12s", "duration: 300s")
    text = text.replace("start: 9s, duration: 3s", "start: 9s, duration: 291s")
    from harness.simulate.run import MAX_SIMULATED_REQUESTS

    path = scenario_file(tmp_path, text)
    loaded = load_scenario(path)
    planned = 10_005 * 301  # (10,000 + 5)/s x (warmup + duration)
    with pytest.raises(InputError) as caught:
        modelled(loaded.scenario)
    said = str(caught.value)
    assert f"{planned:,}" in said and f"{MAX_SIMULATED_REQUESTS:,}" in said, said
    assert "shorten" in said and "rate" in said
    monkeypatch.setattr("harness.simulate.simulate_run", _must_not_simulate)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["simulate", str(path), "--results", str(out)])
    assert result.exit_code == 2, result.output
    assert f"{planned:,}" in result.output
    assert not out.exists() or not any(out.rglob("*"))
