"""Scraped metrics: parse Prometheus text, keep every sample, map to canonical series.

Samples are kept as read (long format: t, source, series, labels, value;
``harness.run.scraper`` collects them during a run). Canonical series
(busy_workers, max_workers, breaker_state, blocked_calls, pg_calls, retries)
are derived afterwards through a *preset* that names the concrete series of
one kind of target, so a Spring Boot service and the reference shop are read
the same way (``harness.analysis.presets``: the presets, a build's ``map`` and
``breaker``).

Names are stored as ``prometheus_client``'s parser gives them: a counter's
samples always end in ``_total`` (``# TYPE circuit counter`` with samples
``circuit{...}``, as opossum-prometheus writes them, is stored as
``circuit_total``). A selector matches either spelling (``Selector.spellings``:
the name as written first, the other only when the first has no sample), so
a preset or a ``map`` may name a series the way the exposition shows it.

A canonical series that never appeared is *not measured*: ``map_canonical``
says why and which series the source did expose (``why_missing``), and the
figures read from it are None, never 0. One exception is told by the preset:
a label whose values appear only once counted (opossum's ``event``), while
the same series exists for the breaker, reads 0 (no ``reject`` sample before
the first rejection means none yet).

Counters are read at any moment, not only at a scrape, by one rule
(``counter_at``, ``counter_delta``): linear between the scrapes around that
moment. A figure over a window therefore neither counts what happened before
its start (the last scrape before ``t0`` may be most of an interval early) nor
stops short of its end when a scrape follows it (the run takes a final one).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from prometheus_client.parser import text_string_to_metric_families

from harness.analysis.breaker_events import half_open_missing
from harness.analysis.presets import (
    BREAKER_STATES,
    PRESETS,
    Combination,
    Fallback,
    Preset,
    Source,
    StateEvents,
    preset_for,
    preset_named,
    resolve_preset,
)
from harness.analysis.servers import pool_note
from harness.core.catalogue import CANONICAL_SERIES, COUNTERS
from harness.core.selectors import Selector, parse_selector
from harness.results.io import METRICS_COLUMNS

__all__ = [
    "BREAKER_STATES",
    "CANONICAL_SERIES",
    "COUNTERS",
    "PG_RECEIVED",
    "PRESETS",
    "Canonical",
    "Combination",
    "Fallback",
    "Preset",
    "Selector",
    "Source",
    "StateEvents",
    "breaker_state_now",
    "canonical",
    "counter",
    "counter_at",
    "counter_delta",
    "labels_match",
    "map_canonical",
    "parse_selector",
    "parse_text",
    "preset_for",
    "preset_named",
    "resolve_preset",
    "select",
    "why_missing",
]

Row = tuple[float, str, str, str, float]
"""One sample as stored: (t, source, series, labels as sorted JSON, value)."""

PG_RECEIVED = Selector("pg_calls_received_total")
"""The gateway's own counter of calls received (source ``pg``): the truth for amplification."""


def parse_text(text: str, t: float, source: str) -> list[Row]:
    """Every sample of a Prometheus text exposition as a long-format row.

    Names as ``prometheus_client`` gives them: a counter's samples end in ``_total``
    even when the exposition wrote them without (see the module's docstring).
    """
    rows: list[Row] = []
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


def _family(metrics: pd.DataFrame, source: str, selector: Selector) -> pd.DataFrame:
    """The rows of ``source`` under the selector's name, in the first spelling that has any."""
    rows = metrics[metrics["source"] == source] if len(metrics) else metrics
    for name in selector.spellings():
        found = rows[rows["series"] == name] if len(rows) else rows
        if len(found):
            return found
    return rows.iloc[0:0]


def _matching(rows: pd.DataFrame, wanted: Mapping[str, str]) -> pd.DataFrame:
    if not wanted or rows.empty:
        return rows
    return rows[rows["labels"].map(lambda s: labels_match(s, wanted))]


def select(metrics: pd.DataFrame, source: str, selector: Selector) -> pd.Series:
    """A time series (index t) of the summed values matching ``selector`` from one source.

    The name is matched as written, else in its other counter spelling
    (``Selector.spellings``): ``circuit`` finds the stored ``circuit_total``.
    """
    rows = _matching(_family(metrics, source, selector), selector.labels)
    if rows.empty:
        return pd.Series(dtype=float)
    return rows.groupby("t")["value"].sum().sort_index().astype(float)


def _lazy_select(
    metrics: pd.DataFrame, source: str, selector: Selector, lazy: frozenset[str]
) -> pd.Series:
    """``select``, reading 0 where the series exists with the selector's other labels but
    no sample has its value of a ``lazy`` label (a value that appears once counted)."""
    s = select(metrics, source, selector)
    if not lazy or not (lazy & set(selector.labels)):
        return s
    others = {k: v for k, v in selector.labels.items() if k not in lazy}
    present = pd.Index(_matching(_family(metrics, source, selector), others)["t"].unique())
    if present.empty:
        return s
    return s.reindex(s.index.union(present)).fillna(0.0).sort_index()


