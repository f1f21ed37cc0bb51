"""The simulator's error against a measured run: the same four figures read from both folders
by the same analysis (``harness.analysis``), so what differs is the model, not the reading.

The figures (docs/simulate.md), over the scenario's fault window:

- ``protected_p99_s``: the p99 latency of the endpoints that do not call the gateway (the
  worst of them): what a breaker is meant to protect;
- ``blocked_per_s``: calls the breaker refused per second (0 without a breaker);
- ``busy_workers``: mean busy request threads;
- ``time_to_open_s``: seconds from the fault's start until the breaker opened (None: it
  never did).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.analysis.endpoints import endpoint_stats
from harness.analysis.figures import analyse
from harness.results.model import load

FIGURES = ("protected_p99_s", "blocked_per_s", "busy_workers", "time_to_open_s")


def figures(run_dir: Path) -> dict[str, dict[str, float | None]]:
    """Per build, the four figures of a run folder (real or simulated)."""
    run = load(run_dir)
    scenario = run.scenario
    report = analyse(run, scenario)
    window = scenario.fault_window() or (0.0, scenario.duration)
    protected = [n for n, e in scenario.traffic.items() if not e.calls_gateway]
    found: dict[str, dict[str, float | None]] = {}
    for key, build in run.builds.items():
        figures_of = report["builds"][key]
        p99s = []
        for name in protected:
            samples = build.samples[build.samples["endpoint"] == name]
            start, end = build.t0 + window[0], build.t0 + window[1]
            p99 = endpoint_stats(samples, start, end, 0.0)["latency_s"]["p99"]
            if p99 is not None:
                p99s.append(p99)
        breaker = figures_of["breaker"]
        found[key] = {
            "protected_p99_s": max(p99s) if p99s else None,
            "blocked_per_s": breaker.get("blocked_per_s_fault") or 0.0,
            "busy_workers": figures_of["workers"].get("busy_mean_fault"),
            "time_to_open_s": figures_of["timeline"].get("time_to_open_s"),
        }
    return found


@dataclass(frozen=True)
class Error:
    """One figure of one build: simulated, measured, and how far apart."""

    build: str
    figure: str
    simulated: float | None
    measured: float | None

    @property
    def absolute(self) -> float | None:
        if self.simulated is None or self.measured is None:
            return None
        return self.simulated - self.measured

    @property
    def relative(self) -> float | None:
        """(simulated - measured) / measured; None when measured is 0 or missing."""
        if self.absolute is None or not self.measured:
            return None
        return self.absolute / abs(self.measured)

    def within(self, absolute: float, relative: float) -> bool:
        """Within ``absolute`` units or ``relative`` of the measured value (either will do);
        both None (never opened in either) agree."""
        if self.simulated is None and self.measured is None:
            return True
        if self.absolute is None:
            return False
        rel = self.relative
        return abs(self.absolute) <= absolute or (rel is not None and abs(rel) <= relative)


def errors(simulated: Path, measured: Path) -> list[Error]:
    """Every figure of every build both folders have."""
    sim, real = figures(simulated), figures(measured)
    return [
        Error(build, figure, sim[build][figure], real[build][figure])
        for build in real
        if build in sim
        for figure in FIGURES
    ]
