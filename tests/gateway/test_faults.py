"""Fault decisions: the right action for every fault, the same for the same fate.

Everything here is pure (no sockets, no clock): the models' validation, what
``decide`` returns for every fault and combination, and the schedule helpers
(ramps, blips, refuse windows). test_integration_pg.py checks that the server
carries these decisions out on real sockets.
"""

import random
from typing import Any

import pytest
from pydantic import ValidationError

from harness.core.errors import ScenarioError
from harness.core.timeline import phase_at
from harness.gateway.decide import (
    HANG_LIMIT_S,
    Action,
    Call,
    decide,
    decide_at,
    fault_on,
    garbage,
    matches,
    next_change,
    refusing,
    sample_delay,
)
from harness.scenario.faults import (
    ErrorFault,
    Fault,
    FaultOverride,
    HealthyFault,
    LatencyFault,
    Match,
    Phase,
    TimeoutFault,
)
from harness.scenario.loader import load_scenario_text

KEYS = [f"pay-{i}" for i in range(4000)]


def fault(**data: Any) -> Fault:
    """A fault from its scenario spelling (kebab-case keys)."""
    return FaultOverride.model_validate({"faults": [data]}).faults[0]


def phase(**data: Any) -> Phase:
    return Phase.model_validate({"name": "p", "start": 10, "duration": 60, **data})


def test_probability_hits_about_that_share_and_the_same_keys_every_time() -> None:
    fault = ErrorFault(type="error", probability=0.3, status=503)
    first = [decide(fault, 42, k, 1).status for k in KEYS]
    second = [decide(fault, 42, k, 1).status for k in KEYS]
    assert first == second
    share = first.count(503) / len(KEYS)
    assert 0.27 < share < 0.33
    other_seed = [decide(fault, 43, k, 1).status for k in KEYS]
    assert other_seed != first


def test_a_key_of_raw_bytes_that_are_not_utf8_has_a_fate_too() -> None:
    """aiohttp hands such a key over with surrogates; deciding must not fail (a 500)."""
    raw = b"pay-\xff\xfe".decode("utf-8", "surrogateescape")
    faults = [
        fault(type="latency", delay="5ms", probability=0.5),
        fault(type="error", status={500: 1, 503: 1}, probability=0.5),
        fault(type="malformed", kind="garbage", probability=0.5),
    ]
    first = [decide(faults, 42, raw, attempt) for attempt in range(1, 50)]
    assert first == [decide(faults, 42, raw, attempt) for attempt in range(1, 50)]
    assert {a.kind for a in first} >= {"respond", "malformed"}
    assert garbage(42, raw, 1) == garbage(42, raw, 1)


def test_actions() -> None:
    assert decide(HealthyFault(type="healthy"), 0, "k", 1).kind == "respond"
    hang = decide(TimeoutFault(type="timeout"), 0, "k", 1)
    assert hang.kind == "hang" and hang.delay_s == HANG_LIMIT_S and hang.decision == "none"
    late = decide(TimeoutFault(type="timeout", after=2.0), 0, "k", 1)
    assert late.kind == "respond" and late.delay_s == 2.0 and late.status == 200
    assert late.decision == "approved"
    err = decide(ErrorFault(type="error", status=502), 0, "k", 1)
    assert err.status == 502 and err.fault == "error" and err.decision == "error"
    never = decide(ErrorFault(type="error", probability=0.0), 0, "k", 1)
    assert never.status == 200 and never.fault == "healthy"


