"""Whether a build measured what it meant to: the harness's own stalls, told apart.

Two ways the harness itself, not the service, can make a build's numbers wrong:

- **A stalled orchestrator** (Ctrl-Z, a machine swapping, a starved CPU) takes no scrape
  while it is stopped: the busy workers of a fault window read from the scrapes around
  the hole (2 where the pool was full at 20). A gap between two scrapes of the target
  longer than ``GAP_INTERVALS`` intervals is recorded (``validity.scrape_gaps``), warned,
  and every figure read from the scrapes' readings over a window it falls in (a gauge's
  max, mean and p50, the breaker's open share, opens and time to open: the statistics
  ``core.canonical.STATISTICS`` marks ``gap_blind``) is None and "not measured" there.
  Counters are not touched: a count over a window reads the counter at its edges, which a
  gap inside does not change.
- **A stalled load generator** (its process stopped, its CPU saturated) sends late what
  was due: latency counts from the intended start, so the service is blamed for the
  wait. A request sent more than ``LATE_WARN_S`` late is warned.

A gap whose scrapes were tried and failed is the target's, not the harness's: the scraper
keeps each failed scrape's time and why (``run.scraper.FailedScrape``, the manifest's
``scrape_failed``), and a target whose metrics share its request port (an actuator on the
app port, queued behind a full pool) is told to serve them on a port of their own.

Both are figures of the catalogue (``validity.scrape_gap_max_s``,
``validity.generator_max_lateness_s``), so a gate can refuse such a run
(``before.generator.max_lateness_s <= 0.5``, ``before.scrape.gap_max_s <= 3``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from urllib.parse import urlsplit

import numpy as np
import pandas as pd

from harness.analysis.replicas import is_target_source
from harness.core.catalogue import FIGURES, Figure
from harness.load.plan import DROPPED

GAP_INTERVALS = 3.0
"""A scrape gap longer than this many scrape intervals is a hole in the metrics."""
LATE_WARN_S = 0.5
"""A request sent this much later than planned means the generator, not the service, stalled."""

Gap = tuple[float, float]


def scrape_gaps(metrics: pd.DataFrame, window: Gap, interval_s: float) -> tuple[list[Gap], float]:
    """The gaps (absolute times) between successive scrapes of the target longer than
    ``GAP_INTERVALS`` intervals that overlap ``window``, and the longest time between two
    scrapes there (NaN when the target was never scraped)."""
    if not len(metrics):
        return [], float("nan")
    gaps: list[Gap] = []
    longest = float("nan")
    for source in metrics["source"].unique():
        if not is_target_source(str(source)):
            continue
        times = np.unique(metrics.loc[metrics["source"] == source, "t"].to_numpy(dtype=float))
        # The window's edges count as scrapes missed when none came near them.
        edges = np.concatenate(([min(window[0], times[0])], times, [max(window[1], times[-1])]))
        starts, ends = edges[:-1], edges[1:]
        inside = (ends > window[0]) & (starts < window[1])
        spans = (ends - starts)[inside]
        if len(spans):
            longest = max(float(spans.max()), 0.0 if np.isnan(longest) else longest)
        wide = inside & (ends - starts > GAP_INTERVALS * interval_s)
        gaps += [(float(a), float(b)) for a, b in zip(starts[wide], ends[wide], strict=True)]
    return sorted(gaps), longest


def overlaps(gaps: list[Gap], start: float, end: float) -> Gap | None:
    """The first gap that falls in [start, end], if one does."""
    return next((g for g in gaps if g[0] < end and g[1] > start), None)


def gap_blind(figure: Figure) -> bool:
    """Whether ``figure`` is read from the scrapes' readings (so a gap makes it wrong): a
    canonical series' figure whose statistic says so (``Statistic.gap_blind``)."""
    return figure.series() is not None and figure.statistic.gap_blind


def failed_in(gap: Gap, failed: Sequence[Sequence[float | str]]) -> list[str]:
    """Why each scrape of a target that started inside ``gap`` failed (``run.scraper``'s
    ``[start, end, source, why]``): empty when none was tried, so the harness was stalled."""
    return [
        str(why)
        for start, _end, source, why in failed
        if is_target_source(str(source)) and gap[0] <= float(start) <= gap[1]
    ]


def _cause(whys: list[str]) -> str:
    """What a gap's failed scrapes say of the target (``failed_in``)."""
    counted = Counter(whys)
    said = {
        "timeout": "not answered in time",
        "refused": "refused (nothing listening)",
        "status": "answered with an HTTP error",
        "unreadable": "answered with no metrics text",
    }
    parts = [f"{n} {said.get(why, why)}" for why, n in counted.most_common()]
    return f"the target's scrapes failed: {', '.join(parts)}"


