"""Candidates judged from their reports: constraints, the objective, the two front scores,
the ranking (feasible first, by the objective), the Pareto front, the recommendation and
per-axis sensitivity.

Every figure is read as a gate reads it (``harness.gates.evaluate``), from the report of
the run the candidate ran in, so a tune's verdicts are the figures its runs' own reports
show.

One rule says what may be recommended and what ``--check`` passes (``admissible``):
measured for real, every constraint met, on the front. The recommendation is the best of
those by the objective, so it always passes its own check (the best by the objective
alone could be dominated: with every candidate at 0 on one score, a tie on the objective
went to the first name, which another candidate beat on the other score). Whether its
lead over the next is within noise is ``tell``'s verdict, the refinement's own: the judge
(``harness.analysis.judge``) on both candidates' 5-s blocks of the figure when their
reports have them, else today's rule (``near``: overlapping ``--repeat`` intervals, else a
tolerance), saying which rule told them and why the judge did not.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.analysis.judge import BLOCK_S, NO_BLOCKS, Policy, blocks_of, flat_key, policy_of
from harness.analysis.judge import judge as judge_blocks
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
class Blocks:
    """A candidate's blocks of one figure (``harness.analysis.judge``), from its report."""

    key: str
    """The flattened figure name: ``products.latency_s.p99[outage]``."""
    values: list[float | None]


BLOCKED = ("objective", "front score 1", "front score 2")
"""What ``Outcome.blocks`` holds, in order."""


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
    dominated_by: list[str] = field(default_factory=list)
    """The candidates of the front's pool that beat it on both scores (empty on the front,
    or when it is not in the pool: infeasible, a score not measured, not run)."""
    aliases: list[str] = field(default_factory=list)
    abort: dict[str, Any] | None = None
    error: str = ""
    """Why it could not be run (``measured`` is ``failed``)."""
    blocks: list[Blocks | None] = field(default_factory=lambda: [None, None, None])
    """The objective's and both front scores' blocks (``BLOCKED``), pooled over rounds;
    None where the judge cannot be asked: ``block_notes`` says why. Not in ``tune.json``."""
    block_notes: list[str] = field(default_factory=lambda: ["", "", ""])

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
    out.blocks[0], out.block_notes[0] = _blocks(objective, build, plan.sweep.objective.expr)
    for i, text in enumerate(plan.sweep.front):
        node = _expr(text, candidate.name)
        out.scores[i] = value_of(node, report)[0]
        out.intervals[i] = _interval(node, build)
        out.blocks[i + 1], out.block_notes[i + 1] = _blocks(node, build, text)
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


def _blocks(node: Any, build: Mapping[str, Any], text: str) -> tuple[Blocks | None, str]:
    """A figure's blocks in a candidate's report section, or None and why: the judge knows
    an endpoint's latency and success only, one figure at a time (not an expression), and
    a report made before it has none."""
    if not isinstance(node, Metric) or node.replica is not None:
        return None, f"`{text}` is not one figure of an endpoint the judge knows"
    key = flat_key(node.path, node.phase, build.get("endpoints", {}))
    if key is None or policy_of(key) is None:
        return None, f"`{text}` is not a figure the judge knows (an endpoint's latency, success)"
    values = blocks_of(build, key)
    if values is None:
        return None, f"its report has no blocks of {key} ({NO_BLOCKS.split('(', 1)[1]}"
    return Blocks(key, values), ""


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
    points = front_pool(ordered)
    for o in points:
        o.dominated_by = [p.name for p in points if p is not o and _dominates(p, o)]
        o.on_front = not o.dominated_by
    return ordered


def front_pool(ordered: list[Outcome]) -> list[Outcome]:
    """The candidates the front is drawn among: the feasible ones measured with both scores
    (the constraints say what is admissible; a point that fails one beats nothing, and is
    never on it: with none feasible there is no front); before any real run, the feasible
    estimates (a screen)."""
    scored = [o for o in ordered if o.feasible and None not in o.scores]
    real = [o for o in scored if o.measured == "measured"]
    measured = any(o.measured == "measured" for o in ordered)
    return real if measured else scored


def flat_scores(ranked: list[Outcome]) -> list[tuple[int, float]]:
    """The front scores that do not vary over the front's pool of two candidates or more:
    ``(index, the one value)``. The front is then the best by the other score alone, and a
    chart of it is a line along one axis, which says nothing of the flat score."""
    points = front_pool(ranked)
    if len(points) < 2:
        return []
    found = []
    for i in range(2):
        values = {o.scores[i] for o in points}
        if len(values) == 1:
            value = values.pop()
            assert value is not None
            found.append((i, value))
    return found


