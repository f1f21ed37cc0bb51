"""What the payment gateway does to one call: pure decisions from the schedule and a seeded hash.

Every probabilistic choice is drawn from ``fate(seed, idempotency key, attempt,
salt)`` (``harness.core.fate``), so the *before* and *after* builds meet the
same failures for the same payments, and a rerun with the same seed meets
them again. Nothing here does I/O or reads a clock: the server
(``harness.gateway.server``) passes the time in and executes the ``Action``
it gets back, which keeps every rule unit-testable.

Several faults combine in order: each hits on its own fate (a distinct salt
per position), delays of latency-type faults add up, and the first
*terminal* fault that hits (hang, error, reject, reset, malformed, slow
body) decides the answer.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, assert_never

from harness.core.fate import fate
from harness.core.timeline import blip_on, phase_at
from harness.scenario.distributions import Distribution
from harness.scenario.faults import HANG_LIMIT_S as HANG_LIMIT_S
from harness.scenario.faults import (
    ErrorFault,
    Fault,
    LatencyComponent,
    LatencyFault,
    MalformedFault,
    Match,
    Phase,
    RefuseFault,
    RejectFault,
    ResetFault,
    SlowBodyFault,
    TimeoutFault,
)

ActionKind = Literal["respond", "hang", "reset", "malformed", "slow-body"]
Decision = Literal["approved", "declined", "error", "none"]

APPROVE_PATH = "/v1/payments/approve"
CATALOGUE_PREFIX = "/v1/catalogue/products/"
"""Product reads: ``GET /v1/catalogue/products/{id}`` (the faults apply to them too)."""
CATALOGUE_ROUTE = CATALOGUE_PREFIX + r"{id:\d{1,18}}"
DEFAULT_ERROR_BODY: dict[str, Any] = {"error": "gateway failure", "fault": "error"}
DEFAULT_REJECT_BODY: dict[str, Any] = {"error": "INSUFFICIENT_BALANCE"}


@dataclass(frozen=True)
class Call:
    """What a partial fault may look at: the request's path and headers."""

    path: str = APPROVE_PATH
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Action:
    """How to answer one call, after waiting ``delay_s``.

    ``respond``: ``status`` with ``body`` (None: the gateway's usual body).
    ``hang``: no answer until the client gives up (504 at ``HANG_LIMIT_S``).
    ``reset``: TCP RST, ``before-body`` or ``after-body`` (reading it first).
    ``malformed``: ``empty``, ``garbage`` or ``truncated`` bytes, then close.
    ``slow-body``: a 200 whose body is sent in ``chunks`` over ``body_duration_s``.
    """

    kind: ActionKind
    fault: str = "healthy"
    status: int = 200
    delay_s: float = 0.0
    body: str | Mapping[str, Any] | None = None
    retry_after_s: int | None = None
    reset_when: Literal["before-body", "after-body"] = "before-body"
    malformed: Literal["empty", "garbage", "truncated"] = "empty"
    chunks: int = 1
    body_duration_s: float = 0.0

    @property
    def decision(self) -> Decision:
        """What the gateway decided about the payment, whether or not the client heard it.

        A truncated answer started a 200, so the payment counts as approved: that
        is the reconciliation hole (approved at the gateway, failed at the client).
        """
        if self.kind in ("respond", "slow-body"):
            if self.status < 300:
                return "approved"
            return "declined" if self.status < 500 else "error"
        if self.kind == "malformed" and self.malformed == "truncated":
            return "approved"
        return "none"

    @property
    def reads_body(self) -> bool:
        """Whether the gateway reads the request body before acting."""
        return not (self.kind == "reset" and self.reset_when == "before-body")


HEALTHY = Action("respond")

T_co = TypeVar("T_co", covariant=True)


class ActionHandler(Protocol[T_co]):
    """How one side carries out an ``Action``, a method per ``ActionKind``: the gateway
    answering on the wire, the simulator modelling what the client meets. ``dispatch`` is
    the one match over the kinds, so a kind added to ``ActionKind`` fails the type check
    there, then in every handler that lacks its method."""

    def respond(self, action: Action) -> T_co: ...
    def hang(self, action: Action) -> T_co: ...
    def reset(self, action: Action) -> T_co: ...
    def malformed(self, action: Action) -> T_co: ...
    def slow_body(self, action: Action) -> T_co: ...


