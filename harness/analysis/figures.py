"""Figures of a run, computed from raw samples and raw scrapes (never from averaged stats).

Per-endpoint figures are in ``analysis.endpoints``, the ledger's in ``analysis.ledger``,
the recovered/stuck verdict in ``analysis.recovery``. Gauges cover the fault window.

Counts over a window come from the most exact record there is. Calls the gateway
received are counted from its ledger (``pg.parquet``: every call with its arrival time),
arrivals in [start, end); only without a ledger from its scraped counter (``pg.source``).
Counters only the target exposes (blocked calls, retries, its own PG calls)
follow ``series.counter_delta``: read at each edge of the window, linear
between the scrapes around it. A build's totals cover the measured window
[t0, t0 + duration), like its phases, so the phases add up to the total.
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np
import pandas as pd

from harness.analysis import validity
from harness.analysis.aborted import covered_until, cut_aborted, measured_until
from harness.analysis.answers import served, stood_in
from harness.analysis.combine import combine_repetitions, compare
from harness.analysis.combine import round_figure as _round
from harness.analysis.cuts import (
    Reader,
    Tree,
    Windows,
    count,
    cut,
    missing_figures,
    ordered,
    replica_reader,
)
from harness.analysis.dependencies import (
    dependency_figures,
    dependency_window,
    tcp_figures,
    tcp_window,
    unmatched_warning,
)
from harness.analysis.endpoints import EPS_S, endpoint_info, endpoint_stats
from harness.analysis.gateway_check import silent_gateway
from harness.analysis.idle import build_idle_warnings
from harness.analysis.in_flight import InFlight
from harness.analysis.judge import flat_blocks
from harness.analysis.ledger import ledger_figures
from harness.analysis.model import (
    SCHEMA,
    BreakerFigures,
    BuildFigures,
    BuildReport,
    InFlightFigures,
    PgFigures,
    PgSource,
    ReplicaBreaker,
    ReplicaFigures,
    ReplicaPg,
    ReplicaWindow,
    Report,
    Timeline,
    WindowBreaker,
    WindowFigures,
    WindowInFlight,
    WindowWorkers,
    WorkerFigures,
)
from harness.analysis.offered import load_per_s
from harness.analysis.recovery import add_verdict
from harness.analysis.replicas import target_series
from harness.analysis.resources import resource_figures
from harness.analysis.series import PG_RECEIVED, counter, counter_delta, select
from harness.core.catalogue import ENDPOINT, FIGURES, GATED
from harness.core.errors import InputError
from harness.core.selectors import CONTAINER_SOURCE, RESOURCE_SERIES, Selector
from harness.load.plan import DROPPED
from harness.results.model import BuildResult, RunResult
from harness.scenario.schema import Scenario


class BuildSeries:
    """What one build measured, indexed once so any time window can be cut cheaply."""

    def __init__(self, scenario: Scenario, build: BuildResult) -> None:
        self.scenario = scenario
        self.t0 = build.t0
        # One row per request (a retried one's attempts in one: results.attempts).
        samples, metrics = build.requests, build.metrics
        # Per endpoint with the dropped arrivals (endpoint_stats counts them apart); the
        # run-wide figures (recovery, needless blocking) read only what was sent.
        self.by_endpoint = {name: samples[samples["endpoint"] == name] for name in scenario.traffic}
        self.samples = samples[samples["error"] != DROPPED] if len(samples) else samples
        self.gateway_endpoints = scenario.gateway_endpoints()
        # Requests open at once: every attempt is one at the service (not requests_of's).
        attempts = build.samples
        self.in_flight = InFlight.of(attempts)
        self.in_flight_by_endpoint = {
            name: InFlight.of(attempts[attempts["endpoint"] == name] if len(attempts) else attempts)
            for name in scenario.traffic
        }
        """Requests in flight over time (``analysis.in_flight``), the service's and each
        endpoint's."""
        target = target_series(metrics, build.info)
        self.missing = target.missing
        """Canonical series that never appeared -> why (``series.map_canonical``)."""
        self.warnings = target.warnings
        self.dependencies = build.dependencies
        """Each named dependency's ledger (``analysis.dependencies``), by name."""
        self.series = target.series
        """The target's canonical series; a replicated build's summed over its replicas."""
        self.replicas = target.replicas
        """Each replica's own canonical series (``analysis.replicas``); empty: one process."""
        self.received = (
            counter(metrics, "pg", PG_RECEIVED) if len(metrics) else pd.Series(dtype=float)
        )
        self.resources = {
            name: select(metrics, CONTAINER_SOURCE, Selector(series))
            if len(metrics)
            else pd.Series(dtype=float)
            for name, series in RESOURCE_SERIES.items()
        }
        """What the build's container cost (Docker Engine's stats); empty outside one."""
        covered = (self.t0, self.t0 + covered_until(scenario, build.info, self.samples, self.t0))
        self.gaps, self.longest_gap = validity.scrape_gaps(
            metrics, covered, scenario.metrics.interval
        )
        """Scrape gaps of the target in the measured window, as far as the build ran it
        (``analysis.validity``)."""
        self.arrivals = np.sort(build.ledger["arrival"].to_numpy(dtype=float))
        self.pg_source: PgSource | None = (
            "ledger" if len(self.arrivals) else "metrics" if not self.received.empty else None
        )
        """Where gateway calls are counted from: the ledger when there is one."""

    def get(self, name: str) -> pd.Series:
        return self.series.get(name, pd.Series(dtype=float))

    def states(self) -> list[pd.Series]:
        """The breaker's state codes: one series per replica (each has its own breaker)."""
        if not self.replicas:
            return [self.get("breaker_state")]
        return [r.get("breaker_state", pd.Series(dtype=float)) for r in self.replicas]

    def counted(self, name: str, start: float, end: float) -> float | None:
        """How much counter ``name`` grew in [start, end]; a replicated build's is the sum
        of its replicas' counts, each rounded to a whole count as their figures are."""
        if not self.replicas:
            return counter_delta(self.get(name), start, end)
        counts = [count(r, name, start, end) for r in self.replicas]
        return None if any(c is None for c in counts) else sum(c or 0.0 for c in counts)

    def reader(self) -> Reader:
        """The build's series as ``analysis.cuts`` reads them (the catalogue's figures)."""
        return Reader(self.series, self.states(), self.counted, tuple(self.gaps))

    def gateway_calls(self, start: float, end: float) -> float | None:
        """Calls the gateway received in [start, end): ledger arrivals, else its counter."""
        if self.pg_source == "ledger":
            first, stop = np.searchsorted(self.arrivals, [start, end], side="left")
            return float(stop - first)
        return counter_delta(self.received, start, end)

    def window(self, start_s: float, end_s: float) -> WindowFigures:
        """Figures of requests intended, and of scrapes taken, in [t0+start_s, t0+end_s)."""
        start, end = self.t0 + start_s, self.t0 + end_s
        endpoints = {
            # Offered: the rate's mean over the window (a ramp's, or the constant rate).
            name: endpoint_stats(
                self.by_endpoint[name],
                start,
                end,
                _round(self.scenario.offered_rps(name, start_s, end_s)) or 0.0,
                self.scenario.traffic[name].retry is not None,
            )
            for name in self.scenario.traffic
        }
        for name, figures in endpoints.items():
            figures["in_flight_max"] = self.in_flight_by_endpoint[name].stats(start, end)[0]
        cuts = cut(self.reader(), "phase", Windows((start, end), (start, end), None))
        calls = self.gateway_calls(start, end)
        payments = sum(endpoints[n]["requests"] for n in self.gateway_endpoints)
        window: WindowFigures = {
            "endpoints": endpoints,
            "workers": cast(WindowWorkers, ordered(cuts["workers"], WindowWorkers)),
            "in_flight": self.in_flight_window(start, end),
            "breaker": cast(WindowBreaker, ordered(cuts["breaker"], WindowBreaker)),
            "pg": {
                "calls": _round(calls, 0),
                "payments": payments,
                "amplification": _round(calls / payments, 3)
                if calls is not None and payments
                else None,
            },
        }
        if "series" in cuts:  # the catalogue's own series (a DB pool's) that were exposed
            window["series"] = cuts["series"]
        if self.dependencies:
            window["dependencies"] = {
                name: dependency_window(ledger, self.samples, start, end)
                for name, ledger in self.dependencies.items()
            }
        return window

    def in_flight_window(self, start: float, end: float) -> WindowInFlight:
        """Requests open at once at the service over [start, end): the most, the median."""
        most, median = self.in_flight.stats(start, end)
        return {"max": most, "p50": median}

    def timeline(self, time_to_open_s: float | None) -> tuple[Timeline, dict[str, float]]:
        """How fast the breaker reacted (``time_to_open_s``), how fast service came back, and
        needless blocking; and recoveries not come inside the window: report key -> the s
        watched after the fault (a bound; the report reads ``> N s``)."""
        fault = self.scenario.fault_window()
        if fault is None:
            return {
                "time_to_open_s": None,
                "service_recover_s": None,
                "time_to_recover_s": None,
                "blocked_pct_healthy": self._blocked_pct_healthy(),
            }, {}
        fs, fe = self.t0 + fault[0], self.t0 + fault[1]
        watched = _round(self.scenario.duration - fault[1], 3) or 0.0
        recover = self._time_to_recover(fe)
        endpoints = {name: self._endpoint_recovery(name, fs, fe) for name in self.scenario.traffic}
        service = service_recovery(endpoints)
        unreached = {_GATEWAY_RECOVERY: watched} if recover == math.inf else {}
        if service == math.inf:
            unreached[_SERVICE_RECOVERY] = watched
        for name, value in endpoints.items():
            if value == math.inf:
                unreached[_RECOVERY.replace(ENDPOINT, name)] = watched
        timeline: Timeline = {
            "time_to_open_s": time_to_open_s,
            "service_recover_s": _reached(service),
            "time_to_recover_s": _reached(recover),
            "blocked_pct_healthy": self._blocked_pct_healthy(),
            "endpoints_recover_s": {name: _reached(v) for name, v in endpoints.items()},
            "protected_p99_s": self._protected_p99(fs, fe),
        }
        return timeline, unreached

    def _protected_p99(self, fault_start: float, fault_end: float) -> float | None:
        """p99 latency of the endpoints that do not call the gateway over the fault window,
        read as each endpoint's own p99 is (requests sent and ended; ``endpoint_stats``)."""
        names = [n for n in self.scenario.traffic if n not in self.gateway_endpoints]
        s = self.samples[self.samples["endpoint"].isin(names)]
        start = s["intended_start"]
        s = s[(start >= fault_start) & (start < fault_end) & (s["error"] != DROPPED)]
        latency = (s["end"] - s["intended_start"]).dropna()
        if latency.empty:
            return None
        return _round(float(np.quantile(latency.to_numpy(dtype=float), 0.99)))

    def _gateway_samples(self) -> pd.DataFrame:
        names = self.gateway_endpoints or list(self.scenario.traffic)
        return self.samples[self.samples["endpoint"].isin(names)]

    def _after_fault(self, samples: pd.DataFrame, fault_end: float) -> pd.DataFrame:
        """Samples intended from the fault's end to the end of the measured window."""
        horizon = self.t0 + self.scenario.duration
        start = samples["intended_start"]
        return samples[(start >= fault_end) & (start < horizon)]

    def _time_to_recover(self, fault_end: float) -> float | None:
        """Seconds from the fault's end until gateway requests are served (``answers.served``:
        2xx/3xx, not a fallback or degraded answer) >= 95% over 5 s."""
        s = self._after_fault(self._gateway_samples(), fault_end)
        return _first_good_span(s, served(s), fault_end)

    def _endpoint_recovery(self, name: str, fault_start: float, fault_end: float) -> float | None:
        """Seconds from the fault's end until ``name`` is its healthy self again: >= 95 % of
        its requests over 5 s served (2xx/3xx, not a fallback or degraded answer:
        ``answers.served``) within twice its healthy p99 (at least that + 10 ms, for
        scheduling jitter).

        The time judged is the service's: from when the request was sent to its answer
        (``end - actual_start``), so a load generator that sent late on a loaded machine (a
        40 ms stall against a 5 ms p99) does not hold a recovered endpoint back; a queue in
        the service is inside that time. Healthy p99: its answered requests before the
        fault began. Unlike ``time_to_recover`` (answers only), this sees a queue that still
        holds requests for seconds after the gateway heals (seed 000's retry-only reads).
        None without a healthy time before the fault; ``inf`` if it never came back inside
        the window.
        """
        samples = self.samples[self.samples["endpoint"] == name]
        latency = samples["end"] - samples["actual_start"]
        ok = served(samples)
        start = samples["intended_start"]
        healthy = latency[ok & (start >= self.t0 - EPS_S) & (start < fault_start)].dropna()
        if healthy.empty:
            return None
        p99 = float(np.percentile(healthy.to_numpy(), 99))
        limit = max(2 * p99, p99 + 0.010)
        after = self._after_fault(samples, fault_end)
        good = ok.loc[after.index] & (latency.loc[after.index] <= limit)
        return _first_good_span(after, good, fault_end)

    def _blocked_pct_healthy(self) -> float | None:
        """Share of gateway requests not answered by the service's own path while the gateway
        was healthy: refused, or answered by a fallback or degraded (``answers.stood_in``)."""
        s = self._gateway_samples()
        t = s["intended_start"] - self.t0
        healthy = (t >= -EPS_S) & (t < self.scenario.duration - EPS_S)
        for phase in self.scenario.phases:
            if phase.fault.type != "healthy" or phase.toxics:  # a TCP dependency's too
                healthy &= ~((t >= phase.start) & (t < phase.end))
        n = int(healthy.sum())
        if not n:
            return None
        return _round(100.0 * float(stood_in(s.loc[healthy]).sum()) / n, 2)


