"""Figures read from canonical series, computed as the catalogue declares them.

Each figure of ``harness.core.catalogue.FIGURES`` whose source is a canonical
series is one statistic of that series over a window (``core.canonical.STATISTICS``,
those marked ``from_series``), read by its reducer here (``REDUCERS``): a gauge's
``max``, ``mean`` or ``p50``, its ``peak``, a counter's ``count`` or ``per_s``
(``series.counter_delta``), the breaker's ``open_pct``, ``opens``, ``opens_from_closed`` or
``time_to_open``.
``cut`` computes them for a build, a phase, a replica or a replica's phase, and places
each at its report key; a new series' figures need no code here, a new statistic its
reducer. A series the catalogue marks optional (a DB pool) and the build never exposed
has no figures at all, rather than figures that read None.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from harness.analysis.combine import round_figure as _round
from harness.analysis.series import BREAKER_STATES, counter_delta
from harness.analysis.validity import gap_blind, overlaps
from harness.core.catalogue import FIGURES, SERIES, SERIES_BY_NAME, Figure

Where = Literal["build", "phase", "replica", "replica_phase"]
"""Whose figures: a build's own, one phase of it, one replica's, one replica's phase."""
Tree = dict[str, Any]

EMPTY = pd.Series(dtype=float)


@dataclass(frozen=True)
class Reader:
    """The canonical series of a build or of one replica, and how its counters are counted."""

    series: Mapping[str, pd.Series]
    states: list[pd.Series]
    """The breaker's state codes: one series per breaker (per replica)."""
    count: Callable[[str, float, float], float | None]
    """How much a counter grew over [start, end] (a replicated build's: its replicas' sum)."""
    gaps: tuple[tuple[float, float], ...] = ()
    """Scrape gaps (``analysis.validity``): a figure read from the readings over a window
    one falls in is None (not measured), not a figure of the scrapes around the hole."""

    def get(self, name: str) -> pd.Series:
        return self.series.get(name, EMPTY)


@dataclass(frozen=True)
class Windows:
    """Absolute times of the measured window and the fault window; ``fault_start`` is None
    when the scenario has no fault (no time to open)."""

    whole: tuple[float, float]
    fault: tuple[float, float]
    fault_start: float | None


def replica_reader(
    series: Mapping[str, pd.Series], gaps: tuple[tuple[float, float], ...] = ()
) -> Reader:
    """One replica's series: its own breaker, counts rounded to whole ones as reported."""
    return Reader(
        series,
        [series.get("breaker_state", EMPTY)],
        lambda n, a, b: count(series, n, a, b),
        gaps,
    )


def count(series: Mapping[str, pd.Series], name: str, start: float, end: float) -> float | None:
    """One replica's count of counter ``name`` over [start, end], to a whole count."""
    return _round(counter_delta(series.get(name, EMPTY), start, end), 0)


def _figures(where: Where) -> list[Figure]:
    out = []
    for figure in FIGURES:
        if figure.series() is None:
            continue
        if where in ("phase", "replica_phase") and figure.phase_key is None:
            continue
        if where in ("replica", "replica_phase") and figure.replica_key is None:
            continue
        out.append(figure)
    return out


def _key(figure: Figure, where: Where) -> str:
    if where == "build":
        return figure.key
    if where == "replica":
        return figure.replica_key or figure.key
    return figure.phase_key or figure.key


def cut(reader: Reader, where: Where, windows: Windows) -> Tree:
    """The series figures of ``where`` as a tree of report sections (``{"workers": {...}}``).

    A phase's are over ``windows.whole`` (give the phase's as both windows).
    """
    tree: Tree = {}
    for figure in _figures(where):
        series = SERIES_BY_NAME[figure.source]
        if series.optional and figure.source not in reader.series:
            continue  # never exposed: no figure (not None)
        window = windows.fault if figure.window == "fault" else windows.whole
        if where in ("phase", "replica_phase"):
            window = windows.whole
        blind = gap_blind(figure) and overlaps(list(reader.gaps), *window) is not None
        found = None if blind else value(figure, reader, window, windows.fault_start)
        put(tree, _key(figure, where), found)
    return tree


