"""Serve until SIGTERM or SIGINT, then stop cleanly: the life of the gateway and proxy processes.

Both run as processes of their own that the orchestrator (or a person at a
terminal) stops with a signal; what they must do then (cut what is in flight,
write the ledger, close connections) belongs to them, but catching the signal,
waiting for it and always stopping, even when starting failed half-way, is
the same for both and lives here. So is stopping early, and loudly, when a
task the process cannot live without (the gateway's ledger writer) ends, and
reading ``--t0``, the instant their schedules count from.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, NoReturn

from harness.core.errors import RunError, ScenarioError
from harness.core.net import OpenFiles

SIGNALS = (signal.SIGTERM, signal.SIGINT)

Vital = Iterable["asyncio.Task[Any]"] | None
"""What ``start`` may return: tasks that must run until the signal."""


async def run_until_signalled(
    start: Callable[[], Awaitable[Vital]],
    stop: Callable[[], Awaitable[object]],
    *,
    files: OpenFiles | None = None,
) -> None:
    """``await start()``, wait for SIGTERM or SIGINT, then ``await stop()``.

    ``stop`` runs whatever happened, so it must cope with a half-done start.
    If ``start`` returned tasks and one of them ends before the signal, the
    process stops at once and that task's error is raised as a ``RunError``
    (after ``stop``): a process must not go on without it, nor end quietly.
    With ``files``, an accept that finds no descriptor left is reported by it
    in one line instead of asyncio's traceback per connection.
    """
    loop = asyncio.get_running_loop()
    if files is not None:
        loop.set_exception_handler(files.exception_handler)
    signalled = asyncio.Event()
    for sig in SIGNALS:
        loop.add_signal_handler(sig, signalled.set)
    ended: asyncio.Task[Any] | None = None
    try:
        vital = list(await start() or ())
        waiting = asyncio.ensure_future(signalled.wait())
        try:
            done, _ = await asyncio.wait([waiting, *vital], return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
        ended = next((task for task in vital if task in done), None)
    finally:
        try:
            await stop()
        finally:
            for sig in SIGNALS:
                loop.remove_signal_handler(sig)
    if ended is not None:
        raise _ended_error(ended)


def _ended_error(task: asyncio.Task[Any]) -> RunError:
    """Why a vital task ended: its own ``RunError``, or one that names it and its error."""
    error = None if task.cancelled() else task.exception()
    if isinstance(error, RunError):
        return error
    what = f"{task.get_name()} ended" + (f": {error!r}" if error is not None else "")
    ended = RunError(f"{what}; the process cannot go on without it")
    ended.__cause__ = error
    return ended


def serve_until_signalled(
    start: Callable[[], Awaitable[Vital]],
    stop: Callable[[], Awaitable[object]],
    *,
    files: OpenFiles | None = None,
) -> None:
    """Blocking: ``run_until_signalled`` in an event loop of its own."""
    asyncio.run(run_until_signalled(start, stop, files=files))


def t0_arg(text: str, *, now: bool = False) -> float:
    """An argparse ``type`` for ``--t0``: finite Unix seconds, or with ``now`` also the
    word ``now`` (the time it is read)."""
    if now and text == "now":
        return time.time()
    try:
        t0 = float(text)
    except ValueError:
        expected = "Unix seconds nor 'now'" if now else "a number of Unix seconds"
        raise argparse.ArgumentTypeError(f"{text!r} is not {expected}") from None
    if not math.isfinite(t0):
        raise argparse.ArgumentTypeError(f"{text!r}: Unix seconds must be a finite number")
    return t0


def exit_for(exc: BaseException, code: int) -> NoReturn:
    """End a process entry (the gateway's, the proxy's) on an error: say it, no traceback.

    Every problem of a file goes on its own line, as ``harness validate`` shows them.
    """
    problems = exc.problems if isinstance(exc, ScenarioError) else [exc]
    try:
        for problem in problems:
            print(f"error {problem}", file=sys.stderr)
        if isinstance(exc, ScenarioError):
            print(f"{len(problems)} problem(s) found.", file=sys.stderr)
        sys.stderr.flush()
    except OSError:  # stderr on the disk that just filled up: the exit code must still say it
        pass
    raise SystemExit(code)
