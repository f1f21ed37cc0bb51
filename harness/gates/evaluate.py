"""Gates evaluated against a run's report: the verdict CI trusts (a failed gate exits 1).

The language itself (grammar, parser, the names a gate may use) is part of
the scenario and lives in ``harness.scenario.gates``; here a parsed gate meets
the figures of ``report.json``. A figure that was not measured makes the gate
an error, which counts as a failure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from harness.analysis.model import Report
from harness.scenario.gates import (
    BUSY_WORKER_FIGURES,
    ENDPOINT_FIGURES,
    LATENCY_FIGURES,
    TIMELINE_FIGURES,
    BinOp,
    Comparator,
    Gate,
    Neg,
    Node,
    Number,
    parse_gate,
)
from harness.scenario.schema import Scenario

_COMPARE: dict[Comparator, Callable[[float, float], bool]] = {
    "<=": lambda a, b: a <= b,
    "<": lambda a, b: a < b,
    ">=": lambda a, b: a >= b,
    ">": lambda a, b: a > b,
    "==": lambda a, b: abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b)),
    "!=": lambda a, b: abs(a - b) > 1e-9 * max(1.0, abs(a), abs(b)),
}


def _lookup(build: Mapping[str, Any], path: tuple[str, ...], phase: str | None) -> Any:
    """Find a figure in one build's report section; KeyError when there is no such figure.

    Looked up by name, not through the typed model: the path comes from the gate's text.
    """
    window = build["phases"][phase] if phase else build
    head, rest = path[0], path[1:]
    if head in build["endpoints"] and len(rest) == 1:
        stats = window["endpoints"][head]
        stat = rest[0]
        if stat in LATENCY_FIGURES:
            return stats["latency_s"][stat]
        if stat == "error_pct":
            ok = stats["success_pct"]
            return None if ok is None else 100.0 - ok
        if stat in ENDPOINT_FIGURES:
            return stats[stat]
    if head == "busy_workers" and len(rest) == 1 and rest[0] in BUSY_WORKER_FIGURES:
        return (
            window["workers"][f"busy_{rest[0]}"]
            if phase
            else build["workers"][f"busy_{rest[0]}_fault"]
        )
    if path == ("max_workers",):
        return build["workers"]["max_workers"]
    if head == "blocked" and rest in (("total",), ("per_s",)):
        if phase:
            return window["breaker"]["blocked" if rest[0] == "total" else "blocked_per_s"]
        return build["breaker"]["blocked_total" if rest[0] == "total" else "blocked_per_s_fault"]
    if path == ("breaker", "open_pct"):
        return window["breaker"]["open_pct"] if phase else build["breaker"]["open_pct_fault"]
    if head == "pg" and rest in (("calls",), ("amplification",)):
        return window["pg"][rest[0]]
    if path == ("pg", "retries") and not phase:
        return build["pg"]["retries"]
    if len(path) == 1 and head in TIMELINE_FIGURES and not phase:
        return build["timeline"][TIMELINE_FIGURES[head]]
    raise KeyError(".".join(path))


@dataclass(frozen=True)
class GateResult:
    """The verdict of one gate with the numbers behind it."""

    name: str
    text: str
    left: float | None
    op: str
    right: float | None
    verdict: Literal["pass", "fail", "error"]
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"


class _Missing(Exception):
    """A figure the gate needs is absent: the gate's verdict is an error, not a crash."""


def _value(node: Node, report: Report, baseline: Report | None) -> float:
    if isinstance(node, Number):
        return node.value
    if isinstance(node, Neg):
        return -_value(node.operand, report, baseline)
    if isinstance(node, BinOp):
        a, b = _value(node.left, report, baseline), _value(node.right, report, baseline)
        if node.op == "+":
            return a + b
        if node.op == "-":
            return a - b
        if node.op == "*":
            return a * b
        if b == 0:
            raise _Missing("division by zero")
        return a / b
    source = baseline if node.baseline else report
    if source is None:
        raise _Missing(f"{node} needs a baseline run (--baseline)")
    build = source["builds"].get(node.build)
    if build is None:
        raise _Missing(f"build {node.build!r} has no results in this run")
    try:
        value = _lookup(build, node.path, node.phase)
    except KeyError as exc:
        raise _Missing(f"{node}: no such figure in the report") from exc
    if value is None:
        raise _Missing(f"{node} was not measured")
    return float(value)


def evaluate(gate: Gate, report: Report, baseline: Report | None = None) -> GateResult:
    """Compare both sides; a figure that was not measured makes the gate an error (a failure)."""
    try:
        left = _value(gate.left, report, baseline)
        right = _value(gate.right, report, baseline)
    except _Missing as exc:
        return GateResult(gate.name, gate.text, None, gate.op, None, "error", str(exc))
    ok = _COMPARE[gate.op](left, right)
    return GateResult(gate.name, gate.text, left, gate.op, right, "pass" if ok else "fail")


def evaluate_all(
    gates: list[Gate], report: Report, baseline: Report | None = None
) -> list[GateResult]:
    """Every gate's verdict, in order."""
    return [evaluate(g, report, baseline) for g in gates]


def gates_of(scenario: Scenario) -> list[Gate]:
    """The scenario's gates, parsed (they were checked when the scenario was loaded)."""
    return [parse_gate(g.expr, g.name) for g in scenario.gate_specs()]
