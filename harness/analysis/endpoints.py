"""Per-endpoint figures: request counts, rates, success and latency percentiles.

Latency is end minus *intended* start, so a request the generator had to send
late still counts its wait. Only requests intended inside the measured window
(after warmup) count. A request a client retried (``traffic.<ep>.retry``) is
one request here (``results.attempts.requests_of``): from its first attempt's
intended start to its final attempt's end, with the final attempt's outcome;
``attempts``, ``retried_pct``, ``admitted_rps`` and ``retried_rps`` count its
attempts.

A request the generator dropped (``max-in-flight``: the endpoint's cap of open
requests was full when it was due) was never sent: it counts in ``dropped``
and in nothing else, as k6 counts a dropped iteration apart from its requests.

What each answer was is its sample's class (``harness.analysis.answers``, from the
endpoint's ``outcomes``): ``success_pct`` is the share of requests served (2xx/3xx, not a
fallback or degraded answer); service kept (seed 004), ``kept_pct``, the share served 2xx,
fresh or from a cache; ``cached_pct`` the share its outcomes class as ``cached``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis.answers import cached as cached_answers
from harness.analysis.answers import kept, served
from harness.analysis.combine import round_figure as _round
from harness.analysis.model import EndpointFigures, EndpointInfo, Percentiles
from harness.load.plan import DROPPED
from harness.results.attempts import ATTEMPTS
from harness.scenario.schema import Scenario

EPS_S = 1e-5
"""Intended starts are stored to the microsecond: the tolerance of a window's edges."""
QUANTILES = {"p50": 0.50, "p95": 0.95, "p99": 0.99}


def measured(samples: pd.DataFrame, t0: float, duration_s: float) -> pd.DataFrame:
    """Samples intended inside the measured window [t0, t0 + duration): what figures count."""
    # Intended starts are stored to the microsecond; the tolerance keeps the first one in.
    start = samples["intended_start"]
    return samples[(start >= t0 - EPS_S) & (start < t0 + duration_s - EPS_S)]


def endpoint_stats(
    samples: pd.DataFrame, start: float, end: float, offered_rps: float, retrying: bool = False
) -> EndpointFigures:
    """Requests, rates, success and latency percentiles of samples intended in [start, end);
    with ``retrying`` (the endpoint has ``retry:``) its attempts too (``retry_stats``)."""
    window = measured(samples, start, end - start)
    not_sent = window["error"] == DROPPED
    dropped = int(not_sent.sum())
    if dropped:
        window = window[~not_sent]
    n = len(window)
    latency = (window["end"] - window["intended_start"]).dropna()
    service = (window["end"] - window["actual_start"]).dropna()
    ok = served(window)
    answered = kept(window)
    cached = cached_answers(window)
    failed = window.loc[~window["status"].between(200, 399)]
    errors = failed["outcome"].where(failed["outcome"] != "", failed["error"])
    lateness = window["actual_start"] - window["intended_start"]
    span = max(end - start, 1e-9)
    figures: EndpointFigures = {
        "requests": n,
        "offered_rps": offered_rps,
        "achieved_rps": _round(n / span),
        "success_pct": _round(100.0 * ok.mean() if n else None, 2),
        "kept_pct": _round(100.0 * answered.mean() if n else None, 2),
        "cached_pct": _round(100.0 * cached.mean() if n else None, 2),
        "errors": {str(k): int(v) for k, v in errors.value_counts().sort_index().items()},
        "latency_s": _percentiles(latency),
        "service_time_s": _percentiles(service),
        "max_lateness_s": _round(lateness.max() if n else None),
        "unfinished": int(window["end"].isna().sum()),
        "dropped": dropped,
    }
    if retrying:
        per, pct, admitted, again = retry_stats(window, span)
        figures["attempts"], figures["retried_pct"] = per, pct
        figures["admitted_rps"], figures["retried_rps"] = admitted, again
    return figures


def retry_stats(
    requests: pd.DataFrame, span_s: float
) -> tuple[float | None, float | None, float | None, float | None]:
    """A retrying endpoint's attempts per request (mean), % of requests retried, and attempts
    and retries sent per second, of the requests (``requests_of``) intended in the window."""
    n = len(requests)
    attempts = requests[ATTEMPTS] if ATTEMPTS in requests.columns else None
    sent = float(attempts.sum()) if attempts is not None else float(n)
    again = float((attempts > 1).sum()) if attempts is not None else 0.0
    return (
        _round(sent / n if n else None, 3),
        _round(100.0 * again / n if n else None, 2),
        _round(sent / span_s),
        _round((sent - n) / span_s),
    )


def _percentiles(values: pd.Series) -> Percentiles:
    if values.empty:
        return {"p50": None, "p95": None, "p99": None, "max": None, "mean": None}
    arr = values.to_numpy(dtype=float)
    p50, p95, p99 = (_round(float(np.quantile(arr, q))) for q in QUANTILES.values())
    return {
        "p50": p50,
        "p95": p95,
        "p99": p99,
        "max": _round(float(arr.max())),
        "mean": _round(float(arr.mean())),
    }


def endpoint_info(scenario: Scenario, name: str) -> EndpointInfo:
    """What the scenario asked of an endpoint; ``shape`` only when it is more than a rate."""
    ep = scenario.traffic[name]
    info: EndpointInfo = {
        # A mix of requests: each of its methods and paths.
        "method": "/".join(dict.fromkeys(v.method or ep.method for v in ep.requests))
        if ep.requests
        else ep.method,
        "path": " | ".join(v.path for v in ep.requests) if ep.requests else ep.path or "",
        "rate": ep.rate
        if ep.rate is not None
        else _round(scenario.offered_rps(name, 0.0, scenario.duration)) or 0.0,
        "calls_gateway": ep.calls_gateway,
    }
    if ep.stages is not None or ep.arrivals != "uniform":
        info["shape"] = ep.shape()
    if ep.retry is not None:
        info["retry"] = ep.retry.describe()
    return info