_RECOVERY = GATED[f"{ENDPOINT}.time_to_recover"].key
"""Where an endpoint's own recovery is in the report (``timeline.endpoints_recover_s.<ep>``)."""
_SERVICE_RECOVERY = GATED["time_to_recover"].key
"""Where the service's recovery is (``timeline.service_recover_s``): the headline's."""
_GATEWAY_RECOVERY = GATED["gateway_time_to_recover"].key
"""Where the gateway calls' answers' recovery is (``timeline.time_to_recover_s``)."""


def service_recovery(endpoints: dict[str, float | None]) -> float | None:
    """The service's time to recover from its endpoints' own (``_endpoint_recovery``): the
    slowest's. ``inf`` (not reached) when one was not back inside the window, whatever the
    others; None (not measured) when one could not be measured, or without endpoints: the
    slowest of the rest would only be a lower bound."""
    values = list(endpoints.values())
    if any(v == math.inf for v in values):
        return math.inf
    if not values or any(v is None for v in values):
        return None
    return max(v for v in values if v is not None)


def service_unmeasured(endpoints: dict[str, float | None]) -> str:
    """Why the service's time to recover is not measured: the endpoints whose own was not."""
    names = [name for name, v in endpoints.items() if v is None]
    if not names:
        return "no endpoint"
    return (
        f"the recovery of {', '.join(names)} was not measured (no request answered 2xx/3xx "
        "before the first fault phase to take its healthy latency from, or none intended "
        "after the last): the service's is its slowest endpoint's"
    )


