"""Gates with ``abort: true``: which may stop a build early, and when each is decided.

k6's thresholds with ``abortOnFail`` stop a test the moment one fails. Here a
gate is checked after a phase of ``pg.phases`` ends, on the figures of that
phase and earlier ones, which cannot change once the phase is over. So a gate
may abort only when every figure it names is cut to a phase (``[phase]``):
a whole-window or fault-window figure (``after.products.p99``) is known only
when the window ends, and such a gate with ``abort: true`` is refused at
validation. ``baseline.*`` figures are refused too (``harness run`` has no
``--baseline``).

When. A phase is over for its figures once every request intended in it has
answered or timed out: ``settle_s`` after its end (the longest endpoint
timeout, plus ``FLUSH_MARGIN_S`` for the load generator's and the gateway's
once-a-second flush of their live logs). A gate is decided at the check after
the last-ending phase it names. A check that would come after the load has
finished is not made: the run's own gates decide that gate at the end.

Gates comparing builds (``a.products.p99[outage] <= b.products.p99[outage]``)
are checked while one of their builds runs once every other build they name
has finished in this run; the build being run is the one that may be stopped.
"""

from __future__ import annotations

from collections.abc import Collection

from harness.scenario.gates import Gate
from harness.scenario.schema import Scenario

FLUSH_MARGIN_S = 2.0
"""Added to the longest endpoint timeout before a phase's figures are read: the load
generator's samples and the gateway's ledger reach their files about once a second."""


def abort_problems(gate: Gate) -> list[str]:
    """Why ``gate`` cannot have ``abort: true`` (none: it can)."""
    problems = []
    for metric in dict.fromkeys(gate.metrics()):
        if metric.baseline:
            problems.append(
                f"abort: true cannot read {metric} (a --baseline run's figure: "
                "harness run has no baseline); drop abort, or the baseline figure"
            )
        elif metric.phase is None:
            problems.append(
                f"abort: true needs every figure cut to a phase, and {metric} covers the "
                "whole window: its verdict is known only when the build has finished; "
                f"cut it to a phase ({metric}[<phase>]) or drop abort"
            )
    if not gate.metrics():
        problems.append("abort: true needs a gate that names a figure")
    return problems


def settle_s(scenario: Scenario) -> float:
    """Seconds after a phase's end until its figures are final (see the module)."""
    return max(e.timeout for e in scenario.traffic.values()) + FLUSH_MARGIN_S


def decided_after(gate: Gate, scenario: Scenario) -> str:
    """The phase after whose end (and ``settle_s``) the gate's figures are all final."""
    ends = {p.name: p.end for p in scenario.phases}
    named = [m.phase for m in gate.metrics() if m.phase is not None]
    return max(named, key=lambda name: ends[name])


def builds_of(gate: Gate) -> set[str]:
    """The builds a gate names."""
    return {m.build for m in gate.metrics()}


def due(gate: Gate, scenario: Scenario, build: str, phase: str, finished: Collection[str]) -> bool:
    """Whether ``gate`` is decided while ``build`` runs, at the check after ``phase``: it
    names ``build``, ``phase`` is its last, and every other build it names has finished."""
    named = builds_of(gate)
    return (
        build in named
        and decided_after(gate, scenario) == phase
        and all(b == build or b in finished for b in named)
    )


def checkpoints(gates: list[Gate], scenario: Scenario, build: str) -> list[tuple[str, float]]:
    """(phase, measured-window seconds) of each check a build's run makes: after the phases
    some abort gate naming the build is decided at, by time."""
    phases = {p.name: p.end for p in scenario.phases}
    wanted = {decided_after(g, scenario) for g in gates if build in builds_of(g)}
    settle = settle_s(scenario)
    return sorted(((name, phases[name] + settle) for name in wanted), key=lambda c: c[1])
