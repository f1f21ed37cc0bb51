"""The gateway's finite capacity, decided purely: who is served, who waits, who is refused.

``Slots`` holds at most ``limit`` calls in service and a FIFO queue of at most
``queue_limit`` before them. Nothing here reads a clock or awaits: the
sockets' side (``harness.gateway.queueing``) tells it what happened (a call
arrived, finished, left the queue, the limit changed) and carries out what
it answers, which keeps every rule unit-testable.

Lowering the limit (a ``brownout``) never stops a call in service: the calls
beyond the new limit finish, and the queue waits until fewer than ``limit``
are in service. Raising it lets queued calls in at once, oldest first.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from harness.core.timeline import phase_at
from harness.gateway.decide import fault_on
from harness.scenario.capacity import GatewayCapacity
from harness.scenario.faults import BrownoutFault, Fault, Phase

State = Literal["new", "queued", "serving", "done", "left"]
Arrival = Literal["serve", "queue", "full"]


@dataclass(eq=False)
class Place:
    """One call's place at the gateway: new, queued, in service, done, or left the queue."""

    state: State = "new"


class Slots:
    """At most ``limit`` places in service, a FIFO queue of at most ``queue_limit`` behind them."""

    def __init__(self, limit: int, queue_limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = limit
        self.queue_limit = queue_limit
        self.in_service = 0
        self._queue: deque[Place] = deque()

    @property
    def queued(self) -> int:
        return len(self._queue)

    def arrive(self, place: Place) -> Arrival:
        """A call arrives: served at once if a slot is free and nobody waits, else queued, else
        refused (the queue is full)."""
        if not self._queue and self.in_service < self.limit:
            place.state = "serving"
            self.in_service += 1
            return "serve"
        if len(self._queue) < self.queue_limit:
            place.state = "queued"
            self._queue.append(place)
            return "queue"
        return "full"

    def done(self, place: Place) -> list[Place]:
        """A call in service ends (answered, or cancelled): its slot frees; who is let in now."""
        if place.state != "serving":
            raise ValueError(f"a place {place.state}, not serving, cannot end its service")
        place.state = "done"
        self.in_service -= 1
        return self._admit()

    def leave(self, place: Place) -> bool:
        """A queued call leaves (its queue timeout, or its client gone with cancel-on-disconnect);
        False if it was not waiting (already let in: it is served)."""
        if place.state != "queued":
            return False
        self._queue.remove(place)
        place.state = "left"
        return True

    def set_limit(self, limit: int) -> list[Place]:
        """The limit in force changes (a brownout starts or ends); who is let in now."""
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = limit
        return self._admit()

    def _admit(self) -> list[Place]:
        admitted = []
        while self._queue and self.in_service < self.limit:
            place = self._queue.popleft()
            place.state = "serving"
            self.in_service += 1
            admitted.append(place)
        return admitted


def fifo_waits(arrivals: Sequence[float], slots: int, services: Sequence[float]) -> list[float]:
    """The queueing reference (M/D/c with ``services`` all D): each call's wait when every call,
    in arrival order, takes the slot that frees first and holds it for its service time.

    Not how the gateway queues (that is ``Slots``, on events): the same rule from the other
    side, for tests and benchmarks to hold the gateway's waits against.
    """
    free = [arrivals[0]] * slots if arrivals else []
    waits = []
    for t, service in zip(arrivals, services, strict=True):
        start = max(t, heapq.heappop(free))
        waits.append(start - t)
        heapq.heappush(free, start + service)
    return waits


def limit_of(capacity: GatewayCapacity, faults: Sequence[Fault]) -> int:
    """The slots in force under ``faults``: the lowest a brownout among them leaves, else all."""
    brownouts = [f.slots(capacity.concurrency) for f in faults if isinstance(f, BrownoutFault)]
    return min(brownouts, default=capacity.concurrency)


def limit_at(
    capacity: GatewayCapacity,
    phases: list[Phase],
    t_s: float | None,
    override: Sequence[Fault] | None = None,
) -> int:
    """The slots in force ``t_s`` into the time line (an override instead of the schedule)."""
    if override is not None:
        return limit_of(capacity, override)
    phase = None if t_s is None else phase_at(phases, t_s)
    if phase is None or t_s is None or not fault_on(phase, t_s):
        return capacity.concurrency
    return limit_of(capacity, phase.faults)
