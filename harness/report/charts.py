"""Charts of a run: PNGs that show *when* things happened, which ``report.json`` sums away.

Each chart is one record of ``CHART_TABLE`` (``Chart``: its key, caption, drawer and
whether a run gets it); ``draw_charts`` draws those that apply and ``report.html``
(``page``) shows them in the table's order with their captions.

Every time axis is seconds since the measured window's start (each build's
``t0``), so builds that ran one after another still overlay. The warmup shows
as negative time and the drain (requests still in flight once the schedule
ended) past the window's end, both shaded grey: neither counts in
``report.json``, but cutting them would hide a backlog and the burst it sends
to the gateway when it recovers. Non-healthy gateway phases are shaded and
named on every time chart, and a build keeps its colour on every chart.

Titles and legends say the scenario's own names: its endpoints, dependencies and
builds. The payment gateway's chart (``gateway_calls``) is drawn only where the run
played ``pg`` (``Scenario.has_pg``); each named dependency's calls are on
``dependency_calls``, one panel per dependency.

What each chart plots is here; how every chart looks (colours, the shaded
time axis, notes, legends, saving) is in ``chart_style``. Samples are binned
with numpy over whole columns (loops run over time windows, never over
requests), so a million samples stay fast.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import NullFormatter

from harness.analysis.replicas import as_frame, target_series
from harness.analysis.series import PG_RECEIVED, select
from harness.report.chart_data import (
    QUANTILE_STYLE,
    ROLLING_WINDOW_S,
    Array,
    counter_rate,
    per_second,
    rolling_quantiles,
    state_bars,
)
from harness.report.chart_style import (
    BUILD_COLOURS,
    LEGEND_STYLE,
    NOTE_STYLE,
    Handle,
    Span,
    empty,
    endpoint_title,
    legend,
    log_seconds_axis,
    new_figure,
    note,
    save,
    shared_rows,
    state_style,
    time_axes,
)
from harness.report.recovery_chart import draw_recovery
from harness.report.vocabulary import PG, PG_CALLS_TITLE
from harness.results.model import BuildResult, RunResult
from harness.scenario.schema import Scenario

POOL_SERIES = {
    "db_active": ("-", "in use"),
    "db_pending": ("--", "waiting"),
    "db_max": (":", "size"),
}
"""The DB pool chart's series -> (line style, what); ``db_pool.png`` is drawn only when a
build exposed one."""

OFFERED_STYLE: dict[str, Any] = {"color": "#777777", "lw": 1.0, "alpha": 0.8}
"""The offered rate of a ramping endpoint, on the latency chart's right-hand axis."""
PERCENTILE_TICKS = {1.0: "0%", 2.0: "50%", 10.0: "90%", 100.0: "99%", 1e3: "99.9%"}
PERCENTILE_TICKS.update({1e4: "99.99%", 1e5: "99.999%", 1e6: "99.9999%", 1e7: "99.99999%"})


@dataclass
class _Build:
    """One build's data, already on the shared time axis (seconds since its ``t0``)."""

    name: str
    colour: str
    label: str
    samples: pd.DataFrame
    """Columns ``endpoint``, ``t`` (intended start) and ``latency`` (end - intended start)."""
    canon: pd.DataFrame
    """Canonical target series (``t``, ``series``, ``value``), ``t`` relative."""
    pg_received: pd.Series
    """The gateway's own counter of calls received, index ``t`` relative."""
    pg_arrivals: Array
    """Arrival time of every call in the gateway's ledger, ``t`` relative (empty: no ledger)."""
    replicas: list[pd.DataFrame]
    """Each replica's canonical series like ``canon`` (``canon`` sums them); empty: one process."""
    result: BuildResult
    """The build's results as read (the recovery chart counts its samples as the verdict does)."""

    def series(self, name: str) -> tuple[Array, Array]:
        return _long_series(self.canon, name)

    def replica_series(self, name: str) -> list[tuple[Array, Array]]:
        """One ``series`` per replica (none for a build of one process)."""
        return [_long_series(frame, name) for frame in self.replicas]

    def last_t(self) -> float:
        """The latest moment this build has data for (a scrape or a request's completion)."""
        ends = self.samples["t"] + self.samples["latency"]
        candidates = [self.canon["t"].max(), self.pg_received.index.max(), ends.max()]
        if len(self.pg_arrivals):
            candidates.append(self.pg_arrivals.max())
        return max((float(c) for c in candidates if pd.notna(c)), default=-math.inf)


