"""Candidates judged from their reports: constraints, the objective, the two front scores,
the ranking (feasible first, by the objective), the Pareto front and per-axis sensitivity.

Every figure is read as a gate reads it (``harness.gates.evaluate``), from the report of
the run the candidate ran in, so a tune's verdicts are the figures its runs' own reports
show.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.analysis.model import Report
from harness.core.catalogue import gated
from harness.gates.evaluate import evaluate, value_of
from harness.scenario.gates import Metric, parse_gate, prefix_figures
from harness.tune.candidates import Candidate
from harness.tune.plan import Plan

FINISHED = ("completed", "aborted")
"""Build statuses a candidate's figures are kept from (an aborted one failed a constraint)."""


@dataclass
class Check:
    """One constraint's verdict for one candidate."""

    text: str
    verdict: str
    """``pass``, ``fail``, ``error`` (a figure not measured: counts as failed)."""
    left: float | None
    right: float | None
    detail: str = ""


@dataclass
class Outcome:
    """A candidate with what its run measured (or the simulator estimated)."""

    name: str
    origin: str
    values: dict[str, Any]
    measured: str
    """``measured`` (a real run), ``simulated``, ``missing`` (not run yet), ``failed`` (it
    could not be run: its target did not start; ``error`` says why)."""
    status: str = ""
    run: str = ""
    objective: float | None = None
    objective_note: str = ""
    objective_interval: list[float] | None = None
    """Its 95 % interval: ``--repeat``'s when the objective is one figure, or over the
    rounds of a refined candidate (``refine.pool``)."""
    rounds: int = 1
    """Run folders it finished in (more than one when refined), each ``--repeat`` times."""
    scores: list[float | None] = field(default_factory=lambda: [None, None])
    intervals: list[list[float] | None] = field(default_factory=lambda: [None, None])
    checks: list[Check] = field(default_factory=list)
    rank: int | None = None
    on_front: bool = False
    aliases: list[str] = field(default_factory=list)
    abort: dict[str, Any] | None = None
    error: str = ""
    """Why it could not be run (``measured`` is ``failed``)."""

    @property
    def feasible(self) -> bool:
        return (
            self.measured not in ("missing", "failed")
            and self.status != "aborted"
            and all(c.verdict == "pass" for c in self.checks)
        )


def _expr(text: str, build: str) -> Any:
    return parse_gate(prefix_figures(text, build) + " >= 0").left


def judge(
    plan: Plan, candidate: Candidate, report: Report | None, run: str, measured: str
) -> Outcome:
    """One candidate's outcome from the report it ran in (None: not run yet)."""
    out = Outcome(
        candidate.name,
        candidate.origin,
        candidate.values,
        "missing" if report is None else measured,
        aliases=candidate.aliases,
    )
    if report is None:
        return out
    build: Mapping[str, Any] = report["builds"][candidate.name]
    out.status, out.run = str(build.get("status", "")), run
    out.abort = build.get("abort")
    objective = _expr(plan.sweep.objective.expr, candidate.name)
    out.objective, out.objective_note = value_of(objective, report)
    out.objective_interval = _interval(objective, build)
    for i, text in enumerate(plan.sweep.front):
        node = _expr(text, candidate.name)
        out.scores[i] = value_of(node, report)[0]
        out.intervals[i] = _interval(node, build)
    for text in plan.constraints:
        result = evaluate(parse_gate(prefix_figures(text, candidate.name), text), report)
        out.checks.append(Check(text, result.verdict, result.left, result.right, result.detail))
    return out


def _interval(node: Any, build: Mapping[str, Any]) -> list[float] | None:
    """The ``--repeat`` 95 % interval of a score that is one figure, when the report has it
    (``ci95`` is keyed by the flattened names: ``products.latency_s.p99[outage]``)."""
    ci = build.get("ci95") or {}
    if not isinstance(node, Metric) or not ci:
        return None
    found = gated(".".join(node.path), build.get("endpoints", {}))
    if found is None:
        return None
    figure, endpoint = found
    if endpoint is None:
        key = figure.key
    else:  # ci95 names an endpoint's figure without its section: products.latency_s.p99
        within = ".latency_s." if ".latency_s." in figure.key else "."
        key = f"{endpoint}{within}{figure.stat}"
    pair = ci.get(key + (f"[{node.phase}]" if node.phase else ""))
    if not pair or pair[0] is None or pair[1] is None:
        return None
    return [float(pair[0]), float(pair[1])]


