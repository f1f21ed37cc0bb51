"""The gate language: comparisons over a run's figures, parsed and checked against a scenario.

A gate is one comparison written in a small grammar, parsed here without
``eval``::

    gate   := expr ("<=" | "<" | ">=" | ">" | "==" | "!=") expr
            | metric "not worse than" (build | "baseline" | "baseline." build) ["by" NUMBER "%"]
    expr   := term (("+" | "-") term)*          write "a - b" with spaces:
    term   := unary (("*" | "/") unary)*        names may contain "-"
    unary  := "-" unary | atom
    atom   := NUMBER [ms | s | m | %] | metric | "(" expr ")"
    metric := [baseline.] build [".replicas." (INDEX | "min" | "max")] "." figure ["[" phase "]"]

Examples::

    after.products.p95[outage] <= 0.5 * before.products.p95[outage]
    after.busy_workers.p50[outage] <= 0.25 * after.max_workers
    after.pg.amplification[outage] <= 1.0
    after.products.p99 < 2s
    after.products.p95 <= 1.1 * baseline.after.products.p95     (with --baseline RUN)
    scaled.replicas.0.breaker.open_pct[outage] >= 50            (replicas: N, replica 0)
    scaled.replicas.max.time_to_open - scaled.replicas.min.time_to_open >= 2s
    probe5.breaker.opens[blips] * 3 <= probe1.breaker.opens[blips]
    after.products.p99[outage] not worse than before by 10%
    after.products.p99[outage] not worse than baseline by 10%     (the --baseline run's after)

``not worse than`` is the judge's (``harness.analysis.judge``): it compares the figure's
5-s blocks (or ``--repeat``'s repetitions) of both sides and fails only when the figure is
worse beyond noise by more than ``by`` (the figure's own allowed change without it,
``harness.core.judge_policy.POLICIES``); ``not enough data`` is an error for a critical
figure, else a skip.

Without ``[phase]`` a figure covers the whole measured window, except busy
workers, blocked calls per second and the breaker's open share, which cover
the fault window. ``build.replicas.I.figure`` reads replica ``I`` (from 0) of
a build with ``replicas: N``, and ``replicas.min`` / ``replicas.max`` the
least and greatest over its replicas (``REPLICA_FIGURES``: the figures a
replica has). Names are
checked against the scenario when it is validated, so a typo fails at
``harness validate``, not at the end of a 10-minute run.

The parser is bounded, whatever it is given (a scenario, ``harness gate -g``):
at most ``MAX_GATE_CHARS`` characters and ``MAX_GATE_TOKENS`` tokens, with
parentheses and unary minus nested at most ``MAX_GATE_DEPTH`` deep.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from harness.core.catalogue import DEPENDENCY, ENDPOINT, GATED, endpoint_gate, gated
from harness.core.judge_policy import POLICIES, policy_of
from harness.scenario.bounds import check_printable
from harness.scenario.gate_tokens import MAX_GATE_CHARS as MAX_GATE_CHARS
from harness.scenario.gate_tokens import MAX_GATE_DEPTH as MAX_GATE_DEPTH
from harness.scenario.gate_tokens import NAME_PATTERN as NAME_PATTERN
from harness.scenario.gate_tokens import NAME_WORD as NAME_WORD
from harness.scenario.gate_tokens import GateSyntaxError as GateSyntaxError
from harness.scenario.gate_tokens import tokens
from harness.scenario.schema import Scenario

_UNITS = {None: 1.0, "s": 1.0, "ms": 0.001, "m": 60.0, "%": 1.0}
Comparator = Literal["<=", "<", ">=", ">", "==", "!="]


BASELINE = "baseline"
"""A gate's first word for the ``--baseline`` run's figures (``baseline.after.products.p95``)."""
REPLICAS = "replicas"
"""The word after a build for one replica's figures (``after.replicas.0.breaker.opens``)."""
REPLICA_AGGREGATES = ("min", "max")
"""What ``build.replicas.<which>`` may say besides an index: the least or greatest replica's."""


