"""The payment gateway's faults: what each ``type`` does, and the phases that schedule them.

These models are the scenario's ``pg:`` block and also the body of a live
override (``PUT /__admin/fault``, the ``X-Harness-Fault`` header), so the
gateway validates both with the same rules. What a fault means at run time
(delays drawn, fate per call) lives in ``harness.gateway``.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from harness.core.durations import Duration
from harness.core.timeline import ordered_phases
from harness.core.yamlmodel import StrictModel
from harness.scenario.bounds import (
    MAX_DURATION_S,
    MAX_FAULTS_PER_PHASE,
    MAX_MIX_COMPONENTS,
    MAX_PATH_CHARS,
    MAX_PHASES,
    MAX_WEIGHT,
    MIN_REPEAT_EVERY_S,
    SafeName,
    check_json,
)
from harness.scenario.capacity import MAX_CONCURRENCY, GatewayCapacity, Share
from harness.scenario.caps import TargetCap
from harness.scenario.distributions import HANG_LIMIT_S as HANG_LIMIT_S
from harness.scenario.distributions import DelayParams, Kind, check_distribution
from harness.scenario.distributions import LatencyComponent as LatencyComponent
from harness.scenario.toxics import Toxic, one_per_type_and_stream

FAULT_TYPES = (
    "healthy",
    "latency",
    "timeout",
    "error",
    "reject",
    "reset",
    "refuse",
    "malformed",
    "slow-body",
    "brownout",
)
"""Every ``type`` a fault may have, in the order docs/faults.md presents them."""

Body = str | dict[str, Any]
"""A response body a fault sends: a string as it is (text/plain), a mapping as JSON."""


class Match(StrictModel):
    """Which calls a partial fault affects: every condition given must hold.

    ``path`` is the request path itself or a prefix of it ending at a ``/``
    boundary (``/v1/payments`` covers ``/v1/payments/approve``). ``header``
    names are case-insensitive, values exact: ``{X-Tenant: a}`` hurts one
    tenant and spares the others.
    """

    path: str | None = Field(None, pattern=r"^/", max_length=MAX_PATH_CHARS)
    header: dict[str, str] = Field(default_factory=dict)

    @field_validator("header", mode="before")
    @classmethod
    def _numbers_are_text(cls, value: Any) -> Any:
        # `X-Version: 2` in YAML is an int; a header is always text.
        if isinstance(value, dict):
            return {
                k: str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
                for k, v in value.items()
            }
        return value

    @model_validator(mode="after")
    def _says_something(self) -> Match:
        if self.path is None and not self.header:
            raise ValueError("match needs path and/or header (to affect every call, drop match)")
        return self


class _FaultBase(StrictModel):
    """What every fault may say: how often it hits, and which calls it may hit."""

    probability: float = Field(
        1.0, ge=0, le=1, description="share of the matching calls it hits, decided per call by fate"
    )
    match: Match | None = None


def _every_call(fault: _FaultBase, why: str) -> None:
    """A fault of the whole gateway (refuse, brownout) hits every call or none."""
    if fault.probability != 1.0 or fault.match is not None:
        raise ValueError(why)


class HealthyFault(_FaultBase):
    """The gateway answers 200 at once."""

    type: Literal["healthy"]


class LatencyFault(_FaultBase, DelayParams):
    """The gateway answers 200 after a delay drawn from a distribution (delays of several add up).

    ``mix`` expresses a long tail (98% about 50 ms, 2% 2–3 s); ``ramp-to``
    grows a fixed delay linearly over the phase.
    """

    type: Literal["latency"]
    distribution: Kind = "fixed"
    mix: list[LatencyComponent] | None = Field(None, min_length=1, max_length=MAX_MIX_COMPONENTS)
    ramp_to: Duration | None = Field(
        None, le=HANG_LIMIT_S, description="fixed delay at the phase's end (linear from delay)"
    )

    @model_validator(mode="after")
    def _parameters_match(self) -> LatencyFault:
        check_distribution(self, self.distribution, self.mix)
        if self.ramp_to is not None and self.distribution != "fixed":
            raise ValueError(
                f"ramp-to needs distribution fixed (the delay grows linearly from delay to "
                f"ramp-to over the phase), not {self.distribution}"
            )
        return self


class TimeoutFault(_FaultBase):
    """The gateway hangs: no answer until the caller gives up, or a 200 after ``after``."""

    type: Literal["timeout"]
    after: Duration | None = Field(None, le=HANG_LIMIT_S)


class ErrorFault(_FaultBase):
    """The gateway answers a 5xx: one ``status``, or a weighted mix such as ``{500: 1, 503: 3}``."""

    type: Literal["error"]
    status: int | dict[int, float] = 500
    body: Body | None = Field(None, description="default {error: gateway failure, fault: error}")
    retry_after: Duration | None = Field(
        None, le=24 * 3600, description="sent as a Retry-After header in whole seconds"
    )

    @field_validator("body")
    @classmethod
    def _body_is_json(cls, body: Body | None) -> Body | None:
        return check_json(body, "body")

    @field_validator("status", mode="before")
    @classmethod
    def _code_or_weights(cls, status: Any) -> Any:
        # One message instead of one per member of the union.
        if isinstance(status, bool) or not isinstance(status, int | dict):
            raise ValueError("status is a code such as 503, or weights such as {500: 1, 503: 3}")
        return status

    @field_validator("status")
    @classmethod
    def _server_errors(cls, status: int | dict[int, float]) -> int | dict[int, float]:
        codes = [status] if isinstance(status, int) else list(status)
        if not codes:
            raise ValueError("status mix is empty; give a code such as 503 or {500: 1, 503: 3}")
        bad = [c for c in codes if not 500 <= c <= 599]
        if bad:
            raise ValueError(
                f"status {', '.join(map(str, bad))} is not a 5xx (500-599); "
                f"a business 4xx is type reject"
            )
        if isinstance(status, dict):
            weightless = [f"{c}: {w:g}" for c, w in status.items() if not w > 0]
            if weightless:
                raise ValueError(f"status weights must be positive, got {', '.join(weightless)}")
            heavy = [f"{c}: {w:g}" for c, w in status.items() if w > MAX_WEIGHT]
            if heavy:
                raise ValueError(
                    f"status weights are at most {MAX_WEIGHT:g} (their sum must stay finite), "
                    f"got {', '.join(heavy)}"
                )
        return status


class RejectFault(_FaultBase):
    """A business refusal (4xx): a client must not retry it and a breaker must not count it."""

    type: Literal["reject"]
    status: int = Field(402, ge=400, le=499)
    body: Body | None = Field(None, description='default {"error": "INSUFFICIENT_BALANCE"}')
    retry_after: Duration | None = Field(None, le=24 * 3600)

    @field_validator("body")
    @classmethod
    def _body_is_json(cls, body: Body | None) -> Body | None:
        return check_json(body, "body")


class ResetFault(_FaultBase):
    """The gateway resets the TCP connection (RST), before or after reading the request body."""

    type: Literal["reset"]
    when: Literal["before-body", "after-body"] = "before-body"


class RefuseFault(_FaultBase):
    """The gateway stops listening for the phase (connection refused) and comes back after it."""

    type: Literal["refuse"]

    @model_validator(mode="after")
    def _whole_listener(self) -> RefuseFault:
        _every_call(
            self,
            "refuse takes the whole listener down, so probability and match do not apply "
            "(for a share of calls, use type reset)",
        )
        return self


class MalformedFault(_FaultBase):
    """An answer HTTP cannot parse: nothing at all, random bytes, or a body cut short."""

    type: Literal["malformed"]
    kind: Literal["empty", "garbage", "truncated"]


class SlowBodyFault(_FaultBase):
    """Status and headers at once, then the body dribbled in ``chunks`` pieces over ``duration``."""

    type: Literal["slow-body"]
    duration: Duration = Field(gt=0, le=HANG_LIMIT_S)
    chunks: int = Field(10, ge=1, le=10_000)


class BrownoutFault(_FaultBase):
    """The gateway's capacity drops for the phase: a share of ``pg.capacity.concurrency`` (``20%``)
    or a number of slots (``concurrency: 2``). Calls in service finish; the queue waits."""

    type: Literal["brownout"]
    capacity: Share | None = Field(None, description="share of pg.capacity.concurrency, (0, 100%]")
    concurrency: int | None = Field(None, ge=1, le=MAX_CONCURRENCY, description="slots in force")

    @model_validator(mode="after")
    def _one_limit(self) -> BrownoutFault:
        _every_call(
            self,
            "brownout lowers the gateway's capacity for every call, so probability and "
            "match do not apply",
        )
        if (self.capacity is None) == (self.concurrency is None):
            raise ValueError(
                "brownout needs capacity (a share such as 20%) or concurrency (slots), not "
                + ("both" if self.capacity is not None else "neither")
            )
        return self

    def slots(self, concurrency: int) -> int:
        """The slots in force under this brownout, of ``concurrency`` (at least 1)."""
        if self.concurrency is not None:
            return self.concurrency
        assert self.capacity is not None
        return max(1, math.floor(self.capacity * concurrency + 0.5))


Fault = Annotated[
    HealthyFault
    | LatencyFault
    | TimeoutFault
    | ErrorFault
    | RejectFault
    | ResetFault
    | RefuseFault
    | MalformedFault
    | SlowBodyFault
    | BrownoutFault,
    Field(discriminator="type"),
]


def _check_combination(faults: list[Fault]) -> None:
    """Rules for several faults at once (a phase's ``faults:`` or a live override)."""
    if len(faults) > 1 and any(f.type == "refuse" for f in faults):
        raise ValueError(
            "refuse takes the whole listener down and cannot be combined with other faults"
        )


def headline_fault(faults: list[Fault]) -> Fault:
    """The fault that names a combination in one word: the first that is not ``healthy``."""
    return next((f for f in faults if f.type != "healthy"), faults[0])


class Repeat(StrictModel):
    """Blips: inside its phase the fault is on only for the first ``for`` of every ``every``."""

    every: Duration = Field(ge=MIN_REPEAT_EVERY_S, le=MAX_DURATION_S)
    for_: Duration = Field(gt=0, alias="for")

    @model_validator(mode="after")
    def _on_shorter_than_period(self) -> Repeat:
        if self.for_ >= self.every:
            raise ValueError(
                f"for ({self.for_:g}s) must be shorter than every ({self.every:g}s); "
                f"for a fault on the whole phase, drop repeat"
            )
        return self


def _healthy() -> Fault:
    return HealthyFault(type="healthy")


class Phase(StrictModel):
    """A named window of the measured time line with its faults in force.

    Give ``fault`` (one) or ``faults`` (a list, combined in order). Either way
    ``faults`` holds the whole list and ``fault`` the headline one (the first
    non-healthy), so code that names a phase by ``fault.type`` keeps working.
    A TCP dependency's phase gives ``toxics`` instead (the proxy's,
    ``harness.scenario.toxics``); its ``fault`` stays ``healthy`` (no HTTP
    fault), so whether a phase breaks anything is ``faulty``, never
    ``fault.type`` alone.
    """

    name: SafeName
    start: Duration = Field(le=MAX_DURATION_S)
    duration: Duration = Field(gt=0, le=MAX_DURATION_S)
    fault: Fault = Field(default_factory=_healthy, description="one fault")
    faults: list[Fault] = Field(
        default_factory=list,
        min_length=1,
        max_length=MAX_FAULTS_PER_PHASE,
        description="several faults, combined in order",
    )
    repeat: Repeat | None = None
    target: TargetCap | None = Field(
        None,
        description="caps on every build's target for the phase (cpus, memory), lifted at its end",
    )
    toxics: list[Toxic] = Field(
        default_factory=list,
        max_length=MAX_FAULTS_PER_PHASE,
        description="a TCP dependency's faults: the proxy's toxics in force for the phase",
    )
    _given: str | None = PrivateAttr(None)
    """``fault`` or ``faults`` when the file gave one (the validator fills both)."""

    @field_validator("toxics")
    @classmethod
    def _one_toxic_per_stream(cls, toxics: list[Toxic]) -> list[Toxic]:
        return one_per_type_and_stream(toxics)

    @model_validator(mode="after")
    def _fault_or_faults(self) -> Phase:
        given = self.model_fields_set
        if "fault" in given and "faults" in given:
            raise ValueError("give either fault (one) or faults (a list), not both")
        if self.toxics and ("fault" in given or "faults" in given):
            raise ValueError(
                "give fault/faults (an HTTP dependency's) or toxics (a TCP dependency's), not both"
            )
        self._given = next((k for k in ("fault", "faults") if k in given), None)
        if "faults" in given:
            _check_combination(self.faults)
            self.fault = headline_fault(self.faults)
        elif "fault" in given or self.target is not None or "toxics" in given:
            self.faults = [self.fault]  # target caps or toxics alone: no HTTP fault
        else:
            raise ValueError(
                "a phase needs fault (one fault), faults (a list of faults), toxics (a TCP "
                "dependency's) or target (caps on the target)"
            )
        return self

    @property
    def given_fault(self) -> str | None:
        """``fault`` or ``faults``: the key the file gave this phase its HTTP fault with."""
        return self._given

    @property
    def faulty(self) -> bool:
        """Whether the phase breaks anything: an HTTP fault, a toxic or a cap on the target."""
        return self.fault.type != "healthy" or bool(self.toxics) or self.target is not None

    @property
    def end(self) -> float:
        return self.start + self.duration

    @property
    def label(self) -> str:
        """The phase's faults in one short name, e.g. ``timeout`` or ``latency+error``; its
        caps on the target after them (``target cpus 0.5``, ``timeout+target cpus 0.5``)."""
        label = "+".join(f.type for f in self.faults)
        if self.toxics:  # a TCP dependency's phase: its toxics, said as TCP's
            label = "tcp " + "+".join(t.type for t in self.toxics)
        if self.target is None:
            return label
        cap = f"target {self.target.label}"
        return cap if label == "healthy" else f"{label}+{cap}"


class FaultOverride(StrictModel):
    """A live override (``PUT /__admin/fault`` or the ``X-Harness-Fault`` header).

    The same fault models as a scenario, minus what needs a phase (``ramp-to``).
    """

    faults: list[Fault] = Field(min_length=1, max_length=MAX_FAULTS_PER_PHASE)

    @model_validator(mode="after")
    def _valid_without_a_phase(self) -> FaultOverride:
        _check_combination(self.faults)
        if any(isinstance(f, LatencyFault) and f.ramp_to is not None for f in self.faults):
            raise ValueError("ramp-to needs a phase to ramp over; give a fixed delay instead")
        return self


class PgSchedule(StrictModel):
    """The payment gateway the harness plays: its fault schedule (a scenario's ``pg:``)."""

    phases: list[Phase] = Field(default_factory=list, max_length=MAX_PHASES)
    capacity: GatewayCapacity | None = Field(
        None, description="finite capacity: N calls in service at once, a FIFO queue before them"
    )
    port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="fixed loopback port of the gateway (needed by url builds); "
        "default: a free one per build",
    )

    def brownout_problems(
        self, at: tuple[str, ...] = ("pg",)
    ) -> list[tuple[tuple[str | int, ...], str]]:
        """A brownout lowers the capacity: without one there is nothing to lower; (YAML path,
        message) of each, said at its line by the loader (``Scenario.cross_field_problems``).
        ``at`` is where this schedule is in the file (``pg``, ``dependencies.<name>``)."""
        found: list[tuple[tuple[str | int, ...], str]] = []
        capacity = self.capacity
        named = ".".join(at)
        for i, phase in enumerate(self.phases):
            for j, fault in enumerate(phase.faults):
                if fault.type != "brownout":
                    continue
                where: tuple[str | int, ...] = (
                    (*at, "phases", i, "faults", j)
                    if len(phase.faults) > 1
                    else (*at, "phases", i, "fault")
                )
                if capacity is None:
                    found.append(
                        (
                            where + ("type",),
                            "a brownout lowers the dependency's capacity: give "
                            f"{named}.capacity (concurrency, service) for it to lower",
                        )
                    )
                elif fault.concurrency is not None and fault.concurrency > capacity.concurrency:
                    found.append(
                        (
                            where + ("concurrency",),
                            f"brownout concurrency {fault.concurrency} "
                            f"is more than {named}.capacity.concurrency {capacity.concurrency}: a "
                            "brownout lowers capacity",
                        )
                    )
        return found

    @field_validator("phases")
    @classmethod
    def _no_overlap(cls, phases: list[Phase]) -> list[Phase]:
        return ordered_phases(phases)
