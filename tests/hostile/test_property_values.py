"""Property test of plain values (issue 18, friction 8): whatever a number or a yes/no word
looks like, the reader takes YAML 1.2's value or refuses it at its line; it never takes a
value YAML 1.1 reads otherwise, and a number field never takes a boolean or text."""

from __future__ import annotations

import math
from typing import Any

import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from harness.core.errors import ScenarioError
from harness.core.yamlmodel import StrictModel, validate_yaml


class Slots(StrictModel):
    whole: int | None = None
    real: float | None = None
    flag: bool | None = None
    anything: Any = None


WORDS = ["yes", "Yes", "YES", "no", "No", "on", "On", "OFF", "off", "true", "False", "y", "n"]
tokens = st.one_of(
    st.sampled_from(WORDS),
    st.from_regex(r"[-+]?(0[xob])?[0-9a-fA-F_]{1,8}", fullmatch=True),
    st.from_regex(r"[-+]?[0-9]{1,3}(:[0-5]?[0-9]){1,2}(\.[0-9]+)?", fullmatch=True),
    st.from_regex(r"[-+]?[0-9_]{0,5}\.?[0-9_]{0,5}([eE][-+]?[0-9]{1,3})?", fullmatch=True),
).filter(lambda t: t in WORDS or any(c.isdigit() for c in t))


def _yaml11(token: str) -> Any:
    try:
        return yaml.safe_load(f"v: {token}\n")["v"]  # PyYAML: YAML 1.1
    except ValueError:
        return token


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


@settings(deadline=None, database=None, max_examples=400)
@given(tokens, st.sampled_from(["whole", "real", "flag", "anything"]))
@example("010", "whole")
@example("yes", "flag")
@example("1_000", "whole")
@example("1:30", "real")
@example("true", "whole")
@example("0b_", "whole")  # PyYAML's own YAML 1.1 reader fails on it
@example("0x_", "real")
def test_a_plain_value_is_yaml_1_2s_or_refused(token: str, slot: str) -> None:
    text = f"{slot}: {token}\n"
    try:
        done = validate_yaml(Slots, text, "v.yaml", expected="a mapping")
    except ScenarioError as exc:
        assert all(p.line == 1 and p.field == slot for p in exc.problems), exc.problems
        return
    if done.problems:  # refused beside a model that validated (the loaders raise these)
        assert all(p.line == 1 and "YAML 1.1" in p.message for p in done.problems)
        return
    value = getattr(done.model, slot)
    old = _yaml11(token)
    # What YAML 1.1 reads as a number or a boolean, the reader took only as the same value.
    if isinstance(old, bool | int | float):
        if slot == "real" and type(old) is int:
            old = float(old)  # a float field takes a whole number as it is
        assert _same(value, old), (token, value, old)
    if slot in ("whole", "real"):
        assert not isinstance(value, bool | str), (token, value)
    if slot == "flag":
        assert isinstance(value, bool) and token.lower() in ("true", "false")
