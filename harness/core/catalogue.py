"""The catalogue of figures: each figure a report holds, a gate names and a table shows, once.

``FIGURES`` is the table: one ``Figure`` (``core.canonical``: what a canonical series, a
statistic and a figure are) per number of ``report.json``: where it is read from (a
canonical series, the samples, the gateway's ledger), its statistic, unit, report key,
gate name, row label, how it can be cut (by phase, by replica) and what its absence means.
Everything else is derived from it: the figures a series drives (``analysis.cuts``), the
gate vocabulary (``scenario.gates``) and lookups (``gates.evaluate``), the not-measured
reasons, the report's rows for series figures, and the docs' figure tables
(``core.figure_docs``, checked by a test).

It sits in ``core`` because the scenario (the gate vocabulary) needs it as much as the
analysis, the gates and the report do. Adding a canonical series: a ``Series`` in
``core.canonical`` and its figures here (``gauge_figures``, ``series_figure``), the
selectors of the presets that read it, a test (docs/architecture.md's recipe); its figures
land under ``series.<name>``, its gates are ``<name>.<stat>``.
"""

from __future__ import annotations

from dataclasses import replace

from harness.core.canonical import (
    DEPENDENCY,
    ENDPOINT,
    NOT_EXPOSED,
    SERIES,
    SERIES_BY_NAME,
    Figure,
    Kind,
    Series,
    Unit,
    Window,
    gauge_figures,
    series_figure,
)

__all__ = [
    "CANONICAL_SERIES",
    "COUNTERS",
    "DEPENDENCY",
    "ENDPOINT",
    "FIGURES",
    "GATED",
    "NOT_EXPOSED",
    "SERIES",
    "SERIES_BY_NAME",
    "Figure",
    "Kind",
    "Series",
    "Unit",
    "Window",
    "endpoint_gate",
    "gated",
    "unit_of",
]

_EP = ENDPOINT
_BUSY = "busy request threads"
_OUTCOME = (
    "% served (answered 2xx/3xx, not a fallback or degraded answer by the endpoint's "
    "`outcomes`), the rest, requests per second achieved, requests intended, how late the "
    "latest request was sent (s)"
)


_NO_RECOVERY = "the scenario has no `recovery:` section (or the report predates the figure)"
_RECOVERED = "the `recovery:` verdict: 1 recovered by itself, 0 stuck; with --repeat the share"
_RECOVERED_AFTER = "s from the trigger's end until goodput held; stuck: none, gates read > `within`"


def _verdict(name: str, unit: Unit, label: str, meaning: str) -> Figure:
    """A figure of the ``recovery:`` verdict (``analysis.recovery``), in ``timeline``."""
    figure = Figure(f"timeline.{name}", "samples", name, "run", name, unit=unit, label=label)
    return replace(figure, meaning=meaning, absent=_NO_RECOVERY)


def _endpoint(
    stat: str,
    unit: Unit = "",
    meaning: str = "",
    key: str | None = None,
    *,
    complement: bool = False,
    absent: str | None = None,
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
        absent=absent,
    )


_NO_DEPENDENCY = "the scenario names no such dependency (`dependencies:`)"


def _dependency(field: str, stat: str, meaning: str, unit: Unit = "") -> tuple[Figure, ...]:
    """A named dependency's figure from its ledger (``analysis.dependencies``): over the
    measured window and each phase (gated), and over the fault window (``<field>_fault``)."""
    where = f"dependencies.{DEPENDENCY}.{field}"
    return (
        Figure(
            key=where,
            source="dependency",
            stat=stat,
            window="whole",
            gate=where,
            phase_key=where,
            unit=unit,
            meaning=meaning,
            absent=_NO_DEPENDENCY,
        ),
        Figure(key=f"{where}_fault", source="dependency", stat=stat, window="fault", unit=unit),
    )


_NO_RETRY = "the endpoint has no `retry:` (each request is sent once)"
_BEFORE_IT = "the report was written before the figure existed"
_IN_FLIGHT = (
    "requests open at once at the service (sent, not yet answered; the load generator's own "
    "samples, so any server has it): the concurrency of a server without a worker pool "
    "(Netty, Node), the queue behind a full one; max, and the median over time"
)