def counter(
    metrics: pd.DataFrame,
    source: str,
    selector: Selector,
    lazy: frozenset[str] = frozenset(),
) -> pd.Series:
    """A counter as ``select`` gives it, at every scrape of ``source``.

    A labelled counter appears in the exposition only once it first counts, so
    the scrapes of that source before then read 0 (rather than missing, which
    would let a window starting before the first count borrow a later value).
    A counter that never appears stays empty. With ``lazy`` labels, a value
    missing while the series exists reads 0 (``_lazy_select``).
    """
    s = _lazy_select(metrics, source, selector, lazy)
    if s.empty:
        return s
    scrapes = pd.Index(metrics.loc[metrics["source"] == source, "t"].unique()).sort_values()
    return s.reindex(scrapes.union(s.index)).ffill().fillna(0.0)


def counter_at(series: pd.Series, t: float) -> float:
    """A counter's value at time ``t``: linear between the scrapes just before and after.

    Before the first scrape it is the first value and after the last it is the
    last: a counter is never extrapolated. ``series`` is indexed by scrape time.
    """
    times = series.index.to_numpy(dtype=float)
    values = series.to_numpy(dtype=float)
    return float(np.interp(t, times, values))


def counter_delta(series: pd.Series, start: float, end: float) -> float | None:
    """How much a counter grew in the window [start, end]; None if it was never scraped.

    The one rule for every counter figure: the value at each edge is
    interpolated between the scrapes around it (``counter_at``), so nothing
    counted before ``start`` enters the window and the increments between the
    last scrape inside the window and ``end`` are shared out by time. With an
    ``end`` after the last scrape, the window ends at the last scrape.
    """
    if series.empty:
        return None
    if end < start:
        return 0.0
    return counter_at(series, end) - counter_at(series, start)


@dataclass
class Canonical:
    """The canonical series of one source, and why any of them is not measured."""

    frame: pd.DataFrame
    """Long format: t, series (a canonical name), value."""
    missing: dict[str, str] = field(default_factory=dict)
    """Canonical series -> why it is not measured (series that never appeared)."""
    warnings: list[str] = field(default_factory=list)
    """What was read but looks wrong, for the report (``breaker_events``)."""


def map_canonical(metrics: pd.DataFrame, preset: Preset, source: str = "target") -> Canonical:
    """Canonical series of one source through ``preset``, with a reason for each one missing.

    Counters read 0 at the scrapes before they first appear (``counter``); a
    series that never appears is left out and ``missing`` says why: the preset
    names none, no scrape succeeded, no series of that name (listing the names
    the source did expose, closest first), or no sample with the wanted labels
    (listing the values seen).
    """
    parts: list[pd.DataFrame] = []
    missing: dict[str, str] = {}
    warnings: list[str] = []
    scraped = _scraped(metrics, source)
    # What the service exposed says which server it runs on: a pool series' note in its terms
    # (a selector the build mapped itself is told about as written).
    exposed = set(metrics.loc[metrics["source"] == source, "series"].unique()) if scraped else set()
    notes = {
        name: preset.notes.get(name)
        if name in preset.overrides
        else pool_note(exposed, name, preset.notes.get(name))
        for name in CANONICAL_SERIES
    }
    for name in CANONICAL_SERIES:
        spec = preset.source(name)
        if spec is None:
            missing[name] = _not_named(preset, name, notes[name])
            continue
        if not scraped:
            missing[name] = f"no scrape of the {source} succeeded, so nothing was read"
            continue
        if name == "breaker_state":
            s, why, events = _breaker_reading(metrics, preset, source)
            if events is not None and preset.state_events is not None:
                warning = half_open_missing(events, preset.state_events.half_open)
                warnings += [warning] if warning else []
        else:
            s = _read(metrics, source, spec, preset.lazy_labels, is_counter=name in COUNTERS)
            counts = name in COUNTERS
            why = None if len(s) else _why_none(metrics, source, spec, is_counter=counts)
        if why is not None:
            note = notes[name]
            missing[name] = f"{why} ({note})" if note else why
            continue
        parts.append(pd.DataFrame({"t": s.index, "series": name, "value": s.to_numpy()}))
    if not parts:
        frame = pd.DataFrame({"t": [], "series": [], "value": []})
    else:
        frame = pd.concat(parts, ignore_index=True).sort_values(["series", "t"], ignore_index=True)
    return Canonical(frame, missing, warnings)


