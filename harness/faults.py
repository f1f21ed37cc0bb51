"""What the payment gateway does to one call: pure decisions from the schedule and a seeded hash.

Every probabilistic choice is drawn from ``sha256(seed, idempotency key, attempt)``,
so the *before* and *after* builds meet the same failures for the same
payments, and a rerun with the same seed meets them again.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass
from typing import Literal

from harness.scenario import ErrorFault, Fault, HealthyFault, LatencyFault, Phase, TimeoutFault

HANG_LIMIT_S = 600.0
"""A hung call is released after this long even if the caller never gives up (bounded work)."""


@dataclass(frozen=True)
class Action:
    """How to answer one call: respond with ``status`` after ``delay_s``, or hang."""

    kind: Literal["respond", "hang"]
    fault: str
    status: int = 200
    delay_s: float = 0.0


def fate(seed: int, key: str, attempt: int, salt: str = "") -> float:
    """A uniform number in [0, 1) fixed by (seed, key, attempt): the call's fate."""
    digest = hashlib.sha256(f"{seed}\x1f{key}\x1f{attempt}\x1f{salt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def sample_delay(fault: LatencyFault, rng: random.Random) -> float:
    """Draw one delay in seconds from the fault's distribution (never negative)."""
    if fault.distribution == "fixed":
        assert fault.delay is not None
        return fault.delay
    if fault.distribution == "uniform":
        assert fault.min is not None and fault.max is not None
        return rng.uniform(fault.min, fault.max)
    if fault.distribution == "normal":
        assert fault.mean is not None and fault.stddev is not None
        return max(0.0, rng.gauss(fault.mean, fault.stddev))
    assert fault.median is not None and fault.sigma is not None
    return rng.lognormvariate(math.log(fault.median), fault.sigma)


def decide(fault: Fault, seed: int, key: str, attempt: int) -> Action:
    """The action for call number ``attempt`` of payment ``key`` under ``fault``."""
    if isinstance(fault, HealthyFault):
        return Action("respond", "healthy")
    hit = fate(seed, key, attempt) < fault.probability
    if not hit:
        return Action("respond", "healthy")
    if isinstance(fault, TimeoutFault):
        if fault.after is None:
            return Action("hang", "timeout", status=504, delay_s=HANG_LIMIT_S)
        return Action("respond", "timeout", status=200, delay_s=fault.after)
    if isinstance(fault, ErrorFault):
        return Action("respond", "error", status=fault.status)
    assert isinstance(fault, LatencyFault)
    rng = random.Random(fate(seed, key, attempt, "delay"))
    return Action("respond", "latency", delay_s=sample_delay(fault, rng))


def phase_at(phases: list[Phase], t_s: float) -> Phase | None:
    """The phase in force ``t_s`` seconds into the measured window, if any."""
    for phase in phases:
        if phase.start <= t_s < phase.end:
            return phase
    return None