def dispatch(action: Action, handler: ActionHandler[T_co]) -> T_co:
    """``handler``'s method for ``action.kind``."""
    match action.kind:
        case "respond":
            return handler.respond(action)
        case "hang":
            return handler.hang(action)
        case "reset":
            return handler.reset(action)
        case "malformed":
            return handler.malformed(action)
        case "slow-body":
            return handler.slow_body(action)
        case _:
            assert_never(action.kind)


def sample_delay(
    fault: LatencyFault | LatencyComponent | Distribution, rng: random.Random
) -> float:
    """Draw one delay in seconds from the fault's distribution (never negative, not ramped)."""
    if isinstance(fault, LatencyFault | Distribution) and fault.distribution == "mix":
        assert fault.mix is not None
        pick = rng.random() * sum(c.weight for c in fault.mix)
        for component in fault.mix:
            pick -= component.weight
            if pick < 0:
                return sample_delay(component, rng)
        return sample_delay(fault.mix[-1], rng)
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


def catalogue_key(product_id: int, request_id: str = "") -> str:
    """The key a product read's fate and attempt count go by: the product, and the request
    (its ``Idempotency-Key`` or ``X-Request-Id``) when it names one.

    With a request id, every read has its own fate and a retry of it is attempt 2, so
    two builds sending the same requests meet the same failures. Without one, the
    product's reads count up together (attempt N is its Nth read), and fates follow
    how many reads of it reached the gateway before.
    """
    key = f"product-{product_id}"
    return f"{key}/{request_id}" if request_id else key


def catalogue_product(product_id: int) -> dict[str, Any]:
    """The catalogue's answer for a product: fixed by its id (the shop's own products agree)."""
    return {
        "id": product_id,
        "name": f"product-{product_id}",
        "price": 1000 + product_id % 97 * 100,
    }


def matches(match: Match | None, call: Call) -> bool:
    """Whether a partial fault applies to this call (no ``match``: every call, on every
    route the gateway serves: approve calls and product reads alike)."""
    if match is None:
        return True
    if match.path is not None and not (
        call.path == match.path or call.path.startswith(match.path.rstrip("/") + "/")
    ):
        return False
    if match.header:
        lowered = {k.lower(): v for k, v in call.headers.items()}
        return all(lowered.get(name.lower()) == value for name, value in match.header.items())
    return True


def _weighted(choices: Mapping[int, float], u: float) -> int:
    """The code a weight mix picks for the uniform number ``u`` (codes in ascending order)."""
    codes = sorted(choices)
    pick = u * sum(choices.values())
    for code in codes:
        pick -= choices[code]
        if pick < 0:
            return code
    return codes[-1]


def _whole_seconds(seconds: float | None) -> int | None:
    """A ``Retry-After`` value: whole seconds, rounded up (``1.5s`` -> 2)."""
    return None if seconds is None else math.ceil(seconds - 1e-9)


_NOT_PER_CALL = ("healthy", "brownout")
"""Faults that decide nothing about a call: ``brownout`` lowers the capacity in force
(``harness.gateway.capacity``), so it is not listed among the faults that hit a call."""


def _is_latency_type(fault: Fault) -> bool:
    """Faults that only delay the answer (their delays add up) rather than decide it."""
    return isinstance(fault, LatencyFault) or (
        isinstance(fault, TimeoutFault) and fault.after is not None
    )


def _delay(fault: Fault, rng: random.Random, progress: float) -> float:
    if isinstance(fault, TimeoutFault):
        assert fault.after is not None
        return fault.after
    assert isinstance(fault, LatencyFault)
    if fault.ramp_to is not None:
        assert fault.delay is not None
        return fault.delay + (fault.ramp_to - fault.delay) * min(1.0, max(0.0, progress))
    return sample_delay(fault, rng)


def _terminal(
    fault: Fault, names: str, delay_s: float, seed: int, key: str, attempt: int, salt: str
) -> Action:
    """The answer a terminal fault gives (``names``: every fault that hit, comma-joined)."""
    if isinstance(fault, TimeoutFault):
        return Action("hang", names, status=504, delay_s=HANG_LIMIT_S)
    if isinstance(fault, ErrorFault):
        status = fault.status
        if not isinstance(status, int):
            status = _weighted(status, fate(seed, key, attempt, "status" + salt))
        return Action(
            "respond",
            names,
            status=status,
            delay_s=delay_s,
            body=fault.body if fault.body is not None else DEFAULT_ERROR_BODY,
            retry_after_s=_whole_seconds(fault.retry_after),
        )
    if isinstance(fault, RejectFault):
        return Action(
            "respond",
            names,
            status=fault.status,
            delay_s=delay_s,
            body=fault.body if fault.body is not None else DEFAULT_REJECT_BODY,
            retry_after_s=_whole_seconds(fault.retry_after),
        )
    if isinstance(fault, ResetFault):
        return Action("reset", names, status=0, delay_s=delay_s, reset_when=fault.when)
    if isinstance(fault, RefuseFault):
        # The listener is down; a call that still slips in on an old connection is dropped.
        return Action("reset", names, status=0, delay_s=0.0)
    if isinstance(fault, MalformedFault):
        return Action("malformed", names, status=0, delay_s=delay_s, malformed=fault.kind)
    assert isinstance(fault, SlowBodyFault)
    return Action(
        "slow-body",
        names,
        delay_s=delay_s,
        chunks=fault.chunks,
        body_duration_s=fault.duration,
    )


