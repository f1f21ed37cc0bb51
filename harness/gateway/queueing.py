"""The capacity stage on the event loop: each call's wait in the queue and its time in service.

A call's stage runs as a task of its own, not inside the request's handler,
so it outlives the connection: when a client hangs up, its call is still
served to the end, holding its slot (the work nobody will read, which keeps
an overloaded gateway overloaded), unless ``cancel-on-disconnect`` frees the
slot or the queue place at once. The decisions are ``capacity.Slots``'s;
this module only times them and counts them for ``/metrics``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Gauge

from harness.core.precise_timer import PreciseTimer
from harness.gateway.capacity import Arrival, Place, Slots
from harness.scenario.capacity import GatewayCapacity

Rejection = Literal["queue-full", "queue-timeout"]


@dataclass(eq=False)
class Ticket(Place):
    """One call through the stage: its planned service time, and what it met."""

    planned_s: float = 0.0
    queue_s: float = 0.0
    service_s: float = 0.0
    rejected: Rejection | None = None
    granted: float = 0.0
    """When its slot was granted (``time.monotonic()``): its service is timed from then."""
    task: asyncio.Task[None] | None = None
    _woken: asyncio.Future[None] | None = field(default=None, repr=False)

    @property
    def over(self) -> bool:
        """The stage has ended (served, refused, or cancelled)."""
        return self.task is None or self.task.done()


class Capacity:
    """The gateway's slots and queue, on the loop; ``limit_now`` gives the limit in force."""

    def __init__(
        self,
        settings: GatewayCapacity,
        timer: PreciseTimer,
        registry: CollectorRegistry,
        limit_now: Callable[[], int],
    ) -> None:
        self.settings = settings
        self.timer = timer
        self.limit_now = limit_now
        self.slots = Slots(limit_now(), settings.queue_limit)
        self._tickets: set[Ticket] = set()
        Gauge(
            "pg_capacity_in_service",
            "Calls in service (at most the limit in force)",
            registry=registry,
        ).set_function(lambda: self.slots.in_service)
        Gauge(
            "pg_capacity_queued", "Calls waiting for a slot, in arrival order", registry=registry
        ).set_function(lambda: self.slots.queued)
        Gauge(
            "pg_capacity_limit",
            "Slots in force (pg.capacity.concurrency, or a brownout's)",
            registry=registry,
        ).set_function(lambda: self.slots.limit)
        self.rejected = Counter(
            "pg_capacity_rejected",
            "Calls refused for a full queue or a queue timeout",
            ["reason"],
            registry=registry,
        )
        self.abandoned = Counter(
            "pg_capacity_abandoned",
            "Calls whose client hung up while they were queued or in service, kept to the end",
            registry=registry,
        )

    def submit(self, planned_s: float, arrived: float) -> Ticket:
        """Start a call's stage: queue, then ``planned_s`` in service (unless refused);
        ``arrived`` (``time.monotonic()``) is when the call came, its wait counted from then."""
        ticket = Ticket(planned_s=planned_s)
        self.refresh()
        verdict = self.slots.arrive(ticket)  # at once, so the loop's delay is not a wait
        ticket.granted = time.monotonic()
        if verdict == "queue":  # before its task runs: it may be let in before then
            ticket._woken = asyncio.get_running_loop().create_future()
        ticket.task = asyncio.create_task(self._run(ticket, arrived, verdict))
        self._tickets.add(ticket)
        ticket.task.add_done_callback(lambda _task: self._tickets.discard(ticket))
        return ticket

    def refresh(self) -> None:
        """Follow the limit in force (a brownout began or ended): let in whom it now allows."""
        limit = self.limit_now()
        if limit != self.slots.limit:
            self._wake(self.slots.set_limit(limit))

    async def stop(self) -> None:
        """At shutdown: end every stage now (their calls are recorded as cut)."""
        tickets = [t.task for t in self._tickets if t.task is not None]
        for task in tickets:
            task.cancel()
        await asyncio.gather(*tickets, return_exceptions=True)
        await asyncio.sleep(0)  # let the stages' done callbacks write their rows

    async def _run(self, ticket: Ticket, arrived: float, verdict: Arrival) -> None:
        if verdict == "full":
            self._refuse(ticket, "queue-full")
            return
        if verdict == "queue":
            await self._wait(ticket, arrived)
            if ticket.state != "serving":
                return  # refused for its queue timeout
        ticket.queue_s = ticket.granted - arrived
        try:  # timed from the grant, so the loop's delay in resuming it is not added
            await self.timer.sleep_until(ticket.granted + ticket.planned_s)
        finally:
            ticket.service_s = time.monotonic() - ticket.granted
            self._wake(self.slots.done(ticket))

    async def _wait(self, ticket: Ticket, arrived: float) -> None:
        """Wait in the queue until let in, or refused at ``queue-timeout``."""
        loop = asyncio.get_running_loop()
        assert ticket._woken is not None
        timeout = self.settings.queue_timeout
        expiry = (
            None
            if timeout is None
            else loop.call_later(
                max(0.0, arrived + timeout - time.monotonic()), self._expire, ticket
            )
        )
        try:
            await ticket._woken
        except asyncio.CancelledError:  # cancel-on-disconnect, or shutdown
            if ticket.state == "serving":  # let in just now: give the slot back
                self._wake(self.slots.done(ticket))
            self.slots.leave(ticket)
            raise
        finally:
            if ticket.state != "serving":  # refused or cancelled in the queue: waited till now
                ticket.granted = time.monotonic()
            ticket.queue_s = ticket.granted - arrived
            if expiry is not None:
                expiry.cancel()

    def _expire(self, ticket: Ticket) -> None:
        if self.slots.leave(ticket):
            self._refuse(ticket, "queue-timeout")
            self._wake([ticket])

    def _refuse(self, ticket: Ticket, reason: Rejection) -> None:
        ticket.rejected = reason
        self.rejected.labels(reason).inc()

    @staticmethod
    def _wake(places: list[Place]) -> None:
        now = time.monotonic()
        for place in places:
            if isinstance(place, Ticket) and place.state == "serving":
                place.granted = now
            woken = place._woken if isinstance(place, Ticket) else None
            if woken is not None and not woken.done():
                woken.set_result(None)