def _long_series(canon: pd.DataFrame, name: str) -> tuple[Array, Array]:
    rows = canon[canon["series"] == name]
    return rows["t"].to_numpy(dtype=float), rows["value"].to_numpy(dtype=float)


Drawer = Callable[[list[_Build], Scenario, Span], Figure]
"""A chart's drawer: the builds on the shared time axis, the scenario, the span drawn."""


@dataclass(frozen=True)
class Chart:
    """One chart of a report, declared once in ``CHART_TABLE``."""

    key: str
    """Its name: written as ``<key>.png``, ``chart-<key>`` in ``report.html``."""
    caption: str
    """One line saying what it shows (``report.html``'s caption and alt text)."""
    draw: Drawer
    when: Callable[[list[_Build], Scenario], bool] | None = None
    """Whether a run gets it by what its builds exposed (a DB pool); None: every run does."""
    plays: Callable[[Scenario], bool] | None = None
    """Whether a run of the scenario gets it (it plays ``pg``, names dependencies, has
    ``recovery:``); None: every run does."""

    def applies(self, builds: list[_Build], scenario: Scenario) -> bool:
        return (self.plays is None or self.plays(scenario)) and (
            self.when is None or self.when(builds, scenario)
        )


def draw_charts(run: RunResult, scenario: Scenario, out_dir: Path) -> dict[str, Path]:
    """Write each chart of ``CHART_TABLE`` that applies to ``run`` into ``out_dir``; returns
    ``{key: png path}`` in the table's order."""
    out_dir.mkdir(parents=True, exist_ok=True)
    builds = _prepare(run, scenario)
    span = _span(builds, scenario)
    return {
        chart.key: save(chart.draw(builds, scenario, span), out_dir / f"{chart.key}.png")
        for chart in CHART_TABLE
        if chart.applies(builds, scenario)
    }


def scenario_charts(scenario: Scenario) -> list[str]:
    """The keys of the charts every run of ``scenario`` gets, in order (whatever its builds
    exposed: a DB pool's chart comes on top where one did)."""
    return [c.key for c in CHART_TABLE if c.when is None and (c.plays is None or c.plays(scenario))]


# ---------------------------------------------------------------- data


def _prepare(run: RunResult, scenario: Scenario) -> list[_Build]:
    """Shift every build onto its own measured-window clock and derive what the charts need."""
    builds = []
    for i, (name, b) in enumerate(run.builds.items()):
        t0, requests = b.t0, b.requests  # a retried request's attempts as one
        samples = pd.DataFrame(
            {
                "endpoint": requests["endpoint"].astype(str).to_numpy(),
                "t": requests["intended_start"].to_numpy(dtype=float) - t0,
                "latency": (requests["end"] - requests["intended_start"]).to_numpy(dtype=float),
            }
        )
        canon = pd.DataFrame({"t": [], "series": [], "value": []})
        replicas: list[pd.DataFrame] = []
        received = pd.Series(dtype=float)
        if len(b.metrics):
            target = target_series(b.metrics, b.info)  # a replicated build's: summed
            found = as_frame(target.series)
            if len(found):
                canon = found.assign(t=found["t"].astype(float) - t0)
            replicas = [
                (f := as_frame(one)).assign(t=f["t"].astype(float) - t0) for one in target.replicas
            ]
            received = select(b.metrics, "pg", PG_RECEIVED)
            received.index = received.index.astype(float) - t0
        build = scenario.builds.get(b.build)
        label = f"{name} ({build.profile})" if build is not None else name
        colour = BUILD_COLOURS[i % len(BUILD_COLOURS)]
        arrivals = b.ledger["arrival"].to_numpy(dtype=float) - t0
        builds.append(_Build(name, colour, label, samples, canon, received, arrivals, replicas, b))
    return builds


def _span(builds: list[_Build], scenario: Scenario) -> Span:
    """Warmup to the last data point, the drain capped at the scenario's drain bound."""
    last = max((b.last_t() for b in builds), default=-math.inf)
    tail = min(scenario.drain_s, max(0.0, last - scenario.duration))
    return Span(-scenario.warmup, scenario.duration, scenario.duration + math.ceil(tail))


# ---------------------------------------------------------------- charts


