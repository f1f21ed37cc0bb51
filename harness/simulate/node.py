"""The Node target (``targets/node-gateway``, seed 003's stack) on the simulated clock.

As its ``server.js`` does it: every request holds a slot of one concurrency cap
(``MAX_CONCURRENCY``; with profile ``separated`` the verification calls have their own,
``VERIFY_CONCURRENCY``); a request that finds the cap full waits in its queue (at most
``MAX_QUEUE``, else 503 ``OVERLOADED``) and leaves it when its client hangs up.
``POST /api/verify`` and ``POST /api/payments`` call the vendor (the gateway's approve
route) with ``VENDOR_TIMEOUT_MS``, retried ``RETRIES`` times on a timeout, a 5xx or a
broken connection after ``RETRY_BACKOFF_MS``, through opossum's breaker
(``harness.simulate.opossum``, the ``CB_*`` options) when ``BREAKER`` is on: a refused
call is the fallback's fast 503 ``VENDOR_OPEN``, a call past ``CB_TIMEOUT_MS`` is cut
(opossum's ``timeout``), a vendor 4xx passes its ``errorFilter``. ``GET /api/cart`` and
``GET /api/products/{id}`` answer at once in a slot of the shared cap.

Read from the command build's ``env`` and its ``--flag value`` arguments (flags win), with
the profile's defaults, as ``loadConfig`` reads them.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.gateway.decide import APPROVE_PATH
from harness.simulate.clock import Clock
from harness.simulate.gateway import Gateway
from harness.simulate.opossum import OpossumBreaker, OpossumConfig
from harness.simulate.shop import Request, Route, Server, route_of
from targets.shop.pg_client import PgRejected, PgServerError, PgTimeout

NODE_CPU_S = 0.001
"""A request's own time on the Node event loop: chosen once (the event loop itself is
never the bottleneck here)."""
PROFILES: dict[str, dict[str, Any]] = {
    "before": {"VENDOR_TIMEOUT_MS": 30000, "RETRIES": 2, "BREAKER": False, "separated": False},
    "hotfix": {"VENDOR_TIMEOUT_MS": 3000, "RETRIES": 0, "BREAKER": False, "separated": False},
    "after": {"VENDOR_TIMEOUT_MS": 5000, "RETRIES": 0, "BREAKER": True, "separated": False},
    "separated": {"VENDOR_TIMEOUT_MS": 5000, "RETRIES": 0, "BREAKER": False, "separated": True},
}
NODE_ROUTES = (
    Route("verify", "POST", re.compile(r"^/api/verify$"), "POST /api/verify"),
    Route("verify", "POST", re.compile(r"^/api/payments$"), "POST /api/payments"),
    Route("cart", "GET", re.compile(r"^/api/cart$"), "GET /api/cart"),
    Route("product", "GET", re.compile(r"^/api/products/([^/]+)$"), "GET /api/products/{id}"),
)
"""``server.js``'s routes (``/api/payments`` is ``/api/verify`` under another name)."""


@dataclass(frozen=True)
class NodeConfig:
    """``server.js``'s ``loadConfig``, durations in seconds (``node_config`` fills every
    field with the profile's or ``server.js``'s default): the caps' slots
    (``MAX_CONCURRENCY``, ``VERIFY_CONCURRENCY`` with profile ``separated``), the longest
    queue (``MAX_QUEUE``), one vendor call's limit (``VENDOR_TIMEOUT_MS``), the attempts
    after the first and the wait before each (``RETRIES``, ``RETRY_BACKOFF_MS``), and
    opossum's options when ``BREAKER`` is on."""

    profile: str
    max_concurrency: int
    verify_concurrency: int
    separated: bool
    max_queue: int
    vendor_timeout_s: float
    retries: int
    retry_backoff_s: float
    breaker: OpossumConfig | None