def decide(
    faults: Fault | Sequence[Fault],
    seed: int,
    key: str,
    attempt: int,
    call: Call | None = None,
    progress: float = 0.0,
) -> Action:
    """The action for call number ``attempt`` of payment ``key`` under one or several faults.

    ``progress`` (0..1) is how far into its phase the call arrived, for ramps.
    The first fault uses the salts a lone fault always used, so a scenario
    that gains a second fault keeps the fates of its first.
    """
    listed: Sequence[Fault] = faults if isinstance(faults, Sequence) else [faults]
    call = call or Call()
    delay = 0.0
    names: list[str] = []
    terminal: tuple[Fault, str] | None = None
    for i, fault in enumerate(listed):
        if fault.type in _NOT_PER_CALL or not matches(fault.match, call):
            continue
        salt = "" if i == 0 else f"#{i}"
        if fate(seed, key, attempt, salt) >= fault.probability:
            continue
        if _is_latency_type(fault):
            rng = random.Random(fate(seed, key, attempt, "delay" + salt))
            delay += _delay(fault, rng, progress)
            names.append(fault.type)
        elif terminal is None:
            terminal = (fault, salt)
            names.append(fault.type)
    delay = min(delay, HANG_LIMIT_S)
    if terminal is None:
        return Action("respond", ",".join(names) or "healthy", delay_s=delay)
    return _terminal(terminal[0], ",".join(names), delay, seed, key, attempt, terminal[1])


def fault_on(phase: Phase, t_s: float) -> bool:
    """Whether the phase's faults are on at ``t_s`` (always, unless ``repeat`` makes blips)."""
    if phase.repeat is None:
        return True
    return blip_on(t_s, phase.start, phase.repeat.every, phase.repeat.for_)


def progress_in(phase: Phase, t_s: float) -> float:
    """How far into the phase ``t_s`` is, from 0 at its start to 1 at its end."""
    return min(1.0, max(0.0, (t_s - phase.start) / phase.duration))


def decide_at(
    phases: list[Phase],
    t_s: float | None,
    seed: int,
    key: str,
    attempt: int,
    call: Call | None = None,
) -> Action:
    """The action the schedule gives a call arriving ``t_s`` into the measured window."""
    phase = None if t_s is None else phase_at(phases, t_s)
    if phase is None or t_s is None or not fault_on(phase, t_s):
        return HEALTHY
    return decide(phase.faults, seed, key, attempt, call, progress_in(phase, t_s))


def refusing(phases: list[Phase], t_s: float | None) -> bool:
    """Whether the listener must be down at ``t_s`` (a ``refuse`` phase, during its blip)."""
    phase = None if t_s is None else phase_at(phases, t_s)
    if phase is None or t_s is None:
        return False
    return any(f.type == "refuse" for f in phase.faults) and fault_on(phase, t_s)


def next_change(phases: list[Phase], t_s: float) -> float | None:
    """The next time after ``t_s`` at which a phase starts or ends or a blip turns on or off."""
    times = [p.start for p in phases if p.start > t_s] + [p.end for p in phases if p.end > t_s]
    phase = phase_at(phases, t_s)
    if phase is not None and phase.repeat is not None:
        every = phase.repeat.every
        cycle = phase.start + math.floor((t_s - phase.start) / every) * every
        times += [t for t in (cycle + phase.repeat.for_, cycle + every) if t > t_s]
    return min(times, default=None)


def garbage(seed: int, key: str, attempt: int) -> bytes:
    """The random bytes a ``malformed: garbage`` answer sends (64 to 512, fixed by fate)."""
    rng = random.Random(fate(seed, key, attempt, "garbage"))
    return rng.randbytes(rng.randint(64, 512))
