"""The recovered/stuck verdict (a scenario's ``recovery:``): did goodput come back by itself?

Goodput is requests served (2xx/3xx, not a fallback or degraded answer: ``answers.served``),
counted in the second each was due (its first
attempt's intended start); the offered load is the first attempts due that second, sent or
dropped (the scenario's open-model arrivals, so a Poisson second of 15 owes 15, not the mean
rate). With client retries (``attempt`` and ``request`` columns) a request counts once, by
its final attempt's answer; without them every row is a first attempt. The requests counted
are those of the ``calls-gateway`` endpoints, or every endpoint when none is marked.

``recovered_after_s`` is the first whole second ``k`` after the trigger's end, ``k`` at most
``within``, from which every second of the next ``hold`` had goodput >= ``goodput``% of its
offered load (a second with nothing due passes); ``recovered`` is 1 then, 0 when no such
``k`` exists (stuck: ``recovered_after_s`` is None and ``not_reached`` holds ``within``, so
it reads ``> 30 s`` and gates compare that bound), None when it cannot be measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pandas as pd

from harness.analysis.answers import served
from harness.analysis.model import Timeline
from harness.load.plan import DROPPED
from harness.results.attempts import requests_of
from harness.scenario.schema import Scenario

Array = npt.NDArray[np.float64]

RECOVERED = "timeline.recovered"
RECOVERED_AFTER = "timeline.recovered_after_s"


@dataclass(frozen=True)
class PerSecond:
    """Whole seconds from ``start`` (seconds since t0): counts of what was due in each."""

    start: float
    offered: Array
    goodput: Array
    retried: Array
    """Client attempts after the first (``attempt >= 2``), by their own intended start."""

    @property
    def edges(self) -> Array:
        return self.start + np.arange(len(self.offered) + 1, dtype=float)


@dataclass(frozen=True)
class Verdict:
    """The figures of one build's ``timeline``, and why any is missing."""

    figures: dict[str, float | None]
    unreached: dict[str, float] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)

    @property
    def recovered(self) -> float | None:
        return self.figures.get("recovered")


def counted_endpoints(scenario: Scenario) -> list[str]:
    """The endpoints goodput counts: those marked ``calls-gateway``, else every one."""
    return scenario.gateway_endpoints() or list(scenario.traffic)


def per_second(
    scenario: Scenario, samples: pd.DataFrame, t0: float, start: float, end: float
) -> PerSecond:
    """Offered, goodput and client retries per whole second over [start, end) (since t0)."""
    n = max(0, math.ceil(end - start - 1e-9))
    own = samples[samples["endpoint"].isin(counted_endpoints(scenario))]
    requests = requests_of(own)  # first attempts, each with its final sent answer
    retries = own[own["attempt"] >= 2] if "attempt" in own.columns else own.iloc[:0]
    retries = retries[retries["error"] != DROPPED]
    due = requests["intended_start"].to_numpy(dtype=float)
    ok = served(requests).to_numpy()

    def binned(times: npt.NDArray[np.float64]) -> Array:
        k = np.floor(times - t0 - start)
        k = k[(k >= 0) & (k < n)].astype(int)
        return np.bincount(k, minlength=n).astype(float)

    return PerSecond(
        start,
        binned(due),
        binned(due[ok]),
        binned(retries["intended_start"].to_numpy(dtype=float)),
    )


def recovery_verdict(
    scenario: Scenario, samples: pd.DataFrame, t0: float, until: float | None = None
) -> Verdict | None:
    """The verdict of one build whose load ran ``until`` s (the window; less if aborted);
    None when the scenario has no ``recovery:``."""
    settings = scenario.recovery
    if settings is None:
        return None
    phase = settings.trigger_phase(scenario.phases)
    if phase is None:  # refused at load; a scenario edited since the run
        return _unmeasured(f"recovery: no trigger phase {settings.trigger or ''} in the scenario")
    end = scenario.duration if until is None else min(until, scenario.duration)
    seconds = per_second(scenario, samples, t0, phase.end, max(end, phase.end))
    if not seconds.offered.sum():
        return _unmeasured(f"no request was due after trigger {phase.name!r} ended")
    hold = max(1, math.ceil(settings.hold - 1e-9))
    good = seconds.goodput >= seconds.offered * settings.goodput / 100.0 - 1e-9
    last = min(math.floor(settings.within + 1e-9), len(good) - hold)
    for k in range(last + 1):
        if good[k : k + hold].all():
            return Verdict({"recovered": 1.0, "recovered_after_s": float(k)})
    if last < math.floor(settings.within + 1e-9):  # the window ended before within + hold
        return _unmeasured(
            f"the build's load ended {len(good):g} s after trigger {phase.name!r} (aborted), "
            "before within + hold"
        )
    return Verdict(
        {"recovered": 0.0, "recovered_after_s": None},
        unreached={RECOVERED_AFTER: float(settings.within)},
    )


def _unmeasured(why: str) -> Verdict:
    return Verdict(
        {"recovered": None, "recovered_after_s": None},
        missing={RECOVERED: why, RECOVERED_AFTER: why},
    )


def add_verdict(
    scenario: Scenario,
    samples: pd.DataFrame,
    t0: float,
    timeline: Timeline,
    unreached: dict[str, float],
    until: float | None = None,
) -> dict[str, str]:
    """Put the verdict into a build's ``timeline`` (a stuck one's bound into ``unreached``);
    its not-measured reasons. Nothing without a ``recovery:``."""
    verdict = recovery_verdict(scenario, samples, t0, until)
    if verdict is None:
        return {}
    timeline["recovered"] = verdict.figures["recovered"]
    timeline["recovered_after_s"] = verdict.figures["recovered_after_s"]
    unreached.update(verdict.unreached)
    return verdict.missing
