"""Bounds of the schema (issue 12, items 3 and 4): safe names, finite and bounded numbers,
paths that become URLs as they are, and gate names that fit in XML. Every refusal is a
located problem that states the bound."""

from __future__ import annotations

import pytest

from harness.core.errors import ScenarioError
from harness.load.plan import EndpointPlan
from harness.scenario.loader import load_scenario_text

BASE = """\
name: t
duration: 60s
traffic:
  products: {path: "/api/products/{id}", params: {id: [1, 10]}, rate: 5}
  payments: {method: POST, path: /api/payments, rate: 5, body: {amount: 100}}
pg:
  phases:
    - {name: outage, start: 5s, duration: 10s, fault: {type: timeout}}
builds:
  before: {profile: retry-only}
  after:
    profile: retry-circuit-breaker
    pg-client: {read-timeout: 3s}
"""


def _problems(text: str) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, "s.yaml")
    return [str(p) for p in info.value.problems]


def _refused(text: str, field: str, fragment: str) -> None:
    problems = _problems(text)
    assert any(f" {field}:" in p and fragment in p for p in problems), problems
    assert all(p.startswith("s.yaml:") for p in problems), problems


def test_base_is_valid() -> None:
    load_scenario_text(BASE)


# ---------------------------------------------------------------- item 3: names


@pytest.mark.parametrize(
    "name",
    ['".."', '"."', '"../escape"', '"a/b"', '"-rf"', '".hidden"', "a..b", '"a b"'],
)
def test_scenario_name_must_be_a_safe_slug(name: str) -> None:
    _refused(BASE.replace("name: t", f"name: {name}"), "name", "1-100 characters")


@pytest.mark.parametrize("length", [101, 300])
def test_a_long_name_is_refused_with_the_bound(length: int) -> None:
    # 300 characters made ENAMETOOLONG when the results folder was created.
    _refused(BASE.replace("name: t", f"name: {'n' * length}"), "name", "at most 100 characters")


@pytest.mark.parametrize("name", ["v1.2", "seed_000", "Quick-Start", "_x", '"7"'])
def test_ordinary_names_pass(name: str) -> None:
    loaded = load_scenario_text(BASE.replace("name: t", f"name: {name}"))
    assert loaded.scenario.name == name.strip('"')


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("  before: {", '  "-before": {', "builds"),
        ("  before: {", "  b.4: {", "builds"),
        ("  products: {", '  "../p": {', "traffic"),
        ("{name: outage,", '{name: "..",', "pg.phases.0.name"),
        ("{name: outage,", f"{{name: {'o' * 101},", "pg.phases.0.name"),
    ],
)
def test_build_endpoint_and_phase_names_are_slugs(old: str, new: str, field: str) -> None:
    problems = _problems(BASE.replace(old, new))
    assert any(f" {field}" in p and "characters" in p for p in problems), problems


# ---------------------------------------------------------------- item 4: numbers


@pytest.mark.parametrize(
    ("old", "new", "field", "fragment"),
    [
        ("duration: 60s", "duration: 60s\nwarmup: 100000h", "warmup", "3600"),
        ("duration: 60s", "duration: 60s\nwarmup: .inf", "warmup", "finite"),
        ("duration: 60s", "duration: 60s\nwarmup: .nan", "warmup", "finite"),
        ("duration: 60s", "duration: 60s\nwarmup: 1.0e+400", "warmup", "finite"),
        ("duration: 60s", "duration: 60s\nwarmup: " + "9" * 400 + "h", "warmup", "finite"),
        ("duration: 60s", "duration: 25h", "duration", "86400"),
        ("duration: 60s", "duration: 60s\ndrain: .inf", "drain", "finite"),
        ("duration: 60s", "duration: 60s\ndrain: 1h", "drain", "600"),
        ("rate: 5}", "rate: 5, timeout: .inf}", "traffic.products.timeout", "finite"),
        ("rate: 5}", "rate: 5, timeout: 11m}", "traffic.products.timeout", "600"),
        ("read-timeout: 3s", "read-timeout: .inf", "read-timeout", "finite"),
        ("read-timeout: 3s", "read-timeout: 1h", "read-timeout", "600"),
        ("start: 5s", "start: .nan", "pg.phases.0.start", "finite"),
        ("start: 5s", "start: 100000h", "pg.phases.0.start", "86400"),
        ("rate: 5}", "rate: 1.0e+9}", "traffic.products.rate", "10000"),
        ("rate: 5}", "rate: .nan}", "traffic.products.rate", "finite"),
        ("duration: 60s", "duration: 60s\nseed: -1", "seed", "greater than or equal to 0"),
        ("duration: 60s", f"duration: 60s\nseed: {2**63}", "seed", "9223372036854775808"),
        ("duration: 60s", "duration: 60s\nseed: " + "7" * 5000, "", "at most 100"),
        ("{profile: retry-only}", "{profile: retry-only, workers: 100000}", "workers", "2000"),
        ("params: {id: [1, 10]}", f"params: {{id: [1, {2**64}]}}", "traffic.products", "2**63"),
    ],
)
def test_numbers_are_finite_and_bounded(old: str, new: str, field: str, fragment: str) -> None:
    problems = _problems(BASE.replace(old, new, 1))
    assert any(f"{field}:" in p and fragment in p for p in problems), problems


