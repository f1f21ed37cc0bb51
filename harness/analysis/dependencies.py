"""Per named dependency: what it received and answered, from its own ledger.

Every figure is counted from the dependency's ledger (``dep-NAME.parquet``,
one row per call with its arrival, status and route), over a window of the
measured time line by arrival, so each equals what the ledger holds:

- ``calls``: calls received;
- ``per_request``: calls per request the load sent in the window (amplification:
  with a retry policy, one request may cost several calls);
- ``errors``: calls answered 5xx or not answered (reset, broken bytes, a hang
  the caller gave up on: status 0);
- ``unmatched``: calls no route of a stub matched (a path nobody stubbed);
- ``held_p99_s``: the 99th percentile of how long the dependency held a call
  (its answer time, injected delays included).

A TCP dependency (``tcp:``) keeps no ledger: the proxy in front of it moves
bytes, not calls. Its figures are the proxy's own counters as the run scraped
them (source ``dep-NAME``, ``harness.proxy.server``), grown over the window.
The scraper reads every counter at each edge of the window and of each phase
(``run.scraper.window_edges``), a few milliseconds after it; a counter's value
at an edge is that scrape's (``EDGE_SCRAPE_S``), not a share of the growth
since the scrape before, as ``series.counter_delta`` would give: connections and
bytes are whole numbers, and a phase's figure is what the proxy counted in it.
Without a scrape that close (a report re-read of an older run), the edge's
value is ``counter_delta``'s interpolation, rounded:

- ``connections``: connections accepted; ``connections_open_max``: the most open
  at a scrape;
- ``bytes_upstream`` (client to dependency) and ``bytes_downstream`` (back);
- ``toxics_applied``: toxics that hit a connection (each time the toxics change,
  every open connection is hit anew); ``toxics_in_force_max``: the most toxics
  in force at a scrape;
- ``upstream_errors``: connections whose upstream could not be reached.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, cast

import numpy as np
import pandas as pd

from harness.analysis.series import counter, counter_at, select
from harness.core.selectors import Selector
from harness.stubs.model import UNMATCHED

UNMATCHED_LISTED = 10
"""Unmatched method and path pairs listed per dependency, most called first."""


class DependencyWindow(TypedDict):
    """One dependency's figures over one window (a phase, the fault window)."""

    calls: int
    per_request: float | None
    errors: int
    unmatched: int
    held_p99_s: float | None


class UnmatchedCall(TypedDict):
    method: str
    path: str
    calls: int


class DependencyFigures(TypedDict):
    """One dependency's figures over the measured window, then the fault window's."""

    calls: int
    calls_fault: int
    per_request: float | None
    per_request_fault: float | None
    errors: int
    errors_fault: int
    unmatched: int
    held_p99_s: float | None
    held_p99_s_fault: float | None
    unmatched_calls: list[UnmatchedCall]
    """The method and path of calls no route matched, most called first (at most
    ``UNMATCHED_LISTED``): the first thing to fix in a stub."""


class TcpWindow(TypedDict):
    """One TCP dependency's figures over one window, from its proxy's counters (None: the
    proxy was never scraped)."""

    connections: int | None
    connections_open_max: int | None
    bytes_upstream: int | None
    bytes_downstream: int | None
    toxics_applied: int | None
    toxics_in_force_max: int | None
    upstream_errors: int | None


class TcpFigures(TypedDict):
    """One TCP dependency's figures over the measured window, then the fault window's."""

    connections: int | None
    connections_fault: int | None
    connections_open_max: int | None
    bytes_upstream: int | None
    bytes_downstream: int | None
    bytes_downstream_fault: int | None
    toxics_applied: int | None
    toxics_applied_fault: int | None
    toxics_in_force_max_fault: int | None
    upstream_errors: int | None


_TCP_COUNTERS = {
    "connections": "proxy_connections_total",
    "bytes_upstream": 'proxy_bytes_total{stream="upstream"}',
    "bytes_downstream": 'proxy_bytes_total{stream="downstream"}',
    "toxics_applied": "proxy_toxics_applied_total",
    "upstream_errors": "proxy_upstream_errors_total",
}
"""Each TCP figure that grows, and the proxy's counter it is read from."""
_TCP_GAUGES = {
    "connections_open_max": "proxy_connections_active",
    "toxics_in_force_max": "proxy_toxics_in_force",
}
"""Each TCP figure that is a gauge's most over the window, and the gauge."""


EDGE_SCRAPE_S = 0.05
"""A scrape this close after an edge (or before it) reads the counter at the edge."""


def _at_edge(series: pd.Series, t: float) -> float:
    """A counter's value at an edge: the scrape taken at it, else interpolated."""
    times = series.index.to_numpy(dtype=float)
    near = np.abs(times - t)
    i = int(np.argmin(near))
    if near[i] <= EDGE_SCRAPE_S:
        return float(series.iloc[i])
    return counter_at(series, t)


def _grown(series: pd.Series, start: float, end: float) -> float | None:
    """How much a counter grew over [start, end]: its values at the two edges."""
    if series.empty:
        return None
    return max(0.0, _at_edge(series, end) - _at_edge(series, start))


