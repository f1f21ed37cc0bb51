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

SCHEMA = "harness.report/1"
"""The value of ``report.json``'s ``schema`` key; changes only when a key's meaning does."""

Section = Literal["workers", "breaker", "pg", "timeline", "ledger"]
"""Sections of a build's figures whose numeric keys are compared and gated."""


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
    errors: dict[str, float]
    """Outcome (or error) of failed requests -> count."""
    latency_s: Percentiles
    """End minus *intended* start."""
    service_time_s: Percentiles
    """End minus actual start."""
    max_lateness_s: float | None
    unfinished: float


class WindowWorkers(TypedDict):
    busy_max: float | None
    busy_mean: float | None
    busy_p50: float | None


class WindowBreaker(TypedDict):
    blocked: float | None
    blocked_per_s: float | None
    open_pct: float | None


class WindowPg(TypedDict):
    calls: float | None
    payments: float
    amplification: float | None


class WindowFigures(TypedDict):
    """The figures of one time window (a phase, or the fault window)."""

    endpoints: dict[str, EndpointFigures]
    workers: WindowWorkers
    breaker: WindowBreaker
    pg: WindowPg


class WorkerFigures(TypedDict):
    max_workers: float | None
    busy_max_fault: float | None
    busy_mean_fault: float | None
    busy_p50_fault: float | None


class BreakerFigures(TypedDict):
    present: bool
    blocked_total: float | None
    blocked_fault: float | None
    blocked_per_s_fault: float | None
    open_pct_fault: float | None


class PgFigures(TypedDict):
    calls: float | None
    """Calls the gateway received, from the measured window's start on."""
    calls_fault: float | None
    target_calls: float | None
    """Calls as the target counted them."""
    retries: float | None
    payments: float
    amplification: float | None
    amplification_fault: float | None


class Timeline(TypedDict):
    time_to_open_s: float | None
    time_to_recover_s: float | None
    blocked_pct_healthy: float | None


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


class BuildFigures(TypedDict):
    """Every figure of one build (one repetition, or the mean of several)."""

    t0: float
    endpoints: dict[str, EndpointFigures]
    workers: WorkerFigures
    breaker: BreakerFigures
    pg: PgFigures
    timeline: Timeline
    phases: dict[str, WindowFigures]
    ledger: LedgerFigures | None
    repetitions: NotRequired[int]
    """With ``--repeat N``: N, and every number is the mean of N repetitions."""
    ci95: NotRequired[dict[str, list[float | None]]]
    """With ``--repeat N``: a bootstrap 95% interval per flattened figure."""


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
    calls_gateway: bool


class Change(TypedDict):
    """One flattened figure of a build against the baseline build."""

    baseline: float | None
    value: float | None
    change_pct: float | None


Flat = dict[str, float | None]
"""A build's comparable numbers by dotted name, e.g. ``products.latency_s.p95[outage]``."""


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


def read_report(path: Path) -> Report:
    """``report.json`` as written (no migration: schema 1 is the only one there is)."""
    return cast(Report, json.loads(Path(path).read_text()))