def canonical(metrics: pd.DataFrame, preset: Preset, source: str = "target") -> pd.DataFrame:
    """Canonical series of one source as a long frame (t, series, value)."""
    return map_canonical(metrics, preset, source).frame


def _scraped(metrics: pd.DataFrame, source: str) -> bool:
    return bool(len(metrics)) and bool((metrics["source"] == source).any())


def _first(spec: Source) -> Selector:
    if isinstance(spec, Fallback):
        return _first(spec.choices[0])
    return spec.plus[0] if isinstance(spec, Combination) else spec


def _why_none(metrics: pd.DataFrame, source: str, spec: Source, *, is_counter: bool) -> str:
    """Why nothing was read: the first choice's reason, and the other choices looked for."""
    why = why_missing(metrics, source, _first(spec), is_counter=is_counter)
    if isinstance(spec, Fallback) and len(spec.choices) > 1:
        others = "; ".join(str(c) for c in spec.choices[1:])
        why += f"; nor any of {others}"
    return why


def _not_named(preset: Preset, name: str, note: str | None = None) -> str:
    note = note or preset.notes.get(name)
    why = f" ({note})" if note else ""
    return f"the {preset.name!r} preset names no series for {name}{why}; add one under metrics.map"


def _read(
    metrics: pd.DataFrame, source: str, spec: Source, lazy: frozenset[str], *, is_counter: bool
) -> pd.Series:
    if isinstance(spec, Fallback):
        chosen = pd.Series(dtype=float)
        for choice in spec.choices:  # the first the service exposes
            chosen = _read(metrics, source, choice, lazy, is_counter=is_counter)
            if len(chosen):
                break
        return chosen
    if isinstance(spec, Combination):
        terms = [(1.0, s) for s in spec.plus] + [(-1.0, s) for s in spec.minus]
        read = [(sign, counter(metrics, source, s, lazy)) for sign, s in terms]
        if read[0][1].empty:  # the first term is the one the figure is about
            return read[0][1]
        index = read[0][1].index
        for _, s in read[1:]:
            index = index.union(s.index)
        total = pd.Series(0.0, index=index)
        for sign, s in read:
            total += sign * s.reindex(index).ffill().fillna(0.0)
        return total
    if is_counter:
        return counter(metrics, source, spec, lazy)
    return _lazy_select(metrics, source, spec, lazy)


# ---------------------------------------------------------------- not measured: why

_SHOWN = 20


def why_missing(
    metrics: pd.DataFrame, source: str, selector: Selector, *, is_counter: bool = True
) -> str:
    """Why ``selector`` matched nothing in ``source``, with what the source did expose.

    A counter's message names both spellings looked for (``circuit or circuit_total``).
    """
    if not _scraped(metrics, source):
        return f"no scrape of the {source} succeeded, so nothing was read"
    rows = metrics[metrics["source"] == source]
    scrapes = rows["t"].nunique()
    family = _family(metrics, source, selector)
    if family.empty:
        names = sorted(set(rows["series"]))
        spelled = " or ".join(selector.spellings()) if is_counter else selector.series
        return (
            f"no series {spelled} in {scrapes} scrape(s) of the {source}; "
            f"series seen: {_listing(names, selector.series)}"
        )
    name = str(family["series"].iloc[0])
    seen: dict[str, set[str]] = {k: set() for k in selector.labels}
    for text in family["labels"].unique():
        labels = json.loads(text)
        for k in seen:
            seen[k].add(str(labels.get(k, "")))
    # The labels whose wanted value never shows; all of them if only the combination is missing.
    off = {k: vs for k, vs in seen.items() if selector.labels[k] not in vs} or seen
    values = "; ".join(
        f"{k}: " + (", ".join(f'"{v}"' for v in sorted(vs)) if vs != {""} else "(no such label)")
        for k, vs in sorted(off.items())
    )
    return f"{name} was scraped but no sample has {_labels_text(selector)}; values seen: {values}"


def _labels_text(selector: Selector) -> str:
    return str(Selector("", selector.labels)) or "{}"


def _listing(names: list[str], near: str) -> str:
    """``names``, the likeliest meant first: same first word as ``near``, then similar ones."""
    if not names:
        return "none"
    word = near.split("_", 1)[0] + "_"
    close = difflib.get_close_matches(near, names, n=_SHOWN, cutoff=0.5)
    order = {n: (not n.startswith(word), n not in close, n) for n in names}
    shown = sorted(names, key=order.__getitem__)[:_SHOWN]
    more = len(names) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")


# ---------------------------------------------------------------- breaker state


