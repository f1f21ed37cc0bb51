"""Reading scenario files: YAML validated once into typed models, every problem reported at once.

Validation is the models' own checks plus the gates: each gate is parsed and
the builds, phases and figures it names are checked, so a typo fails at
``harness validate`` rather than at the end of a long run.
"""

from __future__ import annotations

from pathlib import Path

from harness.core.errors import Problem, ScenarioError
from harness.core.yamlmodel import Validated, problem_at, validate_yaml
from harness.scenario.gates import GateSyntaxError, check_gate, parse_gate
from harness.scenario.schema import LoadedScenario, Scenario


def load_scenario_text(text: str, file: str = "<scenario>") -> LoadedScenario:
    """Validate scenario YAML text; raise ``ScenarioError`` listing every problem found."""
    done = validate_yaml(Scenario, text, file, expected="a mapping of scenario keys")
    problems = done.problems + _gate_problems(done, file)
    if problems:
        raise ScenarioError(problems)
    return LoadedScenario(path=file, text=text, scenario=done.model)


def _gate_problems(done: Validated[Scenario], file: str) -> list[Problem]:
    """Parse every gate and check the builds, phases and figures it names."""
    problems = []
    for i, spec in enumerate(done.model.gate_specs()):
        try:
            messages = check_gate(parse_gate(spec.expr, spec.name), done.model)
        except GateSyntaxError as exc:
            messages = [str(exc)]
        node = done.node(("gates", i, "expr"), ("gates", i))
        problems += [problem_at(file, node, f"gates.{i}", m) for m in messages]
    return problems


def load_scenario(path: str | Path) -> LoadedScenario:
    """Read and validate a scenario file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(
            [Problem(str(p), None, None, "", f"cannot read: {exc.strerror}")]
        ) from None
    return load_scenario_text(text, str(p))