def put(tree: Tree, key: str, item: Any) -> None:
    """Set ``item`` at the dotted ``key`` of ``tree``, making the sections on the way."""
    *path, last = key.split(".")
    for part in path:
        tree = tree.setdefault(part, {})
    tree[last] = item


def value(
    figure: Figure, reader: Reader, window: tuple[float, float], fault_start: float | None
) -> float | None:
    """One figure's statistic of its series over ``window`` (``Figure.stat``)."""
    reducer = REDUCERS.get(figure.stat)
    if reducer is None:
        raise ValueError(f"the catalogue's figure {figure.key!r}: no reducer for {figure.stat!r}")
    return reducer(reader, figure.source, *window, fault_start)


Reducer = Callable[[Reader, str, float, float, float | None], float | None]
"""A statistic of one canonical series: (its reader, the series' name, the window's start
and end, the first fault's start or None) -> the figure, None when not measured."""


def _gauge(how: Callable[[pd.Series], float]) -> Reducer:
    """A statistic of a gauge's readings in [start, end], to 2 decimals (None: no reading)."""

    def reduce(
        reader: Reader, name: str, start: float, end: float, _: float | None
    ) -> float | None:
        series = reader.get(name)
        readings = series[(series.index >= start) & (series.index <= end)]
        digits = SERIES_BY_NAME[name].digits if name in SERIES_BY_NAME else 2
        return None if readings.empty else _round(how(readings), digits)

    return reduce


def _peak(reader: Reader, name: str, start: float, end: float, _: float | None) -> float | None:
    series = reader.get(name)
    return _round(series.max(), 0) if not series.empty else None


def _count(reader: Reader, name: str, start: float, end: float, _: float | None) -> float | None:
    return _round(reader.count(name, start, end), 0)


def _per_s(reader: Reader, name: str, start: float, end: float, _: float | None) -> float | None:
    counted = reader.count(name, start, end)
    return None if counted is None else _round(counted / max(end - start, 1e-9), 2)


REDUCERS: dict[str, Reducer] = {
    "max": _gauge(lambda readings: readings.max()),
    "mean": _gauge(lambda readings: readings.mean()),
    "p50": _gauge(lambda readings: readings.median()),
    "peak": _peak,
    "count": _count,
    "per_s": _per_s,
    "open_pct": lambda reader, _, start, end, __: open_pct(reader.states, start, end),
    "opens": lambda reader, _, start, end, __: count_opens(reader.states, start, end),
    "opens_from_closed": lambda reader, _, start, end, __: count_opens_from_closed(
        reader.states, start, end
    ),
    "time_to_open": lambda reader, _, start, end, fault_start: (
        None if fault_start is None else time_to_open(reader.states, fault_start)
    ),
}
"""The reducer of each statistic read from a canonical series (``Statistic.from_series``),
by its name; ``tests/analysis/test_statistics.py`` checks each such statistic has one."""


def ordered(section: Mapping[str, Any], model: type) -> Tree:
    """``section``'s keys in the order its TypedDict declares them (report.json's order)."""
    keys = list(model.__annotations__)
    return {
        k: section[k]
        for k in sorted(section, key=lambda k: keys.index(k) if k in keys else len(keys))
    }


NOT_MEASURED_FIGURES = {s.name: tuple(f.key for f in FIGURES if f.source == s.name) for s in SERIES}
"""The figures read from each canonical series (their phase figures follow them)."""


def missing_figures(missing: Mapping[str, str]) -> dict[str, str]:
    """Figure -> why it is None, for the series that never appeared (``missing``: series ->
    why). An optional series' figures are absent, not None: not listed."""
    return {
        figure: f"{series}: {reason}"
        for series, reason in missing.items()
        if series in SERIES_BY_NAME and not SERIES_BY_NAME[series].optional
        for figure in NOT_MEASURED_FIGURES[series]
    }


