"""``traffic.<ep>.outcomes`` (issue 30, item 1): what counts as refused, fallback, degraded
or cached in an endpoint's answers, from status, headers and JSONPath on the body.

Bad input is refused by ``harness validate`` at its line (exit 2, no traceback); an endpoint
that names none is read with its builds' kind's preset (the shop's ``x-outcome``), else
``default``; the load plan carries the resolved rules through ``plan.json``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.load.plan import PROTOCOL, LoadPlan, endpoint_plans
from harness.scenario.loader import load_scenario_text
from harness.scenario.outcomes import PRESETS, Outcomes, headers_of, recorded_class

SHOP = """\
name: oc
seed: 4
duration: 3s
traffic:
  api:
    path: /owners
    rate: 5
{outcomes}pg:
  phases:
    - {{name: baseline, start: 0s, duration: 3s, fault: {{type: healthy}}}}
builds:
{builds}"""
SHOP_BUILD = "  b: {profile: retry-only}\n"
URL_BUILD = '  b: {url: "http://127.0.0.1:8080"}\n'


def _text(outcomes: str = "", builds: str = SHOP_BUILD) -> str:
    text = SHOP.format(outcomes=outcomes, builds=builds)
    return text.replace("pg:\n", "pg:\n  port: 18081\n") if "url" in builds else text


def _validate(tmp_path: Path, text: str) -> tuple[int, str]:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def test_bad_rules_are_refused_at_their_lines(tmp_path: Path) -> None:
    outcomes = """\
    outcomes:
      preset: x-outcom
      degraded:
        status: [200, 600, 5xx, 504-500]
        body: {path: "$.pets[", empty: true}
      fallback: {header: {name: X-Fallback, presnt: true}}
      cached: {body: {path: $.a, empty: true, equal: 1}}
      refused: {header: {name: "bad name", matches: "("}}
"""
    code, out = _validate(tmp_path, _text(outcomes))
    assert code == 2
    assert "s.yaml:9:15: traffic.api.outcomes.preset: unknown outcomes preset 'x-outcom'" in out
    assert "s.yaml:11:17: traffic.api.outcomes.degraded.status: status 600" in out
    assert "s.yaml:12:22: traffic.api.outcomes.degraded.body.path: path '$.pets[' is not a" in out
    assert "s.yaml:13:45: traffic.api.outcomes.fallback.header.presnt: unknown key" in out
    assert "s.yaml:14:" in out and "give exactly one of empty, equal" in out
    assert "traffic.api.outcomes.refused.header.name: header name 'bad name'" in out
    assert "refused.header.matches: matches '(' is not a regular expression" in out
    code, out = _validate(tmp_path, _text("    outcomes: {refused: {status: 5xx, body: []}}\n"))
    assert code == 2 and "s.yaml:8:45: traffic.api.outcomes.refused.body: List should" in out


def test_rules_read_status_ranges_headers_and_body() -> None:
    outcomes = Outcomes.model_validate(
        {
            "label": "X-Error",
            "refused": [
                {"status": ["500-502", 429]},
                {"header": {"name": "X-Gate", "present": True}},
            ],
            "fallback": {"header": {"name": "X-Source", "matches": "^fallback"}},
            "degraded": {
                "status": 200,
                "body": {"path": "$.items[?(@.stock == 0)]", "present": True},
            },
            "cached": {"status": "2xx", "body": {"path": "$.cached", "equal": True}},
        }
    )
    c = outcomes.resolved().classifier()
    plain, lower = headers_of({"X-Error": "E42"})
    assert c.label(plain, lower) == "E42"
    assert c.classify(501, plain, lower, b"") == "refused"
    assert c.classify(503, plain, lower, b"") == "failure"  # its own refused replaces 429/503
    gate, gate_lower = headers_of({"x-gate": ""})
    assert c.classify(200, gate, gate_lower, b"{}") == "refused"
    source, source_lower = headers_of({"X-Source": "fallback-cache"})
    assert c.classify(200, source, source_lower, b"{}") == "fallback"
    assert c.classify(200, plain, lower, b'{"items": [{"stock": 0}]}') == "degraded"
    assert c.classify(201, plain, lower, b'{"items": [{"stock": 0}]}') == "success"
    assert c.classify(200, plain, lower, b'{"cached": true}') == "cached"
    assert c.classify(200, plain, lower, b'{"cached": 1}') == "success"  # true is not 1
    assert c.classify(302, plain, lower, b"") == "success"  # a redirect is the answer
    assert c.classify(404, plain, lower, b"") == "failure"
    assert c.reads_body and not Outcomes().resolved().classifier().reads_body


def test_an_endpoint_without_outcomes_takes_its_builds_kind_preset() -> None:
    shop = load_scenario_text(_text()).scenario
    assert endpoint_plans(shop)["api"].outcomes == PRESETS["x-outcome"].resolved()
    stranger = load_scenario_text(_text(builds=URL_BUILD)).scenario
    assert endpoint_plans(stranger)["api"].outcomes == PRESETS["default"].resolved()
    mine = load_scenario_text(_text("    outcomes: x-outcome\n", URL_BUILD)).scenario
    assert endpoint_plans(mine)["api"].outcomes == PRESETS["x-outcome"].resolved()
    own = load_scenario_text(_text("    outcomes: {degraded: {status: 204}}\n")).scenario
    resolved = endpoint_plans(own)["api"].outcomes
    assert resolved is not None and resolved.preset == "default"
    assert [r.status for r in resolved.degraded or []] == [[204]]
    assert [r.status for r in resolved.refused or []] == [[429, 503]]


def test_the_plan_carries_the_resolved_rules(tmp_path: Path) -> None:
    text = _text(
        '    outcomes: {degraded: {body: {path: "$[*].visits", empty: true}}}\n', URL_BUILD
    )
    scenario = load_scenario_text(text).scenario
    plan = LoadPlan(
        "http://127.0.0.1:1", 4, 0.0, 3.0, 1.0, endpoint_plans(scenario),
        str(tmp_path / "s.csv"), str(tmp_path / "p.json"), str(tmp_path / "go.json"),
    )  # fmt: skip
    plan.write(tmp_path / "plan.json")
    assert PROTOCOL == 7
    back = LoadPlan.read(tmp_path / "plan.json")
    assert back == plan
    outcomes = back.endpoints["api"].outcomes
    assert outcomes is not None and outcomes.classifier().classify(200, b"", b"", b"[]") == (
        "degraded"
    )


@pytest.mark.parametrize(
    ("status", "outcome", "error", "expected"),
    [
        (200, "fresh", "", "success"),
        (200, "cached", "", "cached"),
        (503, "cached", "HTTP503", "failure"),
        (200, "not_permitted", "", "refused"),
        (503, "not_permitted", "HTTP503", "refused"),
        (503, "timeout", "HTTP503", "failure"),
        (429, "", "HTTP429", "failure"),  # the shop's reading: only not_permitted is refused
        (0, "", "TimeoutError", "failure"),
        (0, "", "Dropped", ""),
    ],
)
def test_samples_before_the_column_are_read_as_the_shop_header_said(
    status: int, outcome: str, error: str, expected: str
) -> None:
    assert recorded_class(status, outcome, error) == expected