def _reached(seconds: float | None) -> float | None:
    """A recovery's seconds as reported: ``inf`` (never came: the bound in not_reached) is None."""
    return None if seconds == math.inf else seconds


def _first_good_span(
    samples: pd.DataFrame, good: pd.Series, since: float, threshold: float = 0.95, span_s: int = 5
) -> float | None:
    """The first whole second after ``since`` from which ``good`` holds for >= ``threshold``
    of the samples intended over the next ``span_s`` seconds; ``inf`` if none does (not
    reached), None without samples (not measured)."""
    if samples.empty:
        return None
    bins = np.floor(samples["intended_start"].to_numpy() - since).astype(int)
    total = np.bincount(bins)
    passed = np.bincount(bins, weights=good.to_numpy(dtype=float))
    for first in range(len(total)):
        n = total[first : first + span_s].sum()
        if n and passed[first : first + span_s].sum() / n >= threshold:
            return float(first)
    return math.inf


def build_figures(scenario: Scenario, build: BuildResult) -> BuildFigures:
    """Every figure of one build: whole window, fault window, each phase, and timeline."""
    data = BuildSeries(scenario, build)
    duration = scenario.duration
    whole = data.window(0.0, duration)
    fault_window = scenario.fault_window() or (0.0, duration)
    fault = data.window(*fault_window)
    end = data.t0 + duration
    has_breaker = any(not state.empty for state in data.states())
    windows = _windows(data)
    cuts = cut(data.reader(), "build", windows)
    timeline, unreached = data.timeline(cuts["timeline"]["time_to_open_s"])
    until = measured_until(scenario, build.info)
    unmeasured = add_verdict(scenario, build.samples, data.t0, timeline, unreached, until)
    pg = {
        "source": data.pg_source,
        "calls": whole["pg"]["calls"],
        "calls_fault": fault["pg"]["calls"],
        **cuts["pg"],
        "payments": whole["pg"]["payments"],
        "amplification": whole["pg"]["amplification"],
        "amplification_fault": fault["pg"]["amplification"],
    }
    figures: BuildFigures = {
        "t0": data.t0,
        "endpoints": whole["endpoints"],
        "workers": cast(WorkerFigures, ordered(cuts["workers"], WorkerFigures)),
        "in_flight": _in_flight(data, windows.fault),
        "breaker": cast(
            BreakerFigures, ordered({"present": has_breaker, **cuts["breaker"]}, BreakerFigures)
        ),
        "pg": cast(PgFigures, ordered(pg, PgFigures)),
        "timeline": timeline,
        "phases": {p.name: data.window(p.start, p.end) for p in scenario.phases},
        "ledger": ledger_figures(build.ledger, build.payments),
    }
    if any(ep.retry is not None for ep in scenario.traffic.values()):
        figures["load"] = load_per_s(build.samples, data.t0, duration)
    figures["blocks"] = _blocks(data, scenario)
    resources = resource_figures(data.resources, (data.t0, end), windows.fault)
    if resources is not None:  # a docker build: what its container cost
        figures["resources"] = resources
    if "series" in cuts:  # the catalogue's own series (a DB pool's) that were exposed
        figures["series"] = cuts["series"]
    if build.dependencies:  # each named dependency's own ledger
        fault_s = (data.t0 + fault_window[0], data.t0 + fault_window[1])
        figures["dependencies"] = {
            name: dependency_figures(ledger, data.samples, (data.t0, end), fault_s)
            for name, ledger in build.dependencies.items()
        }
    if data.replicas:  # replicas: N: each replica's own figures (the build's are their sums)
        figures["replicas"] = replica_figures(data, build.payments)
    if unreached:  # only when a recovery never came inside the window
        figures["not_reached"] = unreached
    kept = build.info.get("pg_calls")  # the ledger's rows; absent: it was not kept
    silent = (
        None
        if kept is None
        else silent_gateway(
            data.samples, kept, data.gateway_endpoints, build.info.get("pg_url", "")
        )
    )
    _tcp_figures(figures, scenario, build.metrics, (data.t0, end), fault_window)
    lateness, worst = validity.max_lateness(build.samples, windows.whole)  # retries too
    figures["validity"] = {
        "generator_max_lateness_s": _round(lateness, 3),
        "scrape_gap_max_s": None if math.isnan(data.longest_gap) else _round(data.longest_gap, 3),
        "scrape_gaps": [[round(a - data.t0, 3), round(b - data.t0, 3)] for a, b in data.gaps],
    }
    interval = scenario.metrics.interval
    failed = build.info.get("scrape_failed", [])
    on_app_port = validity.metrics_on_app_port(
        build.info.get("target_url"), build.info.get("target_metrics_url")
    )
    stalls = validity.warnings(data.gaps, interval, data.t0, lateness, worst, failed, on_app_port)
    warnings = [*data.warnings, *([silent] if silent else []), *stalls]
    warnings += build_idle_warnings(scenario, build, data)  # a Retry, a breaker never set off
    in_force = build.info.get("settings_in_force")  # settings the service does not hold
    if in_force is not None:
        warnings += in_force["differences"] + ([in_force["unread"]] if "unread" in in_force else [])
    for name in figures.get("dependencies", {}):  # a path nobody stubbed: said first
        said = unmatched_warning(name, figures["dependencies"])
        warnings += [said] if said is not None else []
    if warnings:  # only when something read looks wrong (a half-counted breaker, no call)
        figures["warnings"] = warnings
    phases = {p.name: (data.t0 + p.start, data.t0 + p.end) for p in scenario.phases}
    spans = {"whole": windows.whole, "fault": windows.fault}
    back = timeline.get("endpoints_recover_s")
    service = {}  # the service's recovery not measured (not unreached): which endpoint's it lacks
    unknown = timeline.get("service_recover_s") is None and _SERVICE_RECOVERY not in unreached
    if back is not None and unknown:
        service[_SERVICE_RECOVERY] = service_unmeasured(back)
    missing = {
        **not_measured(data),
        **unmeasured,
        **service,
        **validity.gap_not_measured(
            data.gaps, data.t0, interval, spans, phases, failed, exposed=data.series.keys()
        ),
    }
    if missing:  # only when something was not: a fully measured build reads as before
        figures["not_measured"] = missing
    cut_aborted(figures, scenario, build.info)  # a gate with abort: true stopped its load
    return figures


