"""``traffic.<ep>.retry``: the client that retries (the mobile app), as the load generator
carries it out (``harness.load``): how many attempts, the backoff and its jitter, on which
outcomes, and whether a Retry-After replaces the wait.

One model for both sides: the load plan carries ``ClientRetry`` itself
(``harness.load.plan.EndpointPlan.retry``, written to ``plan.json`` by ``model_dump`` and
read back by ``model_validate``), and the load generator asks it what to do
(``retries``, ``wait_s``). An option is one field here, its default said once.
"""

from __future__ import annotations

import random
from typing import Literal

from pydantic import Field, field_validator, model_validator

from harness.core.durations import Duration, format_duration
from harness.core.yamlmodel import StrictModel
from harness.scenario.bounds import MAX_CLIENT_ATTEMPTS, MAX_TIMEOUT_S

RetryOutcome = Literal["timeout", "5xx", "429", "503", "connection"]
"""What a client may retry on: no answer in its timeout, any 5xx, a 429, a 503 (without the
rest of 5xx), a connection that failed (refused, reset, closed before the answer)."""


DEFAULT_RETRY_ON: tuple[RetryOutcome, ...] = ("timeout", "5xx", "connection")


class ClientRetry(StrictModel):
    """The client retries a failed request (the mobile app that retries): each retry is its
    own attempt, sent after its backoff on the open-model scheduler, never delaying the
    arrivals of first attempts. The wait before retry ``n`` (1 for the first) is
    ``min(max-backoff, backoff x multiplier^(n-1))``, jittered (``full``: uniform in [0, b];
    ``equal``: b/2 plus uniform in [0, b/2]; ``none``: b), or the answer's ``Retry-After``
    when it has one and ``retry-after: honour``."""

    max_attempts: int = Field(
        3,
        ge=1,
        le=MAX_CLIENT_ATTEMPTS,
        description=f"attempts per request, the first included (at most {MAX_CLIENT_ATTEMPTS})",
    )
    backoff: Duration = Field(0.2, ge=0, le=MAX_TIMEOUT_S, description="wait before the 1st retry")
    multiplier: float = Field(2.0, ge=1, le=100, description="each next wait: times this")
    max_backoff: Duration = Field(5.0, ge=0, le=MAX_TIMEOUT_S, description="cap on a wait")
    jitter: Literal["full", "equal", "none"] = Field(
        "full", description="full: uniform in [0, b]; equal: b/2 + uniform in [0, b/2]; none: b"
    )
    on: list[RetryOutcome] = Field(
        default_factory=lambda: list(DEFAULT_RETRY_ON),
        min_length=1,
        max_length=5,
        description="outcomes retried: timeout, 5xx, 429, 503, connection",
    )
    retry_after: Literal["honour", "ignore"] = Field(
        "honour", description="a Retry-After in a 429/503 answer replaces the backoff"
    )

    @model_validator(mode="after")
    def _cap_above_the_wait(self) -> ClientRetry:
        if self.max_backoff < self.backoff:
            raise ValueError(
                f"max-backoff {format_duration(self.max_backoff)} is below backoff "
                f"{format_duration(self.backoff)}: the cap must be at least the first wait"
            )
        return self

    @field_validator("on", mode="before")
    @classmethod
    def _codes_as_names(cls, value: object) -> object:
        # YAML reads ``[timeout, 503, 429]`` with numbers: the status codes are names here.
        if isinstance(value, list):
            return [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
        return value

    def retries(self, status: int, failure: str = "") -> bool:
        """Whether an attempt that ended so is retried (``status`` 0: no answer, ``failure``
        then says why: ``harness.load.plan.failure_of``)."""
        if status:
            if status == 429:
                return "429" in self.on
            if status == 503 and "503" in self.on:
                return True
            return 500 <= status <= 599 and "5xx" in self.on
        return bool(failure) and failure in self.on

    def wait_s(self, retry: int, rng: random.Random, retry_after_s: float | None = None) -> float:
        """Seconds before retry ``retry`` (1: the request's second attempt) is due.

        ``min(max_backoff, backoff x multiplier^(retry-1))``, jittered; a ``Retry-After``
        the answer gave replaces it when honoured (as urllib3's ``Retry`` does), unjittered
        and uncapped: the run's end bounds it.
        """
        if retry_after_s is not None and self.retry_after == "honour":
            return max(0.0, retry_after_s)
        b = min(self.max_backoff, self.backoff * self.multiplier ** (retry - 1))
        if self.jitter == "full":
            return rng.uniform(0.0, b)
        if self.jitter == "equal":
            return b / 2 + rng.uniform(0.0, b / 2)
        return b

    def describe(self) -> str:
        """In a few words, for reports: ``3 attempts, 200ms x2 to 5s, full jitter, on ...``."""
        honoured = "honoured" if self.retry_after == "honour" else "ignored"
        return (
            f"{self.max_attempts} attempts, {format_duration(self.backoff)} x{self.multiplier:g} "
            f"to {format_duration(self.max_backoff)}, {self.jitter} jitter, on "
            f"{'/'.join(self.on)}, Retry-After {honoured}"
        )
