"""What a canonical series, a statistic and a figure are: the vocabulary of the catalogue.

``SERIES`` is every canonical series (what a preset reads from a target's scrapes),
``STATISTICS`` every statistic a figure is read through (what it means, whether a scrape
gap blanks it, whether a reducer reads it from a series), and ``Figure`` one number of a
report, with the helpers that make the common kinds of figure from a series (a gauge's
max/mean/p50, a series' peak or count). ``core.catalogue`` holds the table of figures made
of them: this module says what a figure can be, that one which figures there are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Unit = Literal["", "s", "%"]
Kind = Literal["gauge", "counter", "state"]
Window = Literal["fault", "whole", "run"]
"""What a figure covers without ``[phase]``: the fault window, the whole measured window,
or the run as a whole (never cut by phase)."""

ENDPOINT = "{endpoint}"
"""Stands for an endpoint's name in a figure's gate name and report key."""
DEPENDENCY = "{dependency}"
"""Stands for a named dependency's name in a figure's gate name and report key
(``dependencies.{dependency}.calls``)."""
NOT_EXPOSED = "not exposed"
"""A cell of an optional series a build's service never exposed."""


@dataclass(frozen=True)
class Series:
    """A canonical series: read through a preset from each target's scrapes."""

    name: str
    kind: Kind
    what: str
    """In words, for docs and messages: ``busy request threads``."""
    optional: bool = False
    """Absence is normal (a service without a DB pool): its figures are left out of the
    report rather than reported "not measured", and tables say ``not exposed``."""
    digits: int = 2
    """Decimals a gauge's statistics are kept to: 2 for counts (threads, connections), 4
    for seconds (an event loop's lag of 12 ms is 0.0121, not 0.01)."""


SERIES: tuple[Series, ...] = (
    Series("busy_workers", "gauge", "busy request threads"),
    Series("max_workers", "gauge", "the request pool's size"),
    Series("blocked_calls", "counter", "calls the breaker refused"),
    Series("pg_calls", "counter", "calls to the gateway, as the target counted them"),
    Series("retries", "counter", "extra attempts made by Retry"),
    Series(
        "breaker_failures",
        "counter",
        "calls the breaker recorded as failed (each fills a slot of its window)",
        optional=True,
    ),
    Series("breaker_state", "state", "the breaker's state"),
    Series("db_active", "gauge", "DB connections in use", optional=True),
    Series("db_pending", "gauge", "threads waiting for a DB connection", optional=True),
    Series("db_max", "gauge", "the DB connection pool's size", optional=True),
    Series("db_timeouts", "counter", "waits for a DB connection that timed out", optional=True),
    Series("event_loop_lag", "gauge", "the event loop's lag, s (Node)", optional=True, digits=4),
)
"""Every canonical series, in the order presets, ``metrics.map`` and reports list them."""


SERIES_BY_NAME = {s.name: s for s in SERIES}


@dataclass(frozen=True)
class Statistic:
    """How a figure is read from its source (``Figure.stat`` names one)."""

    name: str
    what: str
    """In words, for the docs' table of statistics."""
    from_series: bool = False
    """Read from a canonical series over a window by its reducer (``analysis.cuts.REDUCERS``,
    keyed by name); False: only the code of the figure's source (the samples', the
    gateway's, the scrapes') computes it. ``max``, ``mean`` and ``p50`` are both: a gauge's
    by the reducer, an endpoint's latency by ``analysis.endpoints``."""
    gap_blind: bool = False
    """Read from a series' scrape readings themselves, so a scrape gap in its window makes
    it wrong: it is then None and "not measured" there (``analysis.validity``). A counter's
    count is not: it reads the counter at the window's edges, which a gap does not change."""


_READINGS = "of a gauge's readings in the window, or of an endpoint's latencies"

