"""The shape of ``report.json`` (schema ``harness.report/1``), typed once.

``analysis.figures`` writes these and ``gates``, ``report`` and ``compare``
read them, so a key renamed on one side is a mypy error on the other. They
are TypedDicts, plain dicts at run time: ``report.json`` stays byte for byte
what it was, and a report written by an older harness loads unchanged.
Every key is documented in ``docs/report.md``.

Counts are typed ``float``: with ``--repeat N`` each figure is the mean of N
repetitions, so a count such as ``requests`` may be fractional.
"""

# No ``from __future__ import annotations``: TypedDict needs real annotations at class
# creation to tell ``NotRequired`` keys apart (Python 3.11), and tests introspect them.
import json
from pathlib import Path
from typing import Literal, NotRequired, TypedDict, cast

from harness.analysis.dependencies import (
    DependencyFigures,
    DependencyWindow,
    TcpFigures,
    TcpWindow,
)
from harness.core.conforms import conforms, departures
from harness.core.errors import InputError
from harness.results.manifest import AbortRecord

SCHEMA = "harness.report/1"
"""The value of ``report.json``'s ``schema`` key; changes only when a key's meaning does."""

PgSource = Literal["ledger", "metrics"]
"""Where gateway calls were counted from: the gateway's ledger, else its scraped counter."""

Section = Literal["workers", "in_flight", "breaker", "pg", "timeline", "ledger", "resources"]
"""Sections of a build's figures whose numeric keys are compared and gated."""

SeriesFigures = dict[str, dict[str, float | None]]
"""The figures of the catalogue's own canonical series (``harness.core.catalogue``: a DB
pool's ``db_active``...): series -> statistic -> value, e.g. ``{"db_pending": {"max_fault":
3.0}}`` (in a phase ``max``). Only the series a build exposed are there; the section is
absent when it exposed none, and in reports written before it."""


class Percentiles(TypedDict):
    """Seconds; None when the window had no finished request."""

    p50: float | None
    p95: float | None
    p99: float | None
    max: float | None
    mean: float | None


class EndpointFigures(TypedDict):
    """One endpoint's requests intended in a window."""

    requests: float
    offered_rps: float
    achieved_rps: float | None
    success_pct: float | None
    kept_pct: NotRequired[float | None]
    """Service kept (seed 004): % of requests answered 2xx, fresh or from a cache."""
    cached_pct: NotRequired[float | None]
    """% of requests its outcomes class as answered from a cache (``cached``:
    ``harness.scenario.outcomes``). Both are absent in reports written before them."""
    errors: dict[str, float]
    """Outcome (or error) of failed requests -> count."""
    latency_s: Percentiles
    """End minus *intended* start."""
    service_time_s: Percentiles
    """End minus actual start."""
    max_lateness_s: float | None
    unfinished: float
    dropped: NotRequired[float]
    """Arrivals not sent: the endpoint's ``max-in-flight`` requests were all open (absent in
    reports written before it)."""
    attempts: NotRequired[float | None]
    """Attempts sent per request, the mean (1 without client retries)."""
    retried_pct: NotRequired[float | None]
    """% of requests the client retried (sent twice or more)."""
    admitted_rps: NotRequired[float | None]
    """Attempts sent per second (first attempts and retries) by the window's requests."""
    retried_rps: NotRequired[float | None]
    """Retries sent per second by the window's requests. The four are absent in reports
    written before client retries; ``offered_rps`` is the first attempts'."""
    in_flight_max: NotRequired[float | None]
    """The most of its requests open at once in the window (sent, not yet answered: each
    attempt), by time rather than by intended start (``analysis.in_flight``). Absent in
    reports written before it."""


class WindowWorkers(TypedDict):
    busy_max: float | None
    busy_mean: float | None
    busy_p50: float | None


class WindowInFlight(TypedDict):
    """Requests open at once at the service over one window (``analysis.in_flight``)."""

    max: float | None
    p50: float | None
    """The median over time."""


class WindowBreaker(TypedDict):
    blocked: float | None
    blocked_per_s: float | None
    open_pct: float | None
    opens: NotRequired[float | None]
    """Times the breaker went to open, half-open re-opens included (``analysis.cuts.count_opens``).
    Absent in reports written before it; in those written before ``opens_from_closed``, the
    times it left closed."""
    opens_from_closed: NotRequired[float | None]
    """Times the breaker left closed (a failed half-open trial is not counted): seed 004's
    flaps. Absent in reports written before it."""


class WindowPg(TypedDict):
    calls: float | None
    """Calls the gateway received in the window (by arrival time), from ``PgFigures.source``."""
    payments: float
    amplification: float | None