def _blocks(data: BuildSeries, scenario: Scenario) -> dict[str, list[float | None]]:
    """The judge's blocks (``analysis.judge.flat_blocks``) of every endpoint, over the
    measured window and each phase; requests the generator dropped are not counted."""
    windows = {"": (data.t0, data.t0 + scenario.duration)}
    windows |= {f"[{p.name}]": (data.t0 + p.start, data.t0 + p.end) for p in scenario.phases}
    by_endpoint = {}
    for name, samples in data.by_endpoint.items():
        sent = samples[samples["error"] != DROPPED]
        by_endpoint[name] = (sent, served(sent))
    return flat_blocks(by_endpoint, windows)


def _in_flight(data: BuildSeries, fault: tuple[float, float]) -> InFlightFigures:
    """Requests open at once at the service over the fault window (``analysis.in_flight``)."""
    window = data.in_flight_window(*fault)
    return {"max_fault": window["max"], "p50_fault": window["p50"]}


def _windows(data: BuildSeries) -> Windows:
    """The build's measured and fault windows in absolute time."""
    fault = data.scenario.fault_window()
    f0, f1 = fault or (0.0, data.scenario.duration)
    return Windows(
        (data.t0, data.t0 + data.scenario.duration),
        (data.t0 + f0, data.t0 + f1),
        None if fault is None else data.t0 + f0,
    )


