"""``pg.capacity``: a gateway that serves at most N calls at once, with a FIFO queue before them.

The model only; what the gateway does with it is ``harness.gateway.capacity``
(the decisions) and ``harness.gateway.queueing`` (on the sockets). A
``brownout`` fault (``harness.scenario.faults``) lowers the limit for a phase.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from harness.core.durations import Duration
from harness.core.yamlmodel import StrictModel
from harness.scenario.distributions import HANG_LIMIT_S, Distribution

MAX_CONCURRENCY = 10_000
"""Calls in service at once: each is an open connection and a timer in one process."""
MAX_QUEUE = 100_000
"""The queue's hard cap, and its length when ``queue-limit`` is not given: each queued call
holds a connection (a file descriptor), so an "unbounded" queue is bounded by this."""

_SHARE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*%\s*$")


def _share(value: Any) -> Any:
    """``20%`` (or a fraction such as ``0.2``) as a fraction in (0, 1]."""
    if isinstance(value, bool):
        raise ValueError("a share is written as a percentage such as 20%")
    if isinstance(value, str):
        m = _SHARE.match(value)
        if m is None:
            raise ValueError(f"{value!r} is not a share; write a percentage such as 20%")
        value = float(m.group(1)) / 100
    if not isinstance(value, int | float):
        raise ValueError("a share is written as a percentage such as 20%")
    if not 0 < value <= 1:
        raise ValueError(
            f"share {value * 100:g}% is outside (0, 100%]: a brownout keeps some capacity "
            "and never adds any"
        )
    return float(value)


Share = Annotated[float, BeforeValidator(_share)]
"""A share written ``20%`` (or ``0.2``), read as the fraction 0.2; outside (0, 100%] refused."""


class GatewayCapacity(StrictModel):
    """At most ``concurrency`` calls in service; the rest wait in a FIFO queue.

    A call's latency is its wait in the queue plus its service time (drawn from
    ``service``), so it grows with the load the builds send. A call whose
    client hung up is served to the end unless ``cancel-on-disconnect``.
    """

    concurrency: int = Field(ge=1, le=MAX_CONCURRENCY, description="calls in service at once")
    queue_limit: int = Field(
        MAX_QUEUE, ge=0, le=MAX_QUEUE, description="calls that may wait; more are refused"
    )
    queue_timeout: Duration | None = Field(
        None, gt=0, le=HANG_LIMIT_S, description="a call waiting longer is refused"
    )
    full_status: Literal[503, 429] = Field(503, description="the answer to a refused call")
    service: Distribution = Field(description="the service time of one call")
    cancel_on_disconnect: bool = Field(
        False, description="free the slot (or the queue place) of a call whose client hung up"
    )
