"""Strict YAML models: unknown keys, missing keys, duplicate keys and bad values, each located."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from pydantic import Field, ValidationError

from harness.core.errors import ScenarioError
from harness.core.yamlmodel import (
    MAX_FILE_BYTES,
    MAX_NODES,
    StrictModel,
    describe_error,
    read_text_file,
    short_repr,
    validate_yaml,
)


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


# ---------------------------------------------------------------- bounded reading (issue 12)


class Loose(StrictModel):
    """Any mapping: the reader's own checks are under test, not a schema."""

    model_config = {"extra": "allow"}


def _refusal(text: str) -> str:
    with pytest.raises(ScenarioError) as info:
        validate_yaml(Loose, text, "x.yaml", expected="a mapping")
    (problem,) = info.value.problems
    return str(problem)


def _file_refusal(path: Path) -> str:
    with pytest.raises(ScenarioError) as info:
        read_text_file(path)
    (problem,) = info.value.problems
    assert problem.file == str(path)
    return str(problem)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a: " + "[" * 10_000 + "]" * 10_000, "nested"),
        ("a: " + "{a: " * 10_000 + "1" + "}" * 10_000, "nested more than 64 levels deep"),
        ("".join(f"{' ' * 2 * i}k{i}:\n" for i in range(200)) + " " * 400 + "1\n", "nested"),
        ("a: &x [1, *x]\n", "alias *x refers to a value that contains it"),
        (
            "".join(f"a{i}: &a{i} [{f'*a{i - 1}' if i else 1}]\n" for i in range(100)),
            "nests values more than 64 levels deep",
        ),
        ("seed: " + "9" * 5000, "a number of 5,000 characters; at most 100"),
        ("seed: 0x" + "f" * 5000, "at most 100"),
        ("ok: !!bool maybe", "cannot read 'maybe' as bool"),
        ("ok: !!float x", "cannot read 'x' as float"),
        ("ok: !!int x", "cannot read 'x' as int"),
        ('ok: "a\x01b"', "control characters are not allowed"),
        ("ok: a\udcffb", "not valid Unicode"),
        ("ok: a\x00b", "NUL"),
        ("? [a, b]\n: 1\n", "unhashable key"),
        ("a: *nowhere\n", "undefined alias"),
        ("a: 1\n---\nb: 2\n", "single document"),
        ("a:\n\t- 1\n", "not valid YAML"),
    ],
)
def test_hostile_yaml_is_a_located_problem(text: str, fragment: str) -> None:
    started = time.monotonic()
    problem = _refusal(text)
    assert fragment in problem, problem
    assert problem.startswith("x.yaml"), problem
    assert time.monotonic() - started < 2


def test_billion_laughs_stop_at_the_node_budget() -> None:
    laughs = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{','.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
    )
    started = time.monotonic()
    problem = _refusal(laughs)
    assert time.monotonic() - started < 1
    assert f"more than {MAX_NODES:,} values (aliases expanded)" in problem
    # Merge keys expand the same way and are counted the same way.
    merges = "a0: &a0 {k: 1}\n" + "".join(
        f"a{i}: &a{i} {{{', '.join(f'x{j}: *a{i - 1}' for j in range(9))}}}\n" for i in range(1, 9)
    )
    assert "aliases expanded" in _refusal(merges)


def test_aliases_within_the_budget_still_work() -> None:
    done = validate_yaml(
        Loose, "base: &b {x: 1}\none: *b\ntwo: {<<: *b, y: 2}\n", "x.yaml", expected="a map"
    )
    assert done.model.model_dump()["two"] == {"x": 1, "y": 2}


def test_text_over_the_size_bound_is_refused_unparsed() -> None:
    text = "a: [" + "1," * (MAX_FILE_BYTES // 2) + "1]\n"
    started = time.monotonic()
    assert "at most 1 MiB" in _refusal(text)
    assert time.monotonic() - started < 1


def test_huge_inputs_are_quoted_short() -> None:
    with pytest.raises(ScenarioError) as info:
        validate_yaml(
            Outer, f"name: {10**90}\ninner: {{max-attempts: 1}}\n", "x.yaml", expected="m"
        )
    (problem,) = info.value.problems
    assert (
        str(problem)
        == "x.yaml:1:7: name: expected text, got a number (a 299-bit integer): quote it for text"
    )
    assert short_repr(10**5000) == "a 16610-bit integer"
    assert short_repr("x" * 1000).endswith("...") and len(short_repr("x" * 1000)) == 60


def test_infinite_floats_are_refused_by_every_strict_model() -> None:
    class Rate(StrictModel):
        rate: float

    with pytest.raises(ValidationError) as info:
        Rate(rate=float("nan"))
    assert describe_error(info.value.errors()[0]) == "must be a finite number (not .inf or .nan)"


# ---------------------------------------------------------------- the file before parsing


def test_a_regular_utf8_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_bytes("\ufeffname: café\n".encode())
    assert read_text_file(path) == "name: café\n"


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    started = time.monotonic()
    assert "is a FIFO (named pipe), not a regular scenario file" in _file_refusal(fifo)
    assert time.monotonic() - started < 1


def test_devices_and_directories_are_refused(tmp_path: Path) -> None:
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")
    assert "is a device, not a regular scenario file" in _file_refusal(link)
    assert "is a device" in _file_refusal(Path("/dev/zero"))
    assert "is a directory" in _file_refusal(tmp_path)


def test_a_file_over_the_bound_is_refused_by_its_size(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:
        f.truncate(50 * 1024 * 1024)  # sparse: 50 MB without writing them
    problem = _file_refusal(big)
    assert "is 52,428,800 bytes; a scenario file may be at most 1 MiB (1,048,576 bytes)" in problem


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ("name: a\n".encode("utf-16"), "is UTF-16 text (it starts with a byte-order mark)"),
        ("name: a\n".encode("utf-32"), "is UTF-32 text"),
        (b"name: a\nb: \x00\x00\n", "contains a NUL byte (line 2, byte 12)"),
        (b"name: a\nb: \xff\xfe\n", "is not UTF-8 text (byte 0xff at line 2, byte 12)"),
        ("name: é\n".encode("latin-1"), "is not UTF-8 text"),
    ],
)
def test_text_that_is_not_utf8_is_refused(tmp_path: Path, data: bytes, fragment: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_bytes(data)
    assert fragment in _file_refusal(path)


def test_unreadable_and_missing_files(tmp_path: Path) -> None:
    assert "cannot read: No such file or directory" in _file_refusal(tmp_path / "none.yaml")
