"""Fault decisions: the same fate for the same (seed, key, attempt), and the right action."""

import random

import pytest

from harness.faults import HANG_LIMIT_S, decide, fate, phase_at, sample_delay
from harness.scenario import ErrorFault, HealthyFault, LatencyFault, Phase, TimeoutFault


def test_fate_is_repeatable_and_depends_on_every_input() -> None:
    assert fate(1, "k", 1) == fate(1, "k", 1)
    assert len({fate(1, "k", 1), fate(2, "k", 1), fate(1, "j", 1), fate(1, "k", 2)}) == 4
    assert all(0 <= fate(3, str(i), 1) < 1 for i in range(100))


def test_probability_hits_about_that_share_and_the_same_keys_every_time() -> None:
    fault = ErrorFault(type="error", probability=0.3, status=503)
    keys = [f"pay-{i}" for i in range(4000)]
    first = [decide(fault, 42, k, 1).status for k in keys]
    second = [decide(fault, 42, k, 1).status for k in keys]
    assert first == second
    share = first.count(503) / len(keys)
    assert 0.27 < share < 0.33
    other_seed = [decide(fault, 43, k, 1).status for k in keys]
    assert other_seed != first


def test_actions() -> None:
    assert decide(HealthyFault(type="healthy"), 0, "k", 1).kind == "respond"
    hang = decide(TimeoutFault(type="timeout"), 0, "k", 1)
    assert hang.kind == "hang" and hang.delay_s == HANG_LIMIT_S
    late = decide(TimeoutFault(type="timeout", after=2.0), 0, "k", 1)
    assert late.kind == "respond" and late.delay_s == 2.0 and late.status == 200
    err = decide(ErrorFault(type="error", status=502), 0, "k", 1)
    assert err.status == 502 and err.fault == "error"
    never = decide(ErrorFault(type="error", probability=0.0), 0, "k", 1)
    assert never.status == 200 and never.fault == "healthy"


@pytest.mark.parametrize(
    ("params", "low", "high"),
    [
        ({"distribution": "fixed", "delay": 0.2}, 0.2, 0.2),
        ({"distribution": "uniform", "min": 0.1, "max": 0.3}, 0.1, 0.3),
        ({"distribution": "normal", "mean": 0.2, "stddev": 0.05}, 0.0, 1.0),
        ({"distribution": "lognormal", "median": 0.05, "sigma": 0.5}, 0.0, 5.0),
    ],
)
def test_latency_distributions(params: dict[str, object], low: float, high: float) -> None:
    fault = LatencyFault.model_validate({"type": "latency", **params})
    rng = random.Random(1)
    delays = [sample_delay(fault, rng) for _ in range(2000)]
    assert all(low <= d <= high for d in delays)
    if fault.distribution == "lognormal":
        delays.sort()
        assert delays[1000] == pytest.approx(0.05, rel=0.15)
    action = decide(fault, 5, "k", 1)
    assert action == decide(fault, 5, "k", 1) and low <= action.delay_s <= high


def test_phase_at_uses_half_open_intervals() -> None:
    phases = [
        Phase(name="a", start=0, duration=10, fault=HealthyFault(type="healthy")),
        Phase(name="b", start=10, duration=5, fault=TimeoutFault(type="timeout")),
    ]
    assert phase_at(phases, -0.1) is None
    assert phase_at(phases, 0).name == "a"  # type: ignore[union-attr]
    assert phase_at(phases, 10).name == "b"  # type: ignore[union-attr]
    assert phase_at(phases, 15) is None