@dataclass(frozen=True)
class Metric:
    """A reference to one figure: ``[baseline.]build[.replicas.I].path[phase]``."""

    build: str
    path: tuple[str, ...]
    phase: str | None = None
    baseline: bool = False
    replica: str | None = None
    """A replica's index (``"0"``, ``"1"``...), or ``min`` / ``max`` over the replicas;
    None: the build's own figure."""

    def __str__(self) -> str:
        where = ("replicas", self.replica) if self.replica is not None else ()
        head = ("baseline",) if self.baseline else ()
        text = ".".join((*head, self.build, *where, *self.path))
        return f"{text}[{self.phase}]" if self.phase else text


@dataclass(frozen=True)
class Number:
    value: float
    unit: Literal["s", "%"] | None = field(default=None, compare=False)
    """What the text said: ``s`` (written s, ms or m), ``%``; None: a bare number."""
    text: str = field(default="", compare=False)
    """As written (``200ms``), for messages."""


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
class Judged:
    """``left not worse than right [by N%]``: the judge's comparison of one figure of two
    builds (or of a build and the baseline run's)."""

    allowed_pct: float | None = None
    """``by N%``; None: the figure's own allowed change (``POLICIES``)."""


JUDGED = ("not", "worse", "than")
"""The words of the judge's comparison."""


@dataclass(frozen=True)
class Gate:
    """A parsed gate: ``left op right``; with ``judged``, ``left`` and ``right`` are the two
    sides' figure (``op`` reads ``<=``: not worse)."""

    name: str
    text: str
    left: Node
    op: Comparator
    right: Node
    judged: Judged | None = None

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


class _Parser:
    """Recursive descent over the tokens; builds the tree, evaluates nothing."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = tokens(text)
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
        if (tok := self.peek()) is not None and tok[:2] == ("name", JUDGED[0]):
            return self.judged(name, left)
        tok = self.take()
        if tok[0] != "cmp":
            raise GateSyntaxError(f"expected a comparison (<=, <, >=, >, ==, !=), found {tok[1]!r}")
        right = self.expr()
        if self.peek() is not None:
            raise GateSyntaxError(f"unexpected {self.peek()[1]!r} after the comparison")  # type: ignore[index]
        op: Comparator = tok[1]  # type: ignore[assignment]
        return Gate(name=name, text=self.text, left=left, op=op, right=right)

    def judged(self, name: str, left: Node) -> Gate:
        """``metric not worse than (build | baseline | baseline.build) [by N%]``."""
        if not isinstance(left, Metric) or left.replica is not None:
            raise GateSyntaxError(
                "'not worse than' compares one figure of a build, e.g. "
                "after.products.p99[outage] not worse than before by 10%"
            )
        for word in JUDGED:
            self.expect(word)
        kind, value, _ = self.take()
        dotted = "." in value and not value.startswith(f"{BASELINE}.")
        if kind != "name" or dotted or value.count(".") > 1:
            raise GateSyntaxError(
                f"after 'not worse than', a build, 'baseline' or 'baseline.BUILD', found {value!r}"
            )
        if value == BASELINE:
            right = Metric(left.build, left.path, left.phase, baseline=True)
        elif value.startswith(f"{BASELINE}."):
            right = Metric(value.split(".", 1)[1], left.path, left.phase, baseline=True)
        else:
            right = Metric(value, left.path, left.phase)
        allowed = None
        if (tok := self.peek()) is not None and tok[:2] == ("name", "by"):
            self.take()
            kind, number, unit = self.take()
            if kind != "num" or unit != "%":
                raise GateSyntaxError(f"'by' takes a percentage (by 10%), found {number!r}")
            allowed = float(number)
            if not math.isfinite(allowed):
                raise GateSyntaxError(f"the number {number[:20]}... is too large")
        if self.peek() is not None:
            raise GateSyntaxError(f"unexpected {self.peek()[1]!r} after the comparison")  # type: ignore[index]
        return Gate(name, self.text, left, "<=", right, Judged(allowed))

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
            return Number(
                number, None if unit is None else "%" if unit == "%" else "s", value + (unit or "")
            )
        if value == "(":
            self.nest()
            node = self.expr()
            self.expect(")")
            self.depth -= 1
            return node
        if kind != "name":
            raise GateSyntaxError(f"expected a number or a figure, found {value!r}")
        parts = value.split(".")
        baseline = parts[0] == BASELINE
        if baseline:
            parts = parts[1:]
        if len(parts) < 2:
            raise GateSyntaxError(
                f"{value!r}: a figure is written build.figure, e.g. after.products.p95"
            )
        replica = None
        if parts[1] == REPLICAS and len(parts) > 2 and _is_replica(parts[2]):
            if len(parts[2]) > 6:
                raise GateSyntaxError(f"{value!r}: replica {parts[2][:20]} is out of range")
            replica = str(int(parts[2])) if parts[2].isdigit() else parts[2]
            parts = [parts[0], *parts[3:]]
            if len(parts) < 2:
                raise GateSyntaxError(
                    f"{value!r}: a replica's figure is written "
                    "build.replicas.I.figure, e.g. after.replicas.0.breaker.open_pct"
                )
        phase = None
        if (tok := self.peek()) is not None and tok[1] == "[":
            self.take()
            phase_tok = self.take()
            if phase_tok[0] != "name":
                raise GateSyntaxError(f"expected a phase name in [...], found {phase_tok[1]!r}")
            phase = phase_tok[1]
            self.expect("]")
        return Metric(parts[0], tuple(parts[1:]), phase, baseline, replica)


def _is_replica(part: str) -> bool:
    """Whether a name's part after ``replicas.`` picks replicas: an index, ``min`` or ``max``."""
    return part.isdigit() or part in REPLICA_AGGREGATES


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