FIGURES: tuple[Figure, ...] = (
    *(
        _endpoint(
            q,
            "s",
            "latency (s), from the intended start (a retried request's first attempt's) to "
            "its final answer",
            key=f"latency_s.{q}",
        )
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
        "service kept (seed 004): % of requests served 2xx (not a fallback or degraded answer), "
        "fresh or from a cache",
    ),
    _endpoint(
        "cached_pct",
        "%",
        "% of requests answered from a cache (classed `cached` by the endpoint's `outcomes`)",
    ),
    _endpoint("offered_rps", meaning="requests (first attempts) per second the scenario asks for"),
    _endpoint(
        "in_flight_max",
        meaning="the most of the endpoint's requests open at once in the window (sent, not yet "
        "answered): which route holds the service's requests in flight",
        absent=_BEFORE_IT,
    ),
    _endpoint(
        "retried_pct",
        "%",
        "% of requests the client retried (`traffic.<ep>.retry`: sent twice or more)",
        absent=_NO_RETRY,
    ),
    _endpoint(
        "attempts",
        meaning="attempts the client sent per request, the mean (1: none retried)",
        absent=_NO_RETRY,
    ),
    _endpoint(
        "admitted_rps",
        meaning="attempts sent per second, retries included (`offered_rps`: first attempts "
        "only), of the requests intended in the window",
        absent=_NO_RETRY,
    ),
    _endpoint(
        "retried_rps",
        meaning="retries sent per second (attempts 2 and later) of the requests intended in "
        "the window",
        absent=_NO_RETRY,
    ),
    Figure(
        key=f"timeline.endpoints_recover_s.{_EP}",
        source="samples",
        stat="time_to_recover",
        window="run",
        gate=f"{_EP}.time_to_recover",
        unit="s",
        meaning="s from the last fault phase's end until the endpoint is its healthy self "
        "again: >= 95% of its requests over 5 s served (2xx/3xx, not a fallback or degraded "
        "answer) within twice its healthy p99 (at least that + 10 ms), the healthy p99 taken "
        "before the first fault phase; the time is the service's, from sent to answered, so a "
        "load generator that sent late does not count. "
        "Sees a queue that drains for seconds after the gateway heals, which "
        "`gateway_time_to_recover` (answers only) does not; not measured without healthy "
        "time before the fault",
        absent="the report was written before the figure existed",
    ),
    _verdict("recovered", "", "recovered", _RECOVERED),
    _verdict("recovered_after_s", "s", "recovered after", _RECOVERED_AFTER),
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
    *(
        Figure(
            key=f"in_flight.{stat}_fault",
            source="samples",
            stat=f"in_flight_{stat}",
            window="fault",
            gate=f"in_flight.{stat}",
            phase_key=f"in_flight.{stat}",
            label=f"requests in flight {stat} (fault)",
            meaning=_IN_FLIGHT,
            absent=_BEFORE_IT,
        )
        for stat in ("max", "p50")
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
        meaning="times the breaker went to open: scrapes that read open after one that did "
        "not, from closed or from half-open (a failed trial), and half-open after closed (the "
        "open fell between two scrapes); the breaker starts closed",
    ),
    Figure(
        key="breaker.opens_from_closed",
        source="breaker_state",
        stat="opens_from_closed",
        window="whole",
        gate="breaker.opens_from_closed",
        phase_key="breaker.opens_from_closed",
        replica_key="breaker.opens_from_closed",
        meaning="times the breaker left closed: scrapes that read open or half-open after one "
        "that read closed (seed 004's flaps: a breaker closed by a lucky trial opening again; "
        "a failed half-open trial is not counted, `breaker.opens` counts it)",
        absent="the report was written before the figure existed (its `breaker.opens` counted "
        "only these)",
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
        label="service retries",
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
        key="timeline.service_recover_s",
        source="samples",
        stat="time_to_recover",
        window="run",
        gate="time_to_recover",
        unit="s",
        label="time to recover",
        meaning="s from the last fault phase's end until every endpoint is its healthy self "
        "again: the slowest endpoint's own `<endpoint>.time_to_recover`; not reached (> N s) "
        "when one was not back inside the window, not measured when one could not be measured",
        absent="the report was written before the figure existed (its `time_to_recover` was "
        "the gateway calls' answers, `gateway_time_to_recover` now): `harness report RUN` "
        "reads the run again",
    ),
    Figure(
        key="timeline.time_to_recover_s",
        source="samples",
        stat="time_to_recover",
        window="run",
        gate="gateway_time_to_recover",
        unit="s",
        label="gateway calls answered again",
        meaning="s from the last fault phase's end until requests of the `calls-gateway` "
        "endpoints are served (2xx/3xx, not a fallback or degraded answer) >= 95% over 5 s: "
        "answers only, however late (a queue still draining is not seen)",
    ),
    Figure(
        key="timeline.blocked_pct_healthy",
        source="samples",
        stat="blocked_pct_healthy",
        window="run",
        gate="blocked_pct_healthy",
        unit="%",
        meaning="% of gateway requests refused, or answered by a fallback or degraded, while the "
        "gateway was healthy (by the endpoints' `outcomes`: seed 004's false opens, and the time "
        "the breaker stays open after recovery)",
    ),
    Figure(
        key="timeline.protected_p99_s",
        source="samples",
        stat="protected_p99",
        window="run",
        gate="protected_p99",
        unit="s",
        meaning="p99 latency (s) of the endpoints that do not call the gateway (no "
        "`calls-gateway`), over their requests intended in the fault window: the protection a "
        "breaker gives the rest of the service (a sweep's default front score)",
        absent="the report was written before the figure existed",
    ),
    Figure(
        key="validity.generator_max_lateness_s",
        source="samples",
        stat="max_lateness",
        window="whole",
        gate="generator.max_lateness_s",
        unit="s",
        meaning="how late the load generator sent its latest request, any endpoint (s): over "
        "0.5 s the run warns that the generator itself was stalled or saturated (latency "
        "counts from the intended start); a gate on it refuses such a run",
        absent="the report was written before the figure existed",
    ),
    Figure(
        key="validity.scrape_gap_max_s",
        source="scrapes",
        stat="gap",
        window="whole",
        gate="scrape.gap_max_s",
        unit="s",
        meaning="the longest time between two scrapes of the target in the measured window "
        "(s): a gap over 3 intervals (a stalled orchestrator) is warned and makes the scrape "
        "figures of every window it falls in not measured; a gate on it refuses such a run",
        absent="the report was written before the figure existed",
    ),
    series_figure(
        "breaker_failures",
        "count",
        "breaker-recorded failures",
        "calls the breaker recorded as failed: every failed attempt with Retry outside it, "
        "one per failed payment with the breaker outside (resilience4j#2383)",
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
    *gauge_figures(
        "event_loop_lag",
        "event-loop lag",
        "the event loop's lag (s), as the service reads it at each scrape (Node's prom-client: "
        "the p99 since the scrape before): a server without a worker pool slows every request "
        "when its loop is held",
        unit="s",
    ),
    *_dependency("calls", "dependency_calls", "calls the dependency received (its ledger)"),
    *_dependency(
        "per_request",
        "per_request",
        "the dependency's calls per request the load sent (amplification: retries cost calls)",
    ),
    *_dependency("errors", "errors", "calls it answered 5xx or not at all (a hang, a reset)"),
    *_dependency("unmatched", "unmatched", "calls no route of its stubs matched (404)"),
    *_dependency("held_p99_s", "held_p99", "p99 of how long it held a call", unit="s"),
    *_dependency("connections", "connections", "a TCP dependency: connections its proxy accepted"),
    *_dependency("bytes_downstream", "bytes", "a TCP dependency: bytes from it to the service"),
    *_dependency(
        "toxics_applied", "toxics_applied", "a TCP dependency: connections its toxics hit"
    ),
    *_dependency(
        "upstream_errors",
        "upstream_errors",
        "a TCP dependency: connections its proxy could not open to it",
    ),
)
"""Every figure, in the order of the headline table's rows and of the docs' tables."""

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
    """The figure a gate's name (without build and phase) reads, and its endpoint (or its
    dependency: ``dependencies.visits.errors`` reads ``dependencies.{dependency}.errors``
    for ``visits``).

    An endpoint's figure (``products.p95``) is found when its first part is one of
    ``endpoints`` (a container of names); an endpoint's name wins over a figure's.
    """
    parts = name.split(".")
    if len(parts) == 3 and parts[0] == "dependencies":
        figure = GATED.get(f"dependencies.{DEPENDENCY}.{parts[2]}")
        return None if figure is None else (figure, parts[1])
    head = name.split(".", 1)[0]
    if head in endpoints:  # type: ignore[operator]
        figure = GATED.get(endpoint_gate(name))
        if figure is not None:
            return figure, head
    figure = GATED.get(name)
    if figure is None or ENDPOINT in name or DEPENDENCY in name:
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
