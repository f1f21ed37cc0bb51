"""Figures side by side: flattened names, % change against a baseline, repetitions combined.

A build's figures flatten to dotted names (``products.latency_s.p95``,
``workers.busy_p50_fault``, ``products.latency_s.p95[outage]``): the keys of
``comparison`` and ``ci95`` in ``report.json`` and the rows of ``harness compare``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, cast

import numpy as np

from harness.analysis.model import BuildFigures, Change, Flat, WindowFigures

RETRY_KEYS = ("attempts", "retried_pct", "admitted_rps", "retried_rps")
"""An endpoint's figures of its client's retries: only when it has ``retry:``."""
SECTIONS = ("workers", "in_flight", "breaker", "pg", "timeline", "ledger", "resources")
"""Sections whose numeric keys are flattened (``bool`` and nested values are not)."""


def round_figure(x: float | None, digits: int = 4) -> float | None:
    """The precision every figure is stored at; NaN (nothing measured) becomes None."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return round(float(x), digits)


def _flat_window(figures: BuildFigures | WindowFigures, suffix: str, flat: Flat) -> None:
    for ep, stats in figures["endpoints"].items():
        for q in ("p50", "p95", "p99", "max"):
            flat[f"{ep}.latency_s.{q}{suffix}"] = stats["latency_s"][q]
        flat[f"{ep}.success_pct{suffix}"] = stats["success_pct"]
        given: Mapping[str, object] = stats  # keys absent in older reports, and without retry
        for kept in ("kept_pct", "cached_pct", "dropped", *RETRY_KEYS, "in_flight_max"):
            value = given.get(kept)
            if kept in given and (value is None or isinstance(value, int | float)):
                flat[f"{ep}.{kept}{suffix}"] = value
        flat[f"{ep}.achieved_rps{suffix}"] = stats["achieved_rps"]
        if "attempts" in stats:  # a client that retries: its offered load beside the rest
            flat[f"{ep}.offered_rps{suffix}"] = stats["offered_rps"]
    # Read as a plain mapping: a report from an older harness may lack a section.
    sections: Mapping[str, object] = figures
    for section in SECTIONS:
        values = sections.get(section) or {}
        assert isinstance(values, Mapping)
        for key, value in values.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                flat[f"{section}.{key}{suffix}"] = float(value)
    for dep, stats in (sections.get("dependencies") or {}).items():  # type: ignore[attr-defined]
        for stat, value in stats.items():  # a named dependency's: dependencies.visits.calls
            if isinstance(value, int | float) and not isinstance(value, bool):
                flat[f"dependencies.{dep}.{stat}{suffix}"] = float(value)
    for series, stats in (sections.get("series") or {}).items():  # type: ignore[attr-defined]
        for stat, value in stats.items():  # the catalogue's series: series.db_pending.max_fault
            if isinstance(value, int | float) and not isinstance(value, bool):
                flat[f"series.{series}.{stat}{suffix}"] = float(value)


def flatten(figures: BuildFigures) -> Flat:
    """The comparable numbers of a build as dotted keys, phases in brackets.

    For example ``products.latency_s.p95``, ``workers.busy_p50_fault``,
    ``products.latency_s.p95[outage]``.
    """
    flat = flatten_whole(figures)
    for phase, window in figures.get("phases", {}).items():
        _flat_window(window, f"[{phase}]", flat)
    return flat


def flatten_whole(figures: BuildFigures) -> Flat:
    """``flatten`` without the phases: the figures over the measured and fault windows."""
    flat: Flat = {}
    _flat_window(figures, "", flat)
    return flat


def change_pct(baseline: float | None, value: float | None) -> float | None:
    if baseline is None or value is None or baseline == 0:
        return None
    return round(100.0 * (value - baseline) / baseline, 1)


def compare(figures: Mapping[str, BuildFigures], baseline: str) -> dict[str, dict[str, Change]]:
    """Every figure of every other build against the baseline build, with % change."""
    base = flatten(figures[baseline])
    out: dict[str, dict[str, Change]] = {}
    for name, fig in figures.items():
        if name == baseline:
            continue
        flat = flatten(fig)
        out[name] = {
            key: {
                "baseline": base.get(key),
                "value": flat.get(key),
                "change_pct": change_pct(base.get(key), flat.get(key)),
            }
            for key in base
        }
    return out


def _mean_tree(trees: list[Any]) -> Any:
    """Average the numeric leaves of several same-shaped figure trees (repetitions)."""
    first = trees[0]
    if isinstance(first, dict):
        keys = [k for k in first if all(isinstance(t, dict) and k in t for t in trees)]
        return {k: _mean_tree([t[k] for t in trees]) for k in keys}
    if isinstance(first, bool) or not isinstance(first, int | float):
        return first
    values = [float(t) for t in trees if isinstance(t, int | float)]
    return round_figure(float(np.mean(values))) if len(values) == len(trees) else None


def bootstrap_ci(
    values: list[float], rng: np.random.Generator, rounds: int = 2000
) -> tuple[float, float]:
    """95% bootstrap interval of the mean of ``values`` (one value per repetition)."""
    arr = np.asarray(values, dtype=float)
    means = arr[rng.integers(0, len(arr), size=(rounds, len(arr)))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def combine_repetitions(reps: list[BuildFigures], seed: int = 0) -> BuildFigures:
    """One build's figures over N repetitions: means, plus a 95% interval for every figure."""
    if len(reps) == 1:
        return reps[0]
    combined = cast(BuildFigures, _mean_tree(reps))
    flats = [flatten(r) for r in reps]
    rng = np.random.default_rng(seed)
    ci: dict[str, list[float | None]] = {}
    for key in flats[0]:
        values = [f.get(key) for f in flats]
        if all(v is not None for v in values):
            low, high = bootstrap_ci([float(v) for v in values if v is not None], rng)
            ci[key] = [round_figure(low), round_figure(high)]
    warnings = list(dict.fromkeys(w for r in reps for w in r.get("warnings", [])))
    if warnings:  # any repetition's, each once
        combined["warnings"] = warnings
    aborted = next((r["abort"] for r in reps if "abort" in r), None)
    if aborted is not None:  # a gate with abort: true stopped one of them
        combined["abort"] = aborted
    combined["repetitions"] = len(reps)
    combined["ci95"] = ci
    blocks = [r.get("blocks") or {} for r in reps]
    if all(blocks):  # the judge's blocks: every repetition's, one after another
        combined["blocks"] = {k: [v for b in blocks for v in b.get(k, [])] for k in blocks[0]}
    return combined