def _dominates(a: Outcome, b: Outcome) -> bool:
    ax, ay = a.scores
    bx, by = b.scores
    assert ax is not None and ay is not None and bx is not None and by is not None
    return ax <= bx and ay <= by and (ax < bx or ay < by)


def admissible(o: Outcome) -> str:
    """Why ``o`` may be neither recommended nor pass ``--check`` ("" when it may): the one
    rule of both. It ran for real (a simulated estimate is never the verdict), meets every
    constraint, and no other such candidate beats it on both front scores."""
    if o.measured == "missing":
        return "not run"
    if o.measured == "failed":
        return f"could not be run: {o.error}"
    if o.measured != "measured":
        return "simulated only (a screen's estimate is never the verdict)"
    if not o.feasible:
        failed = [c.text for c in o.checks if c.verdict != "pass"] or [f"status {o.status}"]
        return f"fails a constraint: {'; '.join(failed)}"
    if o.on_front:
        return ""
    if o.dominated_by:
        return f"dominated by {', '.join(o.dominated_by)}"
    return "not on the front: a front score was not measured"


def recommended(ranked: list[Outcome]) -> Outcome | None:
    """The best candidate by the objective of those ``admissible`` (measured, feasible, on
    the front), or None when there is none: the recommendation always passes its own
    ``--check``."""
    for o in ranked:
        if not admissible(o) and o.objective is not None:
            return o
    return None


def passed_over(ranked: list[Outcome], best: Outcome) -> list[tuple[str, str]]:
    """The measured feasible candidates ranked before ``best`` by the objective that are not
    recommended, each with why (dominated on the front): ``(name, why)``."""
    ahead = ranked[: ranked.index(best)]
    return [
        (o.name, admissible(o))
        for o in ahead
        if o.measured == "measured" and o.feasible and admissible(o)
    ]


@dataclass(frozen=True)
class Told:
    """Whether noise tells two candidates' figure apart, by which rule, and why."""

    within_noise: bool
    rule: str
    """``judge`` (Mann-Whitney on both candidates' blocks), else today's rule: ``intervals``
    (both have a 95 % interval) or ``tolerance`` (one repetition: none)."""
    why: str
    """The verdict's reason (the judge's shift and p-value; the intervals; the values)."""
    note: str = ""
    """With today's rule: why the judge was not asked (no blocks, not enough data)."""


def tell(
    first: str,
    a: float,
    ia: list[float] | None,
    ba: Blocks | None,
    second: str,
    b: float,
    ib: list[float] | None,
    bb: Blocks | None,
    tolerance: float,
    lower_is_better: bool,
    notes: tuple[str, str] = ("", ""),
) -> Told:
    """Whether ``second``'s figure (``b``) is within noise of ``first``'s (``a``, the one
    ranked ahead): the judge on their blocks when both reports have them, else ``near``.

    The judge's verdict of ``second`` against ``first``, the bad direction the figure's sense
    in this sweep: ``worse`` tells them apart; ``within noise`` (the Mann-Whitney test does not
    reject, or the shift is inside the change the figure's policy allows) does not; nor does
    ``better`` (the blocks put ``second`` ahead, against the order of the figures). ``not
    enough data``, or blocks missing on a side (``notes`` says why), falls back to ``near``."""
    note = ""
    if ba is not None and bb is not None and ba.key == bb.key:
        policy = _policy(ba.key, lower_is_better)
        assert policy is not None  # Blocks are only kept for a figure the judge knows
        found = judge_blocks(ba.values, bb.values, policy)
        if found.verdict != "not enough data":
            said = f"the judge on {BLOCK_S:g}-s blocks of {ba.key}: "
            if found.verdict == "worse":
                return Told(False, "judge", said + f"{second} worse than {first}, {found.why}")
            if found.verdict == "better":
                why = (f"{second}'s blocks better than {first}'s, {found.why} (the figures "
                       "and the blocks disagree on the order)")  # fmt: skip
                return Told(True, "judge", said + why)
            return Told(True, "judge", said + f"within noise, {found.why}")
        note = f"the judge: not enough data ({found.why})"
    elif ba is not None and bb is not None:
        note = f"the judge: {first} and {second} have blocks of different figures"
    else:
        sides = ((first, notes[0], ba), (second, notes[1], bb))
        missing = [(n, w or "no blocks") for n, w, x in sides if x is None]
        if len(missing) == 2 and missing[0][1] == missing[1][1] and "`" in missing[0][1]:
            note = f"not the judge: {missing[0][1]}"  # the figure itself, not a report
        else:
            note = "not the judge: " + "; ".join(f"{n}: {w}" for n, w in missing)
    rule = "intervals" if ia is not None and ib is not None else "tolerance"
    why = near(a, b, ia, ib, tolerance)
    if not why:
        why = (
            f"95% intervals apart ({_g(ia)} and {_g(ib)})"  # type: ignore[arg-type]
            if rule == "intervals"
            else f"{b:.4g} more than {tolerance:.0%} from {a:.4g}"
        )
        return Told(False, rule, why, note)
    return Told(True, rule, why, note)