def gap_reason(
    gap: Gap, t0: float, interval_s: float, failed: Sequence[Sequence[float | str]] = ()
) -> str:
    where = (
        f"scrape gap: no scrape of the target for {gap[1] - gap[0]:.1f} s "
        f"(+{gap[0] - t0:.1f} s to +{gap[1] - t0:.1f} s; the interval is {interval_s:g} s)"
    )
    whys = failed_in(gap, failed)
    return f"{where}; {_cause(whys)}" if whys else where


def gap_not_measured(
    gaps: list[Gap],
    t0: float,
    interval_s: float,
    windows: dict[str, Gap],
    phases: dict[str, Gap],
    failed: Sequence[Sequence[float | str]] = (),
    exposed: Collection[str] | None = None,
) -> dict[str, str]:
    """Figure key -> why it is None: a gap fell in its window (``windows``: ``fault`` and
    ``whole``; ``phases``: each phase's, keyed ``phases.<name>.<key>``). With ``exposed``
    (the canonical series the target showed), only figures of those: one whose series the
    service never had is not measured for that reason, not the gap's."""
    out: dict[str, str] = {}
    for figure in FIGURES:
        if not gap_blind(figure):
            continue
        series = figure.series()
        if exposed is not None and series is not None and series.name not in exposed:
            continue
        span = windows["fault" if figure.window == "fault" else "whole"]
        if (gap := overlaps(gaps, *span)) is not None:
            out[figure.key] = gap_reason(gap, t0, interval_s, failed)
        for name, (start, end) in phases.items():
            if figure.phase_key and (gap := overlaps(gaps, start, end)) is not None:
                out[f"phases.{name}.{figure.phase_key}"] = gap_reason(gap, t0, interval_s, failed)
    return out


def max_lateness(samples: pd.DataFrame, window: Gap) -> tuple[float | None, pd.Series | None]:
    """How late the latest request intended in ``window`` was sent, and that request."""
    sent = samples[
        (samples["error"] != DROPPED)
        & (samples["intended_start"] >= window[0])
        & (samples["intended_start"] < window[1])
    ]
    if not len(sent):
        return None, None
    late = (sent["actual_start"] - sent["intended_start"]).to_numpy(dtype=float)
    worst = int(np.argmax(late))
    return max(0.0, float(late[worst])), sent.iloc[worst]


UNMEASURED = (
    "the scrape figures of the windows it falls in are not measured "
    "(gate `scrape.gap_max_s` to refuse such a run)"
)


def _gap_warning(
    gap: Gap,
    interval_s: float,
    t0: float,
    failed: Sequence[Sequence[float | str]],
    metrics_on_app_port: bool,
) -> str:
    """A gap said as the target's when its scrapes were tried and failed, else the harness's."""
    reason = gap_reason(gap, t0, interval_s, failed)
    whys = failed_in(gap, failed)
    if not whys:  # no scrape was even tried: the scraper itself did not run
        return (
            f"{reason}: the orchestrator was stalled (stopped, swapped, starved of CPU); "
            f"{UNMEASURED}"
        )
    if "timeout" not in whys:
        return f"{reason}: the target's metrics could not be read; {UNMEASURED}"
    if metrics_on_app_port:
        advice = (
            "its metrics are served on the port its requests use, where a scrape waits "
            "behind them when every worker is busy: serve them on a port of their own (Spring "
            "Boot: `--management.server.port={metrics_port}` and the build's "
            '`metrics: {port: "{metrics_port}"}`; the harness gives each build that port)'
        )
    else:
        advice = (
            "it was too busy or blocked to answer (a starved CPU, a long pause, a metrics "
            "handler waiting on a lock); a longer `metrics.timeout` (up to the interval) or "
            "`metrics.interval` gives it more time"
        )
    return f"{reason}: the harness was running, the target did not answer; {advice}; {UNMEASURED}"


def metrics_on_app_port(target_url: str | None, metrics_url: str | None) -> bool:
    """Whether the target's metrics are read on the port its requests use."""
    if not target_url or not metrics_url:
        return False
    return urlsplit(target_url).netloc == urlsplit(metrics_url).netloc


def warnings(
    gaps: list[Gap],
    interval_s: float,
    t0: float,
    lateness: float | None,
    worst: pd.Series | None,
    failed: Sequence[Sequence[float | str]] = (),
    metrics_on_app_port: bool = False,
) -> list[str]:
    """What the user must be told: each scrape gap (the target's or the harness's), and a
    generator that ran late."""
    out = [_gap_warning(gap, interval_s, t0, failed, metrics_on_app_port) for gap in gaps]
    if lateness is not None and worst is not None and lateness > LATE_WARN_S:
        out.append(
            f"the load generator sent requests up to {lateness:.2f} s late ({worst['endpoint']}, "
            f"due at +{float(worst['intended_start']) - t0:.1f} s): it was itself stalled or "
            "saturated, and latency counts from the intended start, so that wait is the "
            "generator's, not the service's (gate `generator.max_lateness_s` to refuse such "
            "a run)"
        )
    return out
