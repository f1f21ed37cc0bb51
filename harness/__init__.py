"""harness: prove with numbers that a resilience pattern keeps one failing dependency contained.

The public face is the ``harness`` command (``harness.cli``) and a few library
entry points re-exported here for notebooks and scripts. ``load_run`` and
``latest_run`` are imported on first use: they pull in pandas, which the
gateway, proxy and Locust processes (which import ``harness.*``) do not need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.core.errors import HarnessError, InputError, ProcessDied, RunError, ScenarioError
from harness.scenario.loader import load_scenario

if TYPE_CHECKING:
    from harness.results.model import latest as latest_run
    from harness.results.model import load as load_run

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


def __getattr__(name: str) -> Any:
    if name in ("load_run", "latest_run"):
        from harness import results

        return results.load if name == "load_run" else results.latest
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
