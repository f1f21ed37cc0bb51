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

from harness.analysis.format import figure, number
from harness.analysis.judge import (
    BLOCK_S,
    MIN_BLOCKS,
    NO_BLOCKS,
    Policy,
    blocks_in,
    blocks_of,
    flat_key,
    judge,
    policy_of,
)
from harness.analysis.model import Report
from harness.core.catalogue import DEPENDENCY, ENDPOINT, Figure, Unit, gated, unit_of
from harness.gates.select import not_run
from harness.scenario.gates import (
    REPLICA_AGGREGATES,
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


class _Bound(Exception):
    """A recovery that never came inside the window: only its bound is known (``> N s``)."""


class _NotExposed(KeyError):
    """A figure the catalogue knows whose key the report lacks, and what that means."""


def _dig(section: Mapping[str, Any], key: str, figure: Figure) -> Any:
    """The value at ``key`` (dotted) of ``section``: KeyError when the report has no such
    figure, ``_NotExposed`` when the catalogue says what its absence means."""
    value: Any = section
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            if figure.absent is not None:
                raise _NotExposed(figure.absent)
            raise KeyError(key)
        value = value[part]
    if figure.complement and value is not None:
        return 100.0 - float(value)
    return value


def _lookup(build: Mapping[str, Any], path: tuple[str, ...], phase: str | None) -> Any:
    """Find a figure in one build's report section; KeyError when there is no such figure.

    The gate's name says which figure of the catalogue (``core.catalogue.gated``); its
    report key (or its key per phase) says where it is.
    """
    found = gated(".".join(path), build["endpoints"])
    if found is None:
        raise KeyError(".".join(path))
    figure, endpoint = found
    key = figure.phase_key if phase else figure.key
    if key is None:
        raise KeyError(".".join(path))
    if phase and phase not in build["phases"]:  # an aborted build's later phase
        why = (build.get("not_measured") or {}).get(f"phases.{phase}")
        if why is not None:
            raise _NotExposed(why)
    window = build["phases"][phase] if phase else build
    where = key.replace(ENDPOINT, endpoint or "").replace(DEPENDENCY, endpoint or "")
    value = _dig(window, where, figure)
    if value is None and not phase and where in (build.get("not_reached") or {}):
        raise _Bound(build["not_reached"][where])
    return value


def _replica_lookup(replica: Mapping[str, Any], path: tuple[str, ...], phase: str | None) -> Any:
    """One replica's figure (``REPLICA_FIGURES``) in its section of ``builds.<b>.replicas``."""
    found = gated(".".join(path))
    if found is None or found[0].replica_key is None:
        raise KeyError(".".join(path))
    figure = found[0]
    key = figure.phase_key if phase else figure.replica_key
    if key is None:
        raise KeyError(".".join(path))
    return _dig(replica["phases"][phase] if phase else replica, key, figure)


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
    unit: Unit = ""
    """The unit of ``left`` and ``right`` (the catalogue's, of the figures the gate names):
    ``s`` reads ``7 ms <= 1.83 s``."""

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    @property
    def failed(self) -> bool:
        """A verdict that fails the run (``skip`` does not)."""
        return self.verdict in ("fail", "error")

    def show(self, value: float | None) -> str:
        """A side of the gate in its figures' unit (``7 ms``, ``1.83 s``, ``50.0%``); without
        one, a number to 4 significant digits."""
        return figure(value, self.unit) if self.unit else number(value)


class _Missing(Exception):
    """A figure the gate needs is absent: the gate's verdict is an error, not a crash."""


class _NotReached(_Missing):
    """A figure that was not reached inside the measured window: it is above ``bound``."""

    def __init__(self, metric: Metric, bound: float) -> None:
        super().__init__(f"{metric} was not reached inside the measured window (> {bound:g} s)")
        self.metric, self.bound = metric, bound


_FLIP: dict[Comparator, Comparator] = {
    "<=": ">=",
    "<": ">",
    ">=": "<=",
    ">": "<",
    "==": "==",
    "!=": "!=",
}
"""``a op b`` as ``b FLIP[op] a``."""
_ABOVE: dict[Comparator, bool] = {">": True, ">=": True, "!=": True, "<": False, "<=": False}
"""The verdict of ``x op v`` for any ``x`` above a bound ``B >= v`` (``==`` is False)."""


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
    except _Bound as exc:
        raise _NotReached(node, float(exc.args[0])) from exc
    except _NotExposed as exc:
        raise _Missing(f"{node} was not measured: {exc.args[0]}") from exc
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
        except _NotExposed as exc:
            raise _Missing(f"{node}: replica {index} did not measure it: {exc.args[0]}") from exc
        except KeyError as exc:
            raise _Missing(f"{node}: no such figure for replica {index} in the report") from exc
        if value is None:
            raise _Missing(f"{node}: replica {index} did not measure it")
        values.append(float(value))
    return min(values) if node.replica == "min" else max(values)


def judge_shortfalls(gates: list[Gate], scenario: Scenario, repeat: int) -> list[str]:
    """Gates asking the judge (``not worse than``) that a run of ``repeat`` repetitions can
    never give enough data: the judge needs ``MIN_BLOCKS`` blocks a side, and a window
    gives ``blocks_in`` of its length each repetition. Said before the run, not after it
    as ``not enough data``."""
    windows = {p.name: p.end - p.start for p in scenario.phases}
    problems = []
    for gate in gates:
        if gate.judged is None:
            continue
        for metric in dict.fromkeys(m for m in gate.metrics() if not m.baseline):
            seconds = scenario.duration if metric.phase is None else windows[metric.phase]
            have = blocks_in(seconds) * repeat
            if have < MIN_BLOCKS:
                where = "the measured window" if metric.phase is None else f"phase {metric.phase!r}"
                needed = -(-MIN_BLOCKS // max(blocks_in(seconds), 1))
                problems.append(
                    f"gate {gate.name!r}: the judge ('not worse than') needs at least {MIN_BLOCKS} "
                    f"blocks of {BLOCK_S:g} s of {metric} a side, and {where} ({seconds:g} s) "
                    f"gives {have} in {repeat} run(s); lengthen it to "
                    f"{MIN_BLOCKS * BLOCK_S:g} s or run with --repeat {needed}"
                )
                break  # both sides cut the same window: said once
    return problems


def baseline_gaps(gates: list[Gate], baseline: Report) -> list[str]:
    """The ``baseline.*`` figures ``gates`` name that ``baseline`` does not have at all (its
    build did not run, or no such figure): a baseline of the wrong run, refused before any
    verdict. A figure it has but did not measure is the gate's own error, as in the run."""
    gaps = []
    for gate in gates:
        for metric in dict.fromkeys(gate.metrics()):
            if not metric.baseline:
                continue
            build = baseline["builds"].get(metric.build)
            if build is None:
                ran = ", ".join(baseline["builds"]) or "none"
                gaps.append(f"{metric}: the baseline has no build {metric.build!r} (it ran {ran})")
                continue
            try:
                _lookup(build, metric.path, metric.phase)
            except KeyError:
                gaps.append(f"{metric}: the baseline has no such figure")
            except (_Bound, _NotExposed):
                pass
    return list(dict.fromkeys(gaps))


def evaluate(gate: Gate, report: Report, baseline: Report | None = None) -> GateResult:
    """Compare both sides; a figure that was not measured makes the gate an error (a failure)."""
    skipped = not_run(gate, report)
    if skipped is not None:
        return GateResult(gate.name, gate.text, None, gate.op, None, "skip", skipped)
    figures = tuple(
        (str(m), _value_or_none(m, report, baseline)) for m in dict.fromkeys(gate.metrics())
    )
    unit = _unit(gate)
    if gate.judged is not None:
        return _judged(gate, report, baseline, figures, unit)
    try:
        left = _value(gate.left, report, baseline)
        right = _value(gate.right, report, baseline)
    except _NotReached as exc:
        return _against_bound(gate, exc, report, baseline, figures, unit)
    except _Missing as exc:
        return GateResult(
            gate.name, gate.text, None, gate.op, None, "error", str(exc), figures, unit
        )
    ok = _COMPARE[gate.op](left, right)
    verdict: Literal["pass", "fail"] = "pass" if ok else "fail"
    noise = _margin_noise(gate, report, baseline, left, right)
    return GateResult(gate.name, gate.text, left, gate.op, right, verdict, noise, figures, unit)


def _sides(gate: Gate) -> tuple[Metric, Metric, float] | None:
    """A threshold gate of one figure against ``k *`` another (``a.p95 <= 0.5 * b.p95``):
    the two figures and ``k``; None for any other shape."""
    left, right, factor = gate.left, gate.right, 1.0
    if isinstance(right, BinOp) and right.op == "*":
        if isinstance(right.left, Number) and isinstance(right.right, Metric):
            factor, right = right.left.value, right.right
        elif isinstance(right.right, Number) and isinstance(right.left, Metric):
            factor, right = right.right.value, right.left
    if isinstance(left, Metric) and isinstance(right, Metric) and left.path == right.path:
        return left, right, factor
    return None


def _blocks(metric: Metric, report: Report, baseline: Report | None) -> list[float | None] | None:
    source = baseline if metric.baseline else report
    if source is None:
        return None
    build = source["builds"].get(metric.build)
    if build is None or metric.replica is not None:
        return None
    key = flat_key(metric.path, metric.phase, build["endpoints"])
    return None if key is None else blocks_of(build, key)


def _margin_noise(
    gate: Gate, report: Report, baseline: Report | None, left: float, right: float
) -> str:
    """What a threshold gate between two builds' same figure adds to its detail: that its
    margin is within noise, when the judge cannot tell the left side's blocks from the
    right side's scaled by the gate's factor ("" otherwise, or without blocks)."""
    sides = _sides(gate)
    if sides is None:
        return ""
    a, b = _blocks(sides[1], report, baseline), _blocks(sides[0], report, baseline)
    source = baseline if sides[0].baseline else report
    build = None if source is None else source["builds"].get(sides[0].build)
    key = None if build is None else flat_key(sides[0].path, None, build["endpoints"])
    policy = None if key is None else policy_of(key)
    if a is None or b is None or policy is None:
        return ""
    scaled = [None if v is None else v * sides[2] for v in a]
    found = judge(scaled, b, policy, allowed_pct=0.0)
    if found.verdict != "within noise":
        return ""
    return f"margin within noise: {_show(left, gate)} against {_show(right, gate)}, {found.why}"


def _show(value: float, gate: Gate) -> str:
    unit = _unit(gate)
    return figure(value, unit) if unit else number(value)


def _judged(
    gate: Gate,
    report: Report,
    baseline: Report | None,
    figures: tuple[tuple[str, float | None], ...],
    unit: Unit,
) -> GateResult:
    """``left not worse than right [by N%]``: the judge over both sides' blocks; fails on
    ``worse``; ``not enough data`` is an error for a critical figure, else a skip."""
    assert isinstance(gate.left, Metric) and isinstance(gate.right, Metric)
    assert gate.judged is not None
    left, right = dict(figures).get(str(gate.left)), dict(figures).get(str(gate.right))

    def result(verdict: Literal["pass", "fail", "error", "skip"], detail: str) -> GateResult:
        return GateResult(
            gate.name, gate.text, left, gate.op, right, verdict, detail, figures, unit
        )

    try:  # the figures themselves first: a build or a baseline missing says so as today
        _value(gate.left, report, baseline)
        _value(gate.right, report, baseline)
    except _Missing as exc:
        return result("error", str(exc))
    build = report["builds"][gate.left.build]
    key = flat_key(gate.left.path, gate.left.phase, build["endpoints"])
    policy = None if key is None else policy_of(key)
    if key is None or policy is None:
        return result("error", f"the judge does not know {gate.left}")
    mine, theirs = _blocks(gate.left, report, baseline), _blocks(gate.right, report, baseline)
    if mine is None or theirs is None:
        side = gate.left if mine is None else gate.right
        return result(_no_data(policy), f"{side}: {NO_BLOCKS}")
    found = judge(theirs, mine, policy, allowed_pct=gate.judged.allowed_pct)
    if found.verdict == "not enough data":
        return result(_no_data(policy), f"not enough data: {found.why}")
    verdict: Literal["pass", "fail"] = "fail" if found.verdict == "worse" else "pass"
    return result(verdict, f"{found.verdict}: {found.why}")


def _no_data(policy: Policy) -> Literal["error", "skip"]:
    return policy.without_data


def _against_bound(
    gate: Gate,
    bounded: _NotReached,
    report: Report,
    baseline: Report | None,
    figures: tuple[tuple[str, float | None], ...],
    unit: Unit,
) -> GateResult:
    """A gate whose one side is a figure not reached inside the window (it is above its
    bound B): decided when the other side is at most B, else unknown (an error)."""
    on_left = gate.left == bounded.metric

    def error(detail: str) -> GateResult:
        return GateResult(gate.name, gate.text, None, gate.op, None, "error", detail, figures, unit)

    if not on_left and gate.right != bounded.metric:
        return error(f"{bounded}; only a gate comparing it on its own can use the bound")
    try:
        other = _value(gate.right if on_left else gate.left, report, baseline)
    except _Missing as exc:
        return error(str(exc))
    op = gate.op if on_left else _FLIP[gate.op]
    if other > bounded.bound:
        return error(f"{bounded}: whether it is {op} {other:g} cannot be told")
    verdict: Literal["pass", "fail"] = "pass" if _ABOVE.get(op, False) else "fail"
    left, right = (bounded.bound, other) if on_left else (other, bounded.bound)
    return GateResult(
        gate.name, gate.text, left, gate.op, right, verdict, str(bounded), figures, unit
    )


def _unit(gate: Gate) -> Unit:
    """The unit both sides are in: the one of the figures the gate names, when they share
    one (``after.products.p95 <= 2s`` is in seconds); none otherwise."""
    units = {unit_of(str(metric)) for metric in gate.metrics()}
    return units.pop() if len(units) == 1 else ""


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


def value_of(node: Node, report: Report) -> tuple[float | None, str]:
    """An expression's value against a report (a sweep's objective and scores), and why
    it has none: a figure not measured, or a recovery not reached (``> N s``)."""
    try:
        return _value(node, report, None), ""
    except _NotReached as exc:
        return None, str(exc)
    except _Missing as exc:
        return None, str(exc)