def test_every_terminal_fault_and_what_it_decides() -> None:
    reject = decide(fault(type="reject"), 0, "k", 1)
    assert (reject.status, reject.body, reject.decision) == (
        402,
        {"error": "INSUFFICIENT_BALANCE"},
        "declined",
    )
    teapot = decide(fault(type="reject", status=409, body="no"), 0, "k", 1)
    assert (teapot.status, teapot.body) == (409, "no")
    error = decide(
        fault(type="error", status=503, body={"e": 1}, **{"retry-after": "1500ms"}), 0, "k", 1
    )
    assert (error.status, error.body, error.retry_after_s) == (503, {"e": 1}, 2)
    assert decide(fault(type="error", **{"retry-after": "3s"}), 0, "k", 1).retry_after_s == 3
    reset = decide(fault(type="reset"), 0, "k", 1)
    assert (reset.kind, reset.reset_when, reset.reads_body, reset.decision) == (
        "reset",
        "before-body",
        False,
        "none",
    )
    assert decide(fault(type="reset", when="after-body"), 0, "k", 1).reads_body
    for kind, decision in (("empty", "none"), ("garbage", "none"), ("truncated", "approved")):
        malformed = decide(fault(type="malformed", kind=kind), 0, "k", 1)
        assert (malformed.kind, malformed.malformed, malformed.decision) == (
            "malformed",
            kind,
            decision,
        )
    slow = decide(fault(type="slow-body", duration="2s", chunks=4), 0, "k", 1)
    assert (slow.kind, slow.chunks, slow.body_duration_s, slow.decision) == (
        "slow-body",
        4,
        2.0,
        "approved",
    )
    # A call that slips in on an old connection while the listener is refused is dropped.
    assert decide(fault(type="refuse"), 0, "k", 1).kind == "reset"


def test_garbage_is_random_but_fixed_by_fate() -> None:
    assert garbage(1, "k", 1) == garbage(1, "k", 1) != garbage(1, "k", 2)
    assert all(64 <= len(garbage(1, k, 1)) <= 512 for k in KEYS[:50])


def test_status_mix_proportions() -> None:
    mix = fault(type="error", status={500: 1, 503: 3})
    statuses = [decide(mix, 7, k, 1).status for k in KEYS]
    assert set(statuses) == {500, 503}
    assert 0.72 < statuses.count(503) / len(KEYS) < 0.78


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


def test_long_tail_mix_has_its_proportions() -> None:
    """Seed 003: 98% of calls about 50 ms, 2% at the 2-3 s border."""
    tail = fault(
        type="latency",
        distribution="mix",
        mix=[
            {"weight": 98, "distribution": "fixed", "delay": "50ms"},
            {"weight": 2, "distribution": "uniform", "min": "2s", "max": "3s"},
        ],
    )
    delays = [decide(tail, 3, k, attempt).delay_s for k in KEYS for attempt in (1, 2, 3)]
    slow = [d for d in delays if d > 1]
    assert all(d == 0.05 for d in delays if d <= 1)
    assert all(2.0 <= d <= 3.0 for d in slow)
    assert 0.016 < len(slow) / len(delays) < 0.024
    assert delays[:300] == [decide(tail, 3, k, a).delay_s for k in KEYS[:100] for a in (1, 2, 3)]


def test_ramp_grows_linearly_over_the_phase() -> None:
    ramp = phase(fault={"type": "latency", "delay": "200ms", "ramp-to": "8s"})
    at = {t: decide_at([ramp], t, 0, "k", 1).delay_s for t in (10, 40, 70 - 1e-9)}
    assert at[10] == pytest.approx(0.2)
    assert at[40] == pytest.approx(4.1)
    assert at[70 - 1e-9] == pytest.approx(8.0)
    assert decide_at([ramp], 70, 0, "k", 1).delay_s == 0  # the phase is over: healthy


def test_blips_are_on_for_the_first_for_of_every_every() -> None:
    blips = phase(repeat={"every": "30s", "for": "2s"}, fault={"type": "refuse"})
    on = [10, 11.999, 40, 41.5]  # [10 + k*30, 10 + k*30 + 2)
    off = [12, 25, 39.999, 42, 69.9]
    assert all(fault_on(blips, t) and refusing([blips], t) for t in on)
    assert not any(fault_on(blips, t) or refusing([blips], t) for t in off)
    assert not refusing([blips], 9.9) and not refusing([blips], None)
    error_blips = phase(repeat={"every": "1s", "for": "250ms"}, fault={"type": "error"})
    assert decide_at([error_blips], 10.1, 0, "k", 1).status == 500
    assert decide_at([error_blips], 10.3, 0, "k", 1) == Action("respond")