def prefix_figures(text: str, build: str) -> str:
    """A build-less text (``products.p99[outage] <= 2s``, a sweep's objective and
    constraints) as ``build``'s (``fr50.products.p99[outage] <= 2s``): every figure's name
    gets the build in front; a phase in ``[...]`` does not."""
    if len(text) > MAX_GATE_CHARS:
        raise GateSyntaxError(
            f"a gate has at most {MAX_GATE_CHARS} characters, this one {len(text):,}"
        )
    out: list[str] = []
    previous = ""
    for kind, value, unit in tokens(text):
        if kind == "name" and previous != "[":
            out.append(f"{build}.{value}")
        else:
            out.append(value + (unit or ""))
        previous = value
    return " ".join(out).replace(" [ ", "[").replace(" ]", "]")


def expression_figures(text: str) -> list[Metric]:
    """The figures an expression (no comparison) names, parsed as a gate's left side."""
    parser = _Parser(text)
    node = parser.expr()
    if parser.peek() is not None:
        raise GateSyntaxError(f"unexpected {parser.peek()[1]!r} in {text!r}")  # type: ignore[index]
    return _metrics(node)


# ---------------------------------------------------------------- figures


def _stats(prefix: str) -> tuple[str, ...]:
    return tuple(
        g[len(prefix) :] for g in GATED if g.startswith(prefix) and "." not in g[len(prefix) :]
    )


