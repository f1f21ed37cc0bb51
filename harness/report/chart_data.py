"""The arithmetic behind the charts: rates, per-second counts, rolling quantiles, state runs.

Kept apart from ``charts`` (what each chart plots) so each stays small; numpy over
whole columns, loops only over time windows.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]

QUANTILE_STYLE = {"p50": (0.50, ":"), "p95": (0.95, "--"), "p99": (0.99, "-")}
"""Latency quantiles of the latency chart: name -> (quantile, line style)."""
ROLLING_WINDOW_S = 5.0
MAX_WINDOWS = 600
"""Cap on rolling-window positions, so a 24 h scenario costs no more than a 10 min one."""


def counter_rate(t: Array, v: Array) -> tuple[Array, Array]:
    """Per-second rate between consecutive scrapes; a drop is a restart, counted from zero."""
    if len(t) < 2:
        return np.empty(0), np.empty(0)
    dv = np.diff(v)
    dv = np.where(dv < 0, v[1:], dv)
    dt = np.diff(t)
    rate = np.divide(dv, dt, out=np.zeros_like(dv), where=dt > 0)
    return t[1:], rate


def per_second(t: Array, lo: float, hi: float) -> tuple[Array, Array]:
    """Count of events per 1 s bin over [lo, hi]; returns (counts, bin edges)."""
    edges = np.arange(np.floor(lo), np.ceil(hi) + 1.0, 1.0)
    counts, _ = np.histogram(t, bins=edges)
    return counts.astype(float), edges


def rolling_quantiles(t: Array, values: Array, lo: float, hi: float) -> tuple[Array, Array]:
    """p50/p95/p99 of ``values`` over the trailing ROLLING_WINDOW_S before each position.

    Trailing rather than centred windows, so nothing shows up before its
    cause (a centred window would raise latency ahead of a fault's start).
    The loop runs over window positions (at most MAX_WINDOWS), never over
    samples: each window is a slice of the time-sorted array.
    """
    order = np.argsort(t, kind="stable")
    t, values = t[order], values[order]
    step = max(1.0, (hi - lo) / MAX_WINDOWS)
    ends = np.arange(lo + step, hi + step / 2, step)
    first = np.searchsorted(t, ends - ROLLING_WINDOW_S, side="left")
    last = np.searchsorted(t, ends, side="left")
    qs = [q for q, _ in QUANTILE_STYLE.values()]
    out = np.full((len(ends), len(qs)), np.nan)
    for i, (a, b) in enumerate(zip(first, last, strict=True)):
        if b > a:
            out[i] = np.quantile(values[a:b], qs)
    return ends, out


def state_bars(t: Array, state: Array, until: float) -> dict[int, list[tuple[float, float]]]:
    """Runs of equal state as (start, width) per state code; each lasts until the next change."""
    change = np.flatnonzero(np.diff(state)) + 1
    starts = np.concatenate(([0], change))
    stops = np.concatenate((change, [len(t)]))
    bars: dict[int, list[tuple[float, float]]] = {}
    for a, z in zip(starts, stops, strict=True):
        stop = float(t[z]) if z < len(t) else until
        bars.setdefault(int(state[a]), []).append((float(t[a]), stop - float(t[a])))
    return bars
