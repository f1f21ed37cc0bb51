"""The payment gateway as the simulated shop meets it: the scenario's faults, decided by
the gateway's own pure rules (``harness.gateway.decide``), and its ledger.

Each call's fate is ``decide_at(phases, t, seed, key, attempt)``, the function the real
gateway calls, with the attempt counted per key as the gateway counts it, so a
simulated build meets the same failures for the same payments as a real one. The
client's side is the shop's ``PgClient``: a hang or an answer slower than the read
timeout is a ``PgTimeout`` at the read timeout, a reset or a malformed answer a
``PgConnectionError``, a 5xx ``PgServerError``, a 4xx ``PgRejected``; a ``refuse``
phase's listener is down, so the connect fails at once and the gateway records nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.core.timeline import phase_at
from harness.gateway.decide import Action, Call, decide_at, dispatch, refusing
from harness.scenario.schema import Scenario
from harness.simulate.clock import Clock, ServiceTimes
from targets.shop.pg_client import PgConnectionError, PgRejected, PgServerError, PgTimeout

GATEWAY_SERVICE_S = 0.005
"""The median of a healthy call's round trip as the shop sees it on loopback (the gateway's
aiohttp handler, httpx's client), spread by ``clock.SERVICE_SIGMA``: chosen once, about
what the CI seed-000 scenario's payments measured here (p50 10-13 ms, with the shop's own
``REQUEST_CPU_S``)."""

Outcome = Callable[[BaseException | None], None]
"""Told how one call ended: None for a 2xx, else the client's error."""


@dataclass
class LedgerRow:
    """One call the gateway received (``pg.parquet``'s columns)."""

    arrival: float
    key: str
    attempt: int
    phase: str
    fault: str
    status: int
    decision: str
    duration_s: float
    client_gone: bool
    path: str


@dataclass(frozen=True)
class Met:
    """What the client met: how long the call took, its error (None: a 2xx), the status
    it read (0: none), and the gateway's decision when the kind overrides the action's."""

    took: float
    error: BaseException | None
    status: int
    decision: str | None = None


class _ClientMeets:
    """What the shop's ``PgClient`` meets for each kind of action (``dispatch``)."""

    def __init__(self, service: ServiceTimes, timeout_s: float) -> None:
        self.service, self.timeout_s = service, timeout_s

    def respond(self, action: Action) -> Met:
        status = action.status
        error = (
            None
            if status < 400
            else PgServerError(status)
            if status >= 500
            else PgRejected(status, "")
        )
        return Met(action.delay_s + self.service(GATEWAY_SERVICE_S), error, status)

    def hang(self, action: Action) -> Met:
        return Met(self.timeout_s, PgTimeout("ReadTimeout"), 0, "none")

    def reset(self, action: Action) -> Met:
        return self._broken(action)

    def malformed(self, action: Action) -> Met:
        return self._broken(action)

    def _broken(self, action: Action) -> Met:
        took = action.delay_s + self.service(GATEWAY_SERVICE_S)
        return Met(took, PgConnectionError("ReadError"), 0)

    def slow_body(self, action: Action) -> Met:
        took = action.delay_s + action.body_duration_s + self.service(GATEWAY_SERVICE_S)
        if action.body_duration_s / max(action.chunks, 1) >= self.timeout_s:  # a gap too long
            return Met(action.delay_s + self.timeout_s, PgTimeout("ReadTimeout"), action.status)
        return Met(took, None, action.status)


class Gateway:
    """Decides each call's fate and keeps the ledger (times in the clock's seconds)."""

    def __init__(
        self, clock: Clock, scenario: Scenario, seed: int, read_timeout_s: float, t0_s: float
    ) -> None:
        self.clock = clock
        self.phases = scenario.pg.phases
        self.seed = seed
        self.read_timeout_s = read_timeout_s
        self.t0_s = t0_s
        self.attempts: dict[str, int] = {}
        self.service = ServiceTimes(f"{seed}:gateway")
        self.ledger: list[LedgerRow] = []

    def call(
        self,
        path: str,
        key: str,
        headers: dict[str, str],
        done: Outcome,
        timeout_s: float | None = None,
    ) -> None:
        """Send one call; ``done`` is called when the client has its answer or gives up
        (after ``timeout_s``, or the read timeout)."""
        now = self.clock.now
        t = now - self.t0_s
        if refusing(self.phases, t):
            self.clock.after(0.0, done, PgConnectionError("ConnectError"))
            return
        attempt = self.attempts.get(key, 0) + 1
        self.attempts[key] = attempt
        action = decide_at(self.phases, t, self.seed, key, attempt, Call(path, headers))
        phase = phase_at(self.phases, t)
        timeout = self.read_timeout_s if timeout_s is None else timeout_s
        decision: str = action.decision
        if path != "/v1/payments/approve" and decision == "approved":
            decision = "served"
        met = dispatch(action, _ClientMeets(self.service, timeout))
        took, error, status = met.took, met.error, met.status
        decision = decision if met.decision is None else met.decision
        gone = took >= timeout
        if gone:
            took, error, status = timeout, PgTimeout("ReadTimeout"), 0
        self.ledger.append(
            LedgerRow(
                now,
                key,
                attempt,
                phase.name if phase else "none",
                action.fault,
                status,
                decision,
                took,
                gone,
                path,
            )  # fmt: skip
        )
        self.clock.after(took, done, error)
