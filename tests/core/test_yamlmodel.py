"""Strict YAML models: unknown keys, missing keys, duplicate keys and bad values, each located."""

from __future__ import annotations

import pytest
from pydantic import Field, ValidationError

from harness.core.errors import ScenarioError
from harness.core.yamlmodel import StrictModel, describe_error, validate_yaml


class Inner(StrictModel):
    max_attempts: int = Field(ge=1)


class Outer(StrictModel):
    name: str
    inner: Inner


def _problems(text: str) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        validate_yaml(Outer, text, "x.yaml", expected="a mapping", reference="docs/x.md")
    return [str(p) for p in info.value.problems]


def test_kebab_keys_and_python_names() -> None:
    done = validate_yaml(Outer, "name: a\ninner: {max-attempts: 2}\n", "x.yaml", expected="a map")
    assert done.model.inner.max_attempts == 2 and done.problems == []
    assert Inner(max_attempts=3).max_attempts == 3


def test_every_problem_located() -> None:
    problems = _problems("inner:\n  max-attempts: 0\n  retries: 1\n")
    assert "x.yaml:1:1: name: required key is missing" in problems
    assert any(
        p.startswith("x.yaml:2:17: inner.max-attempts:") and "(got 0)" in p for p in problems
    )
    assert "x.yaml:3:3: inner.retries: unknown key (check the spelling; see docs/x.md)" in problems


def test_duplicates_are_returned_not_raised() -> None:
    done = validate_yaml(
        Outer, "name: a\nname: b\ninner: {max-attempts: 1}\n", "x.yaml", expected="a map"
    )
    assert [str(p) for p in done.problems] == [
        "x.yaml:2:1: name: duplicate key (YAML would silently keep only the last one)"
    ]


def test_not_a_mapping_and_bad_yaml() -> None:
    assert _problems("- a\n") == ["x.yaml:1:1: expected a mapping"]
    (bad,) = _problems("name: [\n")
    assert bad.startswith("x.yaml:2:") and "not valid YAML" in bad


def test_describe_error_without_a_reference_is_plain() -> None:
    with pytest.raises(ValidationError) as info:
        Outer.model_validate({"inner": {"max-attempts": 0}, "extra": 1})
    messages = {describe_error(e) for e in info.value.errors()}
    assert messages == {
        "required key is missing",
        "unknown key",
        "Input should be greater than or equal to 1",
    }
