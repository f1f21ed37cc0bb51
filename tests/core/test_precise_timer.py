"""The gateway's timerfd sleeper: never early, wakes in deadline order, survives cancellation.

How late it is belongs to ``benchmarks/pg_faults.py``; these tests check what
must hold on any machine, however loaded.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time

import pytest

from harness.core.precise_timer import PreciseTimer

LINUX = sys.platform.startswith("linux")


async def _sleepers(timer: PreciseTimer, deadlines: list[float]) -> list[tuple[float, float]]:
    """(deadline, wake-up time) for each sleeper that started before its deadline, in wake order."""
    woke: list[tuple[float, float]] = []

    async def one(deadline: float) -> None:
        waits = time.monotonic() < deadline  # a stalled machine may start a sleeper too late
        await timer.sleep_until(deadline)
        if waits:
            woke.append((deadline, time.monotonic()))

    await asyncio.gather(*(one(d) for d in deadlines))
    return woke


def test_never_early_and_in_deadline_order() -> None:
    rng = random.Random(7)

    async def main() -> list[tuple[float, float]]:
        timer = PreciseTimer()
        now = time.monotonic()
        deadlines = [now + rng.uniform(0.05, 0.3) for _ in range(300)]
        try:
            woke = await _sleepers(timer, deadlines)
            assert timer.precise == LINUX
            return woke
        finally:
            timer.close()

    woke = asyncio.run(main())
    assert len(woke) > 200
    assert all(at >= deadline for deadline, at in woke)
    assert [d for d, _ in woke] == sorted(d for d, _ in woke)
    # Each sleeper wakes at its own deadline, not all at the last one: most are woken before
    # the last deadline (a timer armed only once would wake every one at it). How late they
    # are is the benchmark's figure: a bound here failed on a machine loaded to 12.
    last = max(d for d, _ in woke)
    assert sum(at < last for _, at in woke) > len(woke) // 2


def test_a_new_earlier_deadline_rearms_the_timer() -> None:
    async def main() -> list[tuple[float, float]]:
        timer = PreciseTimer()
        now = time.monotonic()
        late = asyncio.create_task(_sleepers(timer, [now + 0.3]))
        await asyncio.sleep(0.01)
        early = await _sleepers(timer, [now + 0.1])
        assert not late.done()  # the early sleeper did not have to wait for the late one
        await late
        timer.close()
        return early

    assert all(deadline <= at < deadline + 0.2 for deadline, at in asyncio.run(main()))


def test_a_cancelled_sleeper_does_not_disturb_the_others() -> None:
    async def main() -> None:
        timer = PreciseTimer()
        now = time.monotonic()
        doomed = asyncio.create_task(timer.sleep_until(now + 0.05))
        others = asyncio.create_task(_sleepers(timer, [now + 0.05, now + 0.1]))
        await asyncio.sleep(0.01)
        doomed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await doomed
        woke = await others
        assert all(at >= d for d, at in woke)
        timer.close()

    asyncio.run(main())


def test_past_deadlines_return_at_once_and_close_wakes_waiters() -> None:
    async def main() -> None:
        timer = PreciseTimer()
        started = time.monotonic()
        await timer.sleep_until(started - 1)
        waiting = asyncio.create_task(timer.sleep_until(started + 60))
        await asyncio.sleep(0.01)
        timer.close()
        await asyncio.wait_for(waiting, 1)
        assert time.monotonic() - started < 1

    asyncio.run(main())


def test_one_timer_serves_a_second_loop_after_the_first_is_gone() -> None:
    timer = PreciseTimer()
    for _ in range(2):
        woke = asyncio.run(_sleepers(timer, [time.monotonic() + 0.05]))
        assert all(at >= deadline for deadline, at in woke)
    timer.close()


def test_the_asyncio_fallback_is_also_never_early() -> None:
    async def main() -> list[tuple[float, float]]:
        timer = PreciseTimer(precise=False)
        now = time.monotonic()
        woke = await _sleepers(timer, [now + 0.01 * k for k in range(1, 20)])
        assert not timer.precise
        timer.close()
        return woke

    # asyncio.sleep may wake up to its clock resolution (1 ns) early
    assert all(at >= deadline - 1e-6 for deadline, at in asyncio.run(main()))


def test_libc_is_loaded_on_first_use_not_at_import() -> None:
    import subprocess

    code = "import harness.core.precise_timer as p; assert p._libc.cache_info().currsize == 0"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
