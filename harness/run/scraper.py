"""The metrics scraper: a thread in the orchestrator that GETs every /metrics each interval.

It keeps every sample as read (``metrics.parquet``); mapping them to canonical
series happens afterwards (``harness.analysis.series``). With a ``spool`` it
appends each scrape to a CSV file as it goes (``metrics.csv``) instead of
holding every sample in memory: the orchestrator's memory then stays flat
however long the build (an hour's soak grew it by ~20 MB/h before), a run
killed mid-build keeps its metrics (``harness clean`` turns the CSV into
``metrics.parquet`` as it does the samples), and ``metrics.parquet`` is read
back from it. In memory it keeps only each source's newest scrape and the
breaker-state series an event preset (opossum) needs for the live line. Its newest scrape also
feeds the live progress line. ``stop(final=True)`` takes one last scrape of
every source once the load has finished, so the counters' last reading comes
after the last request rather than up to an interval before it. ``scrape_at``
adds scrapes at the edges of the windows figures are cut at (``t0``, each
phase's start and end, the load's stop), so a counter is read there instead of
interpolated between scrapes around it: across the load's stop, interpolation
shared a steady rate out over an interval that was half idle (10 of 283 gateway
calls missed with 2 s scrapes).
"""

from __future__ import annotations

import csv
import json
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Literal, NamedTuple

import httpx
import pandas as pd

from harness.analysis.series import (
    Preset,
    Selector,
    breaker_state_now,
    labels_match,
    parse_text,
)
from harness.results.io import METRICS_COLUMNS, metrics_from_csv
from harness.scenario.schema import Scenario

Clock = Callable[[], float]

MAX_FAILED_KEPT = 1000
"""Failed scrapes kept with their times (the count goes on): enough to place every gap of a
long run's worst stretch, small enough for the manifest."""


FailureKind = Literal["timeout", "refused", "status", "unreadable"]
"""``timeout``: no answer within the scrape timeout (a live process too busy or blocked to
answer); ``refused``: nothing listening or the connection broken; ``status``: an HTTP error
status; ``unreadable``: an answer that is not the text format."""


class FailedScrape(NamedTuple):
    """A scrape that brought nothing: from ``start`` to ``end`` (the clock's), and why."""

    start: float
    end: float
    source: str
    why: FailureKind


