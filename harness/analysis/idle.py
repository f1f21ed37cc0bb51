"""Resilience the fault never set off: a Retry that made no retry, a breaker that never
opened, while the gateway failed the service's calls.

A retry list that names no exception the client throws (Resilience4j's
``retry-exceptions``), or a breaker that records none of them as failures, leaves a
build with resilience in its configuration and none in its run: 0 retries,
amplification 1.00, gates green. That is a measurement, not a missing figure, so it
is said as a warning, and only where the harness knows both sides:

- the fault reached the service: the gateway's ledger has calls that failed in the
  fault window (a faulted phase's call answered other than 2xx, or whose client hung
  up first). A ``refuse`` fault, which the ledger never sees, says nothing;
- the build has a Retry: its own settings say it retries (``BuildSettings.retries_its_calls``:
  the shop's ``max-attempts``), or its preset's ``retries`` series exists only with a
  Retry (``Preset.registered``: Resilience4j's Micrometer binder) and was seen. A
  counter a service exposes whether or not it retries says nothing;
- the build has a breaker: its state was read (``breaker.present``), with no scrape gap
  in the fault window that an open could hide in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import pandas as pd

from harness.analysis.aborted import covered_until
from harness.analysis.presets import BREAKER_STATES, Preset, preset_for
from harness.results.model import BuildResult
from harness.scenario.builds.base import BuildSettings
from harness.scenario.schema import Scenario

OPENED = (BREAKER_STATES["open"], BREAKER_STATES["half_open"], BREAKER_STATES["forced_open"])
"""State codes of a breaker that has opened (half-open comes only after open)."""

Counted = Callable[[str, float, float], float | None]
"""How much a canonical counter grew in [start, end] (``BuildSeries.counted``)."""


class Measured(Protocol):
    """What ``analysis.figures.BuildSeries`` read of a build that this module needs."""

    t0: float
    samples: pd.DataFrame
    missing: dict[str, str]
    gaps: list[tuple[float, float]]

    def counted(self, name: str, start: float, end: float) -> float | None: ...

    def states(self) -> list[pd.Series]: ...


def build_idle_warnings(scenario: Scenario, build: BuildResult, data: Measured) -> list[str]:
    """``idle_warnings`` of one build: its fault window as far as it ran, its ledger's
    failed calls, whether it is known to retry."""
    until = covered_until(scenario, build.info, data.samples, data.t0)
    fault = fault_of(scenario, data.t0, until)
    if fault is None:
        return []
    retry = has_retry(scenario.builds[build.build], preset_for(build.info), data.missing)
    return idle_warnings(
        fault,
        failed_calls(build.ledger, fault.start, fault.end),
        has_retry=retry,
        counted=data.counted,
        states=data.states(),
        gaps=data.gaps,
    )


@dataclass(frozen=True)
class Fault:
    """The fault window in absolute time, as far as the build ran it, and its name."""

    start: float
    end: float
    t0: float
    phases: str
    """The faulted phases' names (``outage``, ``brownout + outage``)."""

    def said(self) -> str:
        return f"{self.phases} ({self.start - self.t0:g}–{self.end - self.t0:g} s)"


def fault_of(scenario: Scenario, t0: float, until_s: float) -> Fault | None:
    """The scenario's fault window from ``t0``, cut at ``until_s`` (what the build ran of its
    window: ``analysis.aborted.covered_until``); None without a fault, or none run."""
    window = scenario.fault_window()
    if window is None or window[0] >= until_s:
        return None
    start, end = window[0], min(window[1], until_s)
    names = [
        p.name
        for p in scenario.phases
        if (p.fault.type != "healthy" or p.toxics) and p.start < end and p.end > start
    ]
    return Fault(t0 + start, t0 + end, t0, " + ".join(names) or "the fault window")


def has_retry(build: BuildSettings, preset: Preset, missing: Mapping[str, str]) -> bool:
    """Whether the build is known to retry its calls: its settings say so, or else its
    ``retries`` series exists only with a Retry and was seen (module docstring)."""
    said = build.retries_its_calls()
    if said is not None:
        return said
    return "retries" in preset.registered and "retries" not in missing


def failed_calls(ledger: pd.DataFrame, start: float, end: float) -> dict[str, int]:
    """Calls of the gateway's ledger that arrived in [start, end) under a fault and failed
    (answered other than 2xx, or their client hung up first), counted by fault."""
    if ledger.empty:
        return {}
    at = ledger["arrival"]
    faulted = (at >= start) & (at < end) & (ledger["fault"].astype(str) != "healthy")
    failed = ~ledger["status"].between(200, 299) | ledger["client_gone"].astype(bool)
    rows = ledger.loc[faulted & failed, "fault"].astype(str)
    return {str(k): int(v) for k, v in rows.value_counts().sort_index().items()}


def _failures(failed: dict[str, int]) -> str:
    total = sum(failed.values())
    kinds = ", ".join(f"{fault}: {n}" for fault, n in failed.items())
    return f"{total} calls to the gateway failed then ({kinds})"


def idle_warnings(
    fault: Fault,
    failed: dict[str, int],
    *,
    has_retry: bool,
    counted: Counted,
    states: Sequence[pd.Series],
    gaps: Sequence[tuple[float, float]],
) -> list[str]:
    """A sentence for a Retry that made no retry and for a breaker that never opened over
    the fault window while calls failed (``failed_calls``); nothing where the harness
    cannot know (module docstring)."""
    if not failed:
        return []
    out: list[str] = []
    retries = counted("retries", fault.start, fault.end) if has_retry else None
    if retries is not None and round(retries) == 0:
        out.append(
            f"its Retry made no retry during {fault.said()}, while {_failures(failed)}: "
            "it most likely retries none of the exceptions its client throws (Resilience4j: "
            "retry-exceptions, ignore-exceptions, a result predicate) or max-attempts is 1"
        )
    if _never_opened(fault, counted, states, gaps):
        out.append(
            f"its breaker never opened during {fault.said()}, while {_failures(failed)}: "
            "it most likely records none of them as failures (Resilience4j: "
            "record-exceptions, ignore-exceptions) or never reached its thresholds "
            "(minimum-number-of-calls, failure-rate-threshold, slow-call settings)"
        )
    return out


def _never_opened(
    fault: Fault,
    counted: Counted,
    states: Sequence[pd.Series],
    gaps: Sequence[tuple[float, float]],
) -> bool:
    """Whether every breaker read closed at each scrape of the fault window and refused no
    call; False (not known) without a breaker, a scrape there, or with a gap there."""
    if not any(len(s) for s in states):
        return False
    if any(a < fault.end and b > fault.start for a, b in gaps):
        return False
    readings = [s[(s.index >= fault.start) & (s.index <= fault.end)] for s in states]
    if not any(len(r) for r in readings):
        return False
    if any(r.isin(OPENED).any() for r in readings):
        return False
    blocked = counted("blocked_calls", fault.start, fault.end)
    return not blocked
