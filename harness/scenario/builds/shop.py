"""The ``shop`` kind's settings: a build of the reference shop (``targets/shop``).

Its resilience profile, request threads, gateway client, DB pool and
Resilience4j blocks (``harness.scenario.builds.resilience``), as the shop reads
them (``targets/shop/config.py``); ``replicas`` is how many shops the harness
starts behind nginx. The code that runs it is ``harness.run.kinds.shop`` (and
``harness.run.kinds.replicas`` with ``replicas`` above 1).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from harness.core.durations import Duration, format_duration
from harness.core.yamlmodel import StrictModel
from harness.scenario.bounds import MAX_DURATION_S, MAX_REPLICAS, MAX_TIMEOUT_S, MAX_WINDOW
from harness.scenario.builds.base import BuildSettings, Recommendation, SimulatorModel
from harness.scenario.builds.resilience import (
    BreakerTypeSettings,
    BulkheadSettings,
    Composition,
    Fallback,
    LayerBlocks,
    ThreadPoolBulkheadSettings,
    TimeLimiterSettings,
)


class PgClientSettings(StrictModel):
    """The target's HTTP client towards the gateway."""

    connect_timeout: Duration = Field(1.0, gt=0, le=MAX_TIMEOUT_S)
    read_timeout: Duration = Field(3.0, gt=0, le=MAX_TIMEOUT_S)


class DbPoolSettings(StrictModel):
    """The shop's database connection pool (Spring's ``spring.datasource.hikari.*`` names).

    Every statement checks out a connection and holds it ``query-time``; a request
    that finds none free waits its turn, first come first served, for at most
    ``connection-timeout`` (then 503)."""

    maximum_pool_size: int = Field(10, ge=1, le=2000, description="connections (Hikari: 10)")
    connection_timeout: Duration = Field(
        30.0, gt=0, le=MAX_TIMEOUT_S, description="longest wait for a connection (Hikari: 30 s)"
    )
    query_time: Duration = Field(
        0.0, ge=0, le=MAX_TIMEOUT_S, description="how long one statement holds its connection"
    )


RefusalName = Literal[
    "io.github.resilience4j.circuitbreaker.CallNotPermittedException",
    "io.github.resilience4j.bulkhead.BulkheadFullException",
]
"""The shop's own refusals a Retry may or may not retry (the rest of what it retries is fixed:
the gateway's timeouts, broken connections and 5xx)."""


BUDGET_KEYS = {
    "grpc-throttling": ("max_tokens", "token_ratio"),
    "finagle-budget": ("ttl", "min_retries_per_second", "percent_can_retry"),
}
"""Each retry budget model's own settings."""


class RetryBudgetSettings(StrictModel):
    """``retry.budget``: retries capped at a share of calls (``targets/shop/resilience/budget.py``).

    ``grpc-throttling`` (the default): gRPC's retry throttling, ``max-tokens`` and
    ``token-ratio`` (a failed attempt takes a token, a success gives ``token-ratio`` back,
    retries while the tokens are above half of ``max-tokens``). ``finagle-budget``:
    Finagle's ``RetryBudget``, ``ttl``, ``min-retries-per-second`` and ``percent-can-retry``
    (retries up to that fraction of the calls of the last ``ttl``, plus the reserve)."""

    model: Literal["grpc-throttling", "finagle-budget"] = "grpc-throttling"
    max_tokens: float = Field(10.0, gt=0, le=1000, description="gRPC: the bucket's tokens")
    token_ratio: float = Field(0.1, gt=0, le=1, description="gRPC: tokens a success returns")
    ttl: Duration = Field(10.0, ge=1, le=60, description="Finagle: how long a deposit lasts")
    min_retries_per_second: int = Field(10, ge=0, le=100_000, description="Finagle: the reserve")
    percent_can_retry: float = Field(
        0.2, ge=0, le=1000, description="Finagle: retries per call, a fraction (0.2: 20%)"
    )

    @model_validator(mode="after")
    def _settings_of_its_model(self) -> RetryBudgetSettings:
        other = next(m for m in BUDGET_KEYS if m != self.model)
        given = sorted(set(BUDGET_KEYS[other]) & self.model_fields_set)
        if given:
            mine = ", ".join(k.replace("_", "-") for k in BUDGET_KEYS[self.model])
            raise ValueError(
                f"{', '.join(k.replace('_', '-') for k in given)}: a setting of model {other}, "
                f"and this budget's model is {self.model} (its settings: {mine})"
            )
        return self


