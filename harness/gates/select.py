"""Which gates a run can answer: one naming a build the run did not run is skipped, not failed.

``harness run --build after`` runs only ``after``; a gate comparing ``before``
with ``after`` has nothing to read for ``before``. It is skipped with its
reason (terminal, ``report.json``'s ``skipped_gates``, ``report.md``, JUnit
``<skipped>``) and does not fail the run. Only a *completed* run is read so:
in a run that failed or was interrupted, a build without results may be the
one that broke, and its gates stay errors. A build the scenario does not
have is refused when the scenario is validated (exit 2), before any of this.
"""

from __future__ import annotations

from harness.analysis.model import Report, SkippedGate
from harness.scenario.gates import Gate, GateSyntaxError, parse_gate
from harness.scenario.schema import Scenario


def not_run(gate: Gate, report: Report) -> str | None:
    """Why ``gate`` is skipped in this run (a build it reads was not run), else None."""
    if report.get("status") != "completed":
        return None
    ran = report["builds"]
    absent = sorted({m.build for m in gate.metrics() if not m.baseline and m.build not in ran})
    if not absent:
        return None
    which = ", ".join(repr(b) for b in absent)
    return f"build {which} was not run; --build chose {', '.join(ran) or 'no build'}"


def skipped_gates(scenario: Scenario, report: Report) -> list[SkippedGate]:
    """The scenario's gates this run skips, in order, each with its reason (report.json)."""
    skipped: list[SkippedGate] = []
    for spec in scenario.gate_specs():
        try:
            gate = parse_gate(spec.expr, spec.name)
        except GateSyntaxError:  # checked at load; a hand-edited run folder is the gate's error
            continue
        reason = not_run(gate, report)
        if reason is not None:
            skipped.append({"gate": gate.name, "expr": gate.text, "reason": reason})
    return skipped
