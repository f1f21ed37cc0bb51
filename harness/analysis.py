"""Figures of a run, computed from raw samples and raw scrapes (never from averaged stats).

Latency is end minus *intended* start, so a request the generator had to send
late still counts its wait. Only requests intended inside the measured window
(after warmup) count. Gauges are summarised over the fault window; counters
are differenced between scrapes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from harness.metrics import BREAKER_STATES, PRESETS, Selector, canonical, select
from harness.results import RunResult
from harness.scenario import Scenario

_EPS_S = 1e-5
QUANTILES = {"p50": 0.50, "p95": 0.95, "p99": 0.99}
PG_RECEIVED = Selector("pg_calls_total")
"""The gateway's own count of calls received: the ground truth for amplification."""


def _round(x: float | None, digits: int = 4) -> float | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return round(float(x), digits)


def endpoint_stats(
    samples: pd.DataFrame, t0: float, duration_s: float, offered_rps: float
) -> dict[str, Any]:
    """Requests, rates, success and latency percentiles of one endpoint's measured samples."""
    # Intended starts are stored to the microsecond; the tolerance keeps the first one in.
    lo, hi = t0 - _EPS_S, t0 + duration_s - _EPS_S
    window = samples[(samples["intended_start"] >= lo) & (samples["intended_start"] < hi)]
    n = len(window)
    latency = (window["end"] - window["intended_start"]).dropna()
    service = (window["end"] - window["actual_start"]).dropna()
    ok = window["status"].between(200, 399)
    errors = window.loc[~ok, "outcome"].where(
        window.loc[~ok, "outcome"] != "", window.loc[~ok, "error"]
    )
    lateness = window["actual_start"] - window["intended_start"]
    return {
        "requests": n,
        "offered_rps": offered_rps,
        "achieved_rps": _round(n / duration_s),
        "success_pct": _round(100.0 * ok.mean() if n else None, 2),
        "errors": {str(k): int(v) for k, v in errors.value_counts().sort_index().items()},
        "latency_s": _percentiles(latency),
        "service_time_s": _percentiles(service),
        "max_lateness_s": _round(lateness.max() if n else None),
        "unfinished": int(window["end"].isna().sum()),
    }


def _percentiles(values: pd.Series) -> dict[str, float | None]:
    if values.empty:
        return {"p50": None, "p95": None, "p99": None, "max": None, "mean": None}
    arr = values.to_numpy(dtype=float)
    out: dict[str, float | None] = {
        k: _round(float(np.quantile(arr, q))) for k, q in QUANTILES.items()
    }
    out["max"] = _round(float(arr.max()))
    out["mean"] = _round(float(arr.mean()))
    return out


def counter_delta(series: pd.Series, start: float, end: float) -> float | None:
    """Increase of a counter between ``start`` and ``end`` (last scrape at or before each)."""
    if series.empty:
        return None
    at_end = series[series.index <= end]
    if at_end.empty:
        return None
    before = series[series.index <= start]
    base = float(before.iloc[-1]) if not before.empty else 0.0
    return float(at_end.iloc[-1]) - base


def gauge_summary(series: pd.Series, start: float, end: float) -> dict[str, float | None]:
    window = series[(series.index >= start) & (series.index <= end)]
    if window.empty:
        return {"max": None, "mean": None, "p50": None}
    return {
        "max": _round(window.max(), 2),
        "mean": _round(window.mean(), 2),
        "p50": _round(window.median(), 2),
    }


