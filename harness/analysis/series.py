"""Scraped metrics: parse Prometheus text, keep every sample, map to canonical series.

Samples are kept as read (long format: t, source, series, labels, value;
``harness.run.scraper`` collects them during a run). Canonical series
(busy_workers, max_workers, breaker_state, blocked_calls, pg_calls, retries)
are derived afterwards through a *preset* that names the concrete series of
one kind of target, so a Spring Boot service and the reference shop are read
the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd
from prometheus_client.parser import text_string_to_metric_families

from harness.core.errors import InputError

METRIC_COLUMNS = ["t", "source", "series", "labels", "value"]
"""Columns of ``metrics.parquet``."""


@dataclass(frozen=True)
class Selector:
    """A concrete series, optionally narrowed by labels; values of matching samples are summed."""

    series: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Preset:
    """How one kind of target names the canonical series."""

    name: str
    busy_workers: Selector | None = None
    max_workers: Selector | None = None
    blocked_calls: Selector | None = None
    pg_calls: Selector | None = None
    retries: Selector | None = None
    breaker_state: str | None = None
    """Gauge with a ``state`` label that is 1 for the current state (Resilience4j style)."""


PRESETS: dict[str, Preset] = {
    "shop": Preset(
        name="shop",
        busy_workers=Selector("shop_workers_busy"),
        max_workers=Selector("shop_workers_max"),
        blocked_calls=Selector("resilience4j_circuitbreaker_not_permitted_calls_total"),
        pg_calls=Selector("shop_pg_calls_total"),
        retries=Selector("shop_pg_retries_total"),
        breaker_state="resilience4j_circuitbreaker_state",
    ),
    "spring-boot": Preset(
        name="spring-boot",
        busy_workers=Selector("tomcat_threads_busy_threads"),
        max_workers=Selector("tomcat_threads_config_max_threads"),
        blocked_calls=Selector("resilience4j_circuitbreaker_not_permitted_calls_total"),
        pg_calls=Selector("resilience4j_circuitbreaker_calls_seconds_count"),
        retries=Selector("resilience4j_retry_calls_total", {"kind": "failed_with_retry"}),
        breaker_state="resilience4j_circuitbreaker_state",
    ),
    "opossum": Preset(
        name="opossum",
        blocked_calls=Selector("circuit", {"event": "reject"}),
        pg_calls=Selector("circuit", {"event": "fire"}),
    ),
}

BREAKER_STATES = {"closed": 0, "open": 1, "half_open": 2, "disabled": 3, "forced_open": 4}
"""Numeric codes of breaker states in the canonical ``breaker_state`` series."""

PG_RECEIVED = Selector("pg_calls_received_total")
"""The gateway's own counter of calls received (source ``pg``): the truth for amplification."""


def preset_named(name: str | None) -> Preset:
    """The preset a build recorded in the manifest; runs that recorded none used ``shop``."""
    try:
        return PRESETS[name or "shop"]
    except KeyError:
        raise InputError(f"unknown metrics preset {name!r}; known: {sorted(PRESETS)}") from None


def parse_text(text: str, t: float, source: str) -> list[tuple[float, str, str, str, float]]:
    """Every sample of a Prometheus text exposition as a long-format row."""
    rows = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = json.dumps(dict(sorted(sample.labels.items())), separators=(",", ":"))
            rows.append((t, source, sample.name, labels, float(sample.value)))
    return rows


def labels_match(labels_json: str, wanted: Mapping[str, str]) -> bool:
    """Whether a sample's labels (as stored: sorted JSON) include every ``wanted`` pair."""
    if not wanted:
        return True
    labels = json.loads(labels_json)
    return all(labels.get(k) == v for k, v in wanted.items())


def select(metrics: pd.DataFrame, source: str, selector: Selector) -> pd.Series:
    """A time series (index t) of the summed values matching ``selector`` from one source."""
    rows = metrics[(metrics["source"] == source) & (metrics["series"] == selector.series)]
    if selector.labels and not rows.empty:
        rows = rows[rows["labels"].map(lambda s: labels_match(s, selector.labels))]
    return rows.groupby("t")["value"].sum().sort_index()


def canonical(metrics: pd.DataFrame, preset: Preset, source: str = "target") -> pd.DataFrame:
    """Canonical series of one source as a long frame (t, series, value)."""
    parts = []
    for name in ("busy_workers", "max_workers", "blocked_calls", "pg_calls", "retries"):
        selector: Selector | None = getattr(preset, name)
        if selector is None:
            continue
        s = select(metrics, source, selector)
        if not s.empty:
            parts.append(pd.DataFrame({"t": s.index, "series": name, "value": s.to_numpy()}))
    if preset.breaker_state:
        rows = metrics[
            (metrics["source"] == source)
            & (metrics["series"] == preset.breaker_state)
            & (metrics["value"] == 1.0)
        ]
        if not rows.empty:
            codes = rows["labels"].map(lambda s: BREAKER_STATES.get(json.loads(s).get("state"), -1))
            parts.append(
                pd.DataFrame({"t": rows["t"].to_numpy(), "series": "breaker_state", "value": codes})
            )
    if not parts:
        return pd.DataFrame({"t": [], "series": [], "value": []})
    return pd.concat(parts, ignore_index=True).sort_values(["series", "t"], ignore_index=True)
