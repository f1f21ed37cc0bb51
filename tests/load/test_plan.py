"""The load plan: the JSON the orchestrator writes and the Locust process reads back."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from harness.core.handoff import HandoffError
from harness.load.plan import (
    LOAD_PLAN,
    PROTOCOL,
    EndpointPlan,
    LoadPlan,
    Paths,
    arrival_offsets,
    idempotency_key,
    schedule,
)
from harness.run.loadgen import plan_for
from harness.scenario.loader import load_scenario_text
from harness.scenario.schema import Scenario


def test_plan_round_trips_through_its_file(tmp_path: Path) -> None:
    plan = LoadPlan(
        base_url="http://127.0.0.1:1",
        seed=7,
        warmup_s=2.0,
        duration_s=10.5,
        drain_s=3.0,
        endpoints={
            "payments": EndpointPlan("POST", "/api/payments", 8.0, 5.0, body={"amount": 1}),
            "products": EndpointPlan("GET", "/api/products/{id}", 4.0, 5.0, {"id": (1, 100)}),
        },
        samples_path="s.csv",
        progress_path="p.json",
        go_path="go.json",
    )
    plan.write(tmp_path / "plan.json")
    assert LoadPlan.read(tmp_path / "plan.json") == plan  # params come back as tuples
    assert plan.total_s == 12.5
    assert plan.planned_count("payments") == 100 and plan.planned_count("products") == 50


# ---------------------------------------------------------------- arrivals and their split


def _plan(tmp_path: Path, **endpoints: EndpointPlan) -> LoadPlan:
    return LoadPlan(
        base_url="http://127.0.0.1:1",
        seed=42,
        warmup_s=2.0,
        duration_s=20.0,
        drain_s=1.0,
        endpoints=endpoints,
        samples_path=str(tmp_path / "samples.csv"),
        progress_path=str(tmp_path / "progress.json"),
        go_path=str(tmp_path / "go.json"),
    )


def _scenario(traffic: str) -> Scenario:
    text = f"""\
name: s
seed: 42
warmup: 2s
duration: 20s
traffic:
{traffic}
builds:
  b: {{profile: retry-only}}
"""
    return load_scenario_text(text).scenario


RAMP = """\
  up:
    path: /up/{id}
    params: {id: [1, 1000]}
    start-rate: 5
    stages: [{duration: 10s, target: 50}, {duration: 5s, target: 50}, {duration: 1s, target: 0}]
  spiky:
    path: /p
    arrivals: poisson
    stages: [{duration: 4s, target: 20}, {duration: 6s, target: 0}]
  flat: {path: /f, rate: 7, idempotency-key: true}