def _policy(key: str, lower_is_better: bool) -> Policy | None:
    """The figure's policy (its allowed change, its scale), the bad direction the sweep's:
    higher for an objective minimised or a front score, lower for one maximised."""
    policy = policy_of(key)
    if policy is None:
        return None
    return dataclasses.replace(policy, bad="increase" if lower_is_better else "decrease")


@dataclass(frozen=True)
class Lead:
    """The recommended candidate's objective against the next-best one on the front."""

    over: str
    by: float
    """How much better the recommended one's objective is, in the objective's sense."""
    within_noise: bool
    why: str
    """``tell``'s reason: what tells them apart, or why they are within noise."""
    rule: str = "tolerance"
    """``judge``, ``intervals`` or ``tolerance`` (``Told.rule``)."""
    rule_note: str = ""
    """With today's rule: why the judge was not asked."""
    within_noise_of: list[str] = field(default_factory=list)
    """Every other choice on the front the recommended one is within noise of on the
    objective (the next-best first), each by ``tell``."""


def lead(ranked: list[Outcome], best: Outcome, sense: str, tolerance: float) -> Lead | None:
    """``best`` against the next-best ``admissible`` candidate by the objective (the other
    choice the front leaves: one ``best`` dominates is no choice), and whether noise tells
    them apart (``tell``: the judge on their blocks, else overlapping 95 % intervals, else
    within ``tolerance`` of ``best``'s objective); None when the front has no other. Every
    other admissible candidate within noise of ``best`` is listed too."""
    assert best.objective is not None
    others = [o for o in ranked if o is not best and not admissible(o) and o.objective is not None]
    if not others:
        return None
    sign = 1.0 if sense == "minimize" else -1.0
    verdicts = [(o, tell_objective(best, o, sense, tolerance)) for o in others]
    other, told = verdicts[0]
    assert other.objective is not None
    by = sign * (other.objective - best.objective)
    why = told.why
    if told.rule == "tolerance" and not told.within_noise:
        why = (
            f"more than {tolerance:.0%} apart; one repetition has no interval, so the noise "
            "itself is not measured (--repeat 3 measures it)"
        )
    within = [o.name for o, t in verdicts if t.within_noise]
    return Lead(other.name, by, told.within_noise, why, told.rule, told.note, within)


def tell_objective(best: Outcome, other: Outcome, sense: str, tolerance: float) -> Told:
    """``tell`` on the objective of two candidates that have one."""
    assert best.objective is not None and other.objective is not None
    return tell(
        best.name, best.objective, best.objective_interval, best.blocks[0],
        other.name, other.objective, other.objective_interval, other.blocks[0],
        tolerance, sense == "minimize", (best.block_notes[0], other.block_notes[0]),
    )  # fmt: skip


def near(
    a: float, b: float, ia: list[float] | None, ib: list[float] | None, tolerance: float
) -> str:
    """Why ``b`` is within noise of ``a`` ("" when it is not), by today's rule (used where
    the reports have no blocks for the judge): overlapping intervals when both have one,
    else closer than ``tolerance`` of ``a``."""
    if ia is not None and ib is not None:
        if ia[0] <= ib[1] and ib[0] <= ia[1]:
            return f"95% intervals overlap ({_g(ia)} and {_g(ib)})"
        return ""
    if abs(b - a) <= tolerance * abs(a):
        return f"{b:.4g} within {tolerance:.0%} of {a:.4g}"
    return ""


def _g(interval: list[float]) -> str:
    return f"[{interval[0]:.4g}, {interval[1]:.4g}]"


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


def check(o: Outcome, front: list[str]) -> tuple[bool, str]:
    """The CI check of ``o`` (``--check``): ``admissible``, and why not, with the front."""
    why = admissible(o)
    if not why:
        return True, "feasible and on the front"
    if o.dominated_by or why.startswith("not on the front"):
        why += f" (front: {', '.join(front) or 'none'})"
    return False, why
