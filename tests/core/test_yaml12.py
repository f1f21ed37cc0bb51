"""YAML 1.2 core schema, one type per value and one spelling per key (issue 18, frictions 8, 9)."""

from __future__ import annotations

import pytest
from pydantic import Field

from harness.core.errors import ScenarioError
from harness.core.yamlmodel import StrictModel, in_file_order, validate_yaml
from harness.core.yamlread import core_tag, yaml11_difference


class Knobs(StrictModel):
    rate: float | None = Field(None, gt=0)
    workers: int = 1
    seed: int = 0
    enabled: bool = False
    read_timeout: float = 1.0
    label: str = ""
    extra: dict[str, object] = Field(default_factory=dict)


def _read(text: str) -> Knobs:
    return validate_yaml(Knobs, text, "k.yaml", expected="a mapping").model


def _problems(text: str) -> list[str]:
    """Every problem: raised, or returned beside a model that validated (as loaders raise)."""
    try:
        done = validate_yaml(Knobs, text, "k.yaml", expected="a mapping", reference="docs/k.md")
    except ScenarioError as exc:
        return [str(p) for p in exc.problems]
    assert done.problems, "no problem found"
    return [str(p) for p in done.problems]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("rate: true", "k.yaml:1:7: rate: expected a number, got true"),
        ("workers: false", "k.yaml:1:10: workers: expected an integer (a whole number), got false"),
        ("seed: true", "k.yaml:1:7: seed: expected an integer (a whole number), got true"),
        ("seed: '7'", "seed: expected an integer (a whole number), got the text '7'"),
        ("workers: 2.5", "workers: expected an integer (a whole number), got 2.5"),
        ("enabled: 1", "k.yaml:1:10: enabled: expected true or false, got 1"),
        ("enabled: 'true'", "enabled: expected true or false, got the text 'true'"),
    ],
)
def test_a_number_is_a_number_and_a_boolean_a_boolean(text: str, fragment: str) -> None:
    (problem,) = _problems(text)
    assert fragment in problem, problem


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("rate: yes", "k.yaml:1:7: rate: `yes` is true in YAML 1.1 but the text 'yes' in YAML 1.2"),
        ("rate: on", "rate: `on` is true in YAML 1.1"),
        ("enabled: off", "enabled: `off` is false in YAML 1.1"),
        ("enabled: No", "enabled: `No` is false in YAML 1.1"),
        ("label: no", "label: `no` is false in YAML 1.1"),
        ("workers: 010", "workers: `010` is 8 (octal) in YAML 1.1 but 10 in YAML 1.2"),
        ("workers: 0b11", "workers: `0b11` is 3 in YAML 1.1 but the text '0b11'"),
        ("workers: 1_000", "workers: `1_000` is 1000 in YAML 1.1 but the text '1_000'"),
        ("seed: 1:30", "seed: `1:30` is 90 (base 60) in YAML 1.1"),
        ("rate: 1_0.5", "rate: `1_0.5` is 10.5 in YAML 1.1"),
        ("extra: {answer: yes}", "k.yaml:1:17: extra.answer: `yes` is true in YAML 1.1"),
    ],
)
def test_what_yaml_1_1_reads_otherwise_is_refused_at_its_line(text: str, fragment: str) -> None:
    (problem,) = _problems(text)  # said once: not again as a wrong type
    assert fragment in problem, problem
    assert "or quote it for text" in problem


def test_the_hint_says_how_to_write_it() -> None:
    (octal,) = _problems("workers: 010")
    assert "write 10 (decimal) or 0o10 (octal 8)" in octal
    (clock,) = _problems("seed: 1:30")
    assert "write 90 or a duration such as 1m30s" in clock
    (word,) = _problems("enabled: yes")
    assert "write true or false" in word


def test_yaml_1_2_core_schema_values() -> None:
    knobs = _read("rate: 1e3\nworkers: 0o17\nseed: 0x1F\nenabled: TRUE\nlabel: '010'\n")
    assert (knobs.rate, knobs.workers, knobs.seed, knobs.enabled) == (1000.0, 15, 31, True)
    assert knobs.label == "010"
    assert _read("label: !!str yes\n").label == "yes"  # an explicit tag is taken as written
    assert _read("workers: 09\n").workers == 9  # text in YAML 1.1, 9 in 1.2: no value changes
    assert _read("extra: {ON: 1, 'yes': 2}\n").extra == {"ON": 1, "yes": 2}  # keys are names
    assert [core_tag(v).rsplit(":", 1)[1] for v in ("~", "", "null", "-.inf", ".5", "+1")] == [
        "null",
        "null",
        "null",
        "float",
        "float",
        "int",
    ]
    assert yaml11_difference("10") is None and yaml11_difference(".inf") is None


def test_snake_case_keys_are_unknown_with_the_kebab_spelling_suggested() -> None:
    (problem,) = _problems("read_timeout: 2")
    assert problem == (
        "k.yaml:1:1: read_timeout: unknown key; did you mean `read-timeout`? (see docs/k.md)"
    )
    assert _read("read-timeout: 2").read_timeout == 2.0
    assert Knobs(read_timeout=3).read_timeout == 3.0  # Python code still uses field names


def test_a_mistyped_key_gets_the_closest_one_and_a_far_one_none() -> None:
    (close,) = _problems("wrokers: 2")
    assert "did you mean `workers`?" in close
    (far,) = _problems("zzz: 2")
    assert far == "k.yaml:1:1: zzz: unknown key (check the spelling; see docs/k.md)"


def test_problems_are_in_the_files_order() -> None:
    problems = _problems("workers: x\nrate: 0\nseed: true\nlabl: a\nenabled: 2\n")
    assert [p.split(":")[1] for p in problems] == ["1", "2", "3", "4", "5"]
    assert in_file_order([]) == []