"""


def test_a_constant_rate_keeps_the_old_schedule(tmp_path: Path) -> None:
    plan = plan_for(_scenario("  flat: {path: /f, rate: 7}"), "http://127.0.0.1:1", tmp_path)
    times = [t for t, _, _ in schedule(plan, 1000.0)]
    assert len(times) == 7 * 22
    assert times == [1000.0 + i / 7.0 for i in range(7 * 22)]


def test_stages_count_from_the_measured_window_and_warmup_runs_at_start_rate(
    tmp_path: Path,
) -> None:
    scenario = _scenario(RAMP)
    plan = plan_for(scenario, "http://127.0.0.1:1", tmp_path)
    up = plan.endpoints["up"]
    # Load time: warmup 0-2 s at 5/s, ramp 2-12 s to 50/s, hold to 17 s, down to 0 at 18 s,
    # then 0 until the window ends at 22 s.
    assert up.knots == (
        (0.0, 5.0),
        (2.0, 5.0),
        (12.0, 50.0),
        (17.0, 50.0),
        (18.0, 0.0),
        (22.0, 0.0),
    )
    expected = 2 * 5 + 10 * 27.5 + 5 * 50 + 0.5 * 50
    assert plan.planned_count("up") == int(expected)
    offsets = [t for t, _ in arrival_offsets(plan, "up")]
    assert offsets == sorted(offsets) and offsets[-1] < 18.0
    # Per second, the arrivals follow the profile's integral over that second.
    profile = up.profile(plan.total_s)
    for second in range(22):
        n = sum(second <= t < second + 1 for t in offsets)
        assert abs(n - profile.integral(second, second + 1)) <= 1
    # The report's offered rate over a window is the profile's mean there.
    assert scenario.offered_rps("up", 0.0, 10.0) == 27.5
    assert scenario.offered_rps("up", -2.0, 0.0) == 5.0


def test_poisson_arrivals_are_seeded_and_follow_the_rate(tmp_path: Path) -> None:
    plan = plan_for(_scenario(RAMP), "http://127.0.0.1:1", tmp_path)
    first = list(arrival_offsets(plan, "spiky"))
    again = list(arrival_offsets(plan_for(_scenario(RAMP), "http://x", tmp_path), "spiky"))
    assert first == again  # same seed, same endpoint: the same times in every build
    assert len(first) == plan.planned_count("spiky") == plan.endpoints["spiky"].count
    expected = plan.endpoints["spiky"].profile(plan.total_s).total  # 4*10 + 6*10 = 100
    assert abs(len(first) - expected) < 4 * expected**0.5
    gaps = [b - a for (a, _), (b, _) in zip(first, first[1:], strict=False)]
    assert len(set(gaps)) > len(gaps) * 0.9  # not evenly spaced
    assert all(2.0 <= t < 12.0 for t, _ in first)  # nothing while the rate is 0
    other = LoadPlan(**{**plan.__dict__, "seed": 43})
    assert list(arrival_offsets(other, "spiky"))[:5] != first[:5]


@pytest.mark.parametrize("workers", [2, 3, 7])
def test_workers_split_the_plan_exactly(tmp_path: Path, workers: int) -> None:
    plan = plan_for(_scenario(RAMP), "http://127.0.0.1:1", tmp_path)
    whole = list(schedule(plan, 0.0))
    shares = [list(schedule(plan, 0.0, k, workers)) for k in range(workers)]
    # Every request is sent by exactly one worker, at the time one process would send it.
    assert sorted(r for share in shares for r in share) == sorted(whole)
    for k, share in enumerate(shares):
        assert all(i % workers == k for _, _, i in share)
        assert [t for t, _, _ in share] == sorted(t for t, _, _ in share)


def test_every_split_sends_the_same_path_and_key_for_each_index(tmp_path: Path) -> None:
    plan = plan_for(_scenario(RAMP), "http://127.0.0.1:1", tmp_path)
    alone = Paths(plan.seed, "up", plan.endpoints["up"])
    by_index = {i: alone.path(i) for _, i in arrival_offsets(plan, "up")}
    assert len(set(by_index.values())) > 100
    for k in range(3):
        paths = Paths(plan.seed, "up", plan.endpoints["up"])
        for _, i in arrival_offsets(plan, "up", k, 3):
            assert paths.path(i) == by_index[i]
    # The key derivation every earlier run used.
    assert idempotency_key(42, "flat", 5) == str(uuid.uuid5(uuid.NAMESPACE_URL, "42/flat/5"))


def test_a_plan_with_shapes_round_trips(tmp_path: Path) -> None:
    plan = plan_for(_scenario(RAMP), "http://127.0.0.1:1", tmp_path, workers=3)
    plan.write(tmp_path / "plan.json")
    back = LoadPlan.read(tmp_path / "plan.json")
    assert back == plan and back.workers == 3
    assert back.worker_samples_path(2) == str(tmp_path / "samples.2.csv")


def test_plan_json_says_the_load_protocol_and_another_version_is_refused(tmp_path: Path) -> None:
    plan = plan_for(_scenario(RAMP), "http://127.0.0.1:9", tmp_path)
    plan.write(tmp_path / "plan.json")
    document = json.loads((tmp_path / "plan.json").read_text())
    assert document["schema"] == LOAD_PLAN.schema == f"harness.load-plan/{PROTOCOL}"
    document["schema"] = f"harness.load-plan/{PROTOCOL - 1}"
    (tmp_path / "plan.json").write_text(json.dumps(document))
    with pytest.raises(HandoffError, match="written by an older harness"):
        LoadPlan.read(tmp_path / "plan.json")
    del document["schema"]  # a plan written before plan.json had one
    (tmp_path / "plan.json").write_text(json.dumps(document))
    with pytest.raises(HandoffError, match="no schema key"):
        LoadPlan.read(tmp_path / "plan.json")
