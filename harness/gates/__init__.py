"""Gates: a scenario's claims checked against a run's report, with JUnit output.

The gate language (parsing, name checks) is part of the scenario:
``harness.scenario.gates``. This package only evaluates, so it depends on the
scenario and never the reverse.
"""

from harness.gates.evaluate import GateResult, evaluate, evaluate_all, gates_of
from harness.gates.junit import junit_xml

__all__ = ["GateResult", "evaluate", "evaluate_all", "gates_of", "junit_xml"]
