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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict, cast

import numpy as np
import pandas as pd

UNMATCHED = "unmatched"
"""The ledger's route of a call no stub matched (``harness.gateway.dependency``)."""
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


def unmatched_warning(name: str, figures: Mapping[str, DependencyFigures]) -> str | None:
    """What a newcomer must see first: the service called paths no route of a stub answers."""
    dep = figures.get(name)
    if dep is None or not dep["unmatched_calls"]:
        return None
    total = sum(c["calls"] for c in dep["unmatched_calls"])
    shown = ", ".join(
        f"{c['method']} {c['path']} ({c['calls']})" for c in dep["unmatched_calls"][:3]
    )
    return (
        f"dependency {name!r}: {total} call(s) matched no route and were answered 404 as "
        f"WireMock answers them: {shown}; add a route for them (dependencies.{name}.routes)"
    )
