"""The refinement: after the first pass, more repetitions for the recommended candidate and
the neighbours noise does not tell it apart from, and only those (docs/tune.md#refinement).

"Within noise" (``harness.tune.rank.near``, the recommendation's own verdict): with
intervals (``--repeat``, or rounds already pooled) the two 95 % intervals overlap; with one
repetition there is none, so the objectives differ by less than ``sweep.refine.within`` of
the recommended one's. The extra real runs count against
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
from harness.tune.rank import Outcome, near, recommended


@dataclass
class Selection:
    """What the refinement runs: the picked candidates (the recommended one first) and why."""

    repeats: int
    within: str
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


def select(ranked: list[Outcome], refine: Refine, repeat: int, used: int) -> Selection:
    """The recommended candidate and its feasible neighbours within noise on the objective
    (with ``refine.front``, also its front neighbours within noise on either score),
    trimmed to the real runs left under ``MAX_REAL_RUNS`` (``used`` already ran)."""
    tol = refine.tolerance
    sel = Selection(refine.repeats, f"{tol:.0%}")
    best = recommended(ranked)
    if best is None or best.objective is None:
        sel.note = "nothing recommended: nothing to refine"
        return sel
    found: list[tuple[float, str, str]] = []
    for o in ranked:
        if o is best or o.measured != "measured" or not o.feasible or o.objective is None:
            continue
        why = near(best.objective, o.objective, best.objective_interval, o.objective_interval, tol)
        if why:
            found.append((abs(o.objective - best.objective), o.name, f"objective: {why}"))
            continue
        if refine.front and best.on_front and o.on_front:
            for i, (x, y) in enumerate(zip(best.scores, o.scores, strict=True)):
                if x is None or y is None:
                    continue
                why = near(x, y, best.intervals[i], o.intervals[i], tol)
                if why:
                    distance = abs(o.objective - best.objective)
                    found.append((distance, o.name, f"front score {i + 1}: {why}"))
                    break
    if not found:
        sel.note = f"no candidate within noise of {best.name}: nothing to refine"
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
    failing = next((o for o in runs if not o.feasible), None)
    if failing is not None:
        out.checks, out.status, out.abort = failing.checks, failing.status, failing.abort
    return out


def _mean(
    values: list[float | None], rng: np.random.Generator, fallback: list[float] | None
) -> tuple[float | None, list[float] | None]:
    known = [v for v in values if v is not None]
    if len(known) != len(values):
        return (values[-1], fallback)
    low, high = bootstrap_ci(known, rng)
    return (float(np.mean(known)), [low, high])