class WindowFigures(TypedDict):
    """The figures of one time window (a phase, or the fault window)."""

    endpoints: dict[str, EndpointFigures]
    workers: WindowWorkers
    in_flight: NotRequired[WindowInFlight]
    """Absent in reports written before it."""
    breaker: WindowBreaker
    pg: WindowPg
    series: NotRequired[SeriesFigures]
    dependencies: NotRequired[dict[str, DependencyWindow | TcpWindow]]
    """Each named dependency's figures (``analysis.dependencies``), when the scenario has some:
    an HTTP one's from its ledger, a TCP one's from its proxy's counters."""


class WorkerFigures(TypedDict):
    max_workers: float | None
    busy_max_fault: float | None
    busy_mean_fault: float | None
    busy_p50_fault: float | None


class InFlightFigures(TypedDict):
    """Requests open at once at the service (sent, not yet answered) over the fault window,
    from the load generator's samples: any server has them, one without a worker pool
    (Netty, Node) too (``analysis.in_flight``)."""

    max_fault: float | None
    p50_fault: float | None
    """The median over time."""


class BreakerFigures(TypedDict):
    present: bool
    blocked_total: float | None
    blocked_fault: float | None
    blocked_per_s_fault: float | None
    open_pct_fault: float | None
    opens: NotRequired[float | None]
    """Times the breaker went to open over the measured window, half-open re-opens included (a
    replicated build's: the sum of its replicas'). Absent in reports written before it; in
    those written before ``opens_from_closed``, the times it left closed."""
    opens_from_closed: NotRequired[float | None]
    """Times the breaker left closed over the measured window (seed 004's flaps). Absent in
    reports written before it."""


class PgFigures(TypedDict):
    source: NotRequired[PgSource | None]
    """Where ``calls`` (here and per phase) and so ``amplification`` were counted from;
    None when neither the ledger nor the gateway's counter recorded anything. Reports
    written before this key counted from the gateway's counter."""
    calls: float | None
    """Calls the gateway received in the measured window [t0, t0 + duration), by arrival."""
    calls_fault: float | None
    target_calls: float | None
    """Calls as the target counted them, over the measured window."""
    retries: float | None
    payments: float
    amplification: float | None
    amplification_fault: float | None


class ResourceFigures(TypedDict):
    """What the build's container cost, from the Docker Engine's stats of it (``docker``
    builds): CPU in % of one core, memory in bytes; the whole measured window, and the
    fault window (``_fault``)."""

    cpu_pct_mean: float | None
    cpu_pct_max: float | None
    memory_bytes_max: float | None
    cpu_pct_mean_fault: float | None
    cpu_pct_max_fault: float | None
    memory_bytes_max_fault: float | None


class ReplicaBreaker(TypedDict):
    """One replica's own breaker (each replica of a build has one)."""

    present: bool
    blocked_total: float | None
    blocked_fault: float | None
    blocked_per_s_fault: float | None
    open_pct_fault: float | None
    time_to_open_s: float | None
    opens: NotRequired[float | None]
    """The times its breaker went to open over the measured window, half-open re-opens included."""
    opens_from_closed: NotRequired[float | None]
    """The times its breaker left closed over the measured window."""


class ReplicaWindow(TypedDict):
    """One replica's figures over one phase."""

    workers: WindowWorkers
    breaker: WindowBreaker
    series: NotRequired[SeriesFigures]


class ReplicaPg(TypedDict):
    """One replica's calls to the gateway, as it counted them, over the measured window."""

    target_calls: float | None
    retries: float | None


class ReplicaFigures(TypedDict):
    """One replica of a build with ``replicas: N``: its own pool, breaker and calls."""

    workers: WorkerFigures
    breaker: ReplicaBreaker
    pg: ReplicaPg
    payments_recorded: float | None
    """Payment records in the replica's own database (the whole run): the requests it got."""
    phases: NotRequired[dict[str, ReplicaWindow]]
    """Its pool and breaker per phase of ``pg.phases`` (absent in older reports)."""
    series: NotRequired[SeriesFigures]


class Timeline(TypedDict):
    time_to_open_s: float | None
    service_recover_s: NotRequired[float | None]
    """The service's time to recover (gate ``time_to_recover``): its slowest endpoint's own
    (``endpoints_recover_s``); absent in reports written before it existed."""
    time_to_recover_s: float | None
    """The gateway calls' (gate ``gateway_time_to_recover``): seconds from the fault's end
    until requests of the ``calls-gateway`` endpoints are answered 2xx/3xx again; answers
    only, so a queue still draining is not seen."""
    blocked_pct_healthy: float | None
    endpoints_recover_s: NotRequired[dict[str, float | None]]
    """Per endpoint: seconds from the fault's end until it is back to its healthy self
    (answers and latency); absent in reports written before it existed."""
    protected_p99_s: NotRequired[float | None]
    """p99 of the endpoints without ``calls-gateway`` over the fault window; absent in
    reports written before it existed."""
    recovered: NotRequired[float | None]
    """1 recovered, 0 stuck, None not measurable (``analysis.recovery``); only with a
    scenario's ``recovery:``. Over repetitions, the share of them that recovered."""
    recovered_after_s: NotRequired[float | None]
    """Seconds after the trigger's end until goodput held; None when stuck or unmeasured."""


