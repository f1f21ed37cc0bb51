"""Every statistic is handled: a reducer for each one read from a series, the scrape-gap
rule from its record (``core.canonical.STATISTICS``), and a figure of the catalogue for each."""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis.cuts import REDUCERS, Windows, cut, replica_reader
from harness.analysis.series import BREAKER_STATES
from harness.analysis.validity import gap_blind
from harness.core.canonical import STATISTICS, STATISTICS_BY_NAME
from harness.core.catalogue import FIGURES, SERIES

TIMES = np.arange(0.0, 31.0)
WINDOWS = Windows(whole=(0.0, 30.0), fault=(10.0, 20.0), fault_start=10.0)
"""A 30 s measured window with a fault from 10 s to 20 s, scraped every second."""


def _series() -> dict[str, pd.Series]:
    """A reading of every canonical series each second: gauges that vary, counters that
    grow, a breaker open from 12 s to 18 s."""
    out = {}
    for series in SERIES:
        if series.kind == "gauge":
            values = 5.0 + (TIMES % 3)
        elif series.kind == "counter":
            values = 2.0 * TIMES
        else:
            opened = (TIMES >= 12) & (TIMES < 18)
            values = np.where(opened, BREAKER_STATES["open"], BREAKER_STATES["closed"])
        out[series.name] = pd.Series(values.astype(float), index=TIMES)
    return out


def _read(tree: dict[str, object], key: str) -> object:
    for part in key.split("."):
        assert isinstance(tree, dict), key
        tree = tree[part]
    return tree


def test_every_series_statistic_has_a_reducer_and_only_those() -> None:
    from_series = {s.name for s in STATISTICS if s.from_series}
    assert set(REDUCERS) == from_series
    for figure in FIGURES:
        if figure.series() is not None:
            assert figure.statistic.from_series, (figure.key, figure.stat)


def test_each_statistic_is_declared_once_and_read_by_a_figure() -> None:
    names = [s.name for s in STATISTICS]
    assert len(names) == len(set(names)) == len(STATISTICS_BY_NAME)
    assert all(s.what for s in STATISTICS)
    assert {f.stat for f in FIGURES} == set(names)


def test_every_series_figure_is_read_and_a_gap_blanks_those_its_statistic_says() -> None:
    """Each figure read from a series has a value; across a scrape gap it is None exactly
    when its statistic is ``gap_blind`` (the rule ``analysis.validity`` applies)."""
    series = _series()
    whole = cut(replica_reader(series), "build", WINDOWS)
    gapped = cut(replica_reader(series, ((14.0, 16.0),)), "build", WINDOWS)
    figures = [f for f in FIGURES if f.series() is not None]
    assert {f.stat for f in figures} == set(REDUCERS)
    for figure in figures:
        assert _read(whole, figure.key) is not None, figure.key
        blanked = _read(gapped, figure.key) is None
        assert blanked == figure.statistic.gap_blind == gap_blind(figure), figure.key
    assert not any(gap_blind(f) for f in FIGURES if f.series() is None)
