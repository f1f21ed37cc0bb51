"""The load plan: the JSON the orchestrator writes and the Locust process reads back."""

from __future__ import annotations

from pathlib import Path

from harness.load.plan import EndpointPlan, LoadPlan


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