def _selector(text: str) -> Selector:
    name, _, rest = text.partition("{")
    if not rest:
        return Selector(name)
    key, _, value = rest.rstrip("}").partition("=")
    return Selector(name, {key: value.strip('"')})


def tcp_window(metrics: pd.DataFrame, source: str, start: float, end: float) -> TcpWindow:
    """One TCP dependency's figures over [start, end] (epoch s) from its proxy's scrapes
    (``source``: ``dep-NAME``)."""
    scraped = bool(len(metrics)) and bool((metrics["source"] == source).any())
    window: dict[str, int | None] = {}
    for key, series in _TCP_COUNTERS.items():
        grown = _grown(counter(metrics, source, _selector(series)), start, end)
        # A labelled counter not yet counted is absent from the exposition: 0 if scraped.
        window[key] = round(grown) if grown is not None else (0 if scraped else None)
    for key, series in _TCP_GAUGES.items():
        gauge = select(metrics, source, _selector(series)) if scraped else pd.Series(dtype=float)
        inside = gauge[(gauge.index >= start) & (gauge.index <= end)]
        window[key] = int(inside.max()) if len(inside) else None
    return cast(TcpWindow, {k: window[k] for k in TcpWindow.__annotations__})


def tcp_figures(
    metrics: pd.DataFrame, source: str, whole: tuple[float, float], fault: tuple[float, float]
) -> TcpFigures:
    """One TCP dependency's figures over the measured window and the fault window (epoch s)."""
    w = tcp_window(metrics, source, *whole)
    f = tcp_window(metrics, source, *fault)
    return {
        "connections": w["connections"],
        "connections_fault": f["connections"],
        "connections_open_max": w["connections_open_max"],
        "bytes_upstream": w["bytes_upstream"],
        "bytes_downstream": w["bytes_downstream"],
        "bytes_downstream_fault": f["bytes_downstream"],
        "toxics_applied": w["toxics_applied"],
        "toxics_applied_fault": f["toxics_applied"],
        "toxics_in_force_max_fault": f["toxics_in_force_max"],
        "upstream_errors": w["upstream_errors"],
    }


def dependency_window(
    ledger: pd.DataFrame, requests: pd.DataFrame, start: float, end: float
) -> DependencyWindow:
    """One dependency's figures over [start, end) (epoch seconds, by arrival); ``requests``:
    one row per request the load sent, with its ``intended_start``."""
    calls = ledger[(ledger["arrival"] >= start) & (ledger["arrival"] < end)]
    sent = requests[(requests["intended_start"] >= start) & (requests["intended_start"] < end)]
    status = calls["status"]
    held = calls["duration_s"].dropna().to_numpy(dtype=float)
    return {
        "calls": len(calls),
        "per_request": round(len(calls) / len(sent), 3) if len(sent) else None,
        "errors": int(((status == 0) | (status >= 500)).sum()),
        "unmatched": int((calls["route"] == UNMATCHED).sum()),
        "held_p99_s": round(float(np.percentile(held, 99)), 4) if held.size else None,
    }


def dependency_figures(
    ledger: pd.DataFrame,
    requests: pd.DataFrame,
    whole: tuple[float, float],
    fault: tuple[float, float],
) -> DependencyFigures:
    """One dependency's figures over the measured window and the fault window (epoch s)."""
    w = dependency_window(ledger, requests, *whole)
    f = dependency_window(ledger, requests, *fault)
    missed = ledger[ledger["route"] == UNMATCHED]
    listed = (
        missed.groupby(["method", "path"]).size().sort_values(ascending=False, kind="stable")
        if not missed.empty
        else pd.Series(dtype="int64")
    )
    return {
        "calls": w["calls"],
        "calls_fault": f["calls"],
        "per_request": w["per_request"],
        "per_request_fault": f["per_request"],
        "errors": w["errors"],
        "errors_fault": f["errors"],
        "unmatched": w["unmatched"],
        "held_p99_s": w["held_p99_s"],
        "held_p99_s_fault": f["held_p99_s"],
        "unmatched_calls": [
            {"method": str(at[0]), "path": str(at[1]), "calls": int(n)}
            for at, n in cast("pd.Series[int]", listed.head(UNMATCHED_LISTED)).items()
            if isinstance(at, tuple)
        ],
    }


def unmatched_warning(
    name: str, figures: Mapping[str, DependencyFigures | TcpFigures]
) -> str | None:
    """What a newcomer must see first: the service called paths no route of a stub answers."""
    dep = figures.get(name)
    calls: list[UnmatchedCall] = cast(Mapping[str, Any], dep or {}).get("unmatched_calls", [])
    if not calls:  # none, or a TCP dependency (no calls: bytes)
        return None
    total = sum(c["calls"] for c in calls)
    shown = ", ".join(f"{c['method']} {c['path']} ({c['calls']})" for c in calls[:3])
    return (
        f"dependency {name!r}: {total} call(s) matched no route and were answered 404 as "
        f"WireMock answers them: {shown}; add a route for them (dependencies.{name}.routes)"
    )
