"""Breaker opens (seed 004's flaps): the rule on hand-made state series, every edge of it.

The same figure on a real run: ``test_integration_opens``.
"""

from __future__ import annotations

import pandas as pd

from harness.analysis.cuts import count_opens
from harness.analysis.presets import BREAKER_STATES

CLOSED, OPEN, HALF = BREAKER_STATES["closed"], BREAKER_STATES["open"], BREAKER_STATES["half_open"]


def _states(*codes: int, start: float = 100.0) -> pd.Series:
    return pd.Series([float(c) for c in codes], index=[start + i for i in range(len(codes))])


def test_opens_count_the_times_the_breaker_left_closed_not_open_scrapes() -> None:
    # closed, open, open, half-open, open (a failed trial: not a new open), open, closed, open:
    # two opens, five open scrapes.
    states = _states(CLOSED, OPEN, OPEN, HALF, OPEN, OPEN, CLOSED, OPEN)
    assert count_opens([states], 100.0, 108.0) == 2.0
    assert count_opens([states], 101.5, 108.0) == 1.0  # the open at 101 is before the window
    # The scrape before the window counts as "before": open at 101 then open at 102 is none.
    assert count_opens([states], 102.0, 104.0) == 0.0
    assert count_opens([states], 104.0, 105.0) == 0.0  # half-open -> open: the same open
    assert count_opens([states], 107.0, 108.0) == 1.0  # closed -> open


def test_a_failed_half_open_trial_is_not_a_new_open_however_often_it_is_seen() -> None:
    """Seed 004: 5 probes needing 3 keep the breaker half-open long enough for scrapes to
    land in every failed trial; 1 probe is half-open too briefly to be seen. Counting each
    return to open would rank the careful breaker as the flapping one."""
    careful = _states(CLOSED, OPEN, HALF, OPEN, HALF, OPEN, HALF, OPEN, HALF, CLOSED)
    flapping = _states(CLOSED, OPEN, CLOSED, OPEN, CLOSED, OPEN, CLOSED, OPEN, CLOSED, CLOSED)
    assert count_opens([careful], 100.0, 110.0) == 1.0
    assert count_opens([flapping], 100.0, 110.0) == 4.0
    # Leaving closed for half-open (the open itself fell between two scrapes) counts too.
    assert count_opens([_states(CLOSED, HALF, CLOSED)], 100.0, 103.0) == 1.0


def test_opens_of_windows_add_up_to_the_whole() -> None:
    states = _states(CLOSED, OPEN, HALF, OPEN, HALF, CLOSED, OPEN, OPEN, HALF, CLOSED, HALF)
    edges = [100.0, 102.0, 103.0, 106.0, 111.0]
    parts = [count_opens([states], a, b) for a, b in zip(edges, edges[1:], strict=False)]
    assert sum(p or 0.0 for p in parts) == count_opens([states], 100.0, 111.0) == 3.0


def test_a_breaker_seen_open_first_counts_once_and_none_without_scrapes() -> None:
    assert count_opens([_states(OPEN, OPEN, CLOSED)], 100.0, 103.0) == 1.0  # it starts closed
    assert count_opens([_states(CLOSED, CLOSED)], 200.0, 300.0) is None  # no scrape in the window
    assert count_opens([pd.Series(dtype=float)], 0.0, 1e12) is None  # no breaker at all
    assert (
        count_opens([_states(CLOSED, CLOSED, CLOSED)], 100.0, 103.0) == 0.0
    )  # measured: never opened


def test_opens_of_several_replicas_are_summed_and_unordered_scrapes_sorted() -> None:
    a = _states(CLOSED, OPEN, HALF, OPEN)
    b = _states(OPEN, CLOSED, CLOSED, CLOSED, start=100.5)
    shuffled = a.iloc[[3, 0, 2, 1]]
    assert count_opens([shuffled, b], 100.0, 104.0) == 2.0
    assert count_opens([a, pd.Series(dtype=float)], 100.0, 104.0) == 1.0
