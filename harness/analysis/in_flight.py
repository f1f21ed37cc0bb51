"""Requests in flight: how many the service held open at once, from the load generator's samples.

Any service gets it, whatever it exposes and whether or not it has a worker pool: each
attempt sent (``actual_start``) and not answered yet (``end``; one never answered stays
open) is one request in flight. On a thread-per-request server the busy workers follow it
up to the pool's size; on Netty (WebFlux) or Node, where a request waiting on a call holds
no thread, it is the concurrency figure there is (issue 30: 201 requests open at once while
another route stayed at 20 ms).

Counted as a step function, sorted once per build and per endpoint: +1 at each send, -1 at
each answer (an answer before a send at the same instant: those two never overlapped). A
window is then cut with ``searchsorted``: ``max`` is the greatest level held in it, ``p50``
the median over time (the level the service held, or held less than, for half the window).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.load.plan import DROPPED


@dataclass(frozen=True)
class InFlight:
    """Requests open at once over time: ``level[i]`` from ``t[i]`` until ``t[i + 1]``."""

    t: np.ndarray
    level: np.ndarray

    @classmethod
    def of(cls, samples: pd.DataFrame) -> InFlight:
        """From samples as the load generator writes them (one row per attempt): those
        sent, dropped arrivals (never sent) left out."""
        sent = samples[samples["error"] != DROPPED] if len(samples) else samples
        start = sent["actual_start"].to_numpy(dtype=float) if len(sent) else np.empty(0)
        end = sent["end"].to_numpy(dtype=float) if len(sent) else np.empty(0)
        start_ok = ~np.isnan(start)
        end = end[start_ok & ~np.isnan(end)]  # unanswered: open to the end
        start = start[start_ok]
        times = np.concatenate((end, start))
        steps = np.concatenate((-np.ones(len(end)), np.ones(len(start))))
        order = np.argsort(times, kind="stable")  # by time; at one instant, answers first
        return cls(times[order], np.cumsum(steps[order]))

    def stats(self, start: float, end: float) -> tuple[float | None, float | None]:
        """The most requests open at once in [start, end), and the median over time; None
        for an empty window."""
        if end <= start:
            return None, None
        first = int(np.searchsorted(self.t, start, side="right"))
        stop = int(np.searchsorted(self.t, end, side="left"))
        before = float(self.level[first - 1]) if first else 0.0
        levels = np.concatenate(([before], self.level[first:stop]))
        edges = np.concatenate(([start], self.t[first:stop], [end]))
        held = np.diff(edges)
        order = np.argsort(levels, kind="stable")
        cumulative = np.cumsum(held[order])
        median = levels[order][int(np.searchsorted(cumulative, cumulative[-1] / 2.0))]
        return float(levels.max()), float(median)