def test_total_rate_and_planned_requests_are_bounded() -> None:
    many = "".join(f"  e{i}: {{path: /e, rate: 10000}}\n" for i in range(11))
    text = BASE.replace("traffic:\n", "traffic:\n" + many)
    assert any("add up to 110010/s; at most 100000/s" in p for p in _problems(text))
    long_run = BASE.replace("duration: 60s", "duration: 24h").replace("rate: 5}", "rate: 1000}")
    assert any("at most 50,000,000" in p for p in _problems(long_run))


@pytest.mark.parametrize(
    ("fault", "fragment"),
    [
        ("{type: latency, distribution: lognormal, median: 1s, sigma: 1000}", "10"),
        ("{type: latency, distribution: normal, mean: 1s, stddev: 100000h}", "600"),
        (
            "{type: latency, distribution: mix, mix: [{weight: .inf, distribution: fixed, "
            "delay: 1s}]}",
            "finite",
        ),
        ("{type: error, status: {500: .inf}}", "finite"),
        ("{type: error, status: {500: 1.0e+300, 503: 1.0e+300}}", "at most 1e+06"),
        ("{type: error, body: {a: .nan}}", "plain JSON"),
        ("{type: slow-body, duration: .inf}", "finite"),
    ],
)
def test_fault_numbers_are_finite_and_bounded(fault: str, fragment: str) -> None:
    problems = _problems(BASE.replace("{type: timeout}", fault))
    assert any(" pg.phases.0.fault" in p and fragment in p for p in problems), problems


def test_repeat_and_phase_count_are_bounded() -> None:
    blips = BASE.replace("{type: timeout}", "{type: timeout}, repeat: {every: 1ms, for: 0.5ms}")
    assert any("repeat.every" in p and "0.01" in p for p in _problems(blips))
    phases = "".join(
        f"    - {{name: p{i}, start: {i * 0.001:.3f}, duration: 0.001, fault: {{type: healthy}}}}\n"
        for i in range(10_001)
    )
    text = BASE.replace(
        "    - {name: outage, start: 5s, duration: 10s, fault: {type: timeout}}\n", phases
    )
    # Refused by count (a quadratic check would show as a hang, not as a timed assertion:
    # these machines are too noisy for one).
    problems = _problems(text)
    assert any("pg.phases" in p and "at most 10000 items" in p for p in problems), problems


def test_breaker_and_retry_settings_are_bounded() -> None:
    window = BASE.replace(
        "pg-client: {read-timeout: 3s}",
        "resilience4j: {circuitbreaker: {sliding-window-size: 1000000000}}",
    )
    assert any("sliding-window-size" in p and "100000" in p for p in _problems(window))
    backoff = BASE.replace(
        "before: {profile: retry-only}",
        "before: {profile: retry-only, resilience4j: {retry: {max-attempts: 20, "
        "enable-exponential-backoff: true, exponential-backoff-multiplier: 100}}}",
    )
    assert any("set exponential-max-wait-duration" in p for p in _problems(backoff))
    cap_below_wait = BASE.replace(
        "before: {profile: retry-only}",
        "before: {profile: retry-only, resilience4j: {retry: {wait-duration: 2s, "
        "exponential-max-wait-duration: 1s}}}",
    )
    assert any("shorter than wait-duration" in p for p in _problems(cap_below_wait))


# ---------------------------------------------------------------- item 4: paths and bodies


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ('"/api/products/{}"', "empty placeholder"),
        ('"/api/products/{0}"', "not a placeholder"),
        ('"/api/products/{id"', "not a placeholder"),
        ('"/api/products/{id.real}"', "not a placeholder"),
        ('"/api/products/{{id}}"', "not a placeholder"),
        ('"/api/products\\r\\nX-Injected: 1"', "control characters"),
        ('"/api/products/\\x00"', "control characters"),
        ('"/api/pro ducts"', "spaces"),
        ('"/api/pro\\u2028ducts"', "control characters"),
        ("api/products", "must start with '/'"),
        ('"/' + "a" * 2000 + '"', "at most 2000"),
        ('"/api/{ref}"', "gives no range"),
    ],
)
def test_paths_become_urls_as_they_are(path: str, fragment: str) -> None:
    text = BASE.replace('path: "/api/products/{id}"', f"path: {path}")
    problems = _problems(text)
    assert any(" traffic.products" in p and fragment in p for p in problems), problems