def open_pct(states: list[pd.Series], start: float, end: float) -> float | None:
    """% of scrapes in [start, end] with the breaker open; several breakers: their mean."""
    shares = []
    for state in states:
        in_window = state[(state.index >= start) & (state.index <= end)]
        if len(in_window):
            shares.append(float((in_window == BREAKER_STATES["open"]).mean()))
    return _round(100.0 * float(np.mean(shares)), 1) if shares else None


_OPEN = [BREAKER_STATES[name] for name in ("open", "forced_open")]
_AWAY = [*_OPEN, BREAKER_STATES["half_open"]]


def count_opens(states: list[pd.Series], start: float, end: float) -> float | None:
    """Times the breaker went to open among the scrapes in [start, end), half-open re-opens
    included, summed over ``states``.

    A scrape counts when it reads open (or forced open) and the scrape before it (inside
    the window or not) did not: from closed, and from half-open, a failed trial sending
    it back. A scrape reading half-open after one that read closed counts too (the open
    itself fell between them); the breaker starts closed. Read from the scrapes: an open
    shorter than the scrape interval, or a trial failed and retried between two scrapes
    that both read half-open, is not seen. Half-open windows, so the phases' counts add
    up to the whole window's. ``count_opens_from_closed`` counts only the opens from closed.
    """
    return _scrapes_marked(states, start, end, _to_open)


def count_opens_from_closed(states: list[pd.Series], start: float, end: float) -> float | None:
    """Times the breaker left closed among the scrapes in [start, end), summed over ``states``:
    seed 004's flaps.

    A scrape counts when it reads open (or half-open, or forced open) and the scrape
    before it read closed; the breaker starts closed, so a first scrape away from closed
    counts too. A failed half-open trial (half-open, then open again) is not counted: with
    several probes the half-open spell is long enough for a scrape to land in it, and
    counting its return to open would make a breaker that probes carefully look like the
    one that flaps, closing on a lucky trial and opening again (``count_opens`` counts it).
    """
    return _scrapes_marked(states, start, end, _left_closed)


def _to_open(state: pd.Series) -> np.ndarray:
    """Scrapes that read the breaker gone to open since the scrape before (``count_opens``)."""
    is_open = state.isin(_OPEN).to_numpy()
    half = (state == BREAKER_STATES["half_open"]).to_numpy()
    was_open = np.concatenate(([False], is_open[:-1]))
    was_half = np.concatenate(([False], half[:-1]))
    return (is_open & ~was_open) | (half & ~was_open & ~was_half)


def _left_closed(state: pd.Series) -> np.ndarray:
    """Scrapes that read the breaker away from closed after one that read closed."""
    away = state.isin(_AWAY).to_numpy()
    return away & ~np.concatenate(([False], away[:-1]))


def _scrapes_marked(
    states: list[pd.Series], start: float, end: float, counted: Callable[[pd.Series], np.ndarray]
) -> float | None:
    """How many scrapes in [start, end) ``counted`` marks, summed over ``states`` (each
    sorted by time first); None when no scrape of any falls in the window."""
    total, measured = 0, False
    for state in states:
        if state.empty:
            continue
        state = state.sort_index()
        t = state.index.to_numpy(dtype=float)
        inside = (t >= start) & (t < end)
        measured = measured or bool(inside.any())
        total += int((counted(state) & inside).sum())
    return float(total) if measured else None


def time_to_open(states: list[pd.Series], fault_start: float) -> float | None:
    """Seconds from ``fault_start`` to the first scrape with a breaker open (the first of
    ``states`` to open)."""
    firsts = []
    for state in states:
        opened = state[(state.index >= fault_start) & (state == BREAKER_STATES["open"])]
        if len(opened):
            firsts.append(float(opened.index[0]))
    return _round(min(firsts) - fault_start, 2) if firsts else None