def build_figures(
    scenario: Scenario, samples: pd.DataFrame, metrics: pd.DataFrame, info: dict[str, Any]
) -> dict[str, Any]:
    """Every figure of one build: per endpoint, workers, breaker, gateway calls."""
    t0 = float(info.get("t0", samples["intended_start"].min() if len(samples) else 0.0))
    duration = scenario.duration
    endpoints = {
        name: endpoint_stats(samples[samples["endpoint"] == name], t0, duration, ep.rate)
        for name, ep in scenario.traffic.items()
    }
    preset = PRESETS[info.get("preset", "shop")]
    canon = (
        canonical(metrics, preset)
        if len(metrics)
        else pd.DataFrame({"t": [], "series": [], "value": []})
    )

    def series(name: str) -> pd.Series:
        rows = canon[canon["series"] == name]
        return pd.Series(rows["value"].to_numpy(), index=rows["t"].to_numpy(), dtype=float)

    fault = scenario.fault_window()
    fs, fe = (t0 + fault[0], t0 + fault[1]) if fault else (t0, t0 + duration)
    fault_s = max(1e-9, fe - fs)
    end = math.inf
    busy = gauge_summary(series("busy_workers"), fs, fe)
    max_workers = series("max_workers")
    blocked = series("blocked_calls")
    blocked_fault = counter_delta(blocked, fs, fe)
    gateway_calls = [n for n, ep in scenario.traffic.items() if ep.calls_gateway]
    payments = sum(endpoints[n]["requests"] for n in gateway_calls)
    received = select(metrics, "pg", PG_RECEIVED) if len(metrics) else pd.Series(dtype=float)
    pg_calls = counter_delta(received, t0, end)
    pg_fault = counter_delta(received, fs, fe)
    payments_fault = sum(
        int(((samples["endpoint"] == n) & samples["intended_start"].between(fs, fe)).sum())
        for n in gateway_calls
    )
    state = series("breaker_state")
    state_fault = state[(state.index >= fs) & (state.index <= fe)]
    return {
        "t0": t0,
        "endpoints": endpoints,
        "workers": {
            "max_workers": _round(max_workers.max(), 0) if not max_workers.empty else None,
            "busy_max_fault": busy["max"],
            "busy_mean_fault": busy["mean"],
            "busy_p50_fault": busy["p50"],
        },
        "breaker": {
            "present": not state.empty,
            "blocked_total": _round(counter_delta(blocked, t0, end), 0) if not state.empty else 0,
            "blocked_fault": _round(blocked_fault, 0) if not state.empty else 0,
            "blocked_per_s_fault": _round((blocked_fault or 0.0) / fault_s, 2),
            "open_share_fault": _round(
                float((state_fault == BREAKER_STATES["open"]).mean()) if len(state_fault) else None,
                3,
            ),
        },
        "pg": {
            "calls": _round(pg_calls, 0),
            "calls_fault": _round(pg_fault, 0),
            "target_calls": _round(counter_delta(series("pg_calls"), t0, end), 0),
            "retries": _round(counter_delta(series("retries"), t0, end), 0),
            "payments": payments,
            "amplification": _round(pg_calls / payments, 3)
            if pg_calls is not None and payments
            else None,
            "amplification_fault": _round(pg_fault / payments_fault, 3)
            if pg_fault is not None and payments_fault
            else None,
        },
    }


def flatten(figures: dict[str, Any]) -> dict[str, float | None]:
    """The comparable numbers of a build as dotted keys (``products.latency_s.p95`` ...)."""
    flat: dict[str, float | None] = {}
    for ep, stats in figures["endpoints"].items():
        for q in ("p50", "p95", "p99", "max"):
            flat[f"{ep}.latency_s.{q}"] = stats["latency_s"][q]
        flat[f"{ep}.success_pct"] = stats["success_pct"]
        flat[f"{ep}.achieved_rps"] = stats["achieved_rps"]
    for section in ("workers", "breaker", "pg"):
        for key, value in figures[section].items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                flat[f"{section}.{key}"] = float(value)
    return flat


def change_pct(baseline: float | None, value: float | None) -> float | None:
    if baseline is None or value is None or baseline == 0:
        return None
    return round(100.0 * (value - baseline) / baseline, 1)


def compare(figures: dict[str, dict[str, Any]], baseline: str) -> dict[str, Any]:
    """Every figure of every other build against the baseline build, with % change."""
    base = flatten(figures[baseline])
    out: dict[str, Any] = {}
    for name, fig in figures.items():
        if name == baseline:
            continue
        flat = flatten(fig)
        out[name] = {
            key: {
                "baseline": base.get(key),
                "value": flat.get(key),
                "change_pct": change_pct(base.get(key), flat.get(key)),
            }
            for key in base
        }
    return out


def analyse(run: RunResult, scenario: Scenario) -> dict[str, Any]:
    """The whole report as a dict (the content of ``report.json``)."""
    figures = {
        name: build_figures(scenario, b.samples, b.metrics, b.info)
        for name, b in run.builds.items()
        if len(b.samples)
    }
    baseline = next(iter(figures), None)
    return {
        "schema": "harness.report/1",
        "scenario": scenario.name,
        "run_id": run.manifest.get("run_id"),
        "status": run.manifest.get("status"),
        "seed": scenario.seed,
        "duration_s": scenario.duration,
        "warmup_s": scenario.warmup,
        "fault_window_s": list(scenario.fault_window() or ()),
        "phases": [
            {"name": p.name, "start_s": p.start, "end_s": p.end, "fault": p.fault.type}
            for p in scenario.pg.phases
        ],
        "endpoints": {
            name: {
                "method": ep.method,
                "path": ep.path,
                "rate": ep.rate,
                "calls_gateway": ep.calls_gateway,
            }
            for name, ep in scenario.traffic.items()
        },
        "baseline": baseline,
        "builds": {
            name: {
                "profile": scenario.builds[name].profile,
                "status": run.builds[name].info.get("status"),
                **fig,
            }
            for name, fig in figures.items()
        },
        "comparison": compare(figures, baseline) if baseline else {},
    }