def rank(plan: Plan, outcomes: list[Outcome]) -> list[Outcome]:
    """Ranked: measured before simulated before not run, feasible first in each, then by
    the objective (its sense); ranks from 1. Marks the Pareto front of the two scores
    (both minimised) among the feasible measured candidates (none feasible: no front)."""
    sign = 1.0 if plan.sweep.objective.sense == "minimize" else -1.0

    def key(o: Outcome) -> tuple[int, int, float, str]:
        value = math.inf if o.objective is None else sign * o.objective
        tier = {"measured": 0, "failed": 0, "simulated": 1}.get(o.measured, 2)
        return (tier, not o.feasible, value, o.name)

    ordered = sorted(outcomes, key=key)
    for i, o in enumerate(x for x in ordered if x.measured != "missing"):
        o.rank = i + 1
    # The front of the feasible candidates measured (the constraints say what is admissible;
    # a point that fails one beats nothing, and is never on it: with none feasible there is
    # no front); before any real run, of the feasible estimates (a screen).
    scored = [o for o in ordered if o.feasible and None not in o.scores]
    real = [o for o in scored if o.measured == "measured"]
    measured = any(o.measured == "measured" for o in ordered)
    points = real if measured else scored
    for o in points:
        o.on_front = not any(_dominates(p, o) for p in points if p is not o)
    return ordered


def _dominates(a: Outcome, b: Outcome) -> bool:
    ax, ay = a.scores
    bx, by = b.scores
    assert ax is not None and ay is not None and bx is not None and by is not None
    return ax <= bx and ay <= by and (ax < bx or ay < by)


def recommended(ranked: list[Outcome]) -> Outcome | None:
    """The best feasible candidate that was measured for real (a simulated estimate is
    never the verdict), or None when none meets the constraints."""
    for o in ranked:
        if o.feasible and o.measured == "measured" and o.objective is not None:
            return o
    return None


def sensitivity(plan: Plan, outcomes: list[Outcome]) -> dict[str, dict[str, Any]]:
    """Per axis, how far the objective moves with it: the mean objective of the measured
    candidates at each of its values, and the spread of those means (max - min; a main
    effect, as a designed experiment reads one). Builds taken whole (``include``) are left
    out: they differ in more than the axes."""
    out: dict[str, dict[str, Any]] = {}
    for axis in plan.axes:
        groups: dict[str, list[float]] = {}
        for o in outcomes:  # the base and the axes' points: an included build is no point
            if o.objective is not None and o.measured == "measured" and o.origin != "include":
                groups.setdefault(str(o.values.get(axis)), []).append(o.objective)
        means = {v: sum(xs) / len(xs) for v, xs in groups.items()}
        spread = max(means.values()) - min(means.values()) if len(means) > 1 else None
        out[axis] = {"means": means, "spread": spread}
    return out


def on_front(ranked: list[Outcome], name: str) -> tuple[bool, str]:
    """The CI check: whether ``name`` is measured, feasible and on the front, and why not."""
    found = next((o for o in ranked if o.name == name or name in o.aliases), None)
    if found is None:
        return False, f"{name!r} is not a candidate of this sweep"
    if found.measured == "missing":
        return False, f"{name} has not run"
    if found.measured == "failed":
        return False, f"{name} could not be run: {found.error}"
    if not found.feasible:
        failed = [c.text for c in found.checks if c.verdict != "pass"] or [found.status]
        return False, f"{name} no longer meets the constraints: {failed}"
    if not found.on_front:
        return False, f"{name} is dominated on the front ({', '.join(plan_front(ranked))})"
    return True, f"{name} is feasible and on the front"


def plan_front(ranked: list[Outcome]) -> list[str]:
    return [o.name for o in ranked if o.on_front]
