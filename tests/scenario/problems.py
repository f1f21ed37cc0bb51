"""The problems ``harness validate`` would list for a scenario's text, as lines."""

from __future__ import annotations

import pytest

from harness.core.errors import ScenarioError
from harness.scenario.loader import load_scenario_text


def problems_of(text: str, file: str = "s.yaml") -> list[str]:
    """Every problem of an invalid scenario, ``file:line:column: field: message`` each."""
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, file)
    return [str(p) for p in info.value.problems]