class RetrySettings(StrictModel):
    """Resilience4j ``resilience4j.retry.instances.<name>`` properties."""

    max_attempts: int = Field(3, ge=1, le=20)
    wait_duration: Duration = Field(0.5, le=MAX_TIMEOUT_S)
    enable_exponential_backoff: bool = False
    exponential_backoff_multiplier: float = Field(2.0, ge=1, le=100)
    exponential_max_wait_duration: Duration | None = Field(None, le=MAX_TIMEOUT_S)
    enable_randomized_wait: bool = False
    randomized_wait_factor: float = Field(0.5, ge=0, lt=1)
    fallback: Fallback | None = Field(None, description="answers for the Retry's last error")
    budget: RetryBudgetSettings | None = Field(
        None, description="caps retries at a share of calls (gRPC's throttling, Finagle's budget)"
    )
    ignore_exceptions: list[RefusalName] | None = Field(
        None,
        description="refusals the Retry does not retry (Resilience4j's names); default: both "
        "(the breaker's CallNotPermittedException and the bulkhead's BulkheadFullException); "
        "[]: retry them too, as Resilience4j's defaults do",
    )

    @model_validator(mode="after")
    def _waits_are_bounded(self) -> RetrySettings:
        cap = self.exponential_max_wait_duration
        if cap is not None and cap < self.wait_duration:
            raise ValueError(
                f"exponential-max-wait-duration ({cap:g}s) is shorter than wait-duration "
                f"({self.wait_duration:g}s)"
            )
        if self.enable_exponential_backoff and cap is None:
            # The wait before the last attempt, as the shop computes it.
            longest = self.wait_duration * self.exponential_backoff_multiplier ** max(
                0, self.max_attempts - 2
            )
            if longest > MAX_TIMEOUT_S:
                raise ValueError(
                    f"the wait before attempt {self.max_attempts} would be "
                    f"{format_duration(longest)}; at most {format_duration(MAX_TIMEOUT_S)}: "
                    "set exponential-max-wait-duration, or fewer max-attempts"
                )
        return self


class CircuitBreakerSettings(BreakerTypeSettings):
    """Resilience4j ``resilience4j.circuitbreaker.instances.<name>`` properties (and
    ``type: naive``'s, ``harness.scenario.builds.resilience``)."""

    sliding_window_type: Literal["COUNT_BASED", "TIME_BASED"] = "COUNT_BASED"
    sliding_window_size: int = Field(100, ge=1, le=MAX_WINDOW)
    minimum_number_of_calls: int = Field(100, ge=1, le=MAX_WINDOW)
    failure_rate_threshold: float = Field(50.0, gt=0, le=100)
    slow_call_rate_threshold: float = Field(100.0, gt=0, le=100)
    slow_call_duration_threshold: Duration = Field(60.0, gt=0, le=MAX_DURATION_S)
    wait_duration_in_open_state: Duration = Field(60.0, gt=0, le=MAX_DURATION_S)
    permitted_number_of_calls_in_half_open_state: int = Field(10, ge=1, le=MAX_WINDOW)
    automatic_transition_from_open_to_half_open_enabled: bool = False
    max_wait_duration_in_half_open_state: Duration = Field(0.0, le=MAX_DURATION_S)


class Resilience4j(LayerBlocks):
    """The resilience settings of one build, as a ``resilience4j:`` block would give them."""

    retry: RetrySettings = Field(default_factory=RetrySettings)
    circuitbreaker: CircuitBreakerSettings | None = None
    bulkhead: BulkheadSettings | None = None
    thread_pool_bulkhead: ThreadPoolBulkheadSettings | None = None
    timelimiter: TimeLimiterSettings | None = None
    fallback: Fallback | None = Field(None, description="outermost: around every layer")


Profile = Literal["retry-only", "retry-circuit-breaker"]


class ShopBuild(BuildSettings):
    """A build of the reference shop (``targets/shop``): its resilience profile and settings."""

    kind: ClassVar[str] = "shop"
    recommendation: ClassVar[Recommendation] = Recommendation.SHOP_RESILIENCE4J
    simulator_model: ClassVar[SimulatorModel] = SimulatorModel.SHOP
    answers: ClassVar[str] = "x-outcome"
    """The shop names every answer in its ``X-Outcome`` header."""
    target: Literal["shop"] = Field("shop", description="the reference target in targets/shop")
    profile: Profile
    workers: int = Field(200, ge=1, le=2000, description="request threads (Tomcat max-threads)")
    replicas: int = Field(
        1,
        ge=1,
        le=MAX_REPLICAS,
        description="shop processes behind one nginx (round robin), each with its own pool "
        "and breaker; 1: the shop alone, no load balancer",
    )
    pg_client: PgClientSettings = Field(default_factory=PgClientSettings)
    db_pool: DbPoolSettings | None = Field(
        None, description="a bounded DB connection pool shared by every request; none: no pool"
    )
    resilience4j: Resilience4j = Field(default_factory=Resilience4j)
    resilience: Composition = Field(
        None, description="the layers, outermost first; default: Resilience4j's aspect order"
    )

    def retries_its_calls(self) -> bool:
        """Every profile has a Retry; it retries unless ``max-attempts`` is 1."""
        return self.resilience4j.retry.max_attempts > 1

    @model_validator(mode="after")
    def _profile_matches_settings(self) -> ShopBuild:
        cb = self.resilience4j.circuitbreaker
        if self.profile == "retry-only" and cb is not None:
            raise ValueError(
                "profile retry-only has no circuit breaker; remove resilience4j.circuitbreaker "
                "or use profile retry-circuit-breaker"
            )
        if self.profile == "retry-circuit-breaker" and cb is None:
            self.resilience4j.circuitbreaker = CircuitBreakerSettings()
        return self
