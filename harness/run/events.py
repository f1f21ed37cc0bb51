"""The run's events: what the orchestrator tells whoever listens (the CLI's live line, tests).

Four events, fired in this order for every build (and every repetition of it):

- ``build_started(key)``: its folder exists; the gateway and target are about to start.
- ``progress(Progress)``: about once a second while the load runs.
- ``warning(key, text)``: after its results are written, each thing they show that most
  likely means the build did not test what was meant (its gateway heard no call).
- ``build_finished(key, status)``: every process has stopped and its results are written;
  ``status`` is ``completed``, ``aborted`` (a gate with ``abort: true``), ``interrupted`` or
  ``failed``.

``key`` is the build's name, or ``<name>.r<n>`` when a run repeats its builds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Progress:
    """One live reading of a running build, for the CLI's progress line."""

    build: str
    elapsed_s: float
    total_s: float
    state: str
    offered_rps: dict[str, float]
    achieved_rps: dict[str, float]
    dropped: dict[str, int]
    """Requests not sent so far (``max-in-flight``), per endpoint that dropped any."""
    busy_workers: float | None
    max_workers: float | None
    breaker_state: str | None
    metrics_age_s: float | None = None
    """How old the target's newest scrape is (None: none yet); the line says it when stale."""
    interval_s: float = 1.0
    """The scrape interval: a reading older than two is stale."""


@dataclass
class RunListener:
    """Callbacks for the run's events; each defaults to doing nothing."""

    build_started: Callable[[str], None] = lambda key: None
    progress: Callable[[Progress], None] = lambda progress: None
    warning: Callable[[str, str], None] = lambda key, text: None
    build_finished: Callable[[str, str], None] = lambda key, status: None