def test_next_change_finds_phase_edges_and_blip_edges() -> None:
    blips = phase(repeat={"every": "30s", "for": "2s"}, fault={"type": "refuse"})
    other = Phase.model_validate(
        {"name": "q", "start": 100, "duration": 5, "fault": {"type": "refuse"}}
    )
    phases = [blips, other]
    assert next_change(phases, 0) == 10
    assert next_change(phases, 10) == pytest.approx(12)
    assert next_change(phases, 12) == pytest.approx(40)
    assert next_change(phases, 69) == 70
    assert next_change(phases, 70) == 100
    assert next_change(phases, 104) == 105
    assert next_change(phases, 105) is None


def test_combined_faults_add_delays_and_the_first_terminal_hit_decides() -> None:
    faults = [
        fault(type="latency", delay="100ms"),
        fault(type="error", status=503, probability=0.5),
        fault(type="latency", delay="50ms"),
        fault(type="reject"),
    ]
    actions = [decide(faults, 9, k, 1) for k in KEYS[:1000]]
    assert all(a.delay_s == pytest.approx(0.15) for a in actions)
    errors = [a for a in actions if a.status == 503]
    assert all(a.fault == "latency,error,latency" for a in errors)
    rejects = [a for a in actions if a.status == 402]
    assert all(a.fault == "latency,latency,reject" for a in rejects)
    assert len(errors) + len(rejects) == 1000 and 400 < len(errors) < 600
    # Each fault hits on its own fate: the first keeps the salts a lone fault uses.
    alone = [decide(faults[1], 9, k, 1).status == 503 for k in KEYS[:1000]]
    assert alone != [a.status == 503 for a in actions]
    # A fault appended later changes no earlier fault's fate.
    assert [decide(faults[:2], 9, k, 1).status == 503 for k in KEYS[:1000]] == [
        a.status == 503 for a in actions
    ]


def test_combined_independent_probabilities() -> None:
    faults = [
        fault(type="error", probability=0.5),
        fault(type="error", probability=0.5, status=503),
    ]
    statuses = [decide(faults, 1, k, 1).status for k in KEYS]
    # 50% the first; of the rest, 50% the second; 25% pass.
    assert 0.47 < statuses.count(500) / len(KEYS) < 0.53
    assert 0.22 < statuses.count(503) / len(KEYS) < 0.28
    assert 0.22 < statuses.count(200) / len(KEYS) < 0.28


def test_match_on_path_and_header() -> None:
    tenant = Match.model_validate({"header": {"X-Tenant": "a"}})
    assert matches(tenant, Call(headers={"x-tenant": "a"}))
    assert not matches(tenant, Call(headers={"X-Tenant": "b"}))
    assert not matches(tenant, Call())
    prefix = Match.model_validate({"path": "/v1/payments"})
    assert matches(prefix, Call("/v1/payments/approve"))
    assert matches(prefix, Call("/v1/payments"))
    assert not matches(prefix, Call("/v1/paymentsX"))
    assert matches(Match.model_validate({"path": "/"}), Call("/anything"))
    both = Match.model_validate({"path": "/v1/refunds", "header": {"X-Tenant": "a"}})
    assert not matches(both, Call(headers={"X-Tenant": "a"}))
    assert matches(None, Call())
    partial = fault(type="error", match={"header": {"X-Tenant": 7}})
    assert decide(partial, 0, "k", 1, Call(headers={"X-Tenant": "7"})).status == 500
    assert decide(partial, 0, "k", 1, Call(headers={"X-Tenant": "8"})).status == 200


def test_phase_accepts_fault_or_faults_and_names_its_headline() -> None:
    one = phase(fault={"type": "timeout"})
    assert [f.type for f in one.faults] == ["timeout"] and one.label == "timeout"
    many = phase(faults=[{"type": "healthy"}, {"type": "latency", "delay": 1}, {"type": "error"}])
    assert many.fault.type == "latency" and many.label == "healthy+latency+error"
    assert phase_at([one], 10) is one and phase_at([one], 70) is None


