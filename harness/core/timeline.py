"""The measured time line: named windows (phases) in order, shared by the gateway and the proxy.

Times are seconds from the start of the measured window. Anything with a
``name``, a ``start`` and an ``end`` is a window here, so the gateway's
phases and the proxy's schedule entries use the same checks.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Protocol, TypeVar


class Timed(Protocol):
    """A named window of the time line."""

    @property
    def name(self) -> str: ...

    @property
    def start(self) -> float: ...

    @property
    def end(self) -> float: ...


T = TypeVar("T", bound=Timed)


def ordered_phases(phases: list[T]) -> list[T]:
    """Phases sorted by start; raise ``ValueError`` if two overlap or share a name."""
    ordered = sorted(phases, key=lambda p: p.start)
    for a, b in zip(ordered, ordered[1:], strict=False):
        if b.start < a.end - 1e-9:  # 8.188 + 1.438 is 9.626000000000001: still adjacent
            raise ValueError(f"phase {b.name!r} starts before phase {a.name!r} ends")
    dupes = sorted(name for name, n in Counter(p.name for p in phases).items() if n > 1)
    if dupes:
        raise ValueError(f"phase names must be unique, repeated: {dupes}")
    return ordered


# ------------------------------------------------ lookup and fault windows (gateway, proxy, charts)


def phase_at(phases: Iterable[T], t_s: float) -> T | None:
    """The window in force ``t_s`` seconds into the time line (half-open: start <= t < end)."""
    return next((p for p in phases if p.start <= t_s < p.end), None)


def blip_on(t_s: float, start: float, every: float, for_: float) -> bool:
    """Whether a fault that repeats from ``start``, on for ``for_`` of every ``every``, is on."""
    return (t_s - start) % every < for_


def fault_windows(
    start: float,
    duration: float,
    every: float | None = None,
    for_: float | None = None,
    *,
    max_windows: int | None = None,
) -> list[tuple[float, float]]:
    """When a window's faults are on: the whole window, or each blip when they repeat.

    With ``max_windows``, more blips than that come back as the whole window in
    one piece (too thin to draw apart).
    """
    end = start + duration
    if every is None or for_ is None:
        return [(start, end)]
    if max_windows is not None and duration / every > max_windows:
        return [(start, end)]
    starts = (start + i * every for i in range(math.ceil(duration / every)))
    return [(a, min(a + for_, end)) for a in starts]
