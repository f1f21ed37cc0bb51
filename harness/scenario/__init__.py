"""Scenario files: the schema, the fault models and the loader that validates them."""

from harness.scenario.schema import (
    Build,
    LoadedScenario,
    Scenario,
    load_scenario,
    load_scenario_text,
)

__all__ = ["Build", "LoadedScenario", "Scenario", "load_scenario", "load_scenario_text"]
