"""The canonical series (``SERIES``: what a preset reads from a target's scrapes), what a
figure is (``Figure``), and the helpers that make the common kinds of figure from a series
(a gauge's max/mean/p50, a series' peak or count). ``core.catalogue`` holds the table of
figures built from them; both are one catalogue, split so each file stays readable."""

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
)
"""Every canonical series, in the order presets, ``metrics.map`` and reports list them."""


SERIES_BY_NAME = {s.name: s for s in SERIES}


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
