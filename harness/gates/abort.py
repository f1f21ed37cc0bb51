"""Gates with ``abort: true`` decided during a build: the ``AbortCheck`` ``harness run`` uses.

After a phase ends (and settles: ``harness.scenario.abort``), the abort gates
decided there are evaluated on the run so far, with the figures the final
report computes (``analysis.figures.analyse`` over the live data) and the
same evaluation as ``harness gate``. Only a ``fail`` stops the build: a gate
whose figure was not measured (``error``) does not, and the run's own gates
say so at the end.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.analysis.figures import analyse
from harness.gates.evaluate import GateResult, evaluate
from harness.run.abort import AbortAsk, AbortVerdict
from harness.scenario.abort import builds_of, checkpoints, due
from harness.scenario.gates import Gate, parse_gate
from harness.scenario.schema import Scenario


def abort_gates(scenario: Scenario) -> list[Gate]:
    """The scenario's gates with ``abort: true``, parsed (checked when it was loaded)."""
    return [parse_gate(g.expr, g.name) for g in scenario.gate_specs() if g.abort]


class GateAbort:
    """An ``AbortCheck`` (``harness.run.abort``) over a scenario's gates with ``abort: true``."""

    def __init__(self, scenario: Scenario, gates: list[Gate] | None = None) -> None:
        self.scenario = scenario
        self.gates = abort_gates(scenario) if gates is None else gates
        self.results: list[tuple[str, str, GateResult]] = []
        """Every check made: (build, phase, verdict), in order (for tests and the terminal)."""

    def checkpoints(self, build: str) -> Sequence[tuple[str, float]]:
        return checkpoints(self.gates, self.scenario, build)

    def __call__(self, ask: AbortAsk) -> AbortVerdict | None:
        scenario = self.scenario
        gates = [g for g in self.gates if due(g, scenario, ask.build, ask.phase, ask.finished)]
        if not gates:
            return None
        named = {b for gate in gates for b in builds_of(gate)}
        report = analyse(ask.run(named), scenario)
        for gate in gates:
            result = evaluate(gate, report)
            self.results.append((ask.build, ask.phase, result))
            if result.verdict == "fail":
                return AbortVerdict(gate.name, gate.text, result.left, result.right)
        return None
