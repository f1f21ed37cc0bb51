"""The scenario's typed models: traffic, builds, settings and the scenario itself.

A scenario says what load to send (``traffic``), how the payment gateway
misbehaves over time (``pg.phases``) and which builds of the service to run
under both (``builds``). Keys use Resilience4j's kebab-case property names so
a seed's ``application.yml`` block reads the same here.

Time line: ``warmup`` runs first with a healthy gateway and is excluded from
the statistics; the measured window of ``duration`` follows, and phase
``start`` times count from its beginning. The fault models are in
``harness.scenario.faults``; reading a file is ``harness.scenario.loader``.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harness.core.durations import Duration
from harness.core.yamlmodel import StrictModel
from harness.scenario.faults import PgSchedule

# ---------------------------------------------------------------- traffic


class Endpoint(StrictModel):
    """One stream of requests at a constant arrival rate (open model)."""

    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "GET"
    path: str = Field(pattern=r"^/")
    rate: float = Field(gt=0, le=10_000, description="requests per second")
    timeout: Duration = Field(10.0, gt=0, description="client gives up after this")
    params: dict[str, tuple[int, int]] = Field(
        default_factory=dict, description="path parameters drawn uniformly from [low, high]"
    )
    body: dict[str, Any] | None = None
    idempotency_key: bool = Field(False, description="send a fresh Idempotency-Key header")
    calls_gateway: bool = Field(
        False, description="this endpoint calls the gateway (used for amplification)"
    )

    @model_validator(mode="after")
    def _params_cover_path(self) -> Endpoint:
        names = set(re.findall(r"{(\w+)}", self.path))
        missing = names - set(self.params)
        if missing:
            raise ValueError(
                f"path {self.path!r} uses {sorted(missing)} but params gives no range for it"
            )
        for name, (low, high) in self.params.items():
            if low > high:
                raise ValueError(f"params.{name}: low {low} is greater than high {high}")
        return self


# ---------------------------------------------------------------- builds


class PgClientSettings(StrictModel):
    """The target's HTTP client towards the gateway."""

    connect_timeout: Duration = Field(1.0, gt=0)
    read_timeout: Duration = Field(3.0, gt=0)


class RetrySettings(StrictModel):
    """Resilience4j ``resilience4j.retry.instances.<name>`` properties."""

    max_attempts: int = Field(3, ge=1, le=20)
    wait_duration: Duration = 0.5
    enable_exponential_backoff: bool = False
    exponential_backoff_multiplier: float = Field(2.0, ge=1)
    exponential_max_wait_duration: Duration | None = None
    enable_randomized_wait: bool = False
    randomized_wait_factor: float = Field(0.5, ge=0, lt=1)


class CircuitBreakerSettings(StrictModel):
    """Resilience4j ``resilience4j.circuitbreaker.instances.<name>`` properties."""

    sliding_window_type: Literal["COUNT_BASED", "TIME_BASED"] = "COUNT_BASED"
    sliding_window_size: int = Field(100, ge=1)
    minimum_number_of_calls: int = Field(100, ge=1)
    failure_rate_threshold: float = Field(50.0, gt=0, le=100)
    slow_call_rate_threshold: float = Field(100.0, gt=0, le=100)
    slow_call_duration_threshold: Duration = Field(60.0, gt=0)
    wait_duration_in_open_state: Duration = Field(60.0, gt=0)
    permitted_number_of_calls_in_half_open_state: int = Field(10, ge=1)
    automatic_transition_from_open_to_half_open_enabled: bool = False
    max_wait_duration_in_half_open_state: Duration = 0.0


class Resilience4j(StrictModel):
    """The resilience settings of one build, as a ``resilience4j:`` block would give them."""

    retry: RetrySettings = Field(default_factory=RetrySettings)
    circuitbreaker: CircuitBreakerSettings | None = None


Profile = Literal["retry-only", "retry-circuit-breaker"]


class Build(StrictModel):
    """One variant of the service under test."""

    target: Literal["shop"] = Field("shop", description="the reference target in targets/shop")
    profile: Profile
    workers: int = Field(200, ge=1, le=2000, description="request threads (Tomcat max-threads)")
    pg_client: PgClientSettings = Field(default_factory=PgClientSettings)
    resilience4j: Resilience4j = Field(default_factory=Resilience4j)

    @model_validator(mode="after")
    def _profile_matches_settings(self) -> Build:
        cb = self.resilience4j.circuitbreaker
        if self.profile == "retry-only" and cb is not None:
            raise ValueError(
                "profile retry-only has no circuit breaker; remove resilience4j.circuitbreaker "
                "or use profile retry-circuit-breaker"
            )
        if self.profile == "retry-circuit-breaker" and cb is None:
            self.resilience4j.circuitbreaker = CircuitBreakerSettings()
        return self


class MetricsSettings(StrictModel):
    """How the harness watches the processes."""

    interval: Duration = Field(1.0, ge=0.1, le=60)


# ---------------------------------------------------------------- gates


class GateSpec(StrictModel):
    """A named gate; a bare string in ``gates:`` is a gate named by its own text."""

    name: str | None = None
    expr: str = Field(min_length=3)


# ---------------------------------------------------------------- scenario


class Scenario(StrictModel):
    """A whole experiment: load, faults and the builds to compare."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    seed: int = 0
    warmup: Duration = Field(5.0, ge=0)
    duration: Duration = Field(gt=0, le=24 * 3600)
    drain: Duration | None = Field(None, ge=0, description="max wait for in-flight requests")
    traffic: dict[str, Endpoint] = Field(min_length=1)
    pg: PgSchedule = Field(default_factory=PgSchedule)
    builds: dict[str, Build] = Field(min_length=1)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    gates: list[str | GateSpec] = Field(
        default_factory=list,
        description="comparisons that fail the run (exit 1); see harness/scenario/gates.py",
    )

    def gate_specs(self) -> list[GateSpec]:
        return [GateSpec(expr=g) if isinstance(g, str) else g for g in self.gates]

    @field_validator("traffic", "builds")
    @classmethod
    def _names_are_safe(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name in value:
            if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
                raise ValueError(f"name {name!r} may only use letters, digits, '-' and '_'")
        return value

    @model_validator(mode="after")
    def _phases_fit(self) -> Scenario:
        for phase in self.pg.phases:
            if phase.end > self.duration + 1e-9:
                raise ValueError(
                    f"phase {phase.name!r} ends at {phase.end:g}s, after the run's duration "
                    f"{self.duration:g}s"
                )
        return self

    @property
    def drain_s(self) -> float:
        """Bound on waiting for in-flight requests once the schedule ends."""
        if self.drain is not None:
            return self.drain
        return max(e.timeout for e in self.traffic.values()) + 2.0

    def fault_window(self) -> tuple[float, float] | None:
        """Start and end (measured-time seconds) of the span covered by non-healthy phases."""
        faulty = [p for p in self.pg.phases if p.fault.type != "healthy"]
        if not faulty:
            return None
        return min(p.start for p in faulty), max(p.end for p in faulty)


class LoadedScenario(BaseModel):
    """A validated scenario together with the text it came from (for the run manifest)."""

    model_config = ConfigDict(frozen=True)

    path: str
    text: str
    scenario: Scenario

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()
