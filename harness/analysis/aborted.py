"""An aborted build's figures: what its load measured before a gate with ``abort: true``
stopped it, and which of its figures it never measured.

Its phases up to the one the gate was checked after are whole (every request
intended in them had answered: ``harness.scenario.abort``). Later phases were
cut short or never reached: they are left out of ``phases`` and said in
``not_measured`` (a gate on them is an error, a table cell ``-``), never 0.
Its whole-window, fault-window and timeline figures cover only what ran before
the stop, and a warning says so; a recovery not seen by then is not measured
(not "not reached": the window's end never came); scrape gaps are looked for up
to the stop only, as in a build interrupted, killed or failed mid-load, up to the last
request it sent (``covered_until``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis.model import BuildFigures
from harness.results.manifest import BuildRecord
from harness.scenario.schema import Scenario


def measured_until(scenario: Scenario, info: BuildRecord) -> float:
    """Seconds of the measured window the build's load ran: all of it, unless aborted."""
    abort = info.get("abort")
    return scenario.duration if abort is None else min(scenario.duration, abort["at_s"])


UNFINISHED = ("interrupted", "crashed", "failed")
"""A build's statuses when its load stopped before its end (Ctrl-C, a kill, an error)."""


def covered_until(scenario: Scenario, info: BuildRecord, sent: pd.DataFrame, t0: float) -> float:
    """Seconds of the measured window the build covered: ``measured_until``, and for a build
    that did not finish (``UNFINISHED``), no further than the last request it sent (``sent``:
    its samples, dropped arrivals left out): the scraper stopped with its load, so what
    came after is no gap in its scrapes (``harness.analysis.validity.scrape_gaps``)."""
    until = measured_until(scenario, info)
    if info.get("status") not in UNFINISHED:
        return until
    starts = sent["actual_start"].to_numpy(dtype=float) if len(sent) else np.array([])
    starts = starts[~np.isnan(starts)]
    last = float(starts.max()) - t0 if len(starts) else 0.0
    return max(0.0, min(until, last))


def cut_aborted(figures: BuildFigures, scenario: Scenario, info: BuildRecord) -> None:
    """Leave out the phases an aborted build did not measure whole, and say why."""
    abort = info.get("abort")
    if abort is None:
        return
    ends = {p.name: p.end for p in scenario.phases}
    checked_end = ends.get(abort["phase"], 0.0)
    later = [name for name, end in ends.items() if end > checked_end + 1e-9]
    why = (
        f"the build was aborted at {abort['at_s']:g} s by gate {abort['gate']!r} "
        f"(checked after phase {abort['phase']!r}): this phase was not measured whole"
    )
    for name in later:
        figures["phases"].pop(name, None)
        for replica in (figures.get("replicas") or {}).values():
            replica["phases"].pop(name, None)
    missing = {
        key: reason
        for key, reason in (figures.get("not_measured") or {}).items()
        if not any(key.startswith(f"phases.{name}.") for name in later)
    }
    missing.update({f"phases.{name}": why for name in later})
    # A recovery not seen before the stop has no bound: the window's end was never reached.
    for key in figures.pop("not_reached", {}):
        missing[key] = f"the build was aborted at {abort['at_s']:g} s, before it was seen"
    if missing:
        figures["not_measured"] = missing
    figures["warnings"] = [
        *figures.get("warnings", []),
        f"aborted at {abort['at_s']:g} s of {scenario.duration:g} s by gate {abort['gate']!r} "
        f"({abort['expr']}: {abort['value']} against {abort['limit']}); its figures over the "
        "whole and the fault window, and its timeline, cover only what ran before the stop",
    ]
    figures["abort"] = abort
