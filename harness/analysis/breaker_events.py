"""Checks on a breaker told by counters of its transitions (opossum): is the exporter whole?

A breaker cannot open twice in a row: between two ``open`` transitions it went
half-open (its probe failed) or was closed. opossum-prometheus 0.3.0 with
opossum 9 subscribes only to events that already have a listener
(``circuit.eventNames()``), and opossum itself listens to ``open`` and ``close``
but not to ``halfOpen``: on a stock service ``circuit{event="halfOpen"}`` never
counts, and every failed probe reads as the breaker staying open
(``series.states_from_events``). Two or more opens with nothing counted between
them are the sign, and the report says so rather than showing a wrong timeline.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def reopens_without_half_open(counts: pd.DataFrame) -> int:
    """How many ``open`` transitions followed another with no ``half_open`` or ``close``
    counted between them, from cumulative ``open``, ``half_open``, ``close`` counts per scrape.

    Only scrapes whose new events are all opens count: when a scrape's interval also
    holds a half-open or a close, their order is unknown, and nothing is claimed. A
    count that went down (the service restarted) starts again.
    """
    previous = np.zeros(3)
    after_open = False  # the last event counted was an open
    found = 0
    for values in counts[["open", "half_open", "close"]].to_numpy(dtype=float):
        delta = values - previous
        if (delta < 0).any():
            after_open, delta = False, values
        previous = values
        opens, half_opens, closes = delta
        if half_opens or closes:
            after_open = False
        elif opens:
            found += int(opens) - (0 if after_open else 1)
            after_open = True
    return found


def half_open_missing(counts: pd.DataFrame, half_open_name: str) -> str | None:
    """The report's warning when the breaker opened twice in a row (``reopens_without_half_open``),
    naming the likely cause; None when its transitions are consistent."""
    found = reopens_without_half_open(counts)
    if not found:
        return None
    return (
        f"the breaker opened again {found} time(s) with no {half_open_name!r} event counted "
        "since its previous open, so each failed probe reads as open in the breaker timeline: "
        "opossum-prometheus 0.3.0 with opossum 9 counts only events that already have a "
        f"listener; register one (breaker.on('{half_open_name}', ...)) before creating "
        "PrometheusMetrics (docs/report.md, opossum's state)"
    )
