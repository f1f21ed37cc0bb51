"""Serve until signalled: stop always runs, after a signal or a failed start."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import pytest

from harness.core.errors import Problem, RunError, ScenarioError
from harness.core.serving import SIGNALS, exit_for, run_until_signalled


@pytest.mark.parametrize("sig", SIGNALS)
def test_a_signal_stops_what_was_started(sig: signal.Signals) -> None:
    calls: list[str] = []

    async def start() -> None:
        calls.append("start")
        asyncio.get_running_loop().call_later(0.05, os.kill, os.getpid(), sig)

    async def stop() -> None:
        calls.append("stop")

    async def body() -> None:
        await run_until_signalled(start, stop)
        loop = asyncio.get_running_loop()
        assert not any(loop.remove_signal_handler(s) for s in SIGNALS)  # handlers are gone

    asyncio.run(body())
    assert calls == ["start", "stop"]


def test_stop_runs_when_start_fails() -> None:
    calls: list[str] = []

    async def start() -> None:
        raise OSError("cannot listen")

    async def stop() -> None:
        calls.append("stop")

    with pytest.raises(OSError, match="cannot listen"):
        asyncio.run(run_until_signalled(start, stop))
    assert calls == ["stop"]


def test_a_vital_task_that_ends_stops_the_process_loudly() -> None:
    """No signal needed: stop runs, and the task's error comes out as a RunError."""
    calls: list[str] = []

    class WriterBroke(RunError):
        pass

    async def writer() -> None:
        await asyncio.sleep(0.05)
        raise WriterBroke("cannot write the ledger")

    async def crashes() -> None:
        raise ZeroDivisionError

    def start_with(
        vital: Callable[[], Coroutine[Any, Any, None]],
    ) -> Callable[[], Awaitable[list[asyncio.Task[None]]]]:
        async def start() -> list[asyncio.Task[None]]:
            calls.append("start")
            return [asyncio.create_task(vital(), name="the writer")]

        return start

    async def stop() -> None:
        calls.append("stop")

    with pytest.raises(WriterBroke, match="cannot write the ledger"):
        asyncio.run(run_until_signalled(start_with(writer), stop))
    assert calls == ["start", "stop"]
    with pytest.raises(RunError, match="the writer ended: ZeroDivisionError"):
        asyncio.run(run_until_signalled(start_with(crashes), stop))


def test_exit_for_lists_every_problem(capsys: pytest.CaptureFixture[str]) -> None:
    problems = [Problem("s.yaml", 2, 3, "a", "bad"), Problem("s.yaml", 4, 1, "b", "worse")]
    with pytest.raises(SystemExit) as caught:
        exit_for(ScenarioError(problems), 2)
    assert caught.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "error s.yaml:2:3: a: bad",
        "error s.yaml:4:1: b: worse",
        "2 problem(s) found.",
    ]
    with pytest.raises(SystemExit) as caught:
        exit_for(OSError("no port"), 3)
    assert caught.value.code == 3 and capsys.readouterr().err == "error no port\n"
