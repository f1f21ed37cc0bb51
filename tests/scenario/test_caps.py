"""``pg.phases[].target``: CPU and memory caps on the target, and what is refused (exit 2)."""

from __future__ import annotations

import json

import pytest

from harness.core.errors import InputError
from harness.scenario.caps import MIN_MEMORY_BYTES, format_bytes, parse_bytes
from harness.scenario.loader import load_scenario_text
from harness.scenario.starter import scenario_json_schema

SCENARIO = """\
name: caps
duration: 10s
pg:
  port: 18080
  phases:
    - {{name: calm, start: 0s, duration: 2s, fault: {{type: healthy}}}}
    - name: squeeze
      start: 2s
      duration: 3s
      target: {target}
traffic:
  x: {{path: /x, rate: 5}}
builds:
  a: {{profile: retry-only}}
{more}"""


def _load(target: str, more: str = "") -> object:
    return load_scenario_text(SCENARIO.format(target=target, more=more)).scenario


def _problem(target: str, more: str = "") -> str:
    with pytest.raises(InputError) as caught:
        _load(target, more)
    return str(caught.value)


def test_a_phase_of_caps_alone_leaves_the_gateway_healthy() -> None:
    scenario = _load("{cpus: 0.5, memory: 256MiB}")
    phase = scenario.pg.phases[1]  # type: ignore[attr-defined]
    assert phase.target.cpus == 0.5 and phase.target.memory == 256 * 1024**2
    assert [f.type for f in phase.faults] == ["healthy"]
    assert phase.target.label == "cpus 0.5, memory 256MiB"
    assert phase.label == "target cpus 0.5, memory 256MiB"  # the report's timeline, charts
    # A capped phase is not healthy: it is in the fault window, which the calm one is not.
    assert scenario.fault_window() == (2.0, 5.0)  # type: ignore[attr-defined]


def test_a_cap_beside_a_fault_is_named_after_it() -> None:
    text = SCENARIO.format(target="{cpus: 0.5}", more="").replace(
        "      target:", "      fault: {type: timeout}\n      target:"
    )
    phase = load_scenario_text(text).scenario.pg.phases[1]
    assert phase.label == "timeout+target cpus 0.5" and phase.fault.type == "timeout"


def test_either_cap_alone() -> None:
    only_cpu = _load("{cpus: 2}").pg.phases[1].target  # type: ignore[attr-defined]
    assert (only_cpu.cpus, only_cpu.memory) == (2.0, None)
    only_memory = _load("{memory: 1GiB}").pg.phases[1].target  # type: ignore[attr-defined]
    assert (only_memory.cpus, only_memory.memory) == (None, 1024**3)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("256MiB", 256 * 1024**2),
        ("256Mi", 256 * 1024**2),
        ("1.5GiB", 1536 * 1024**2),
        ("512MB", 512 * 10**6),
        ("64 KiB", 64 * 1024),
        ("1000000", 10**6),
        (268435456, 268435456),
        ("100B", 100),
    ],
)
def test_sizes(text: object, expected: int) -> None:
    assert parse_bytes(text) == expected


@pytest.mark.parametrize(
    ("target", "line", "said"),
    [
        ("{cpus: 0}", 10, "cpus must be from 0.01"),
        ("{cpus: -1}", 10, "cpus must be from 0.01"),
        ("{cpus: 2000}", 10, "to 1024, got 2000"),
        ("{memory: 1MiB}", 10, "memory must be from 16MiB"),
        ("{memory: 256M}", 10, "M alone is ambiguous"),
        ("{memory: lots}", 10, "expected a size such as 256MiB"),
        ("{cpu: 1}", 10, "did you mean `cpus`"),
        ("{}", 10, "a target cap needs cpus, memory or both"),
    ],
)
def test_bad_caps_are_refused_at_their_line(target: str, line: int, said: str) -> None:
    problem = _problem(target)
    assert f"<scenario>:{line}:" in problem and said in problem, problem


def test_a_cap_on_a_url_build_is_refused_at_the_phase() -> None:
    problem = _problem("{cpus: 0.5}", "  prod: {url: 'http://127.0.0.1:9000'}\n")
    assert "<scenario>:10:" in problem and "pg.phases.1.target" in problem
    assert "does not run build(s) prod" in problem and "cpus 0.5" in problem


def test_a_phase_needs_a_fault_or_a_cap() -> None:
    text = SCENARIO.format(target="{cpus: 1}", more="").replace("      target: {cpus: 1}\n", "")
    with pytest.raises(InputError, match="a phase needs fault .*, faults .* or target"):
        load_scenario_text(text)


def test_the_floor_and_the_sizes_print_as_written() -> None:
    assert format_bytes(MIN_MEMORY_BYTES) == "16MiB"
    assert format_bytes(1536 * 1024**2) == "1.5GiB" and format_bytes(999) == "999B"


def test_the_json_schema_takes_a_size_as_text_or_bytes() -> None:
    text = json.dumps(scenario_json_schema())
    assert "caps on every build's target" in text and "KMG" in text