def _busy_workers(builds: list[_Build], scenario: Scenario, span: Span) -> Figure:
    """Busy workers per build over time against the pool size (seed 000, result 1)."""
    fig, (ax,) = new_figure(1, 4.0)
    ax.set_title("Busy workers (request threads in use)")
    pools: dict[str, float] = {}
    for b in builds:
        t, busy = b.series("busy_workers")
        if len(t):
            label = f"{b.label}: busy" + (", all replicas" if b.replicas else "")
            ax.plot(t, busy, color=b.colour, lw=1.8, marker=".", ms=3, label=label)
        for i, (rt, rbusy) in enumerate(b.replica_series("busy_workers")):
            each = f"{b.label}: busy, each replica" if i == 0 else None
            ax.plot(rt, rbusy, color=b.colour, lw=0.9, ls=":", label=each)
        _, mx = b.series("max_workers")
        if len(mx):
            pools[b.name] = float(mx.max())
    if len(set(pools.values())) == 1:
        size = next(iter(pools.values()))
        ax.axhline(size, color="black", ls="--", lw=1.2, label=f"pool size, every build ({size:g})")
    else:
        for b in builds:
            if b.name in pools:
                label = f"{b.name}: pool size ({pools[b.name]:g})"
                ax.axhline(pools[b.name], color=b.colour, ls="--", lw=1.2, label=label)
    missing = [b.name for b in builds if not len(b.series("busy_workers")[0])]
    if not ax.lines:
        empty(ax, "no worker metrics were scraped")
    else:
        ax.set_ylim(0, max([*pools.values(), float(ax.get_ylim()[1])]) * 1.1)
        if missing:
            note(ax, "no worker metrics for " + ", ".join(missing), y=0.1)
    ax.set_ylabel("busy workers (threads)")
    time_axes(ax, scenario, span, bottom=True)
    legend(ax)
    return fig


def _pg_calls(builds: list[_Build], scenario: Scenario, span: Span) -> Figure:
    """Per build: requests to the endpoints that call ``pg`` offered, calls the breaker
    blocked, calls that reached the payment gateway (only where the run played it)."""
    fig, axes = new_figure(len(builds), 2.6)
    gateway_eps = scenario.gateway_endpoints()
    offered_what = _names(gateway_eps) or "requests"
    fig.suptitle(f"{offered_what} offered, calls blocked by the breaker, {PG_CALLS_TITLE}")
    top = 1.0
    for ax, b in zip(axes, builds, strict=False):
        source = "ledger" if len(b.pg_arrivals) else "counter"
        styles = _pg_styles(b.colour, offered_what, source)
        offered_style, blocked_style, reached_style = styles.values()
        offered = b.samples.loc[b.samples["endpoint"].isin(gateway_eps), "t"].to_numpy(float)
        counts, edges = per_second(offered, span.start, span.end)
        ax.stairs(counts, edges, fill=True, **offered_style)
        blocked_t, blocked = counter_rate(*b.series("blocked_calls"))
        ax.step(blocked_t, blocked, where="pre", **blocked_style)
        if len(b.pg_arrivals):  # the ledger: exact arrival times, binned like the offered load
            reached, reached_edges = per_second(b.pg_arrivals, span.start, span.stop)
            ax.stairs(reached, reached_edges, **reached_style)
        else:  # no ledger: the gateway's counter, at the scrape interval's resolution
            received = b.pg_received
            reached_t, reached = counter_rate(
                received.index.to_numpy(float), received.to_numpy(float)
            )
            ax.step(reached_t, reached, where="pre", **reached_style)
        top = max([top, *counts, *blocked, *reached])
        notes = [
            text
            for text, missing in (
                ("no breaker: nothing blocked", not len(blocked_t)),
                ("no pg metrics", not len(reached)),
                (f"no {offered_what} samples", not len(offered)),
            )
            if missing
        ]
        if notes:
            note(ax, "; ".join(notes), y=0.75)
        ax.set_title(b.label, color=b.colour, loc="left", fontsize=10, fontweight="bold")
        ax.set_ylabel("calls/s")
        time_axes(ax, scenario, span, bottom=ax is axes[-1])
        handles = [Line2D([], [], label=k, **v) for k, v in list(styles.items())[1:]]
        legend(ax, [Patch(label=next(iter(styles)), **offered_style), *handles])
    shared_rows(axes, top, scenario, span, drawn=bool(builds))
    return fig


def _pg_styles(colour: str, offered: str, source: str) -> dict[str, dict[str, Any]]:
    """Label and style of each series, shared by the lines and their legend keys."""
    return {
        f"{offered} offered/s (by intended start)": {"color": "#bbbbbb", "alpha": 0.7},
        "blocked by the breaker/s": {"color": colour, "lw": 1.4, "ls": "--"},
        f"reached pg/s (the {PG}'s {source})": {"color": colour, "lw": 2.2},
    }


