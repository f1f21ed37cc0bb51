"""Scenario files: the schema, the fault models, the gate language and the loader.

Inside the harness, import from the defining submodule (``schema``,
``builds``, ``faults``, ``gates``, ``loader``); this face is for notebooks and users.
"""

from harness.scenario.builds import Build, CommandBuild, DockerBuild, ShopBuild, UrlBuild
from harness.scenario.faults import Fault, FaultOverride, PgSchedule, Phase
from harness.scenario.loader import load_scenario, load_scenario_text
from harness.scenario.schema import Endpoint, LoadedScenario, Scenario

__all__ = [
    "Build",
    "CommandBuild",
    "DockerBuild",
    "Endpoint",
    "Fault",
    "FaultOverride",
    "LoadedScenario",
    "PgSchedule",
    "Phase",
    "Scenario",
    "ShopBuild",
    "UrlBuild",
    "load_scenario",
    "load_scenario_text",
]
