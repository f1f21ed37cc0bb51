"""Gates: comparisons over a run's figures that CI can trust (a failed gate exits 1).

A gate is one comparison written in a small grammar, parsed here without
``eval``::

    gate   := expr ("<=" | "<" | ">=" | ">" | "==" | "!=") expr
    expr   := term (("+" | "-") term)*          write "a - b" with spaces:
    term   := unary (("*" | "/") unary)*        names may contain "-"
    unary  := "-" unary | atom
    atom   := NUMBER [ms | s | m | %] | metric | "(" expr ")"
    metric := [baseline.] build.figure[.figure...] ["[" phase "]"]

Examples::

    after.products.p95[outage] <= 0.5 * before.products.p95[outage]
    after.busy_workers.p50[outage] <= 0.25 * after.max_workers
    after.pg.amplification[outage] <= 1.0
    after.products.p99 < 2s
    after.products.p95 <= 1.1 * baseline.after.products.p95     (with --baseline RUN)

Without ``[phase]`` a figure covers the whole measured window, except busy
workers and blocked calls per second, which cover the fault window. Names are
checked against the scenario when it is validated, so a typo fails at
``harness validate``, not at the end of a 10-minute run.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from harness.scenario.schema import Scenario

# ---------------------------------------------------------------- parsing

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d+)?)(?P<unit>ms|s|m|%)?(?![A-Za-z0-9_])"
    r"|(?P<cmp><=|>=|==|!=|<|>)"
    r"|(?P<op>[-+*/()\[\]])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*))"
)
_UNITS = {None: 1.0, "s": 1.0, "ms": 0.001, "m": 60.0, "%": 1.0}
Comparator = Literal["<=", "<", ">=", ">", "==", "!="]
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<=": lambda a, b: a <= b,
    "<": lambda a, b: a < b,
    ">=": lambda a, b: a >= b,
    ">": lambda a, b: a > b,
    "==": lambda a, b: abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b)),
    "!=": lambda a, b: abs(a - b) > 1e-9 * max(1.0, abs(a), abs(b)),
}


class GateSyntaxError(ValueError):
    """The gate's text does not follow the grammar, or names something that does not exist."""


@dataclass(frozen=True)
class Metric:
    """A reference to one figure: ``[baseline.]build.path[phase]``."""

    build: str
    path: tuple[str, ...]
    phase: str | None = None
    baseline: bool = False

    def __str__(self) -> str:
        text = ".".join((("baseline",) if self.baseline else ()) + (self.build, *self.path))
        return f"{text}[{self.phase}]" if self.phase else text


@dataclass(frozen=True)
class Number:
    value: float


@dataclass(frozen=True)
class BinOp:
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Neg:
    operand: Node


Node = Number | Metric | BinOp | Neg


@dataclass(frozen=True)
class Gate:
    """A parsed gate: ``left op right``."""

    name: str
    text: str
    left: Node
    op: Comparator
    right: Node

    def metrics(self) -> list[Metric]:
        return _metrics(self.left) + _metrics(self.right)


def _metrics(node: Node) -> list[Metric]:
    if isinstance(node, Metric):
        return [node]
    if isinstance(node, BinOp):
        return _metrics(node.left) + _metrics(node.right)
    if isinstance(node, Neg):
        return _metrics(node.operand)
    return []


