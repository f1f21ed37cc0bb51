"""harness: prove with numbers that a resilience pattern keeps one failing dependency contained.

The public face is the ``harness`` command (``harness.cli``) and a few library
entry points re-exported here for notebooks and scripts.
"""

from harness.errors import HarnessError, InputError, ProcessDied, RunError, ScenarioError
from harness.results import latest as latest_run
from harness.results import load as load_run
from harness.scenario import load_scenario

__all__ = [
    "HarnessError",
    "InputError",
    "ProcessDied",
    "RunError",
    "ScenarioError",
    "latest_run",
    "load_run",
    "load_scenario",
]
