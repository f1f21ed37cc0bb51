"""The refinement: after the first pass, more repetitions for the recommended candidate and
the neighbours noise does not tell it apart from, and only those (docs/tune.md#refinement).

"Within noise" (``harness.tune.rank.tell``, the recommendation's own verdict): the judge
(``harness.analysis.judge``) on both candidates' 5-s blocks of the figure when their
reports have them (it does not find the neighbour worse); else today's rule, said in each
pick's reason: with intervals (``--repeat``, or rounds already pooled) the two 95 %
intervals overlap; with one repetition there is none, so the objectives differ by less
than ``sweep.refine.within`` of the recommended one's. The extra real runs count against
``MAX_REAL_RUNS``: the farthest neighbours are left out to fit, or nothing is refined.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.analysis.combine import bootstrap_ci
from harness.scenario.sweep import Refine
from harness.tune.plan import MAX_REAL_RUNS
from harness.tune.rank import Blocks, Outcome, Told, recommended, tell, tell_objective


@dataclass
class Selection:
    """What the refinement runs: the picked candidates (the recommended one first) and why."""

    repeats: int
    within: str
    """The rules that told the neighbours apart: ``the judge`` (5-s blocks), the tolerance
    (``10%``, where a report had no blocks), or both (``the judge, else 10%``)."""
    picked: list[dict[str, str]] = field(default_factory=list)
    """``{"name", "why"}``, nearest first after the recommended candidate."""
    note: str = ""
    """Why nothing (or not every neighbour) is refined: far apart, the cap."""
    extra_runs: int = 0

    @property
    def names(self) -> list[str]:
        return [p["name"] for p in self.picked]

    def record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def select(
    ranked: list[Outcome], refine: Refine, repeat: int, used: int, sense: str = "minimize"
) -> Selection:
    """The recommended candidate and its feasible neighbours within noise on the objective
    (with ``refine.front``, also its front neighbours within noise on either score),
    trimmed to the real runs left under ``MAX_REAL_RUNS`` (``used`` already ran); ``sense``
    is the objective's (the judge's bad direction)."""
    tol = refine.tolerance
    sel = Selection(refine.repeats, f"{tol:.0%}")
    best = recommended(ranked)
    if best is None or best.objective is None:
        sel.note = "nothing recommended: nothing to refine"
        return sel
    found: list[tuple[float, str, str]] = []
    rules: set[str] = set()
    for o in ranked:
        if o is best or o.measured != "measured" or not o.feasible or o.objective is None:
            continue
        told = tell_objective(best, o, sense, tol)
        rules.add(told.rule)
        if told.within_noise:
            found.append((abs(o.objective - best.objective), o.name, f"objective: {_why(told)}"))
            continue
        if refine.front and best.on_front and o.on_front:
            for i, (x, y) in enumerate(zip(best.scores, o.scores, strict=True)):
                if x is None or y is None:
                    continue
                told = tell(
                    best.name, x, best.intervals[i], best.blocks[i + 1],
                    o.name, y, o.intervals[i], o.blocks[i + 1],
                    tol, True, (best.block_notes[i + 1], o.block_notes[i + 1]),
                )  # fmt: skip
                rules.add(told.rule)
                if told.within_noise:
                    distance = abs(o.objective - best.objective)
                    found.append((distance, o.name, f"front score {i + 1}: {_why(told)}"))
                    break
    if rules == {"judge"}:
        sel.within = "the judge"
    elif "judge" in rules:
        sel.within = f"the judge, else {tol:.0%}"
    if not found:
        sel.note = (
            f"no candidate within noise of {best.name} ({_by(rules, tol)}): nothing to refine"
        )
        return sel
    found.sort()
    picked = [{"name": best.name, "why": "recommended"}]
    picked += [{"name": name, "why": why} for _, name, why in found]
    each = refine.repeats * repeat
    fit = max(0, MAX_REAL_RUNS - used) // each
    if fit < 2:
        sel.note = (
            f"{len(picked)} within noise ({', '.join(p['name'] for p in picked)}) would need "
            f"{len(picked) * each} more real runs; {used} of {MAX_REAL_RUNS} already ran: "
            "nothing refined"
        )
        return sel
    if fit < len(picked):
        left = [p["name"] for p in picked[fit:]]
        sel.note = (
            f"trimmed to {fit} to stay within {MAX_REAL_RUNS} real runs ({used} already ran): "
            f"left out, the farthest: {', '.join(left)}"
        )
        picked = picked[:fit]
    sel.picked = picked
    sel.extra_runs = len(picked) * each
    return sel


def _why(told: Told) -> str:
    """A pick's reason: the judge's verdict, or today's rule's and why not the judge."""
    if told.rule == "judge":
        return told.why
    return f"{told.why} (today's rule, {told.note})" if told.note else told.why


def _by(rules: set[str], tol: float) -> str:
    if rules == {"judge"}:
        return "the judge on 5-s blocks"
    today = "95% intervals" if rules - {"judge"} == {"intervals"} else f"intervals, else {tol:.0%}"
    return ("the judge, else " if "judge" in rules else "") + today


def pool(runs: list[Outcome], seed: int = 0) -> Outcome:
    """One candidate over its rounds (each a run folder of ``--repeat`` repetitions): the
    mean of the rounds' objective and scores and, with two rounds or more, the bootstrap
    95 % interval of that mean (as ``--repeat`` intervals are); feasible only when every
    round met every constraint (the checks shown are the first failing round's, else the
    latest's)."""
    if len(runs) == 1:
        return runs[0]
    rng = np.random.default_rng(seed)
    last = runs[-1]
    out = dataclasses.replace(last, rounds=len(runs), run=", ".join(o.run for o in runs))
    out.objective, out.objective_interval = _mean(
        [o.objective for o in runs], rng, last.objective_interval
    )
    out.scores, out.intervals = [], []
    for i in range(len(last.scores)):
        mean, interval = _mean([o.scores[i] for o in runs], rng, last.intervals[i])
        out.scores.append(mean)
        out.intervals.append(interval)
    out.blocks = [_pooled([o.blocks[i] for o in runs]) for i in range(len(last.blocks))]
    failing = next((o for o in runs if not o.feasible), None)
    if failing is not None:
        out.checks, out.status, out.abort = failing.checks, failing.status, failing.abort
    return out


def _pooled(rounds: list[Blocks | None]) -> Blocks | None:
    """Every round's blocks one after another (as ``--repeat`` pools its repetitions'), or
    None when a round has none (``block_notes`` is the latest round's)."""
    first = rounds[0]
    if first is None or any(b is None or b.key != first.key for b in rounds):
        return None
    return Blocks(first.key, [v for b in rounds if b is not None for v in b.values])


def _mean(
    values: list[float | None], rng: np.random.Generator, fallback: list[float] | None
) -> tuple[float | None, list[float] | None]:
    known = [v for v in values if v is not None]
    if len(known) != len(values):
        return (values[-1], fallback)
    low, high = bootstrap_ci(known, rng)
    return (float(np.mean(known)), [low, high])