class Reconciliation(TypedDict):
    """The gateway's approvals against the target's own records (seed 002)."""

    payments_recorded: float
    approved_both: float
    approved_but_failed: float
    approved_but_unknown: float
    approved_but_pending: float
    recorded_approved_not_at_gateway: float


class LedgerFigures(TypedDict):
    """From the gateway's ledger, over the whole run."""

    calls: float
    keys: float
    duplicate_keys: float
    max_calls_per_key: float
    client_gone: float
    approved_at_gateway: float
    reconciliation: NotRequired[Reconciliation]
    """Only when the target kept payment records."""


class Validity(TypedDict):
    """Whether the harness itself stalled (``harness.analysis.validity``)."""

    generator_max_lateness_s: float | None
    """How late the load generator sent its latest request in the measured window."""
    scrape_gap_max_s: float | None
    """The longest time between two scrapes of the target there; None: never scraped."""
    scrape_gaps: list[list[float]]
    """``[start, end]`` (s after t0) of each gap over 3 scrape intervals."""


class LoadPerSecond(TypedDict):
    """Per second of the measured window (``[t0 + k, t0 + k + 1)``), all endpoints together:
    ``analysis.offered``."""

    offered: list[int]
    """First attempts intended (the scenario's load, dropped arrivals included)."""
    admitted: list[int]
    """Attempts sent, retries included (by actual start)."""
    retried: list[int]
    """Retries sent (``attempt >= 2``)."""


class BuildFigures(TypedDict):
    """Every figure of one build (one repetition, or the mean of several)."""

    t0: float
    endpoints: dict[str, EndpointFigures]
    workers: WorkerFigures
    in_flight: NotRequired[InFlightFigures]
    """Absent in reports written before it."""
    breaker: BreakerFigures
    pg: PgFigures
    timeline: Timeline
    phases: dict[str, WindowFigures]
    ledger: LedgerFigures | None
    load: NotRequired[LoadPerSecond]
    """Only when some endpoint has ``retry:``: offered, admitted and retried load per second."""
    resources: NotRequired[ResourceFigures]
    """Only when the build ran in a container whose stats were scraped (``docker``)."""
    series: NotRequired[SeriesFigures]
    """Over the fault window (``_fault``), the measured window (``total``) or the run."""
    dependencies: NotRequired[dict[str, DependencyFigures | TcpFigures]]
    """Each named dependency's figures (``analysis.dependencies``): an HTTP one's from its own
    ledger, a TCP one's from its proxy's scraped counters (connections, bytes, toxics)."""
    replicas: NotRequired[dict[str, ReplicaFigures]]
    """Only for a build with ``replicas: N`` (N > 1): each replica's figures by its index
    (``"0"``, ``"1"``, ...). The build's own figures are read across them: busy and max
    workers summed per scrape round, counts the exact sums of the replicas' counts,
    ``open_pct`` the mean of theirs, ``time_to_open_s`` the first replica's to open."""
    not_reached: NotRequired[dict[str, float]]
    """Figure (dotted report key, e.g. ``timeline.time_to_recover_s``) -> N: a recovery that
    never came inside the measured window, which went on N s after the fault's end; the
    figure is None and reads ``> N s``, and gates compare the bound. Only when some was."""
    not_measured: NotRequired[dict[str, str]]
    """Figure (dotted, as in ``comparison``) -> why it is None: the series it is read from
    never appeared, with the series the target did expose. Absent in older reports."""
    validity: NotRequired[Validity]
    """Absent in reports written before it."""
    warnings: NotRequired[list[str]]
    """Only when something read looks wrong, e.g. a breaker that opened twice in a row
    (``analysis.breaker_events``). Absent in older reports."""
    repetitions: NotRequired[int]
    """With ``--repeat N``: N, and every number is the mean of N repetitions."""
    ci95: NotRequired[dict[str, list[float | None]]]
    """With ``--repeat N``: a bootstrap 95% interval per flattened figure."""
    blocks: NotRequired[dict[str, list[float | None]]]
    """Each endpoint figure the judge knows (``analysis.judge.POLICIES``) per 5-s block of the
    measured window and of each phase, by flattened name (``products.latency_s.p99[outage]``):
    what ``harness compare``, the gates' ``not worse than`` and ``harness tune`` judge noise
    from. With ``--repeat N``, every repetition's blocks one after another. Absent in
    reports written before the judge."""
    abort: NotRequired[AbortRecord]
    """Only for a build a gate with ``abort: true`` stopped: the manifest's ``abort``
    (``gate``, ``expr``, ``phase``, ``at_s``, ``value``, ``limit``); with ``--repeat``, the
    first aborted repetition's."""


