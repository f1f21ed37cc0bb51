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

from harness.analysis.series import BREAKER_STATES, PRESETS, Selector, canonical, select
from harness.results.model import RunResult
from harness.scenario.schema import Scenario

_EPS_S = 1e-5
QUANTILES = {"p50": 0.50, "p95": 0.95, "p99": 0.99}
PG_RECEIVED = Selector("pg_calls_received_total")
"""The gateway's own count of calls received: the ground truth for amplification."""


def _round(x: float | None, digits: int = 4) -> float | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return round(float(x), digits)


def measured(samples: pd.DataFrame, t0: float, duration_s: float) -> pd.DataFrame:
    """Samples intended inside the measured window [t0, t0 + duration): what figures count."""
    # Intended starts are stored to the microsecond; the tolerance keeps the first one in.
    start = samples["intended_start"]
    return samples[(start >= t0 - _EPS_S) & (start < t0 + duration_s - _EPS_S)]


def endpoint_stats(
    samples: pd.DataFrame, start: float, end: float, offered_rps: float
) -> dict[str, Any]:
    """Requests, rates, success and latency percentiles of samples intended in [start, end)."""
    window = measured(samples, start, end - start)
    n = len(window)
    latency = (window["end"] - window["intended_start"]).dropna()
    service = (window["end"] - window["actual_start"]).dropna()
    ok = window["status"].between(200, 399)
    failed = window.loc[~ok]
    errors = failed["outcome"].where(failed["outcome"] != "", failed["error"])
    lateness = window["actual_start"] - window["intended_start"]
    return {
        "requests": n,
        "offered_rps": offered_rps,
        "achieved_rps": _round(n / max(end - start, 1e-9)),
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


class BuildSeries:
    """What one build measured, indexed once so any time window can be cut cheaply."""

    def __init__(
        self, scenario: Scenario, samples: pd.DataFrame, metrics: pd.DataFrame, info: dict[str, Any]
    ) -> None:
        self.scenario = scenario
        first = float(samples["intended_start"].min()) if len(samples) else 0.0
        self.t0 = float(info.get("t0", first))
        self.samples = samples
        self.by_endpoint = {name: samples[samples["endpoint"] == name] for name in scenario.traffic}
        self.gateway_endpoints = [n for n, ep in scenario.traffic.items() if ep.calls_gateway]
        preset = PRESETS[info.get("preset", "shop")]
        empty = pd.DataFrame({"t": [], "series": [], "value": []})
        canon = canonical(metrics, preset) if len(metrics) else empty
        self.series = {
            name: pd.Series(rows["value"].to_numpy(), index=rows["t"].to_numpy(), dtype=float)
            for name, rows in canon.groupby("series")
        }
        self.received = (
            select(metrics, "pg", PG_RECEIVED) if len(metrics) else pd.Series(dtype=float)
        )

    def get(self, name: str) -> pd.Series:
        return self.series.get(name, pd.Series(dtype=float))

    def window(self, start_s: float, end_s: float) -> dict[str, Any]:
        """Figures of requests intended, and of scrapes taken, in [t0+start_s, t0+end_s)."""
        start, end = self.t0 + start_s, self.t0 + end_s
        endpoints = {
            name: endpoint_stats(self.by_endpoint[name], start, end, ep.rate)
            for name, ep in self.scenario.traffic.items()
        }
        busy = gauge_summary(self.get("busy_workers"), start, end)
        state = self.get("breaker_state")
        in_window = state[(state.index >= start) & (state.index <= end)]
        blocked = counter_delta(self.get("blocked_calls"), start, end) if not state.empty else 0.0
        calls = counter_delta(self.received, start, end)
        payments = sum(endpoints[n]["requests"] for n in self.gateway_endpoints)
        return {
            "endpoints": endpoints,
            "workers": {
                "busy_max": busy["max"],
                "busy_mean": busy["mean"],
                "busy_p50": busy["p50"],
            },
            "breaker": {
                "blocked": _round(blocked, 0),
                "blocked_per_s": _round((blocked or 0.0) / max(end - start, 1e-9), 2),
                "open_pct": _round(
                    100.0 * float((in_window == BREAKER_STATES["open"]).mean())
                    if len(in_window)
                    else None,
                    1,
                ),
            },
            "pg": {
                "calls": _round(calls, 0),
                "payments": payments,
                "amplification": _round(calls / payments, 3)
                if calls is not None and payments
                else None,
            },
        }

    def timeline(self) -> dict[str, float | None]:
        """How fast the breaker reacted, how fast service came back, and needless blocking."""
        fault = self.scenario.fault_window()
        if fault is None:
            return {
                "time_to_open_s": None,
                "time_to_recover_s": None,
                "blocked_pct_healthy": self._blocked_pct_healthy(),
            }
        fs, fe = self.t0 + fault[0], self.t0 + fault[1]
        state = self.get("breaker_state")
        opened = state[(state.index >= fs) & (state == BREAKER_STATES["open"])]
        return {
            "time_to_open_s": _round(float(opened.index[0]) - fs, 2) if len(opened) else None,
            "time_to_recover_s": self._time_to_recover(fe),
            "blocked_pct_healthy": self._blocked_pct_healthy(),
        }

    def _gateway_samples(self) -> pd.DataFrame:
        names = self.gateway_endpoints or list(self.scenario.traffic)
        return self.samples[self.samples["endpoint"].isin(names)]

    def _time_to_recover(
        self, fault_end: float, threshold: float = 0.95, span_s: int = 5
    ) -> float | None:
        """Seconds from the fault's end until gateway requests succeed >= 95% over 5 s."""
        horizon = self.t0 + self.scenario.duration
        s = self._gateway_samples()
        s = s[(s["intended_start"] >= fault_end) & (s["intended_start"] < horizon)]
        if s.empty:
            return None
        bins = np.floor(s["intended_start"].to_numpy() - fault_end).astype(int)
        ok = s["status"].between(200, 399).to_numpy()
        total = np.bincount(bins)
        good = np.bincount(bins, weights=ok)
        for first in range(len(total)):
            n = total[first : first + span_s].sum()
            if n and good[first : first + span_s].sum() / n >= threshold:
                return float(first)
        return None

    def _blocked_pct_healthy(self) -> float | None:
        """Share of gateway requests refused by the breaker while the gateway was healthy."""
        s = self._gateway_samples()
        t = s["intended_start"] - self.t0
        healthy = (t >= -_EPS_S) & (t < self.scenario.duration - _EPS_S)
        for phase in self.scenario.pg.phases:
            if phase.fault.type != "healthy":
                healthy &= ~((t >= phase.start) & (t < phase.end))
        n = int(healthy.sum())
        if not n:
            return None
        return _round(100.0 * float((s.loc[healthy, "outcome"] == "not_permitted").sum()) / n, 2)


def ledger_figures(ledger: pd.DataFrame, payments: pd.DataFrame) -> dict[str, Any] | None:
    """Duplicate calls per payment and the reconciliation of gateway and target records.

    Covers the whole run (warmup and drain included): a payment approved at the
    gateway but recorded FAILED or TIMEOUT_UNKNOWN by the target is a consistency
    hole whenever it happens (seed 002).
    """
    if ledger.empty:
        return None
    per_key = ledger.groupby("key").size()
    approved = set(ledger.loc[ledger["decision"] == "approved", "key"])
    out: dict[str, Any] = {
        "calls": len(ledger),
        "keys": len(per_key),
        "duplicate_keys": int((per_key > 1).sum()),
        "max_calls_per_key": int(per_key.max()),
        "client_gone": int(ledger["client_gone"].sum()),
        "approved_at_gateway": len(approved),
    }
    if not payments.empty:
        recorded = payments.set_index("idempotency_key")["status"]
        status_of_approved = recorded[recorded.index.isin(approved)]
        out["reconciliation"] = {
            "payments_recorded": len(recorded),
            "approved_both": int((status_of_approved == "APPROVED").sum()),
            "approved_but_failed": int((status_of_approved == "FAILED").sum()),
            "approved_but_unknown": int((status_of_approved == "TIMEOUT_UNKNOWN").sum()),
            "approved_but_pending": int((status_of_approved == "PENDING").sum()),
            "recorded_approved_not_at_gateway": int(
                ((recorded == "APPROVED") & ~recorded.index.isin(approved)).sum()
            ),
        }
    return out


def build_figures(
    scenario: Scenario,
    samples: pd.DataFrame,
    metrics: pd.DataFrame,
    info: dict[str, Any],
    ledger: pd.DataFrame | None = None,
    payments: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """Every figure of one build: whole window, fault window, each phase, and timeline."""
    data = BuildSeries(scenario, samples, metrics, info)
    duration = scenario.duration
    whole = data.window(0.0, duration)
    fault_window = scenario.fault_window() or (0.0, duration)
    fault = data.window(*fault_window)
    max_workers = data.get("max_workers")
    received = counter_delta(data.received, data.t0, math.inf)
    has_breaker = not data.get("breaker_state").empty
    return {
        "t0": data.t0,
        "endpoints": whole["endpoints"],
        "workers": {
            "max_workers": _round(max_workers.max(), 0) if not max_workers.empty else None,
            "busy_max_fault": fault["workers"]["busy_max"],
            "busy_mean_fault": fault["workers"]["busy_mean"],
            "busy_p50_fault": fault["workers"]["busy_p50"],
        },
        "breaker": {
            "present": has_breaker,
            # Counted from the window's start to the last scrape: calls refused while draining
            # belong to the measured requests too.
            "blocked_total": _round(counter_delta(data.get("blocked_calls"), data.t0, math.inf), 0)
            if has_breaker
            else 0,
            "blocked_fault": fault["breaker"]["blocked"],
            "blocked_per_s_fault": fault["breaker"]["blocked_per_s"],
            "open_pct_fault": fault["breaker"]["open_pct"],
        },
        "pg": {
            "calls": _round(received, 0),
            "calls_fault": fault["pg"]["calls"],
            "target_calls": _round(counter_delta(data.get("pg_calls"), data.t0, math.inf), 0),
            "retries": _round(counter_delta(data.get("retries"), data.t0, math.inf), 0),
            "payments": whole["pg"]["payments"],
            "amplification": _ratio(received, whole["pg"]["payments"]),
            "amplification_fault": fault["pg"]["amplification"],
        },
        "timeline": data.timeline(),
        "phases": {p.name: data.window(p.start, p.end) for p in scenario.pg.phases},
        "ledger": ledger_figures(
            ledger if ledger is not None else pd.DataFrame(),
            payments if payments is not None else pd.DataFrame(),
        ),
    }


def _ratio(num: float | None, den: float | None) -> float | None:
    return _round(num / den, 3) if num is not None and den else None


def _flat_window(figures: dict[str, Any], suffix: str, flat: dict[str, float | None]) -> None:
    for ep, stats in figures["endpoints"].items():
        for q in ("p50", "p95", "p99", "max"):
            flat[f"{ep}.latency_s.{q}{suffix}"] = stats["latency_s"][q]
        flat[f"{ep}.success_pct{suffix}"] = stats["success_pct"]
        flat[f"{ep}.achieved_rps{suffix}"] = stats["achieved_rps"]
    for section in ("workers", "breaker", "pg", "timeline", "ledger"):
        for key, value in (figures.get(section) or {}).items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                flat[f"{section}.{key}{suffix}"] = float(value)


def flatten(figures: dict[str, Any]) -> dict[str, float | None]:
    """The comparable numbers of a build as dotted keys, phases in brackets.

    For example ``products.latency_s.p95``, ``workers.busy_p50_fault``,
    ``products.latency_s.p95[outage]``.
    """
    flat: dict[str, float | None] = {}
    _flat_window(figures, "", flat)
    for phase, window in figures.get("phases", {}).items():
        _flat_window(window, f"[{phase}]", flat)
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


def _mean_tree(trees: list[Any]) -> Any:
    """Average the numeric leaves of several same-shaped figure trees (repetitions)."""
    first = trees[0]
    if isinstance(first, dict):
        keys = [k for k in first if all(isinstance(t, dict) and k in t for t in trees)]
        return {k: _mean_tree([t[k] for t in trees]) for k in keys}
    if isinstance(first, bool) or not isinstance(first, int | float):
        return first
    values = [float(t) for t in trees if isinstance(t, int | float)]
    return _round(float(np.mean(values))) if len(values) == len(trees) else None


def bootstrap_ci(
    values: list[float], rng: np.random.Generator, rounds: int = 2000
) -> tuple[float, float]:
    """95% bootstrap interval of the mean of ``values`` (one value per repetition)."""
    arr = np.asarray(values, dtype=float)
    means = arr[rng.integers(0, len(arr), size=(rounds, len(arr)))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def combine_repetitions(reps: list[dict[str, Any]], seed: int = 0) -> dict[str, Any]:
    """One build's figures over N repetitions: means, plus a 95% interval for every figure."""
    if len(reps) == 1:
        return reps[0]
    combined: dict[str, Any] = _mean_tree(reps)
    flats = [flatten(r) for r in reps]
    rng = np.random.default_rng(seed)
    ci: dict[str, list[float | None]] = {}
    for key in flats[0]:
        values = [f.get(key) for f in flats]
        if all(v is not None for v in values):
            low, high = bootstrap_ci([float(v) for v in values if v is not None], rng)
            ci[key] = [_round(low), _round(high)]
    combined["repetitions"] = len(reps)
    combined["ci95"] = ci
    return combined


def analyse(run: RunResult, scenario: Scenario) -> dict[str, Any]:
    """The whole report as a dict (the content of ``report.json``)."""
    per_build: dict[str, list[dict[str, Any]]] = {}
    status: dict[str, str] = {}
    for key, b in run.builds.items():
        if not len(b.samples):
            continue
        name = str(b.info.get("build", key))
        per_build.setdefault(name, []).append(
            build_figures(scenario, b.samples, b.metrics, b.info, b.ledger, b.payments)
        )
        status[name] = str(b.info.get("status"))
    figures = {name: combine_repetitions(reps, scenario.seed) for name, reps in per_build.items()}
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
            {"name": p.name, "start_s": p.start, "end_s": p.end, "fault": p.label}
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
                "status": status[name],
                **fig,
            }
            for name, fig in figures.items()
        },
        "comparison": compare(figures, baseline) if baseline else {},
    }