def _names(names: list[str]) -> str:
    """``owners``, ``owners and vets``, ``owners, vets and visits``."""
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def _dependency_calls(builds: list[_Build], scenario: Scenario, span: Span) -> Figure:
    """One panel per named dependency: the calls it received per second (by arrival, from
    its ledger) and those it answered with an error (5xx, or none), per build."""
    names = list(scenario.dependencies)
    fig, axes = new_figure(len(names), 2.6)
    fig.suptitle(f"Calls each dependency received ({_names(names)}), by arrival")
    top = 1.0
    for ax, name in zip(axes, names, strict=True):
        handles: list[Handle] = []
        tcp = scenario.dependencies[name].api == "tcp"
        for b in builds:
            ledger = b.result.dependencies.get(name)
            if ledger is None or not len(ledger):
                continue
            arrivals = ledger["arrival"].to_numpy(dtype=float) - b.result.t0
            status = ledger["status"].to_numpy(dtype=float)
            calls, edges = per_second(arrivals, span.start, span.stop)
            errors, _ = per_second(arrivals[(status == 0) | (status >= 500)], span.start, span.stop)
            ax.stairs(calls, edges, color=b.colour, lw=2.0)
            ax.stairs(errors, edges, color=b.colour, lw=1.2, ls="--")
            top = max([top, *calls])
            handles.append(Line2D([], [], color=b.colour, lw=2.0, label=f"{b.label}: calls/s"))
            handles.append(
                Line2D([], [], color=b.colour, lw=1.2, ls="--", label=f"{b.label}: errors/s")
            )
        ax.set_title(name, loc="left", fontsize=10, fontweight="bold")
        ax.set_ylabel("calls/s")
        if not handles:
            said = "bytes, not calls: its connections are in the tables" if tcp else "no call"
            empty(ax, f"{name}: {said}")
        else:
            legend(ax, handles)
        time_axes(ax, scenario, span, bottom=ax is axes[-1])
    shared_rows(axes, top, scenario, span, drawn=bool(builds))
    return fig


def _latency_over_time(builds: list[_Build], scenario: Scenario, span: Span) -> Figure:
    """Rolling p50/p95/p99 of latency by intended start, one panel per endpoint."""
    endpoints = list(scenario.traffic)
    fig, axes = new_figure(len(endpoints), 2.8)
    fig.suptitle(
        f"Latency (end - intended start) over a trailing {ROLLING_WINDOW_S:g} s window, "
        "by intended start"
    )
    for ax, ep in zip(axes, endpoints, strict=True):
        for b in builds:
            rows = b.samples[(b.samples["endpoint"] == ep) & (b.samples["latency"] > 0)]
            if rows.empty:
                continue
            t, lat = rows["t"].to_numpy(float), rows["latency"].to_numpy(float)
            ends, qs = rolling_quantiles(t, lat, span.start, span.end)
            for j, (_, style) in enumerate(QUANTILE_STYLE.values()):
                ax.plot(ends, qs[:, j], color=b.colour, ls=style, lw=1.5)
        endpoint_title(ax, scenario, ep)
        ax.set_ylabel("latency (ms / s, log scale)")
        offered = _offered_rate(ax, scenario, ep, span)
        if ax.lines:
            log_seconds_axis(ax)
            handles = _build_and_quantile_handles(builds) + offered
            if offered:  # past the right-hand axis's labels
                ax.legend(handles=handles, **{**LEGEND_STYLE, "bbox_to_anchor": (1.07, 1.0)})
            else:
                legend(ax, handles)
        else:
            empty(ax, f"no finished {ep} requests")
        time_axes(ax, scenario, span, bottom=ax is axes[-1])
    return fig


def _offered_rate(ax: Axes, scenario: Scenario, ep: str, span: Span) -> list[Handle]:
    """A ramping endpoint's offered rate, thin and grey on a right-hand axis; its legend key.

    A constant rate draws nothing: the panel's title says it.
    """
    profile = scenario.rate_profile(ep)
    if profile.is_constant:
        return []
    t, rate = profile.drawn(span.start, span.end)
    right = ax.twinx()
    right.plot(t, rate, **OFFERED_STYLE)
    right.set_ylim(0, max(max(rate), 1e-9) * 1.15)
    right.set_ylabel("offered (req/s)", color=OFFERED_STYLE["color"], fontsize=8)
    right.tick_params(axis="y", colors=OFFERED_STYLE["color"], labelsize=7)
    return [Line2D([], [], label="offered rate (req/s, right axis)", **OFFERED_STYLE)]