class BuildReport(BuildFigures):
    """A build's section of the report: its figures, the profile it ran and how it ended."""

    profile: str
    status: str


class PhaseInfo(TypedDict):
    name: str
    start_s: float
    end_s: float
    fault: str


class EndpointInfo(TypedDict):
    method: str
    path: str
    rate: float
    """Requests per second; with stages, the mean over the measured window."""
    shape: NotRequired[str]
    """The traffic in words: ``35/s``, ``stages 0 -> 200/s, poisson`` (absent in older reports)."""
    calls_gateway: bool
    retry: NotRequired[str]
    """The client's retries in words (``traffic.<ep>.retry``); only when it has them."""


class Change(TypedDict):
    """One flattened figure of a build against the baseline build."""

    baseline: float | None
    value: float | None
    change_pct: float | None


Flat = dict[str, float | None]
"""A build's comparable numbers by dotted name, e.g. ``products.latency_s.p95[outage]``."""


class SeedClaim(TypedDict):
    """A gate with ``seed:``: the seed article's own figure beside ours, and the verdict."""

    gate: str
    """The gate's name (its text when it has none)."""
    expr: str
    seed: str
    """The seed's figure, as the scenario wrote it."""
    figures: dict[str, float | None]
    """Each figure the gate names (as written, e.g. ``after.products.p95[outage]``) -> ours;
    None: not measured."""
    measured: float | None
    """The gate's left side, evaluated (None when a figure was not measured)."""
    op: str
    limit: float | None
    """The gate's right side, evaluated."""
    verdict: Literal["pass", "fail", "error", "skip"]
    detail: str


class SkippedGate(TypedDict):
    """A gate this run cannot answer: it names a build the run did not run (``--build``)."""

    gate: str
    """The gate's name (its text when it has none)."""
    expr: str
    reason: str


class Report(TypedDict):
    """The whole of ``report.json``."""

    schema: str
    scenario: str
    run_id: str | None
    status: str | None
    seed: int
    duration_s: float
    warmup_s: float
    fault_window_s: list[float]
    phases: list[PhaseInfo]
    endpoints: dict[str, EndpointInfo]
    baseline: str | None
    builds: dict[str, BuildReport]
    comparison: dict[str, dict[str, Change]]
    seed_claims: NotRequired[list[SeedClaim]]
    """Only when a gate of the scenario has ``seed:``: one entry per such gate, in order."""
    skipped_gates: NotRequired[list[SkippedGate]]
    """Only when a gate names a build the run did not run (``--build``): those gates, in order."""
    harness_version: NotRequired[str]
    """The harness that made the run (its manifest's), so a baseline kept as report.json alone
    can be told apart from one another harness computed (``harness gate --baseline``)."""
    played: NotRequired[list[str]]
    """Only when the scenario names dependencies: those the run played, ``pg`` first when it
    did (``Scenario.played``). Absent: the run played ``pg`` alone (``plays_pg``), as every
    run did before ``dependencies:``."""


def read_report(path: Path) -> Report:
    """``report.json`` as written, checked before anything reads a figure of it.

    No migration: schema 1 is the only one there is, so a report of another
    schema (a newer harness) is refused, not read as if its figures meant the
    same; keys this one does not know are read past (a newer harness of the same
    schema adds keys). A file cut short, or a figure of the wrong type, is an
    ``InputError`` saying where, never a ``TypeError`` half way through a gate.
    """
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise InputError(f"{path}: not JSON ({exc}); {_RENDER_AGAIN}") from None
    if not isinstance(raw, dict):
        raise InputError(f"{path}: expected a JSON object, got {type(raw).__name__}")
    schema = raw.get("schema")
    if schema != SCHEMA:
        raise InputError(
            f"{path}: schema {schema!r}, and this harness reads {SCHEMA!r}: the report was "
            "written by another harness version, whose figures may mean something else; "
            + _RENDER_AGAIN
        )
    problems = conforms(raw, Report, "", extra_keys=True)
    if problems:
        raise InputError(f"{path}: not a report of this harness: {departures(problems)}")
    return cast(Report, raw)


def plays_pg(report: Report) -> bool:
    """Whether the run played the payment gateway ``pg`` (its rows, its ledger, its chart are
    shown only then); a report written before ``played`` did."""
    return "pg" in report.get("played", ["pg"])


_RENDER_AGAIN = "`harness report RUN` writes it again from the run's own files"