LATENCY_FIGURES = tuple(
    g.rsplit(".", 1)[1]
    for g, f in GATED.items()
    if f.key.startswith(f"endpoints.{ENDPOINT}.latency_s.")
)
"""Latency statistics of an endpoint (``after.products.p95``)."""
ENDPOINT_RECOVERY = "time_to_recover"
"""An endpoint's own recovery (``after.products.time_to_recover``): seconds from the
fault's end until its answers and latency are back to healthy; whole run, not cut."""
ENDPOINT_FIGURES = tuple(
    s for s in _stats(f"{ENDPOINT}.") if s not in LATENCY_FIGURES and s != ENDPOINT_RECOVERY
)
"""The other figures of an endpoint (``kept_pct``, ``cached_pct``: service kept, seed 004)."""
BUSY_WORKER_FIGURES = _stats("busy_workers.")
"""Statistics of busy workers (``after.busy_workers.p50``)."""
TIMELINE_FIGURES = {
    g: f.key.split(".", 1)[1]
    for g, f in GATED.items()
    if f.section == "timeline" and ENDPOINT not in g
}
"""Figures of the whole run, never cut by phase: gate name -> key in the report's timeline."""
UNCUT_FIGURES = frozenset(g for g, f in GATED.items() if not f.cut)
"""Figures a ``[phase]`` cannot cut (``{endpoint}.time_to_recover`` for every endpoint's)."""


def is_uncut(name: str) -> bool:
    """Whether the figure ``name`` (without build and phase) is of the whole run only."""
    return name in UNCUT_FIGURES or endpoint_gate(name) in UNCUT_FIGURES


REPLICA_FIGURES = tuple(g for g, f in GATED.items() if f.replica_key is not None)
"""What one replica of a build with ``replicas: N`` has (``build.replicas.I.<figure>``)."""


def figure_names(scenario: Scenario) -> list[str]:
    """Every figure a gate may name (without build and phase), for help and errors: the
    catalogue's (``harness.core.catalogue.FIGURES``), each endpoint's spelled out."""
    endpoint = [g for g in GATED if g.startswith(ENDPOINT + ".")]
    names = [g.replace(ENDPOINT, ep) for ep in scenario.traffic for g in endpoint]
    named = [g for g in GATED if DEPENDENCY in g]
    names += [g.replace(DEPENDENCY, dep) for dep in scenario.dependencies for g in named]
    return names + [g for g in GATED if ENDPOINT not in g and DEPENDENCY not in g]


def check_gate(gate: Gate, scenario: Scenario, known: set[str] | None = None) -> list[str]:
    """Problems with the names a gate uses (builds, phases, figures), before anything runs.

    ``known`` is ``set(figure_names(scenario))``, given when checking many gates.
    """
    problems = []
    phases = {p.name for p in scenario.phases}
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
        if metric.replica is not None:
            problems += _replica_problems(metric, scenario)
        elif name not in known:
            hint = ""
            if metric.path[0] == "replicas":
                hint = " (a replica's figure: build.replicas.I.figure, I an index, min or max)"
            problems.append(f"unknown figure {name!r}{hint}; known: {_some(known)}")
        elif metric.phase and is_uncut(name):
            problems.append(f"figure {name!r} is not cut by phase; drop [{metric.phase}]")
    if gate.judged is not None and not problems:
        problems += _judged_problems(gate, scenario)
    return problems or unit_problems(gate, scenario)


def _judged_problems(gate: Gate, scenario: Scenario) -> list[str]:
    """``not worse than`` needs a figure the judge knows (an endpoint's latency or success)."""
    assert isinstance(gate.left, Metric)
    name = ".".join(gate.left.path)
    found = gated(name, scenario.traffic)
    known = ", ".join(sorted({f"{ENDPOINT}.{k.rsplit('.', 1)[-1]}" for k in POLICIES}))
    if found is None or found[1] is None or policy_of(f"{found[1]}.{_flat(found[0].key)}") is None:
        return [f"the judge ('not worse than') does not know the figure {name!r}; it knows {known}"]
    return []


def _flat(key: str) -> str:
    """A catalogue key's part after the endpoint (``latency_s.p99``, ``success_pct``)."""
    return key.split(f"{ENDPOINT}.", 1)[-1]


# ---------------------------------------------------------------- units

