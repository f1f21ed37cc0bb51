"""The catalogue of figures: each figure a report holds, a gate names and a table shows, once.

A canonical series (``SERIES``) is what a preset reads from a target's scrapes
(``harness.analysis.presets``); a figure (``FIGURES``) is one number of
``report.json``: where it is read from (a canonical series, the samples, the
gateway's ledger), its statistic, unit, report key, gate name, row label, how it
can be cut (by phase, by replica) and what its absence means. Everything else is
derived from these two tables: the figures a series drives (``analysis.cuts``),
the gate vocabulary (``scenario.gates``) and lookups (``gates.evaluate``), the
not-measured reasons, the report's rows for series figures, and the docs' figure
tables (``core.figure_docs``, checked against docs/scenario.md by a test).

It sits in ``core`` because the scenario (the gate vocabulary) needs it as much
as the analysis, the gates and the report do.

Adding a canonical series: a ``Series`` here and its figures (``gauge_figures``,
``series_figure``), the selectors of the presets that read it,
a test. Its figures land under ``series.<name>`` in a build's report, phase and
replica (``series.<name>.max_fault``...), its gates are ``<name>.<stat>``.
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


SERIES: tuple[Series, ...] = (
    Series("busy_workers", "gauge", "busy request threads"),
    Series("max_workers", "gauge", "the request pool's size"),
    Series("blocked_calls", "counter", "calls the breaker refused"),
    Series("pg_calls", "counter", "calls to the gateway, as the target counted them"),
    Series("retries", "counter", "extra attempts made by Retry"),
    Series("breaker_state", "state", "the breaker's state"),
    Series("db_active", "gauge", "DB connections in use", optional=True),
    Series("db_pending", "gauge", "threads waiting for a DB connection", optional=True),
    Series("db_max", "gauge", "the DB connection pool's size", optional=True),
    Series("db_timeouts", "counter", "waits for a DB connection that timed out", optional=True),
)
"""Every canonical series, in the order presets, ``metrics.map`` and reports list them."""


@dataclass(frozen=True)
class Figure:
    """One number of a build's report."""

    key: str
    """Dotted key in a build's section of ``report.json`` (``workers.busy_max_fault``);
    ``{endpoint}`` for per-endpoint figures."""
    source: str
    """A canonical series' name, or ``samples`` (the load's requests), ``gateway`` (the
    gateway's ledger, else its counter), ``ledger``."""
    stat: str
    """How it is read: ``max``, ``mean``, ``p50`` (a gauge over the window), ``peak`` (a
    gauge's greatest reading), ``count`` and ``per_s`` (a counter's growth),
    ``open_pct``, ``opens``, ``time_to_open`` (the breaker's state), or what the
    ``samples`` / ``gateway`` code computes."""
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


_EP = ENDPOINT
_BUSY = "busy request threads"
_OUTCOME = (
    "% answered 2xx/3xx, the rest, requests per second achieved, requests intended, how late "
    "the latest request was sent (s)"
)


def _endpoint(
    stat: str,
    unit: Unit = "",
    meaning: str = "",
    key: str | None = None,
    *,
    complement: bool = False,
) -> Figure:
    """An endpoint's figure over the requests intended in the window."""
    where = f"endpoints.{_EP}.{key or stat}"
    return Figure(
        key=where,
        source="samples",
        stat=stat,
        window="whole",
        gate=f"{_EP}.{stat}",
        phase_key=where,
        unit=unit,
        meaning=meaning,
        complement=complement,
    )