def breaker_states(
    metrics: pd.DataFrame, preset: Preset, source: str = "target"
) -> tuple[pd.Series, str | None]:
    """The breaker's state code (``BREAKER_STATES``) at each scrape, or why there is none.

    From a gauge with a ``state`` label that is 1 for the current state
    (Resilience4j), or, with ``preset.state_events``, from the counters of the
    breaker's transitions (opossum, ``states_from_events``). With several
    breakers and no ``breaker`` chosen, there is no one state to tell.
    """
    states, why, _ = _breaker_reading(metrics, preset, source)
    return states, why


def _breaker_reading(
    metrics: pd.DataFrame, preset: Preset, source: str
) -> tuple[pd.Series, str | None, pd.DataFrame | None]:
    """``breaker_states``, plus the transition counts it came from (opossum's; else None)."""
    empty = pd.Series(dtype=float)
    selector = preset.breaker_state
    if selector is None:
        return empty, _not_named(preset, "breaker_state"), None
    if not _scraped(metrics, source):
        return empty, f"no scrape of the {source} succeeded, so nothing was read", None
    others = {k: v for k, v in selector.labels.items() if k not in preset.lazy_labels}
    rows = _matching(_family(metrics, source, selector), others)
    if rows.empty:
        why = why_missing(
            metrics,
            source,
            Selector(selector.series, others),
            is_counter=preset.state_events is not None,
        )
        return empty, why, None
    names = {str(json.loads(t).get(preset.breaker_label, "")) for t in rows["labels"].unique()}
    if preset.breaker is None and len(names) > 1:
        listed = ", ".join(sorted(names))
        why = f"several breakers ({listed}) in {rows['series'].iloc[0]}: choose one with "
        return empty, why + "metrics.breaker", None
    if preset.state_events is None:
        on = rows[rows["value"] == 1.0]
        codes = on["labels"].map(lambda s: BREAKER_STATES.get(json.loads(s).get("state"), -1))
        s = pd.Series(codes.to_numpy(dtype=float), index=on["t"].to_numpy(dtype=float))
        return s.sort_index(), None if len(s) else "no state of the breaker read 1", None
    ev = preset.state_events
    kinds = rows["labels"].map(lambda s: json.loads(s).get(ev.label))
    table = rows.assign(kind=kinds).pivot_table(
        index="t", columns="kind", values="value", aggfunc="sum"
    )
    scrapes = pd.Index(metrics.loc[metrics["source"] == source, "t"].unique()).sort_values()
    table = table.reindex(scrapes.union(table.index)).ffill().fillna(0.0)
    columns = {"open": ev.open, "half_open": ev.half_open, "close": ev.close}
    counts = pd.DataFrame(
        {state: table.get(column, 0.0) for state, column in columns.items()}, index=table.index
    )
    return states_from_events(counts), None, counts


def states_from_events(counts: pd.DataFrame) -> pd.Series:
    """State codes at each scrape from cumulative ``open``, ``half_open``, ``close`` counts.

    Before any event the breaker is closed. At each scrape the events counted
    since the previous one are taken in the breaker's own order (closed -open->
    open -half_open-> half_open -close-> closed, half_open -open-> open): an
    ``open`` not yet followed by a ``half_open`` leaves it open; otherwise as
    many ``close`` as ``half_open`` (plus one if it was half-open) close it,
    fewer leave it half-open; a ``close`` alone closes it (a manual close).
    A count that went down (the service restarted) starts again from closed.
    """
    state = "closed"
    previous = np.zeros(3)
    out = []
    for values in counts[["open", "half_open", "close"]].to_numpy(dtype=float):
        delta = values - previous
        if (delta < 0).any():  # counters reset: a restarted process starts closed
            state, delta = "closed", values
        previous = values
        o, h, c = delta
        if o == 0 and h == 0 and c > 0:
            state = "closed"
        elif (state == "open") + o - h > 0:
            state = "open"
        elif o or h or c:
            state = "closed" if c >= h + (state == "half_open") else "half_open"
        out.append(float(BREAKER_STATES[state]))
    return pd.Series(out, index=counts.index.to_numpy(dtype=float), dtype=float)


def breaker_state_now(preset: Preset, rows: Iterable[Row], source: str = "target") -> str | None:
    """The breaker's state at the newest of ``rows`` (for the live progress line).

    ``rows`` are scraped samples (``Row``); a gauge preset needs only the newest
    scrape, an event preset (opossum) the scrapes so far.
    """
    selector = preset.breaker_state
    if selector is None:
        return None
    names = set(selector.spellings())
    kept = [r for r in rows if r[1] == source and r[2] in names]
    if not kept:
        return None
    frame = pd.DataFrame(kept, columns=METRICS_COLUMNS)
    states, _ = breaker_states(frame, preset, source)
    if states.empty:
        return None
    code = int(states.iloc[-1])
    return next((name for name, c in BREAKER_STATES.items() if c == code), None)