STATISTICS: tuple[Statistic, ...] = (
    Statistic("max", f"the greatest {_READINGS}", from_series=True, gap_blind=True),
    Statistic("mean", f"the mean {_READINGS}", from_series=True, gap_blind=True),
    Statistic("p50", f"the median {_READINGS}", from_series=True, gap_blind=True),
    Statistic("peak", "a gauge's greatest reading over the run (a pool's size)", from_series=True),
    Statistic(
        "count", "how much a counter grew over the window (read at its edges)", from_series=True
    ),
    Statistic("per_s", "how much a counter grew over the window, per second", from_series=True),
    Statistic(
        "open_pct",
        "% of the scrapes in the window that read the breaker open",
        from_series=True,
        gap_blind=True,
    ),
    Statistic(
        "opens",
        "times the breaker went to open, half-open re-opens included, as the scrapes in the "
        "window read it",
        from_series=True,
        gap_blind=True,
    ),
    Statistic(
        "opens_from_closed",
        "times the breaker left closed, as the scrapes in the window read it",
        from_series=True,
        gap_blind=True,
    ),
    Statistic(
        "time_to_open",
        "s from the first fault's start to the first scrape reading the breaker open",
        from_series=True,
        gap_blind=True,
    ),
    Statistic("p95", "the 95th percentile of an endpoint's latencies"),
    Statistic("p99", "the 99th percentile of an endpoint's latencies"),
    Statistic("success_pct", "% of an endpoint's requests served (2xx/3xx, not a fallback)"),
    Statistic("error_pct", "100 minus `success_pct`"),
    Statistic("achieved_rps", "an endpoint's requests per second achieved"),
    Statistic("requests", "an endpoint's requests"),
    Statistic("max_lateness_s", "how late an endpoint's latest request was sent (s)"),
    Statistic("dropped", "an endpoint's requests not sent (`max-in-flight` of them open)"),
    Statistic("kept_pct", "% of an endpoint's requests served 2xx, fresh or from a cache"),
    Statistic("cached_pct", "% of an endpoint's requests answered from a cache"),
    Statistic("offered_rps", "first attempts per second the scenario asks of an endpoint"),
    Statistic("retried_pct", "% of an endpoint's requests sent twice or more"),
    Statistic("attempts", "attempts per request of an endpoint, the mean"),
    Statistic("admitted_rps", "an endpoint's attempts per second, retries included"),
    Statistic("retried_rps", "an endpoint's retries (attempts 2 and later) per second"),
    Statistic("time_to_recover", "s from the last fault's end until requests are healthy again"),
    Statistic("recovered", "the `recovery:` verdict: 1 recovered by itself, 0 stuck"),
    Statistic("recovered_after_s", "s from the `recovery:` trigger's end until goodput held"),
    Statistic("blocked_pct_healthy", "% of gateway requests refused or stood in for while healthy"),
    Statistic(
        "protected_p99",
        "p99 latency, over the fault window, of the endpoints not calling the gateway",
    ),
    Statistic(
        "in_flight_max",
        "the most requests open at once in the window (sent, not yet answered), from the load "
        "generator's samples",
    ),
    Statistic(
        "in_flight_p50",
        "the median over time of the requests open at once in the window (the level held, or "
        "less, for half of it)",
    ),
    Statistic("max_lateness", "how late the load generator sent its latest request (s)"),
    Statistic("calls", "calls the gateway received in the window (its ledger, else its counter)"),
    Statistic("amplification", "gateway calls per request of the `calls-gateway` endpoints"),
    Statistic("gap", "the longest time between two scrapes of the target in the window (s)"),
    Statistic("dependency_calls", "calls a named dependency received in the window (its ledger)"),
    Statistic("per_request", "a named dependency's calls per request the load sent"),
    Statistic("errors", "a named dependency's calls answered 5xx or not answered (status 0)"),
    Statistic("unmatched", "a named dependency's calls no stub route matched"),
    Statistic("held_p99", "the 99th percentile of how long a named dependency held a call (s)"),
    Statistic("connections", "connections a TCP dependency's proxy accepted in the window"),
    Statistic("bytes", "bytes a TCP dependency's proxy passed one way in the window"),
    Statistic("toxics_applied", "connections a TCP dependency's toxics hit in the window"),
    Statistic("upstream_errors", "connections a TCP dependency's proxy could not open upstream"),
)
"""Every statistic a figure is read through: those a reducer reads from a series first,
then those its source's code computes, in the order of the docs' table."""

