"""The proxy's toxics and the gateway's live overrides take one spelling per key, the
kebab-case one (issue 22, item 20): ``average_size`` for ``average-size`` or
``retry_after`` for ``retry-after`` was accepted by ``Proxy.set_toxics`` and by
``PUT /__admin/fault`` / ``X-Harness-Fault``, though a scenario or a schedule file
refuses it with "did you mean"."""

from __future__ import annotations

import json

import pytest

from harness.core.errors import ScenarioError
from harness.gateway.overrides import OverrideError, parse_override
from harness.proxy.server import Proxy
from harness.proxy.toxics import ProxyConfigError, load_schedule_text

SLICER = "phases:\n  - {name: a, start: 0s, duration: 1s, toxics: [{type: slicer, %s: 10}]}\n"


def test_a_schedule_file_refuses_snake_case_with_the_kebab_spelling() -> None:
    assert load_schedule_text(SLICER % "average-size").phases[0].toxics[0].type == "slicer"
    with pytest.raises(ScenarioError, match="did you mean `average-size`"):
        load_schedule_text(SLICER % "average_size", "s.yaml")


def test_set_toxics_refuses_snake_case_with_the_kebab_spelling() -> None:
    proxy = Proxy("127.0.0.1:0", "127.0.0.1:9")
    proxy.set_toxics([{"type": "slicer", "average-size": 10}])
    with pytest.raises(ProxyConfigError, match="average_size.*did you mean `average-size`"):
        proxy.set_toxics([{"type": "slicer", "average_size": 10}])


@pytest.mark.parametrize(
    "fault",
    [
        {"type": "error", "status": 503, "retry_after": "1s"},
        {"faults": [{"type": "reject", "retry_after": "1s"}]},
    ],
)
def test_a_live_override_refuses_snake_case_with_the_kebab_spelling(fault: object) -> None:
    kebab = json_of(fault).replace("retry_after", "retry-after")
    assert parse_override(kebab, allow_refuse=False)[0].retry_after == 1.0
    with pytest.raises(OverrideError, match="retry_after: unknown key; did you mean `retry-after`"):
        parse_override(json_of(fault), allow_refuse=False)


def json_of(value: object) -> str:
    return json.dumps(value)


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("010", r"`010` is 8 \(octal\)"),
        ("yes", "`yes` is true in YAML 1.1"),
        ("true", "expected an"),
    ],
)
def test_a_schedule_number_means_what_it_says(value: str, said: str) -> None:
    with pytest.raises(ScenarioError, match=said):
        load_schedule_text((SLICER % "average-size").replace(": 10}", f": {value}}}"), "s.yaml")