def failure_kind(exc: Exception) -> FailureKind:
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    if isinstance(exc, httpx.HTTPStatusError):
        return "status"
    if isinstance(exc, httpx.HTTPError):
        return "refused"
    return "unreadable"


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
        spool: Path | None = None,
        history: Preset | None = None,
        timeout_s: float | None = None,
    ) -> None:
        self.sources = dict(sources)
        self.interval_s = interval_s
        self.clock = clock
        self.timeout_s = min(interval_s, timeout_s) if timeout_s is not None else interval_s
        self.client = httpx.Client(timeout=max(0.5, self.timeout_s), transport=transport)
        self.rows: list[tuple[float, str, str, str, float]] = []
        self.failures: dict[str, int] = {name: 0 for name in self.sources}
        self.failed: list[FailedScrape] = []
        """The failed scrapes (the first ``MAX_FAILED_KEPT``): when, which source, why."""
        self.latest: dict[str, list[tuple[float, str, str, str, float]]] = {}
        self._stop = threading.Event()
        self._edges: list[float] = []
        """Times (the clock's) still to scrape at besides the interval's (``scrape_at``)."""
        self._edges_lock = threading.Lock()
        self._wake = threading.Event()
        """Set by ``stop`` and ``scrape_at``: the loop's sleep ends early."""
        self._thread: threading.Thread | None = None
        self._closed = False
        self.spool = spool
        self._keep: frozenset[str] | None = None
        """With a spool: the series kept in memory (the breaker-state series of ``history``)."""
        if spool is not None:
            state = history.breaker_state if history is not None else None
            self._keep = frozenset(state.spellings()) if state is not None else frozenset()
        self.spool_error: str | None = None
        """Why the spool stopped being written (a full disk), if it did."""
        self._spool_file: IO[str] | None = None
        if spool is not None:
            self._spool_file = spool.open("w", newline="", encoding="utf-8")
            csv.writer(self._spool_file).writerow(METRICS_COLUMNS)
            self._spool_file.flush()

    def _append_to_spool(self, rows: list[tuple[float, str, str, str, float]]) -> None:
        """Append one source's scrape to the spool; a write error stops the spool, not the
        scraper (the samples in memory still make ``metrics.parquet``)."""
        if self._spool_file is None:
            return
        try:
            csv.writer(self._spool_file).writerows(rows)
            self._spool_file.flush()
        except OSError as exc:
            self.spool_error = f"{self.spool}: {exc.strerror or exc}"
            self._close_spool()

    def _close_spool(self) -> None:
        spool, self._spool_file = self._spool_file, None
        if spool is not None:
            try:
                spool.close()
            except OSError as exc:
                self.spool_error = self.spool_error or f"{self.spool}: {exc.strerror or exc}"

    def scrape_once(self) -> None:
        for source, url in self.sources.items():
            t = self.clock()
            try:
                response = self.client.get(url)
                response.raise_for_status()
                rows = parse_text(response.text, t, source)
            except (httpx.HTTPError, ValueError) as exc:
                self.failures[source] += 1
                if len(self.failed) < MAX_FAILED_KEPT:
                    self.failed.append(FailedScrape(t, self.clock(), source, failure_kind(exc)))
                continue
            if self._keep is None:
                self.rows.extend(rows)
            elif self._keep:
                self.rows.extend(r for r in rows if r[2] in self._keep)
            self.latest[source] = rows
            self._append_to_spool(rows)

    def scrape_at(self, times: list[float]) -> None:
        """Scrape every source at each of ``times`` too (the clock's time), besides the
        interval's scrapes: the edges of the windows the figures are cut at."""
        with self._edges_lock:
            self._edges = sorted(set(self._edges) | set(times))
        self._wake.set()

    def _take_due_edges(self, now: float) -> bool:
        """Drop the edges due by ``now``; whether there were any."""
        with self._edges_lock:
            due = bool(self._edges) and self._edges[0] <= now
            self._edges = [t for t in self._edges if t > now]
        return due

    def _loop(self) -> None:
        next_at = self.clock()
        while not self._stop.is_set():
            now = self.clock()
            if now >= next_at:
                self._take_due_edges(now)  # this scrape covers them
                self.scrape_once()
                next_at += self.interval_s
            elif self._take_due_edges(now):
                self.scrape_once()
            self._wake.clear()  # before reading the edges: one added after is not missed
            with self._edges_lock:
                wake = min([next_at, *self._edges[:1]])
            self._wake.wait(max(0.0, wake - self.clock()))

    def start(self) -> Scraper:
        self._thread = threading.Thread(target=self._loop, name="scraper", daemon=True)
        self._thread.start()
        return self

    def stop(self, final: bool = False) -> None:
        """Stop the thread; with ``final``, then scrape every source once more before closing.

        Call it with ``final=True`` after the load generator has finished and
        before the processes stop. Stopping twice is harmless (the second does nothing).
        """
        if self._closed:
            return
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        # A thread still inside a scrape (a source not answering) must not interleave with ours.
        if final and (self._thread is None or not self._thread.is_alive()):
            self.scrape_once()
        self._closed = True
        self.client.close()
        self._close_spool()

    def frame(self) -> pd.DataFrame:
        """Every sample scraped: read back from the spool, or the rows in memory without one."""
        if self.spool is not None:
            return metrics_from_csv(self.spool)
        return pd.DataFrame(self.rows, columns=METRICS_COLUMNS)

    def latest_at(self, source: str) -> float | None:
        """When the newest good scrape of ``source`` was taken (the clock's), if any."""
        rows = self.latest.get(source)
        return rows[0][0] if rows else None

    def latest_value(self, source: str, selector: Selector) -> float | None:
        """Sum of the newest scrape's samples matching ``selector`` (for live progress)."""
        rows = self.latest.get(source)
        if not rows:
            return None
        present = {r[2] for r in rows}
        name = next((n for n in selector.spellings() if n in present), None)
        total, found = 0.0, False
        for _, _, series, labels, value in rows:
            if series == name and labels_match(labels, selector.labels):
                total += value
                found = True
        return total if found else None

    def breaker_state(self, source: str, preset: Preset) -> str | None:
        """The breaker's state by ``preset`` (for live progress): from the newest scrape, or
        from every scrape so far when the state is told by events (opossum; with a spool,
        the scraper must have been given that preset as ``history``)."""
        rows = self.rows if preset.state_events else self.latest.get(source, [])
        return breaker_state_now(preset, list(rows), source)

    def latest_state(self, source: str, series: str) -> str | None:
        for _, _, name, labels, value in self.latest.get(source, []):
            if name == series and value == 1.0:
                state = json.loads(labels).get("state")
                return str(state) if state is not None else None
        return None


def window_edges(scenario: Scenario, t0: float) -> list[float]:
    """The absolute times the figures cut counters at: the measured window's start and
    end (the load's stop) and each gateway phase's start and end within it."""
    edges = {0.0, scenario.duration}
    for phase in scenario.phases:
        edges |= {phase.start, phase.end}
    return sorted(t0 + e for e in edges if 0.0 <= e <= scenario.duration)