_ANY = "any"
"""The unit of a product or quotient of two figures with units: not checked further."""
_UNIT_WORDS = {"s": "in seconds", "%": "a percentage", "": "a count or ratio, without a unit"}


def unit_problems(gate: Gate, scenario: Scenario) -> list[str]:
    """Sides that cannot be compared or added: ``p95 <= 99%`` (seconds against a percentage),
    ``success_pct >= 3s``. A bare number fits any unit; ``ms``, ``s`` and ``m`` are seconds."""
    problems: list[str] = []
    _compare(gate.left, gate.right, gate.op, scenario, problems)
    return problems


def _unit(node: Node, scenario: Scenario, problems: list[str]) -> str | None:
    """The unit of a node (``s``, ``%``, ``""``), None for a bare number, ``_ANY`` unknown."""
    if isinstance(node, Number):
        return node.unit
    if isinstance(node, Neg):
        return _unit(node.operand, scenario, problems)
    if isinstance(node, Metric):
        found = gated(".".join(node.path), () if node.replica else scenario.traffic)
        return _ANY if found is None else found[0].unit
    if node.op in "+-":
        return _compare(node.left, node.right, node.op, scenario, problems)
    left = _unit(node.left, scenario, problems)
    right = _unit(node.right, scenario, problems)
    if node.op == "*":
        return right if left in (None, "") else left if right in (None, "") else _ANY
    if right in (None, ""):
        return left
    return "" if left == right else _ANY


def _compare(
    left: Node, right: Node, op: str, scenario: Scenario, problems: list[str]
) -> str | None:
    """Both sides of a comparison, ``+`` or ``-`` in one unit; the unit they share."""
    a, b = _unit(left, scenario, problems), _unit(right, scenario, problems)
    if a is None or a == _ANY:
        return b if a is None else a
    if b is None or b == _ANY or a == b:
        return a
    problems.append(
        f"units do not fit: {_show(left)} is {_UNIT_WORDS[a]}, {_show(right)} is "
        f"{_UNIT_WORDS[b]} ({op!r} needs one unit on both sides)"
    )
    return _ANY


def _show(node: Node) -> str:
    if isinstance(node, Number):
        return node.text or f"{node.value:g}"
    if isinstance(node, Metric):
        return str(node)
    if isinstance(node, Neg):
        return "-" + _show(node.operand)
    return f"{_show(node.left)} {node.op} {_show(node.right)}"


def _replica_problems(metric: Metric, scenario: Scenario) -> list[str]:
    """A per-replica figure needs a build with ``replicas: N > 1``, an index below N and a
    figure a replica has."""
    problems = []
    name = ".".join(metric.path)
    build = scenario.builds.get(metric.build)
    if build is not None:
        count = getattr(build, "replicas", 1)
        if count <= 1:
            kind = "replicas: 1" if build.kind == "shop" else f"a {build.kind} build"
            problems.append(
                f"{str(metric)!r}: build {metric.build!r} runs one process ({kind}); "
                "per-replica figures need a shop build with replicas: N > 1"
            )
        elif metric.replica not in REPLICA_AGGREGATES and int(metric.replica or 0) >= count:
            problems.append(
                f"{str(metric)!r}: build {metric.build!r} has replicas 0..{count - 1} "
                f"(replicas: {count}), not {metric.replica}"
            )
    if name not in REPLICA_FIGURES:
        problems.append(
            f"{name!r} is not a figure of one replica; a replica has: {', '.join(REPLICA_FIGURES)}"
        )
    elif metric.phase and is_uncut(name):
        problems.append(f"figure {name!r} is not cut by phase; drop [{metric.phase}]")
    return problems


def _some(names: set[str], limit: int = 40) -> str:
    """Names for a message, sorted; a long list is cut (a scenario may have 100 endpoints)."""
    shown = sorted(names)
    if len(shown) <= limit:
        return ", ".join(shown)
    return ", ".join(shown[:limit]) + f", ... ({len(shown) - limit} more; see docs/scenario.md)"
