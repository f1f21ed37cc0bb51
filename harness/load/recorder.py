"""What the load generator measured: one row per attempt, counters, and where they go.

A ``Recorder`` keeps the rows of finished requests and the counters the
orchestrator watches (sent, done, lateness, state). Where the rows go is the
subclass's business:

- ``FileRecorder``: a single Locust process appends them to ``samples.csv`` and
  writes ``progress.json`` itself;
- ``WorkerRecorder``: a Locust worker sends them, with its counters, to the
  master in a ``harness_report`` message (``harness.load.master`` writes them).

Both flush about once a second, so a killed process loses at most that much.
Imports neither Locust nor gevent: the locustfile hands in what it needs.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.load.plan import DROPPED, SAMPLE_COLUMNS, LoadPlan

Row = str
"""A ``samples.csv`` line, ``\r\n`` included (``sample_row``)."""


def atomic_json(path: str, data: dict[str, Any]) -> None:
    """Write ``data`` as JSON via a temporary name: a reader never sees half a file."""
    tmp = f"{path}.tmp"
    try:
        Path(tmp).write_text(json.dumps(data))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):  # a full disk must not leave the half-written file
            os.unlink(tmp)
        raise


def sample_row(
    name: str, index: int, intended: float, actual: float, end: float | None, status: int,
    error: str, outcome: str, attempt: int = 1, request: int | None = None, kind: str = "",
) -> Row:  # fmt: skip
    """One ``samples.csv`` row (``SAMPLE_COLUMNS``) as its CSV line; times to the microsecond.
    ``request`` is the index of the request's first attempt (``index`` itself by default);
    ``kind`` the answer's class (``harness.scenario.outcomes``; ``""``: never sent).

    The line ``csv.writer`` would write, made by one f-string: formatting rows as
    they finish, rather than in ``csv.writer.writerows`` at each flush, keeps the
    flush from holding the load's loop (8 ms for 8,000 rows).
    """
    request = index if request is None else request
    line = (
        f"{name},{index},{intended:.6f},{actual:.6f},{'' if end is None else f'{end:.6f}'},"
        f"{status},{error},{outcome},{attempt},{request},{kind}\r\n"
    )
    if line.count(",") == 10 and '"' not in line and line.find("\r") == len(line) - 2:
        return line  # no field holds a comma, a quote or a line break: nothing to quote
    out = io.StringIO()
    csv.writer(out).writerow(
        (name, index, f"{intended:.6f}", f"{actual:.6f}", "" if end is None else f"{end:.6f}",
         status, error, outcome, attempt, request, kind)
    )  # fmt: skip
    return out.getvalue()


class Recorder:
    """Rows and counters of one load generator process (a single process, or one worker)."""

    def __init__(self, plan: LoadPlan, worker: int = 0) -> None:
        self.plan = plan
        self.worker = worker
        self.pending: list[Row] = []
        self.sent: Counter[str] = Counter()
        """Attempts sent, retries included."""
        self.retried: Counter[str] = Counter()
        """Retries sent (attempts after a request's first)."""
        self.done: Counter[str] = Counter()
        self.dropped: Counter[str] = Counter()
        """Arrivals not sent: the endpoint's ``max_in_flight`` requests were all open."""
        self.max_lateness_s = 0.0
        self.active: dict[tuple[str, int], tuple[float, float, int, int]] = {}
        self.state = "starting"
        self.start_at: float | None = None
        self.error: str | None = None
        """Why the samples could not be kept; the process then stops with exit code 3."""

    def planned(self) -> dict[str, int]:
        """Requests this process sends per endpoint (its share of the plan)."""
        n, k = self.plan.workers, self.worker
        return {
            name: len(range(k, self.plan.planned_count(name), n)) for name in self.plan.endpoints
        }

    def started(
        self, name: str, index: int, intended: float, actual: float, attempt: int = 1,
        request: int | None = None,
    ) -> None:  # fmt: skip
        lateness = actual - intended
        if lateness > self.max_lateness_s:
            self.max_lateness_s = lateness
        self.sent[name] += 1
        if attempt > 1:
            self.retried[name] += 1
        self.active[(name, index)] = (
            intended, actual, attempt, index if request is None else request,
        )  # fmt: skip

    def finished(self, name: str, index: int, row: Row) -> None:
        if self.active.pop((name, index), None) is None:
            return  # already recorded as Unfinished when the drain bound ran out: once only
        self.done[name] += 1
        self.pending.append(row)

    def drop(
        self, name: str, index: int, intended: float, now: float, attempt: int = 1,
        request: int | None = None,
    ) -> None:  # fmt: skip
        """Record an arrival (or a retry) that was not sent (k6's dropped iteration): a row, so
        every planned attempt still has one, marked ``Dropped`` and never counted as sent."""
        self.dropped[name] += 1
        self.pending.append(
            sample_row(name, index, intended, now, None, 0, DROPPED, "", attempt, request)
        )

    def abandon_active(self) -> None:
        """Record requests still unanswered when the drain bound ran out: never drop one."""
        for (name, index), (intended, actual, attempt, request) in self.active.items():
            error, kind = "Unfinished", "failure"
            self.pending.append(
                sample_row(
                    name, index, intended, actual, None, 0, error, "", attempt, request, kind
                )
            )
        self.active.clear()

    def counters(self) -> dict[str, Any]:
        return {
            "t": time.time(),
            "state": self.state,
            "start_at": self.start_at,
            "planned": self.planned(),
            "sent": dict(self.sent),
            "retried": dict(self.retried),
            "done": dict(self.done),
            "dropped": dict(self.dropped),
            "max_lateness_s": self.max_lateness_s,
            "error": self.error,
        }

    def fail(self, reason: str) -> None:
        """The samples cannot be kept (a full disk): say so and stop the run, rather than send
        the whole schedule with nothing recorded."""
        if self.error is None:
            self.error = reason
            self.state = "failed"
            with contextlib.suppress(OSError):
                self.announce()  # the orchestrator reads the error there, if there is room
            with contextlib.suppress(OSError):
                print(f"load: {self.error}", file=sys.stderr, flush=True)

    def flush(self) -> None:
        """Hand on the rows recorded since the last flush, with the counters."""
        raise NotImplementedError

    def announce(self) -> None:
        """Hand on the counters (the state, an error) even if the rows cannot go."""
        self.flush()

    def write_failed(self, exc: OSError) -> None:
        self.fail(f"cannot write {exc.filename or self.plan.samples_path}: {exc.strerror}")

    def close(self) -> None:
        """The last flush; a failure to keep the rows is said, not raised."""
        try:
            self.flush()
        except OSError as exc:
            self.write_failed(exc)


class FileRecorder(Recorder):
    """A single Locust process: rows to ``samples.csv``, counters to ``progress.json``."""

    def __init__(self, plan: LoadPlan) -> None:
        super().__init__(plan)
        self.file = open(plan.samples_path, "w", newline="")  # noqa: SIM115 - closed in close()
        csv.writer(self.file).writerow(SAMPLE_COLUMNS)

    def flush(self) -> None:
        if not self.file.closed:
            if self.pending:
                self.file.write("".join(self.pending))
                self.pending.clear()
            self.file.flush()
        self.announce()

    def announce(self) -> None:
        atomic_json(self.plan.progress_path, self.counters())

    def close(self) -> None:
        super().close()
        with contextlib.suppress(OSError):
            self.file.close()


class WorkerRecorder(Recorder):
    """A Locust worker: rows and counters to the master, in one ``harness_report`` message."""

    def __init__(self, plan: LoadPlan, worker: int, send: Callable[[dict[str, Any]], None]) -> None:
        super().__init__(plan, worker)
        self.send = send

    def flush(self) -> None:
        rows, self.pending = self.pending, []
        self.send({"worker": self.worker, "rows": rows, **self.counters()})