def _build_and_quantile_handles(builds: list[_Build]) -> list[Handle]:
    """Legend keys: colour says the build, line style says the percentile."""
    handles: list[Handle] = [Patch(color=b.colour, label=b.label) for b in builds]
    for name, (_, style) in QUANTILE_STYLE.items():
        handles.append(Line2D([], [], color="black", ls=style, label=name))
    return handles


def _latency_distribution(builds: list[_Build], scenario: Scenario, span: Span) -> Figure:
    """HDR-histogram-style percentile curves of the measured window, one panel per endpoint.

    x is 1 / (1 - p) on a log scale, so the tail (99 %, 99.9 %) gets as much
    room as the body; each curve stops at the percentile its sample count
    supports, then rises to the maximum (the dot).
    """
    endpoints = list(scenario.traffic)
    fig, axes = new_figure(len(endpoints), 3.2, sharex=False)
    fig.suptitle("Latency by percentile, measured window only (HDR-histogram style)")
    for ax, ep in zip(axes, endpoints, strict=True):
        top = 1e3
        for b in builds:
            s = b.samples
            m = (s["endpoint"] == ep) & (s["t"] >= 0) & (s["t"] < span.end) & (s["latency"] > 0)
            lat = np.sort(s.loc[m, "latency"].to_numpy(float))
            if not len(lat):
                continue
            x = np.logspace(0, np.log10(max(len(lat), 2)), 400)
            y = np.quantile(lat, 1 - 1 / x)
            label = f"{b.label}: {len(lat):,} requests"
            ax.plot([*x, x[-1]], [*y, lat[-1]], color=b.colour, lw=1.8, label=label)
            ax.plot([x[-1]], [lat[-1]], marker="o", color=b.colour, ms=4)
            top = max(top, float(x[-1]) * 1.5)
        endpoint_title(ax, scenario, ep)
        ax.set_ylabel("latency (ms / s, log scale)")
        ax.set_xlabel("percentile (log scale of 1 / (1 - p))")
        if ax.lines:
            ax.set_xscale("log")
            ticks = [k for k in PERCENTILE_TICKS if k <= top]
            ax.set_xticks(ticks, [PERCENTILE_TICKS[k] for k in ticks])
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlim(1, top)
            log_seconds_axis(ax)
            legend(ax)
        else:
            empty(ax, f"no finished {ep} requests in the measured window", keep_x=False)
        ax.grid(True, which="major", alpha=0.3)
    return fig


def _breaker_rows(builds: list[_Build]) -> list[tuple[_Build, str, str, Array, Array]]:
    """One band per build, or one per replica of a replicated build (each has its own
    breaker): (build, label, name, scrape times, state codes)."""
    rows: list[tuple[_Build, str, str, Array, Array]] = []
    for b in builds:
        if not b.replicas:
            rows.append((b, b.label, b.name, *b.series("breaker_state")))
            continue
        for i, (t, state) in enumerate(b.replica_series("breaker_state")):
            rows.append((b, f"{b.label} replica {i}", f"{b.name} replica {i}", t, state))
    return rows


def _breaker_state(builds: list[_Build], scenario: Scenario, span: Span) -> Figure:
    """Breaker state per build (per replica) as coloured bands (as sampled at each scrape)."""
    rows = _breaker_rows(builds)
    fig, (ax,) = new_figure(1, 0.55 * max(2, len(rows)) + 0.6)
    ax.set_title("Circuit breaker state (as sampled at each metrics scrape)")
    seen: set[int] = set()
    for row, (_, _, name, t, state) in enumerate(rows):
        if not len(t):
            whole = [(span.start, span.stop - span.start)]
            ax.broken_barh(whole, (row - 0.35, 0.7), facecolors="#f7f7f7", edgecolor="#cccccc")
            ax.text((span.start + span.stop) / 2, row, f"{name}: no breaker", **NOTE_STYLE)
            continue
        interval = float(np.median(np.diff(t))) if len(t) > 1 else 1.0
        for code, bars in state_bars(t, state, float(t[-1]) + interval).items():
            ax.broken_barh(bars, (row - 0.35, 0.7), facecolors=state_style(code)[1], lw=0)
            seen.add(code)
    ax.set_yticks(range(len(rows)), [label for _, label, _, _, _ in rows])
    for tick, (b, *_) in zip(ax.get_yticklabels(), rows, strict=True):
        tick.set_color(b.colour)
    ax.set_ylim(max(1, len(rows)) - 0.5, -0.8)
    if not builds:
        empty(ax, "no builds in this run")
    time_axes(ax, scenario, span, bottom=True)
    legend(ax, [Patch(color=state_style(c)[1], label=state_style(c)[0]) for c in sorted(seen)])
    return fig


