"""Figures of a run, computed from raw samples and raw scrapes (never from averaged stats).

Latency is end minus *intended* start, so a request the generator had to send
late still counts its wait. Only requests intended inside the measured window
(after warmup) count. Gauges are summarised over the fault window; counters
are differenced between scrapes.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.analysis.combine import combine_repetitions, compare
from harness.analysis.combine import round_figure as _round
from harness.analysis.model import (
    SCHEMA,
    BuildFigures,
    BuildReport,
    EndpointFigures,
    LedgerFigures,
    Percentiles,
    Report,
    Timeline,
    WindowFigures,
)
from harness.analysis.series import BREAKER_STATES, PG_RECEIVED, canonical, preset_named, select
from harness.results.model import BuildResult, RunResult
from harness.scenario.schema import Scenario

_EPS_S = 1e-5
QUANTILES = {"p50": 0.50, "p95": 0.95, "p99": 0.99}


def measured(samples: pd.DataFrame, t0: float, duration_s: float) -> pd.DataFrame:
    """Samples intended inside the measured window [t0, t0 + duration): what figures count."""
    # Intended starts are stored to the microsecond; the tolerance keeps the first one in.
    start = samples["intended_start"]
    return samples[(start >= t0 - _EPS_S) & (start < t0 + duration_s - _EPS_S)]


def endpoint_stats(
    samples: pd.DataFrame, start: float, end: float, offered_rps: float
) -> EndpointFigures:
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

    def __init__(self, scenario: Scenario, build: BuildResult) -> None:
        self.scenario = scenario
        self.t0 = build.t0
        samples, metrics = build.samples, build.metrics
        self.samples = samples
        self.by_endpoint = {name: samples[samples["endpoint"] == name] for name in scenario.traffic}
        self.gateway_endpoints = [n for n, ep in scenario.traffic.items() if ep.calls_gateway]
        preset = preset_named(build.preset)
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

    def window(self, start_s: float, end_s: float) -> WindowFigures:
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

    def timeline(self) -> Timeline:
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


def ledger_figures(ledger: pd.DataFrame, payments: pd.DataFrame) -> LedgerFigures | None:
    """Duplicate calls per payment and the reconciliation of gateway and target records.

    Covers the whole run (warmup and drain included): a payment approved at the
    gateway but recorded FAILED or TIMEOUT_UNKNOWN by the target is a consistency
    hole whenever it happens (seed 002).
    """
    if ledger.empty:
        return None
    per_key = ledger.groupby("key").size()
    approved = set(ledger.loc[ledger["decision"] == "approved", "key"])
    out: LedgerFigures = {
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


def build_figures(scenario: Scenario, build: BuildResult) -> BuildFigures:
    """Every figure of one build: whole window, fault window, each phase, and timeline."""
    data = BuildSeries(scenario, build)
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
        "ledger": ledger_figures(build.ledger, build.payments),
    }


def _ratio(num: float | None, den: float | None) -> float | None:
    return _round(num / den, 3) if num is not None and den else None


def analyse(run: RunResult, scenario: Scenario) -> Report:
    """The whole report as a dict (the content of ``report.json``)."""
    per_build: dict[str, list[BuildFigures]] = {}
    status: dict[str, str] = {}
    for b in run.builds.values():
        if not len(b.samples):
            continue
        per_build.setdefault(b.build, []).append(build_figures(scenario, b))
        status[b.build] = str(b.info.get("status"))
    figures = {name: combine_repetitions(reps, scenario.seed) for name, reps in per_build.items()}
    baseline = next(iter(figures), None)
    return {
        "schema": SCHEMA,
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
            name: _build_report(scenario.builds[name].profile, status[name], fig)
            for name, fig in figures.items()
        },
        "comparison": compare(figures, baseline) if baseline else {},
    }


def _build_report(profile: str, status: str, figures: BuildFigures) -> BuildReport:
    """A build's section: profile and status first, then its figures (the order of report.json)."""
    return {"profile": profile, "status": status, **figures}
