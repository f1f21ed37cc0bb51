"""A build's result files, written each on its own whatever happened before (a failed
build keeps what it measured; a full disk fails only the files it stops)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.core.errors import RunError
from harness.results.io import dependency_calls, keep_live_logs, write_parquet_atomic
from harness.results.manifest import BuildRecord
from harness.run.scraper import Scraper
from harness.run.targets import Target


def save_build(
    bdir: Path, scraper: Scraper | None, target: Target, info: BuildRecord
) -> RunError | None:
    """Write the build's result files, each on its own, whatever happened before.

    A file that cannot be written (a full disk) is said in ``info`` (and fails a
    build that had completed); the first such error is returned, not raised, so
    the manifest is written and the build's own error, if any, stays the one shown.
    """
    problems: list[RunError] = []

    def attempt(step: Callable[[], object]) -> None:
        try:
            step()
        except RunError as exc:
            problems.append(exc)
        except Exception as exc:  # a target's records unreadable (sqlite3.Error...)
            problems.append(RunError(f"{type(exc).__name__}: {exc}"))

    if scraper is not None:
        scraper.stop()  # already stopped after the load; here for a build that failed before
        attempt(lambda: write_parquet_atomic(scraper.frame(), bdir / "metrics.parquet"))
        info["scrape_failures"] = dict(scraper.failures)
        if scraper.failed:  # when, which source and why: a gap is then said as the target's
            info["scrape_failed"] = [
                [round(f.start, 3), round(f.end, 3), f.source, f.why] for f in scraper.failed
            ]
        if scraper.spool_error is not None:
            info["metrics_spool_error"] = scraper.spool_error

    def keep_logs() -> None:
        kept = keep_live_logs(bdir)
        info["samples"], info["pg_calls"] = kept["samples"], kept["pg_calls"]
        named = dependency_calls(kept)
        if named:
            info["dependency_calls"] = named

    attempt(keep_logs)
    attempt(lambda: target.collect(bdir))
    if not problems:
        return None
    info["save_error"] = "; ".join(str(p) for p in problems)
    if info["status"] in ("completed", "aborted"):
        info["status"] = "failed"
        info["error"] = str(problems[0])
    return problems[0]
