"""The simulator as a screen: every candidate simulated in seconds, the best few (and a few
others) then run for real, and the simulator's error against every candidate both
simulated and measured. A simulated figure is never the verdict: the recommendation is
always a measured candidate (``rank.recommended``).

The simulator is handed in (``Simulate``: ``harness.simulate.simulate_run``'s signature),
so a test can hand in its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.analysis.model import Report
from harness.core.errors import InputError
from harness.report.make import make_report
from harness.tune.folder import TuneFolder, checked_report
from harness.tune.plan import Plan
from harness.tune.rank import Outcome, judge, rank

Simulate = Callable[..., Path]
"""``harness.simulate.simulate_run`` (or a stand-in with its signature): the run folder."""


def simulated_reports(folder: TuneFolder) -> dict[str, Report]:
    """Candidate -> the report of the simulated run that has it."""
    found: dict[str, Report] = {}
    for path in sorted(folder.simulated.glob("batch-*/*/*/report.json")):
        try:
            report = checked_report(json.loads(path.read_text(encoding="utf-8")), path)
        except ValueError as exc:
            raise InputError(f"{path}: expected JSON (a simulated run's report): {exc}") from None
        for name in report["builds"]:
            found[name] = report
    return found


def simulate_all(folder: TuneFolder, plan: Plan, simulate: Simulate) -> dict[str, Report]:
    """Every candidate simulated (in batches of one scenario each), each batch reported:
    ``simulated/batch-<i>/<name>/<stamp>/``, laid out as a real run's folder."""
    for i, batch in enumerate(plan.batches()):
        loaded = plan.loaded(batch)
        out = folder.simulated / f"batch-{i}"
        names = [c.name for c in batch]
        run_dir = simulate(
            loaded.scenario, out, names, scenario_text=loaded.text, scenario_file=plan.file
        )
        make_report(run_dir, charts=False)
    return simulated_reports(folder)


def picks(plan: Plan, reports: dict[str, Report]) -> list[str]:
    """What runs for real: the current setting, the ``screen.best`` best simulated
    candidates, and ``screen.others`` spread evenly over the rest of the ranking."""
    outcomes = [judge(plan, c, reports.get(c.name), "", "simulated") for c in plan.candidates]
    current = [c.name for c in plan.candidates if c.current]
    ranked = [o.name for o in rank(plan, outcomes) if o.name not in current]
    best = ranked[: plan.sweep.screen.best]
    rest = [n for n in ranked if n not in best]
    n = min(plan.sweep.screen.others, len(rest))
    others = [rest[round(i * (len(rest) - 1) / max(1, n - 1))] for i in range(n)]
    return list(dict.fromkeys([*current, *best, *others]))


def errors(measured: list[Outcome], simulated: dict[str, Outcome]) -> list[dict[str, Any]]:
    """Per candidate both measured and simulated: each figure's two values and the
    simulator's error (simulated - measured, and relative to the measured)."""
    rows = []
    for o in measured:
        s = simulated.get(o.name)
        if o.measured != "measured" or s is None:
            continue
        figures = {"objective": (s.objective, o.objective)}
        figures |= {f"score{i}": (s.scores[i], o.scores[i]) for i in range(2)}
        row: dict[str, Any] = {"name": o.name}
        for key, (sim, real) in figures.items():
            err = None if sim is None or real is None else sim - real
            rel = None if err is None or not real else err / abs(real)
            row[key] = {"simulated": sim, "measured": real, "error": err, "relative": rel}
        rows.append(row)
    return rows