FIGURES: tuple[Figure, ...] = (
    *(
        _endpoint(q, "s", "latency (s), from the intended start", key=f"latency_s.{q}")
        for q in ("p50", "p95", "p99", "max", "mean")
    ),
    _endpoint("success_pct", "%", _OUTCOME),
    _endpoint("error_pct", "%", _OUTCOME, key="success_pct", complement=True),
    _endpoint("achieved_rps", "", _OUTCOME),
    _endpoint("requests", "", _OUTCOME),
    _endpoint("max_lateness_s", "s", _OUTCOME),
    _endpoint("dropped", meaning="requests not sent: `max-in-flight` of them were open"),
    _endpoint(
        "kept_pct",
        "%",
        "service kept (seed 004): % of requests answered 2xx, fresh or from a cache",
    ),
    _endpoint(
        "cached_pct",
        "%",
        "% of requests answered from the target's cache (the answer said `X-Outcome: cached`)",
    ),
    Figure(
        key=f"timeline.endpoints_recover_s.{_EP}",
        source="samples",
        stat="time_to_recover",
        window="run",
        gate=f"{_EP}.time_to_recover",
        unit="s",
        meaning="s from the last fault phase's end until the endpoint is its healthy self "
        "again: >= 95% of its requests over 5 s answered (2xx/3xx) within twice its healthy "
        "p99 (at least that + 10 ms), the healthy p99 taken before the first fault phase. "
        "Sees a queue that drains for seconds after the gateway heals, which "
        "`time_to_recover` (answers only) does not; not measured without healthy time "
        "before the fault",
        absent="the report was written before the figure existed",
    ),
    *gauge_figures("busy_workers", "busy workers", _BUSY, "workers.busy_{stat}", None),
    Figure(
        key="workers.max_workers",
        source="max_workers",
        stat="peak",
        window="run",
        gate="max_workers",
        replica_key="workers.max_workers",
        label="max workers",
        meaning="the pool size",
    ),
    Figure(
        key="breaker.blocked_total",
        source="blocked_calls",
        stat="count",
        window="whole",
        gate="blocked.total",
        phase_key="breaker.blocked",
        replica_key="breaker.blocked_total",
        label="blocked calls",
        meaning="calls refused by the breaker",
    ),
    Figure(
        key="breaker.blocked_fault",
        source="blocked_calls",
        stat="count",
        window="fault",
        replica_key="breaker.blocked_fault",
    ),
    Figure(
        key="breaker.blocked_per_s_fault",
        source="blocked_calls",
        stat="per_s",
        window="fault",
        gate="blocked.per_s",
        phase_key="breaker.blocked_per_s",
        replica_key="breaker.blocked_per_s_fault",
        label="blocked calls/s (fault)",
        meaning="refused per second",
    ),
    Figure(
        key="breaker.open_pct_fault",
        source="breaker_state",
        stat="open_pct",
        window="fault",
        gate="breaker.open_pct",
        phase_key="breaker.open_pct",
        replica_key="breaker.open_pct_fault",
        unit="%",
        meaning="% of scrapes in which the breaker was open",
    ),
    Figure(
        key="breaker.opens",
        source="breaker_state",
        stat="opens",
        window="whole",
        gate="breaker.opens",
        phase_key="breaker.opens",
        replica_key="breaker.opens",
        meaning="times the breaker left closed: scrapes that read open or half-open after one "
        "that read closed (seed 004's flaps; the breaker starts closed; a failed half-open "
        "trial is not a new open)",
    ),
    Figure(
        key="pg.calls",
        source="gateway",
        stat="calls",
        window="whole",
        gate="pg.calls",
        phase_key="pg.calls",
        label="PG calls received",
        meaning="calls the gateway received (by arrival, from its ledger)",
    ),
    Figure(
        key="pg.calls_fault",
        source="gateway",
        stat="calls",
        window="fault",
        label="PG calls received (fault)",
    ),
    Figure(
        key="pg.amplification",
        source="gateway",
        stat="amplification",
        window="whole",
        gate="pg.amplification",
        phase_key="pg.amplification",
        label="PG amplification",
        meaning="gateway calls / requests of `calls-gateway` endpoints",
    ),
    Figure(
        key="pg.amplification_fault",
        source="gateway",
        stat="amplification",
        window="fault",
        label="PG amplification (fault)",
    ),
    Figure(
        key="pg.target_calls",
        source="pg_calls",
        stat="count",
        window="whole",
        replica_key="pg.target_calls",
    ),
    Figure(
        key="pg.retries",
        source="retries",
        stat="count",
        window="whole",
        gate="pg.retries",
        replica_key="pg.retries",
        meaning="extra attempts made by Retry, over the measured window",
    ),
    Figure(
        key="timeline.time_to_open_s",
        source="breaker_state",
        stat="time_to_open",
        window="run",
        gate="time_to_open",
        replica_key="breaker.time_to_open_s",
        unit="s",
        label="time to open",
        meaning="s from the first fault phase's start to the breaker's first open scrape",
    ),
    Figure(
        key="timeline.time_to_recover_s",
        source="samples",
        stat="time_to_recover",
        window="run",
        gate="time_to_recover",
        unit="s",
        label="time to recover",
        meaning="s from the last fault phase's end until gateway requests succeed >= 95% over 5 s",
    ),
    Figure(
        key="timeline.blocked_pct_healthy",
        source="samples",
        stat="blocked_pct_healthy",
        window="run",
        gate="blocked_pct_healthy",
        unit="%",
        meaning="% of gateway requests refused while the gateway was healthy (seed 004's false "
        "opens, and the time it stays open after recovery)",
    ),
    *gauge_figures("db_active", "DB connections active", "DB connections in use (HikariCP)"),
    *gauge_figures(
        "db_pending", "DB connections pending", "threads waiting for a DB connection (HikariCP)"
    ),
    series_figure("db_max", "peak", "DB pool size", "the DB connection pool's size"),
    series_figure(
        "db_timeouts",
        "count",
        "DB connection timeouts",
        "waits for a DB connection that reached connection-timeout",
    ),
)
"""Every figure, in the order of the headline table's rows and of the docs' tables."""

SERIES_BY_NAME = {s.name: s for s in SERIES}
CANONICAL_SERIES = tuple(s.name for s in SERIES)
COUNTERS = tuple(s.name for s in SERIES if s.kind == "counter")
"""Canonical series that are counters (the state is read apart, the others are gauges)."""
GATED = {f.gate: f for f in FIGURES if f.gate is not None}
"""Gate name (``busy_workers.max``, ``{endpoint}.p95``) -> its figure."""


def endpoint_gate(name: str) -> str:
    """A gate name with its endpoint replaced by ``{endpoint}`` (``products.p95`` ->
    ``{endpoint}.p95``); endpoint names have no dot."""
    return ENDPOINT + "." + name.split(".", 1)[1] if "." in name else name


def gated(name: str, endpoints: object = ()) -> tuple[Figure, str | None] | None:
    """The figure a gate's name (without build and phase) reads, and its endpoint.

    An endpoint's figure (``products.p95``) is found when its first part is one of
    ``endpoints`` (a container of names); an endpoint's name wins over a figure's.
    """
    head = name.split(".", 1)[0]
    if head in endpoints:  # type: ignore[operator]
        figure = GATED.get(endpoint_gate(name))
        if figure is not None:
            return figure, head
    figure = GATED.get(name)
    if figure is None or ENDPOINT in name:
        return None
    return figure, None


def unit_of(name: str) -> Unit:
    """The unit of a figure a gate names, as written (``after.products.p95[outage]``)."""
    bare = name.split("[", 1)[0]
    parts = bare.split(".")
    for start in range(len(parts)):
        rest = ".".join(parts[start:])
        figure = GATED.get(rest) or GATED.get(endpoint_gate(rest))
        if figure is not None:
            return figure.unit
    return ""