def _flags(argv: Sequence[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    i = 0
    while i < len(argv):
        m = re.match(r"^--([a-z][a-z0-9-]*)(?:=(.*))?$", argv[i])
        if m:
            value = m.group(2)
            if value is None and i + 1 < len(argv):
                i += 1
                value = argv[i]
            found[m.group(1).upper().replace("-", "_")] = value or ""
        i += 1
    return found


def node_config(env: Mapping[str, str], argv: Sequence[str]) -> NodeConfig:
    """The settings ``server.js`` would start with, given its environment and arguments."""
    given = {**env, **_flags(argv)}

    def get(name: str, default: Any) -> Any:
        raw = given.get(name)
        return default if raw is None or raw == "" else raw

    def boolean(name: str, default: bool) -> bool:
        raw = get(name, default)
        return (
            raw if isinstance(raw, bool) else str(raw).strip().lower() in ("1", "true", "yes", "on")
        )

    profile_name = str(get("PROFILE", "before")).strip()
    if profile_name not in PROFILES:
        raise ValueError(f"PROFILE must be one of {'|'.join(PROFILES)}, got {profile_name!r}")
    profile = PROFILES[profile_name]
    breaker = None
    if boolean("BREAKER", profile["BREAKER"]):
        breaker = OpossumConfig(
            timeout_s=int(get("CB_TIMEOUT_MS", 5000)) / 1000,
            error_threshold_percentage=float(get("CB_ERROR_THRESHOLD", 50)),
            reset_timeout_s=int(get("CB_RESET_TIMEOUT_MS", 30000)) / 1000,
            volume_threshold=int(get("CB_VOLUME_THRESHOLD", 20)),
            rolling_count_timeout_s=int(get("CB_ROLLING_COUNT_TIMEOUT_MS", 10000)) / 1000,
            rolling_count_buckets=int(get("CB_ROLLING_COUNT_BUCKETS", 10)),
        )
    return NodeConfig(
        profile=profile_name,
        max_concurrency=int(get("MAX_CONCURRENCY", 50)),
        verify_concurrency=int(get("VERIFY_CONCURRENCY", 20)),
        separated=profile["separated"],
        max_queue=int(get("MAX_QUEUE", 10000)),
        vendor_timeout_s=int(get("VENDOR_TIMEOUT_MS", profile["VENDOR_TIMEOUT_MS"])) / 1000,
        retries=int(get("RETRIES", profile["RETRIES"])),
        retry_backoff_s=int(get("RETRY_BACKOFF_MS", 0)) / 1000,
        breaker=breaker,
    )


@dataclass
class Slots:
    """One concurrency cap and its queue (``class Pool`` in ``server.js``)."""

    name: str
    size: int
    max_queue: int
    busy: int = 0
    waiting: deque[list[Any]] = field(default_factory=deque)
    queued: int = 0
    overloaded: int = 0

    def acquire(self, request: Request, granted: Callable[[], None]) -> bool:
        """Take a slot now or queue for one; False when the queue is full."""
        if self.busy < self.size:
            self.busy += 1
            granted()
            return True
        if self.queued >= self.max_queue:
            self.overloaded += 1
            return False
        self.waiting.append([request, granted])
        self.queued += 1
        return True

    def leave(self, request: Request) -> None:
        """A queued request's client hung up: out of the queue (``abandoned``)."""
        for entry in self.waiting:
            if entry[0] is request:
                entry[0] = None
                self.queued -= 1
                return

    def release(self) -> None:
        self.busy -= 1
        while self.waiting:
            request, granted = self.waiting.popleft()
            if request is not None:
                self.queued -= 1
                self.busy += 1
                granted()
                return


class NodeService(Server):
    """The Node gateway: its caps, its queue, the vendor call with retries and opossum."""

    def __init__(self, clock: Clock, config: NodeConfig, gateway: Gateway) -> None:
        super().__init__(clock, gateway)
        self.config = config
        self.shared = Slots("shared", config.max_concurrency, config.max_queue)
        self.verify_slots = (
            Slots("verify", config.verify_concurrency, config.max_queue)
            if config.separated
            else self.shared
        )
        self.breaker = OpossumBreaker(clock, config.breaker) if config.breaker else None
        self.retries = 0
        self.vendor_calls: Counter[str] = Counter()
        self._queued_in: dict[int, Slots] = {}

    @property
    def pools(self) -> list[Slots]:
        return (
            [self.shared] if self.verify_slots is self.shared else [self.shared, self.verify_slots]
        )

    def accept(self, request: Request) -> None:
        self.clock.after(self.service_time(NODE_CPU_S), self._route, request)

    def _client_gives_up(self, request: Request) -> None:
        slots = self._queued_in.pop(id(request), None)
        if slots is not None:
            slots.leave(request)
        super()._client_gives_up(request)

    def _in_slot(
        self, slots: Slots, request: Request, work: Callable[[Callable[[int], None]], None]
    ) -> None:
        """``work`` once ``request`` holds a slot; it calls back with the answer's status."""
        started = [False]

        def granted() -> None:
            started[0] = True
            self._queued_in.pop(id(request), None)

            def answered(status: int) -> None:
                self._client_hears(request, status, "")
                slots.release()

            work(answered)

        if not slots.acquire(request, granted):
            self._client_hears(request, 503, "")  # OVERLOADED
        elif not started[0]:
            self._queued_in[id(request)] = slots

    def _route(self, request: Request) -> None:
        name, _ = route_of(NODE_ROUTES, request.method, request.path)
        if name == "verify":
            self._in_slot(self.verify_slots, request, lambda answer: self._verify(request, answer))
        elif name in ("cart", "product"):
            self._in_slot(self.shared, request, lambda answer: answer(200))
        else:
            self._client_hears(request, int(name), "")

    def _verify(self, request: Request, answer: Callable[[int], None]) -> None:
        config, breaker = self.config, self.breaker
        key = request.key

        def attempt(n: int) -> None:
            if breaker is not None and not breaker.fire():
                answer(503)  # the fallback's VENDOR_OPEN: a value, never retried
                return
            cut = breaker.config.timeout_s if breaker is not None else None
            timeout = config.vendor_timeout_s if cut is None else min(cut, config.vendor_timeout_s)
            self.gateway.call(
                APPROVE_PATH, key, {"Idempotency-Key": key},
                lambda error: result(n, error, cut is not None and cut < config.vendor_timeout_s),
                timeout_s=timeout,
            )  # fmt: skip

        def result(n: int, error: BaseException | None, cut_by_breaker: bool) -> None:
            code = _vendor_code(error)
            self.vendor_calls[_VENDOR_OUTCOME.get(code, "error")] += 1
            if breaker is not None:
                if error is None or code == "EVENDOR4XX":
                    breaker.success()
                else:
                    breaker.failure(timed_out=code == "ETIMEDOUT" and cut_by_breaker)
            if error is None:
                answer(200)
                return
            if code in ("ETIMEDOUT", "EVENDOR5XX", "ECONN") and n < config.retries + 1:
                self.retries += 1
                self.clock.after(config.retry_backoff_s, attempt, n + 1)
                return
            answer({"ETIMEDOUT": 504, "EVENDOR4XX": 422}.get(code, 502))

        attempt(1)


_VENDOR_OUTCOME = {"OK": "success", "ETIMEDOUT": "timeout", "EVENDOR5XX": "server_error",
                   "EVENDOR4XX": "client_error"}  # fmt: skip


_VENDOR_CODES: tuple[tuple[type[Exception], str], ...] = (
    (PgTimeout, "ETIMEDOUT"),
    (PgServerError, "EVENDOR5XX"),
    (PgRejected, "EVENDOR4XX"),
)
"""``VendorError.code`` of each way a vendor call fails (else ``ECONN``)."""


def _vendor_code(error: BaseException | None) -> str:
    if error is None:
        return "OK"
    return next((code for kind, code in _VENDOR_CODES if isinstance(error, kind)), "ECONN")