def test_phase_at_uses_half_open_intervals() -> None:
    phases = [
        Phase(name="a", start=0, duration=10, fault=HealthyFault(type="healthy")),
        Phase(name="b", start=10, duration=5, fault=TimeoutFault(type="timeout")),
    ]
    assert phase_at(phases, -0.1) is None
    assert phase_at(phases, 0).name == "a"  # type: ignore[union-attr]
    assert phase_at(phases, 10).name == "b"  # type: ignore[union-attr]
    assert phase_at(phases, 15) is None


SCENARIO = """\
name: t
duration: 60s
traffic:
  x: {{path: /x, rate: 1}}
pg:
  phases:
    - {{name: a, start: 0s, duration: 10s, {phase}}}
builds:
  b: {{profile: retry-only}}
"""


@pytest.mark.parametrize(
    ("phase_text", "field", "message"),
    [
        ("fault: {type: latency, distribution: uniform, min: 1s, max: 2s, ramp-to: 3s}",
         "pg.phases.0.fault", "ramp-to needs distribution fixed"),
        ("fault: {type: latency, delay: 1s, min: 2s}", "pg.phases.0.fault",
         "distribution fixed takes delay, not min"),
        ("fault: {type: latency, distribution: mix}", "pg.phases.0.fault",
         "distribution mix needs mix"),
        ("fault: {type: latency, distribution: mix, "
         "mix: [{weight: 0, distribution: fixed, delay: 1s}]}",
         "pg.phases.0.fault.mix.0.weight", "greater than 0"),
        ("repeat: {every: 2s, for: 2s}, fault: {type: error}", "pg.phases.0.repeat",
         "for (2s) must be shorter than every (2s)"),
        ("fault: {type: error, status: 404}", "pg.phases.0.fault.status", "type reject"),
        ("fault: {type: error, status: {500: 1, 503: 0}}", "pg.phases.0.fault.status",
         "weights must be positive, got 503: 0"),
        ("fault: {type: reject, status: 503}", "pg.phases.0.fault.status",
         "less than or equal to 499"),
        ("fault: {type: refuse, probability: 0.5}", "pg.phases.0.fault", "probability and match"),
        ("faults: [{type: refuse}, {type: error}]", "pg.phases.0", "cannot be combined"),
        ("faults: [{type: latency, delay: 1s}, {type: error, status: 600}]",
         "pg.phases.0.faults.1.status", "not a 5xx"),
        ("fault: {type: error}, faults: [{type: error}]", "pg.phases.0", "not both"),
        ("repeat: {every: 2s, for: 1s}", "pg.phases.0", "needs fault"),
        ("fault: {type: malformed}", "pg.phases.0.fault.kind", "required key is missing"),
        ("fault: {type: reset, when: later}", "pg.phases.0.fault.when", "before-body"),
        ("fault: {type: error, match: {}}", "pg.phases.0.fault.match", "match needs path"),
        ("fault: {type: error, match: {header: {X-Tenant: a}, methd: GET}}",
         "pg.phases.0.fault.match.methd", "unknown key"),
        ("fault: {type: timeout, after: 20m}", "pg.phases.0.fault.after", "600"),
        ("fault: {type: slow-body, chunks: 3}", "pg.phases.0.fault.duration", "required key"),
    ],
)  # fmt: skip
def test_bad_faults_are_reported_with_their_field(
    phase_text: str, field: str, message: str
) -> None:
    with pytest.raises(ScenarioError) as caught:
        load_scenario_text(SCENARIO.format(phase=phase_text), "s.yaml")
    problems = [str(p) for p in caught.value.problems]
    assert any(
        p.startswith("s.yaml:7:") and f" {field}: " in p and message in p for p in problems
    ), problems


def test_override_rules() -> None:
    with pytest.raises(ValidationError, match="ramp-to needs a phase"):
        FaultOverride.model_validate({"faults": [{"type": "latency", "delay": 1, "ramp-to": 2}]})
    with pytest.raises(ValidationError, match="at least 1"):
        FaultOverride.model_validate({"faults": []})
