"""Gates evaluated against a run's report: the verdict CI trusts (a failed gate exits 1).

The language itself (grammar, parser, the names a gate may use) is part of
the scenario and lives in ``harness.scenario.gates``; here a parsed gate meets
the figures of ``report.json``. A figure that was not measured makes the gate
an error, which counts as a failure; a gate naming a build the run did not
run (``--build``) is skipped before it is evaluated (``harness.gates.select``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from harness.analysis.model import Report
from harness.gates.select import not_run
from harness.scenario.gates import (
    BUSY_WORKER_FIGURES,
    ENDPOINT_FIGURES,
    ENDPOINT_RECOVERY,
    LATENCY_FIGURES,
    REPLICA_AGGREGATES,
    TIMELINE_FIGURES,
    BinOp,
    Comparator,
    Gate,
    Metric,
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
    if head in build["endpoints"] and rest == (ENDPOINT_RECOVERY,) and not phase:
        # absent from reports written before the figure existed: not measured
        return build["timeline"].get("endpoints_recover_s", {}).get(head)
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
    if path == ("breaker", "opens"):
        return window["breaker"]["opens"]
    if head == "pg" and rest in (("calls",), ("amplification",)):
        return window["pg"][rest[0]]
    if path == ("pg", "retries") and not phase:
        return build["pg"]["retries"]
    if len(path) == 1 and head in TIMELINE_FIGURES and not phase:
        return build["timeline"][TIMELINE_FIGURES[head]]
    raise KeyError(".".join(path))


def _replica_lookup(replica: Mapping[str, Any], path: tuple[str, ...], phase: str | None) -> Any:
    """One replica's figure (``REPLICA_FIGURES``) in its section of ``builds.<b>.replicas``."""
    window = replica["phases"][phase] if phase else None
    head, rest = path[0], path[1:]
    if head == "busy_workers" and len(rest) == 1 and rest[0] in BUSY_WORKER_FIGURES:
        if window is not None:
            return window["workers"][f"busy_{rest[0]}"]
        return replica["workers"][f"busy_{rest[0]}_fault"]
    if path == ("max_workers",) and not phase:
        return replica["workers"]["max_workers"]
    if head == "blocked" and rest in (("total",), ("per_s",)):
        if window is not None:
            return window["breaker"]["blocked" if rest[0] == "total" else "blocked_per_s"]
        return replica["breaker"]["blocked_total" if rest[0] == "total" else "blocked_per_s_fault"]
    if path == ("breaker", "open_pct"):
        if window is not None:
            return window["breaker"]["open_pct"]
        return replica["breaker"]["open_pct_fault"]
    if path == ("breaker", "opens"):
        return (window or replica)["breaker"]["opens"]
    if path == ("time_to_open",) and not phase:
        return replica["breaker"]["time_to_open_s"]
    if path == ("pg", "retries") and not phase:
        return replica["pg"]["retries"]
    raise KeyError(".".join(path))


@dataclass(frozen=True)
class GateResult:
    """The verdict of one gate with the numbers behind it."""

    name: str
    text: str
    left: float | None
    op: str
    right: float | None
    verdict: Literal["pass", "fail", "error", "skip"]
    detail: str = ""
    figures: tuple[tuple[str, float | None], ...] = ()
    """Each figure the gate names, as written, with its value (None: not measured): what a
    seed claim shows beside the seed's own figure."""

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    @property
    def failed(self) -> bool:
        """A verdict that fails the run (``skip`` does not)."""
        return self.verdict in ("fail", "error")


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
    if node.replica is not None:
        return _replica_value(node, build)
    try:
        value = _lookup(build, node.path, node.phase)
    except KeyError as exc:
        raise _Missing(f"{node}: no such figure in the report") from exc
    if value is None:
        raise _Missing(f"{node} was not measured")
    return float(value)


def _replica_value(node: Metric, build: Mapping[str, Any]) -> float:
    """A replica's figure, or the least / greatest of the replicas' (each one measured)."""
    replicas: Mapping[str, Any] = build.get("replicas") or {}
    if not replicas:
        raise _Missing(f"{node}: build {node.build!r} has no per-replica figures in this run")
    if node.replica in REPLICA_AGGREGATES:
        chosen = sorted(replicas, key=int)
    elif node.replica in replicas:
        chosen = [str(node.replica)]
    else:
        raise _Missing(f"{node}: the run has replicas 0..{len(replicas) - 1}")
    values = []
    for index in chosen:
        try:
            value = _replica_lookup(replicas[index], node.path, node.phase)
        except KeyError as exc:
            raise _Missing(f"{node}: no such figure for replica {index} in the report") from exc
        if value is None:
            raise _Missing(f"{node}: replica {index} did not measure it")
        values.append(float(value))
    return min(values) if node.replica == "min" else max(values)


def evaluate(gate: Gate, report: Report, baseline: Report | None = None) -> GateResult:
    """Compare both sides; a figure that was not measured makes the gate an error (a failure)."""
    skipped = not_run(gate, report)
    if skipped is not None:
        return GateResult(gate.name, gate.text, None, gate.op, None, "skip", skipped)
    figures = tuple(
        (str(m), _value_or_none(m, report, baseline)) for m in dict.fromkeys(gate.metrics())
    )
    try:
        left = _value(gate.left, report, baseline)
        right = _value(gate.right, report, baseline)
    except _Missing as exc:
        return GateResult(gate.name, gate.text, None, gate.op, None, "error", str(exc), figures)
    ok = _COMPARE[gate.op](left, right)
    verdict: Literal["pass", "fail"] = "pass" if ok else "fail"
    return GateResult(gate.name, gate.text, left, gate.op, right, verdict, "", figures)


def _value_or_none(metric: Metric, report: Report, baseline: Report | None) -> float | None:
    try:
        return _value(metric, report, baseline)
    except _Missing:
        return None


def evaluate_all(
    gates: list[Gate], report: Report, baseline: Report | None = None
) -> list[GateResult]:
    """Every gate's verdict, in order."""
    return [evaluate(g, report, baseline) for g in gates]


def gates_of(scenario: Scenario) -> list[Gate]:
    """The scenario's gates, parsed (they were checked when the scenario was loaded)."""
    return [parse_gate(g.expr, g.name) for g in scenario.gate_specs()]
