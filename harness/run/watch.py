"""Watching a build's load: progress every second until the load generator finishes.

Each second the run folder's space is checked, every process of the build is
checked alive, and the listener gets a ``Progress``: offered and achieved rates
from Locust's progress file, and the target's pool and breaker state from the
scraper's newest readings (summed, or listed, over a replicated build's replicas).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.analysis.replicas import is_target_source
from harness.analysis.series import Preset, Selector
from harness.core.errors import ProcessDied, RunError
from harness.load.plan import LoadPlan
from harness.results.io import RunFolder
from harness.run.events import Progress, RunListener
from harness.run.loadgen import LOAD_WORKER, read_progress
from harness.run.processes import ProcessGroup
from harness.run.scraper import Scraper


def watch_load(
    folder: RunFolder,
    listener: RunListener,
    key: str,
    plan: LoadPlan,
    start_at: float,
    group: ProcessGroup,
    scraper: Scraper,
    preset: Preset,
    load_exit: Callable[[], int | None],
    stop_early: Callable[[float], bool] | None = None,
    check: Callable[[], None] = lambda: None,
) -> bool:
    """Emit progress every second until the load generator finishes; fail if a process dies.

    ``folder`` is checked for space first each second; ``listener`` gets the progress;
    ``check`` raises what else fails the build (a phase cap that could not be applied).
    ``stop_early`` is asked each second with the time (a gate with ``abort: true``): when
    it says so, the watch ends with the load still running, for the caller to stop it.
    Returns whether it did.
    """
    previous: dict[str, Any] = {}
    hard_stop = start_at + plan.total_s + plan.drain_s + 30
    while True:
        time.sleep(1.0)
        # First: a full disk also kills the gateway's ledger and Locust's samples, and
        # "disk full" says more than "Locust exited with code 3".
        folder.check_space()
        progress = read_progress(Path(plan.progress_path))
        if progress.get("state") in ("finished", "interrupted") or load_exit() is not None:
            break
        # The gateway and every process of the build (Locust's exit is read above).
        workers = [c.name for c in group.children if c.name.startswith(LOAD_WORKER)]
        group.check_alive(
            *(c.name for c in group.children if c.name != "load" and c.name not in workers)
        )
        try:  # Locust's workers, when the load is distributed
            if workers:
                group.check_alive(*workers)
        except ProcessDied:
            # The master quits its workers once every one has finished: not a death.
            progress = read_progress(Path(plan.progress_path))
            if progress.get("state") != "finished":
                raise
            break
        check()
        if time.time() > hard_stop:
            raise RunError("the load generator did not finish in time")
        if stop_early is not None and stop_early(time.time()):
            return True
        listener.progress(_progress(key, plan, start_at, progress, previous, scraper, preset))
        previous = progress
    code = load_exit()
    if code not in (None, 0):
        folder.check_space()
        error = read_progress(Path(plan.progress_path)).get("error") or progress.get("error")
        if error:  # the locustfile says why (it could not write its samples...)
            raise RunError(f"the load generator stopped: {error}")
        load = next(c for c in group.children if c.name == "load")
        tail = load.log_tail()
        raise ProcessDied(f"Locust exited with code {code}; last lines of {load.log_path}:\n{tail}")
    if progress.get("state") != "finished":
        raise RunError(f"the load generator stopped early (state {progress.get('state')!r})")
    return False


def _firsts(progress: dict[str, Any], endpoint: str) -> int:
    """First attempts sent so far: attempts less the client's retries (``traffic.<ep>.retry``),
    so achieved is the requests' rate, as the report's ``achieved_rps``."""
    sent = int(progress.get("sent", {}).get(endpoint, 0))
    return sent - int(progress.get("retried", {}).get(endpoint, 0))


def _progress(
    key: str,
    plan: LoadPlan,
    start_at: float,
    now: dict[str, Any],
    before: dict[str, Any],
    scraper: Scraper,
    preset: Preset,
) -> Progress:
    dt = max(1e-6, now.get("t", 0.0) - before.get("t", start_at))
    achieved = {ep: (_firsts(now, ep) - _firsts(before, ep)) / dt for ep in plan.endpoints}
    elapsed = max(0.0, time.time() - start_at)
    return Progress(
        build=key,
        elapsed_s=elapsed,
        total_s=plan.total_s,
        state=str(now.get("state", "?")),
        offered_rps={
            ep: round(e.profile(plan.total_s).rate_at(min(elapsed, plan.total_s)), 1)
            for ep, e in plan.endpoints.items()
        },
        achieved_rps=achieved,
        dropped={ep: int(n) for ep, n in now.get("dropped", {}).items() if n},
        busy_workers=_latest(scraper, preset.gauge("busy_workers")),
        max_workers=_latest(scraper, preset.gauge("max_workers")),
        breaker_state=_breaker_now(scraper, preset),
        metrics_age_s=_age(scraper),
        interval_s=scraper.interval_s,
    )


def _age(scraper: Scraper) -> float | None:
    """How old the oldest of the target's newest scrapes is: a live figure read from a
    target that stopped answering its metrics is that old."""
    times = [scraper.latest_at(source) for source in _targets(scraper)]
    known = [t for t in times if t is not None]
    return max(0.0, scraper.clock() - min(known)) if known else None


def _targets(scraper: Scraper) -> list[str]:
    """The scrape sources of the build's target: ``target``, or one per replica."""
    return [source for source in scraper.sources if is_target_source(source)]


def _latest(scraper: Scraper, selector: Selector | None) -> float | None:
    """The newest reading of ``selector``, summed over the replicas of a replicated build."""
    if selector is None:
        return None
    read = [scraper.latest_value(source, selector) for source in _targets(scraper)]
    values = [v for v in read if v is not None]
    return sum(values) if values else None


def _breaker_now(scraper: Scraper, preset: Preset) -> str | None:
    """The breaker's state now; a replicated build's, one per replica (``open/closed/open``)."""
    if not preset.breaker_state:
        return None
    states = [scraper.breaker_state(source, preset) for source in _targets(scraper)]
    if len(states) <= 1:
        return states[0] if states else None
    return "/".join(state or "-" for state in states)