STATISTICS_BY_NAME = {s.name: s for s in STATISTICS}


@dataclass(frozen=True)
class Figure:
    """One number of a build's report."""

    key: str
    """Dotted key in a build's section of ``report.json`` (``workers.busy_max_fault``);
    ``{endpoint}`` for per-endpoint figures."""
    source: str
    """A canonical series' name, or ``samples`` (the load's requests), ``gateway`` (the
    gateway's ledger, else its counter), ``ledger``, ``scrapes`` (when they were taken)."""
    stat: str
    """How it is read: the name of one of ``STATISTICS`` (``max``, ``count``, ``p95``...)."""
    window: Window
    gate: str | None = None
    """The name a gate uses (``busy_workers.max``, ``{endpoint}.p95``); None: not gated."""
    phase_key: str | None = None
    """Its key in ``phases.<phase>``; None: not cut by phase."""
    replica_key: str | None = None
    """Its key in ``replicas.<i>`` (a replica's own); None: a replica has none."""
    unit: Unit = ""
    label: str | None = None
    """The label of its row in the headline table; None: no row."""
    meaning: str = ""
    """For the docs' gate table."""
    absent: str | None = None
    """What a report without its key means (None: no such figure in that report)."""
    complement: bool = False
    """Read as 100 minus the key's value (``error_pct`` from ``success_pct``)."""

    def __post_init__(self) -> None:
        if self.stat not in STATISTICS_BY_NAME:
            raise ValueError(f"figure {self.key!r}: {self.stat!r} is not one of STATISTICS")

    @property
    def statistic(self) -> Statistic:
        """The statistic it is read through."""
        return STATISTICS_BY_NAME[self.stat]

    @property
    def section(self) -> str:
        return self.key.split(".", 1)[0]

    @property
    def cut(self) -> bool:
        """Whether ``[phase]`` can cut it."""
        return self.phase_key is not None

    def series(self) -> Series | None:
        """The canonical series it is read from, if it is."""
        return SERIES_BY_NAME.get(self.source)


def gauge_figures(
    series: str,
    label: str,
    meaning: str,
    key: str = "series.{series}.{stat}",
    absent: str | None = NOT_EXPOSED,
    unit: Unit = "",
) -> tuple[Figure, ...]:
    """A gauge's ``max``, ``mean`` and ``p50`` over the fault window (``<key>_fault``), per
    phase (``<key>``) and per replica."""
    return tuple(
        Figure(
            key=key.format(series=series, stat=stat) + "_fault",
            source=series,
            stat=stat,
            window="fault",
            gate=f"{series}.{stat}",
            phase_key=key.format(series=series, stat=stat),
            replica_key=key.format(series=series, stat=stat) + "_fault",
            unit=unit,
            label=f"{label} {stat} (fault)",
            meaning=meaning,
            absent=absent,
        )
        for stat in ("max", "mean", "p50")
    )


def series_figure(series: str, stat: Literal["peak", "count"], label: str, meaning: str) -> Figure:
    """A gauge's greatest reading over the run (``peak``: a pool's size, not cut by phase),
    or a counter's growth over the measured window (``count``: per phase too)."""
    key = f"series.{series}.{'max' if stat == 'peak' else 'total'}"
    return Figure(
        key=key,
        source=series,
        stat=stat,
        window="run" if stat == "peak" else "whole",
        gate=series,
        phase_key=None if stat == "peak" else key,
        replica_key=key,
        label=label,
        meaning=meaning,
        absent=NOT_EXPOSED,
    )
