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
from harness.gateway.decide import Call, decide_at, refusing
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
        status = action.status
        error: BaseException | None
        if action.kind == "hang":
            took, error, status, decision = timeout, PgTimeout("ReadTimeout"), 0, "none"
        elif action.kind in ("reset", "malformed"):
            took, error, status = (
                action.delay_s + self.service(GATEWAY_SERVICE_S),
                PgConnectionError("ReadError"),
                0,
            )
        elif action.kind == "slow-body":
            gap = action.body_duration_s / max(action.chunks, 1)
            took = action.delay_s + action.body_duration_s + self.service(GATEWAY_SERVICE_S)
            error = None
            if gap >= timeout:
                took, error = action.delay_s + timeout, PgTimeout("ReadTimeout")
        else:
            took = action.delay_s + self.service(GATEWAY_SERVICE_S)
            error = (
                None
                if status < 400
                else PgServerError(status)
                if status >= 500
                else PgRejected(status, "")
            )
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