def replica_figures(data: BuildSeries, payments: pd.DataFrame) -> dict[str, ReplicaFigures]:
    """Each replica's own figures, by its index: its pool over the fault window, its
    breaker, its calls to the gateway over the measured window, the payments it recorded,
    and its pool and breaker per phase (the catalogue's replica figures).

    Counts are the ones the build's figures sum (``BuildSeries.counted``).
    """
    windows = _windows(data)
    out: dict[str, ReplicaFigures] = {}
    phases = [(p.name, data.t0 + p.start, data.t0 + p.end) for p in data.scenario.phases]
    for i, series in enumerate(data.replicas):
        reader = replica_reader(series, tuple(data.gaps))
        cuts = cut(reader, "replica", windows)
        recorded = None
        if "replica" in payments.columns:
            recorded = int((payments["replica"] == i).sum())
        present = {"present": not reader.states[0].empty}
        figures: Tree = {
            "workers": ordered(cuts["workers"], WorkerFigures),
            "breaker": ordered({**present, **cuts["breaker"]}, ReplicaBreaker),
            "pg": ordered(cuts["pg"], ReplicaPg),
            "payments_recorded": recorded,
            "phases": {name: _replica_window(reader, a, b) for name, a, b in phases},
        }
        if "series" in cuts:
            figures["series"] = cuts["series"]
        out[str(i)] = cast(ReplicaFigures, figures)
    return out


