"""Serve until SIGTERM or SIGINT, then stop cleanly: the life of the gateway and proxy processes.

Both run as processes of their own that the orchestrator (or a person at a
terminal) stops with a signal; what they must do then (cut what is in flight,
write the ledger, close connections) belongs to them, but catching the signal,
waiting for it and always stopping, even when starting failed half-way, is
the same for both and lives here.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import NoReturn

from harness.core.errors import ScenarioError

SIGNALS = (signal.SIGTERM, signal.SIGINT)


async def run_until_signalled(
    start: Callable[[], Awaitable[object]], stop: Callable[[], Awaitable[object]]
) -> None:
    """``await start()``, wait for SIGTERM or SIGINT, then ``await stop()``.

    ``stop`` runs whatever happened, so it must cope with a half-done start.
    """
    loop = asyncio.get_running_loop()
    signalled = asyncio.Event()
    for sig in SIGNALS:
        loop.add_signal_handler(sig, signalled.set)
    try:
        await start()
        await signalled.wait()
    finally:
        try:
            await stop()
        finally:
            for sig in SIGNALS:
                loop.remove_signal_handler(sig)


def serve_until_signalled(
    start: Callable[[], Awaitable[object]], stop: Callable[[], Awaitable[object]]
) -> None:
    """Blocking: ``run_until_signalled`` in an event loop of its own."""
    asyncio.run(run_until_signalled(start, stop))


def exit_for(exc: BaseException, code: int) -> NoReturn:
    """End a process entry (the gateway's, the proxy's) on an error: say it, no traceback.

    Every problem of a file goes on its own line, as ``harness validate`` shows them.
    """
    problems = exc.problems if isinstance(exc, ScenarioError) else [exc]
    for problem in problems:
        print(f"error {problem}", file=sys.stderr)
    if isinstance(exc, ScenarioError):
        print(f"{len(problems)} problem(s) found.", file=sys.stderr)
    raise SystemExit(code)