def _tokens(text: str) -> list[tuple[str, str, str | None]]:
    out: list[tuple[str, str, str | None]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise GateSyntaxError(f"cannot read {text[pos:]!r} (at character {pos + 1})")
        pos = match.end()
        kind = match.lastgroup if match.lastgroup != "unit" else "num"
        if match.group("num") is not None:
            out.append(("num", match.group("num"), match.group("unit")))
        elif kind is not None:
            out.append((kind, match.group(kind), None))
    return out


class _Parser:
    """Recursive descent over the tokens; builds the tree, evaluates nothing."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str, str | None] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> tuple[str, str, str | None]:
        tok = self.peek()
        if tok is None:
            raise GateSyntaxError(f"{self.text!r} ends too early")
        self.i += 1
        return tok

    def expect(self, value: str) -> None:
        tok = self.peek()
        if tok is None or tok[1] != value:
            found = repr(tok[1]) if tok else "the end"
            raise GateSyntaxError(f"expected {value!r} but found {found} in {self.text!r}")
        self.i += 1

    def gate(self, name: str) -> Gate:
        left = self.expr()
        tok = self.take()
        if tok[0] != "cmp":
            raise GateSyntaxError(f"expected a comparison (<=, <, >=, >, ==, !=), found {tok[1]!r}")
        right = self.expr()
        if self.peek() is not None:
            raise GateSyntaxError(f"unexpected {self.peek()[1]!r} after the comparison")  # type: ignore[index]
        op: Comparator = tok[1]  # type: ignore[assignment]
        return Gate(name=name, text=self.text, left=left, op=op, right=right)

    def expr(self) -> Node:
        node = self.term()
        while (tok := self.peek()) is not None and tok[1] in ("+", "-"):
            self.take()
            node = BinOp(tok[1], node, self.term())
        return node

    def term(self) -> Node:
        node = self.unary()
        while (tok := self.peek()) is not None and tok[1] in ("*", "/"):
            self.take()
            node = BinOp(tok[1], node, self.unary())
        return node

    def unary(self) -> Node:
        tok = self.peek()
        if tok is not None and tok[1] == "-":
            self.take()
            return Neg(self.unary())
        return self.atom()

    def atom(self) -> Node:
        kind, value, unit = self.take()
        if kind == "num":
            return Number(float(value) * _UNITS[unit])
        if value == "(":
            node = self.expr()
            self.expect(")")
            return node
        if kind != "name":
            raise GateSyntaxError(f"expected a number or a figure, found {value!r}")
        parts = value.split(".")
        baseline = parts[0] == "baseline"
        if baseline:
            parts = parts[1:]
        if len(parts) < 2:
            raise GateSyntaxError(
                f"{value!r}: a figure is written build.figure, e.g. after.products.p95"
            )
        phase = None
        if (tok := self.peek()) is not None and tok[1] == "[":
            self.take()
            phase_tok = self.take()
            if phase_tok[0] != "name":
                raise GateSyntaxError(f"expected a phase name in [...], found {phase_tok[1]!r}")
            phase = phase_tok[1]
            self.expect("]")
        return Metric(parts[0], tuple(parts[1:]), phase, baseline)


def parse_gate(text: str, name: str | None = None) -> Gate:
    """Parse one gate; raises ``GateSyntaxError`` with what was expected."""
    return _Parser(text).gate(name or text)


# ---------------------------------------------------------------- figures

_LATENCY = ("p50", "p95", "p99", "max", "mean")
_ENDPOINT_FIGURES = ("success_pct", "error_pct", "achieved_rps", "requests", "max_lateness_s")
_TIMELINE = {
    "time_to_open": "time_to_open_s",
    "time_to_recover": "time_to_recover_s",
    "blocked_pct_healthy": "blocked_pct_healthy",
}


def figure_names(scenario: Scenario) -> list[str]:
    """Every figure a gate may name (without build and phase), for help and errors."""
    names = [f"{ep}.{q}" for ep in scenario.traffic for q in _LATENCY + _ENDPOINT_FIGURES]
    names += [f"busy_workers.{s}" for s in ("max", "mean", "p50")] + ["max_workers"]
    names += ["blocked.total", "blocked.per_s", "breaker.open_pct"]
    names += ["pg.calls", "pg.amplification", "pg.retries", *_TIMELINE]
    return names


def _lookup(build: dict[str, Any], path: tuple[str, ...], phase: str | None) -> Any:
    """Find a figure in one build's report section; KeyError when there is no such figure."""
    window = build["phases"][phase] if phase else build
    head, rest = path[0], path[1:]
    if head in build["endpoints"] and len(rest) == 1:
        stats = window["endpoints"][head]
        stat = rest[0]
        if stat in _LATENCY:
            return stats["latency_s"][stat]
        if stat == "error_pct":
            ok = stats["success_pct"]
            return None if ok is None else 100.0 - ok
        if stat in _ENDPOINT_FIGURES:
            return stats[stat]
    if head == "busy_workers" and len(rest) == 1 and rest[0] in ("max", "mean", "p50"):
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
    if len(path) == 1 and head in _TIMELINE and not phase:
        return build["timeline"][_TIMELINE[head]]
    raise KeyError(".".join(path))


def check_gate(gate: Gate, scenario: Scenario) -> list[str]:
    """Problems with the names a gate uses (builds, phases, figures), before anything runs."""
    problems = []
    phases = {p.name for p in scenario.pg.phases}
    known = set(figure_names(scenario))
    for metric in gate.metrics():
        if metric.build not in scenario.builds:
            problems.append(
                f"unknown build {metric.build!r} in {str(metric)!r}; "
                f"builds: {sorted(scenario.builds)}"
            )
        if metric.phase is not None and metric.phase not in phases:
            problems.append(f"unknown phase {metric.phase!r}; phases: {sorted(phases)}")
        name = ".".join(metric.path)
        if name not in known:
            problems.append(f"unknown figure {name!r}; known: {', '.join(sorted(known))}")
        elif metric.phase and (name in _TIMELINE or name in ("max_workers", "pg.retries")):
            problems.append(f"figure {name!r} is not cut by phase; drop [{metric.phase}]")
    return problems


# ---------------------------------------------------------------- evaluation


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
    pass


def _value(node: Node, report: dict[str, Any], baseline: dict[str, Any] | None) -> float:
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


def evaluate(
    gate: Gate, report: dict[str, Any], baseline: dict[str, Any] | None = None
) -> GateResult:
    """Compare both sides; a figure that was not measured makes the gate an error (a failure)."""
    try:
        left = _value(gate.left, report, baseline)
        right = _value(gate.right, report, baseline)
    except _Missing as exc:
        return GateResult(gate.name, gate.text, None, gate.op, None, "error", str(exc))
    ok = _COMPARE[gate.op](left, right)
    return GateResult(gate.name, gate.text, left, gate.op, right, "pass" if ok else "fail")


def evaluate_all(
    gates: list[Gate], report: dict[str, Any], baseline: dict[str, Any] | None = None
) -> list[GateResult]:
    return [evaluate(g, report, baseline) for g in gates]


def junit_xml(results: list[GateResult], suite: str) -> str:
    """JUnit XML: one test case per gate, so CI systems list each gate as a test."""
    failures = sum(r.verdict == "fail" for r in results)
    errors = sum(r.verdict == "error" for r in results)
    root = ET.Element(
        "testsuites", tests=str(len(results)), failures=str(failures), errors=str(errors)
    )
    ts = ET.SubElement(
        root,
        "testsuite",
        name=f"harness gates: {suite}",
        tests=str(len(results)),
        failures=str(failures),
        errors=str(errors),
    )
    for r in results:
        case = ET.SubElement(
            ts, "testcase", classname=f"harness.gates.{suite}", name=r.name, time="0"
        )
        measured = f"{_num(r.left)} {r.op} {_num(r.right)}"
        if r.verdict == "fail":
            ET.SubElement(
                case, "failure", message=f"{r.text}: {measured} is false"
            ).text = f"gate: {r.text}\nmeasured: {measured}"
        elif r.verdict == "error":
            ET.SubElement(case, "error", message=r.detail).text = f"gate: {r.text}\n{r.detail}"
        ET.SubElement(case, "system-out").text = f"{r.text}\nmeasured: {measured}"
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def gates_of(scenario: Scenario) -> list[Gate]:
    """The scenario's gates, parsed (they were checked when the scenario was loaded)."""
    return [parse_gate(g.expr, g.name) for g in scenario.gate_specs()]
