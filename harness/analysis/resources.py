"""What a build's container cost (CPU, memory) over the measured and the fault window, from
the Docker Engine's stats (the ``container`` scrape source): a build that ran in no
container has none."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from harness.analysis.combine import round_figure as _round
from harness.analysis.model import ResourceFigures


def resource_figures(
    resources: Mapping[str, pd.Series], whole: tuple[float, float], fault: tuple[float, float]
) -> ResourceFigures | None:
    """CPU (mean, max) and memory (max) of the build's container over the measured window
    and the fault window; ``None`` when no container's stats were scraped."""
    cpu, memory = resources["cpu_pct"], resources["memory_bytes"]
    if cpu.empty and memory.empty:
        return None

    def cut(series: pd.Series, window: tuple[float, float]) -> pd.Series:
        return series[(series.index >= window[0]) & (series.index <= window[1])]

    def stat(series: pd.Series, how: str, window: tuple[float, float]) -> float | None:
        values = cut(series, window)
        if values.empty:
            return None
        return _round(float(values.mean() if how == "mean" else values.max()), 2)

    return {
        "cpu_pct_mean": stat(cpu, "mean", whole),
        "cpu_pct_max": stat(cpu, "max", whole),
        "memory_bytes_max": stat(memory, "max", whole),
        "cpu_pct_mean_fault": stat(cpu, "mean", fault),
        "cpu_pct_max_fault": stat(cpu, "max", fault),
        "memory_bytes_max_fault": stat(memory, "max", fault),
    }