def _replica_window(reader: Reader, start: float, end: float) -> ReplicaWindow:
    """One replica's pool and breaker over [start, end], as ``BuildSeries.window`` reads a
    build's."""
    cuts = cut(reader, "replica_phase", Windows((start, end), (start, end), None))
    window: Tree = {
        "workers": ordered(cuts["workers"], WindowWorkers),
        "breaker": ordered(cuts["breaker"], WindowBreaker),
    }
    if "series" in cuts:
        window["series"] = cuts["series"]
    return cast(ReplicaWindow, window)


def not_measured(data: BuildSeries) -> dict[str, str]:
    """Figures whose series never appeared -> why, naming what the source did expose.

    Such a figure is None in the report (``-`` in tables), never 0.
    """
    out = missing_figures(data.missing)
    if not data.scenario.has_pg:  # no pg played: none of its figures is missed
        pg = {f.key for f in FIGURES if f.source in ("gateway", "pg_calls")}
        return {key: why for key, why in out.items() if key not in pg}
    if data.pg_source is None:
        why = "pg: neither the gateway's ledger nor its scraped counter recorded a call"
        for figure in FIGURES:
            if figure.source == "gateway":
                out[figure.key] = why
    return out


def analyse(run: RunResult, scenario: Scenario) -> Report:
    """The whole report as a dict (the content of ``report.json``)."""
    unknown = sorted({b.build for b in run.builds.values()} - set(scenario.builds))
    if unknown:
        raise InputError(
            f"{run.path / 'manifest.json'}: build(s) {', '.join(unknown)} ran, and the run's "
            f"scenario.yaml has no such build (its builds: {', '.join(scenario.builds)}): "
            "renamed since the run? The scenario copy must stay as the run read it"
        )
    per_build: dict[str, list[BuildFigures]] = {}
    status: dict[str, str] = {}
    for b in run.builds.values():
        if not len(b.samples):
            continue
        per_build.setdefault(b.build, []).append(build_figures(scenario, b))
        status[b.build] = str(b.info.get("status"))
    figures = {name: combine_repetitions(reps, scenario.seed) for name, reps in per_build.items()}
    baseline = next(iter(figures), None)
    report: Report = {
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
            for p in scenario.phases
        ],
        "endpoints": {name: endpoint_info(scenario, name) for name in scenario.traffic},
        "baseline": baseline,
        "builds": {
            name: _build_report(scenario.builds[name].profile, status[name], fig)
            for name, fig in figures.items()
        },
        "comparison": compare(figures, baseline) if baseline else {},
    }
    made_by = run.manifest.get("harness_version")
    if made_by:
        report["harness_version"] = str(made_by)
    if scenario.dependencies:  # what it played; without the key: pg alone (``plays_pg``)
        report["played"] = [d.name for d in scenario.played()]
    return report


def _build_report(profile: str, status: str, figures: BuildFigures) -> BuildReport:
    """A build's section: profile and status first, then its figures (the order of report.json)."""
    return {"profile": profile, "status": status, **figures}


def _tcp_figures(
    figures: BuildFigures,
    scenario: Scenario,
    metrics: pd.DataFrame,
    whole: tuple[float, float],
    fault_window: tuple[float, float],
) -> None:
    """Each TCP dependency's figures from its proxy's scraped counters, beside the HTTP
    dependencies' (``analysis.dependencies``): the measured and fault windows, each phase."""
    t0 = whole[0]
    fault = (t0 + fault_window[0], t0 + fault_window[1])
    for dep in scenario.played():
        if dep.api != "tcp":
            continue
        named = figures.setdefault("dependencies", {})
        named[dep.name] = tcp_figures(metrics, dep.source, whole, fault)
        for phase in scenario.phases:
            window = figures["phases"][phase.name]
            window.setdefault("dependencies", {})[dep.name] = tcp_window(
                metrics, dep.source, t0 + phase.start, t0 + phase.end
            )
