"""Metrics: scrape Prometheus text from the processes, keep every sample, map to canonical series.

The scraper stores what it read, untouched (long format: t, source, series,
labels, value). Canonical series (busy_workers, max_workers, breaker_state,
blocked_calls, pg_calls, retries) are derived afterwards through a *preset*
that names the concrete series of one kind of target, so a Spring Boot
service and the reference shop are read the same way.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import httpx
import pandas as pd
from prometheus_client.parser import text_string_to_metric_families

METRIC_COLUMNS = ["t", "source", "series", "labels", "value"]


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

Clock = Callable[[], float]


def parse_text(text: str, t: float, source: str) -> list[tuple[float, str, str, str, float]]:
    """Every sample of a Prometheus text exposition as a long-format row."""
    rows = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = json.dumps(dict(sorted(sample.labels.items())), separators=(",", ":"))
            rows.append((t, source, sample.name, labels, float(sample.value)))
    return rows


class Scraper:
    """GETs each source's /metrics every ``interval_s`` on a thread; keeps every sample.

    The HTTP transport and the clock are injectable so tests can feed text
    without a server.
    """

    def __init__(
        self,
        sources: Mapping[str, str],
        interval_s: float,
        *,
        transport: httpx.BaseTransport | None = None,
        clock: Clock = time.time,
    ) -> None:
        self.sources = dict(sources)
        self.interval_s = interval_s
        self.clock = clock
        self.client = httpx.Client(timeout=max(0.5, interval_s), transport=transport)
        self.rows: list[tuple[float, str, str, str, float]] = []
        self.failures: dict[str, int] = {name: 0 for name in self.sources}
        self.latest: dict[str, list[tuple[float, str, str, str, float]]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def scrape_once(self) -> None:
        for source, url in self.sources.items():
            t = self.clock()
            try:
                response = self.client.get(url)
                response.raise_for_status()
                rows = parse_text(response.text, t, source)
            except (httpx.HTTPError, ValueError):
                self.failures[source] += 1
                continue
            self.rows.extend(rows)
            self.latest[source] = rows

    def _loop(self) -> None:
        next_at = self.clock()
        while not self._stop.is_set():
            self.scrape_once()
            next_at += self.interval_s
            self._stop.wait(max(0.0, next_at - self.clock()))

    def start(self) -> Scraper:
        self._thread = threading.Thread(target=self._loop, name="scraper", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.client.close()

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=METRIC_COLUMNS)

    def latest_value(self, source: str, selector: Selector) -> float | None:
        """Sum of the newest scrape's samples matching ``selector`` (for live progress)."""
        rows = self.latest.get(source)
        if not rows:
            return None
        total, found = 0.0, False
        for _, _, series, labels, value in rows:
            if series == selector.series and _labels_match(labels, selector.labels):
                total += value
                found = True
        return total if found else None

    def latest_state(self, source: str, series: str) -> str | None:
        for _, _, name, labels, value in self.latest.get(source, []):
            if name == series and value == 1.0:
                state = json.loads(labels).get("state")
                return str(state) if state is not None else None
        return None


def _labels_match(labels_json: str, wanted: Mapping[str, str]) -> bool:
    if not wanted:
        return True
    labels = json.loads(labels_json)
    return all(labels.get(k) == v for k, v in wanted.items())


def select(metrics: pd.DataFrame, source: str, selector: Selector) -> pd.Series:
    """A time series (index t) of the summed values matching ``selector`` from one source."""
    rows = metrics[(metrics["source"] == source) & (metrics["series"] == selector.series)]
    if selector.labels and not rows.empty:
        rows = rows[rows["labels"].map(lambda s: _labels_match(s, selector.labels))]
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
