"""The gate language: comparisons over a run's figures, parsed and checked against a scenario.

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

The parser is bounded, whatever it is given (a scenario, ``harness gate -g``):
at most ``MAX_GATE_CHARS`` characters and ``MAX_GATE_TOKENS`` tokens, with
parentheses and unary minus nested at most ``MAX_GATE_DEPTH`` deep.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from harness.scenario.bounds import check_printable
from harness.scenario.schema import Scenario

MAX_GATE_CHARS = 1000
"""A gate's text; real gates are under 100 characters."""
MAX_GATE_TOKENS = 200
"""Numbers, names, operators and brackets of one gate."""
MAX_GATE_DEPTH = 32
"""Parentheses and unary minus nested in one gate."""

# ---------------------------------------------------------------- parsing

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d+)?)(?P<unit>ms|s|m|%)?(?![A-Za-z0-9_])"
    r"|(?P<cmp><=|>=|==|!=|<|>)"
    r"|(?P<op>[-+*/()\[\]])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*))"
)
_UNITS = {None: 1.0, "s": 1.0, "ms": 0.001, "m": 60.0, "%": 1.0}
Comparator = Literal["<=", "<", ">=", ">", "==", "!="]


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
            rest = text[pos:] if len(text) - pos <= 40 else text[pos : pos + 37] + "..."
            raise GateSyntaxError(f"cannot read {rest!r} (at character {pos + 1})")
        pos = match.end()
        kind = match.lastgroup if match.lastgroup != "unit" else "num"
        if match.group("num") is not None:
            out.append(("num", match.group("num"), match.group("unit")))
        elif kind is not None:
            out.append((kind, match.group(kind), None))
        if len(out) > MAX_GATE_TOKENS:
            raise GateSyntaxError(
                f"a gate has at most {MAX_GATE_TOKENS} numbers, names and operators; "
                "split it into several gates"
            )
    return out


class _Parser:
    """Recursive descent over the tokens; builds the tree, evaluates nothing."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.depth = 0

    def nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_GATE_DEPTH:
            raise GateSyntaxError(
                f"parentheses and minus signs nested more than {MAX_GATE_DEPTH} deep"
            )

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
            self.nest()
            node = Neg(self.unary())
            self.depth -= 1
            return node
        return self.atom()

    def atom(self) -> Node:
        kind, value, unit = self.take()
        if kind == "num":
            number = float(value) * _UNITS[unit]
            if not math.isfinite(number):
                raise GateSyntaxError(f"the number {value[:20]}... is too large")
            return Number(number)
        if value == "(":
            self.nest()
            node = self.expr()
            self.expect(")")
            self.depth -= 1
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
    if len(text) > MAX_GATE_CHARS:
        raise GateSyntaxError(
            f"a gate has at most {MAX_GATE_CHARS} characters, this one {len(text):,}"
        )
    try:
        check_printable(text, "the gate")
    except ValueError as exc:
        raise GateSyntaxError(str(exc)) from None
    return _Parser(text).gate(name or text)


# ---------------------------------------------------------------- figures

LATENCY_FIGURES = ("p50", "p95", "p99", "max", "mean")
"""Latency statistics of an endpoint (``after.products.p95``)."""
ENDPOINT_FIGURES = (
    "success_pct",
    "error_pct",
    "kept_pct",
    "cached_pct",
    "achieved_rps",
    "requests",
    "max_lateness_s",
)
"""The other figures of an endpoint (``kept_pct``, ``cached_pct``: service kept, seed 004)."""
BUSY_WORKER_FIGURES = ("max", "mean", "p50")
"""Statistics of busy workers (``after.busy_workers.p50``)."""
TIMELINE_FIGURES = {
    "time_to_open": "time_to_open_s",
    "time_to_recover": "time_to_recover_s",
    "blocked_pct_healthy": "blocked_pct_healthy",
}
"""Figures of the whole run, never cut by phase: gate name -> key in the report's timeline."""


def figure_names(scenario: Scenario) -> list[str]:
    """Every figure a gate may name (without build and phase), for help and errors."""
    names = [f"{ep}.{q}" for ep in scenario.traffic for q in LATENCY_FIGURES + ENDPOINT_FIGURES]
    names += [f"busy_workers.{s}" for s in BUSY_WORKER_FIGURES] + ["max_workers"]
    names += ["blocked.total", "blocked.per_s", "breaker.open_pct"]
    names += ["pg.calls", "pg.amplification", "pg.retries", *TIMELINE_FIGURES]
    return names


def check_gate(gate: Gate, scenario: Scenario, known: set[str] | None = None) -> list[str]:
    """Problems with the names a gate uses (builds, phases, figures), before anything runs.

    ``known`` is ``set(figure_names(scenario))``, given when checking many gates.
    """
    problems = []
    phases = {p.name for p in scenario.pg.phases}
    known = set(figure_names(scenario)) if known is None else known
    for metric in gate.metrics():
        if metric.build not in scenario.builds:
            problems.append(
                f"unknown build {metric.build!r} in {str(metric)!r}; "
                f"builds: {sorted(scenario.builds)}"
            )
        if metric.phase is not None and metric.phase not in phases:
            problems.append(f"unknown phase {metric.phase!r}; phases: {_some(phases)}")
        name = ".".join(metric.path)
        if name not in known:
            problems.append(f"unknown figure {name!r}; known: {_some(known)}")
        elif metric.phase and (name in TIMELINE_FIGURES or name in ("max_workers", "pg.retries")):
            problems.append(f"figure {name!r} is not cut by phase; drop [{metric.phase}]")
    return problems


def _some(names: set[str], limit: int = 40) -> str:
    """Names for a message, sorted; a long list is cut (a scenario may have 100 endpoints)."""
    shown = sorted(names)
    if len(shown) <= limit:
        return ", ".join(shown)
    return ", ".join(shown[:limit]) + f", ... ({len(shown) - limit} more; see docs/scenario.md)"