def _db_pool(builds: list[_Build], scenario: Scenario, span: Span) -> Figure:
    """Per build with a DB pool: connections in use, threads waiting, the pool's size."""
    fig, (ax,) = new_figure(1, 3.4)
    ax.set_title("DB connection pool (connections in use, threads waiting, pool size)")
    for b in builds:
        for name, (style, what) in POOL_SERIES.items():
            t, value = b.series(name)
            if len(t):
                ax.step(
                    t, value, where="post", color=b.colour, ls=style, label=f"{b.label}: {what}"
                )
    missing = [b.name for b in builds if not any(len(b.series(n)[0]) for n in POOL_SERIES)]
    if missing:
        note(ax, "no DB pool exposed by " + ", ".join(missing), y=0.6)
    ax.set_ylim(0, ax.get_ylim()[1] * 1.1)
    ax.set_ylabel("connections / threads")
    time_axes(ax, scenario, span, bottom=True)
    legend(ax)
    return fig


def _has_pool(builds: list[_Build], scenario: Scenario) -> bool:
    return any(len(b.series(name)[0]) for b in builds for name in POOL_SERIES)


def _recovery(builds: list[_Build], scenario: Scenario, span: Span) -> Figure:
    """The verdict's chart (``report.recovery_chart``)."""
    return draw_recovery([b.result for b in builds], builds, scenario, span)


CHART_TABLE: tuple[Chart, ...] = (
    Chart(
        "busy_workers",
        "Busy request threads per build over time; the dashed line is the pool size.",
        _busy_workers,
    ),
    Chart(
        "gateway_calls",
        f"Per build and per second: the requests to the endpoints that call the {PG} offered "
        "(grey, by intended start), calls the breaker refused (dashed) and calls pg received "
        "(solid; by arrival time from its ledger, or from its counter at the scrape interval "
        "without one). Fault phases are shaded; a phase with repeating blips is shaded "
        "lightly, each blip darker. Only where the run played pg.",
        _pg_calls,
        plays=lambda scenario: scenario.has_pg,
    ),
    Chart(
        "dependency_calls",
        "One panel per dependency the scenario names: the calls it received per second "
        "(solid, by arrival time from its ledger) and those answered with an error (dashed: "
        "5xx, or no answer), per build. Fault phases are shaded.",
        _dependency_calls,
        plays=lambda scenario: bool(scenario.dependencies),
    ),
    Chart(
        "latency_over_time",
        "Latency (end minus intended start) p50/p95/p99 over a trailing 5 s window of "
        "requests, by intended start time, per endpoint; an endpoint whose rate ramps (stages) "
        "shows its offered rate as a thin grey line on the right-hand axis.",
        _latency_over_time,
    ),
    Chart(
        "latency_distribution",
        "Latency by percentile over the measured window (HDR-histogram style); the dot is the "
        "maximum.",
        _latency_distribution,
    ),
    Chart(
        "breaker_state",
        "Circuit breaker state per build (one row per replica of a replicated build: each has "
        "its own breaker), as sampled at each metrics scrape.",
        _breaker_state,
    ),
    Chart(
        "db_pool",
        "DB connections per build over time (HikariCP): in use (solid), threads waiting for "
        "one (dashed) and the pool's size (dotted); only builds with a pool.",
        _db_pool,
        when=_has_pool,
    ),
    Chart(
        "recovery",
        "Per build and per second: the offered load (grey: first attempts due, by intended "
        "start), goodput (solid: requests answered 2xx/3xx, by when they were due), the "
        "threshold recovery: asks for (thin), the client's retries (dashed) and the target's "
        "retries to the gateway (dotted, from its retries counter); the trigger phase is "
        "hatched and the build's verdict is in its legend.",
        _recovery,
        plays=lambda scenario: scenario.recovery is not None,
    ),
)
"""Every chart, in the order a report shows them."""
CHARTS = tuple(chart.key for chart in CHART_TABLE if chart.when is None and chart.plays is None)
"""The keys of the charts every run gets (``scenario_charts``: a scenario's run's)."""