def test_every_accepted_path_formats_like_the_load_generator() -> None:
    # The locustfile formats the path with str.format(**params): what validates must format.
    ep = load_scenario_text(BASE).scenario.traffic["products"]
    plan = EndpointPlan(ep.method, ep.path, ep.rate, ep.timeout, dict(ep.params))
    assert plan.path.format(**{k: lo for k, (lo, _) in plan.params.items()}) == "/api/products/1"


@pytest.mark.parametrize(
    ("body", "fragment"),
    [("{amount: .nan}", "plain JSON"), ("{raw: !!binary aGk=}", "plain JSON")],
)
def test_bodies_are_plain_json(body: str, fragment: str) -> None:
    problems = _problems(BASE.replace("body: {amount: 100}", f"body: {body}"))
    assert any("traffic.payments.body" in p and fragment in p for p in problems), problems


def test_dates_stay_text() -> None:
    # YAML would make 2024-02-30 a date (and crash: day out of range); no key is a date.
    scenario = load_scenario_text(BASE.replace("{amount: 100}", "{day: 2024-02-30}")).scenario
    assert scenario.traffic["payments"].body == {"day": "2024-02-30"}


# ---------------------------------------------------------------- item 4: gate names


@pytest.mark.parametrize("name", ['"bad\\x01gate"', '"esc\\e[31m"', '"nul\\0"', '"v\\x0btab"'])
def test_gate_names_refuse_control_characters(name: str) -> None:
    text = BASE + f'gates:\n  - {{name: {name}, expr: "after.products.p95 < 1s"}}\n'
    _refused(text, "gates.0.name", "control character")


def test_gate_text_refuses_control_characters() -> None:
    text = BASE + 'gates:\n  - "after.products.p95\\x1c < 1s"\n'
    assert any("gates.0" in p and "control character" in p for p in _problems(text))


def test_adjacent_phases_with_decimal_times_do_not_overlap() -> None:
    # 8.188 + 1.438 is 9.626000000000001 in floats: found by the property test.
    text = BASE.replace(
        "    - {name: outage, start: 5s, duration: 10s, fault: {type: timeout}}\n",
        "    - {name: a, start: 8.188, duration: 1.438, fault: {type: timeout}}\n"
        "    - {name: b, start: 9.626, duration: 1, fault: {type: healthy}}\n",
    )
    assert [p.name for p in load_scenario_text(text).scenario.pg.phases] == ["a", "b"]


@pytest.mark.parametrize(
    ("value", "fragment"),
    [("0", "greater than or equal to 1"), ("100001", "less than or equal to 100000"),
     ("1.5", "integer"), ("lots", "integer")],
)  # fmt: skip
def test_max_in_flight_is_a_count_within_its_bound(value: str, fragment: str) -> None:
    text = BASE.replace("rate: 5, body", f"rate: 5, max-in-flight: {value}, body")
    _refused(text, "traffic.payments.max-in-flight", fragment)


def test_max_in_flight_reaches_the_plan_and_splits_over_workers() -> None:
    scenario = load_scenario_text(
        BASE.replace("rate: 5, body", "rate: 5, max-in-flight: 7, body"), "s.yaml"
    ).scenario
    assert scenario.traffic["payments"].max_in_flight == 7
    assert scenario.traffic["products"].max_in_flight is None
    ep = EndpointPlan("GET", "/", 5.0, 1.0, max_in_flight=7)
    assert [ep.in_flight_limit(k, 3) for k in range(3)] == [3, 2, 2]
    assert ep.in_flight_limit(0, 1) == 7
    assert [EndpointPlan("GET", "/", 5.0, 1.0, max_in_flight=2).in_flight_limit(k, 3)
            for k in range(3)] == [1, 1, 1]  # fmt: skip
    assert EndpointPlan("GET", "/", 5.0, 1.0).in_flight_limit(0, 2) is None


@pytest.mark.parametrize("text", ['""', "ab"])
def test_a_bare_gate_too_short_to_be_one_is_refused_at_its_line(text: str) -> None:
    # found by tests/hostile/test_property.py: it passed validation, then crashed gate_specs()
    _refused(BASE + f"gates:\n  - {text}\n", "gates.0", "at least 3 characters")
