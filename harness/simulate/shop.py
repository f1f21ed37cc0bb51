"""The shop on the simulated clock: its request threads and accept queue, its DB pool, its
three routes, and the load generator's side of every request.

What holds a request thread is what holds one in ``targets.shop``: a payment checks
out a DB connection for each of its two statements before the gateway call
(``Store.create_payment``) and one after (``finish_payment``), and holds its thread
through every attempt and every Retry wait; a product read is one statement; a
product-detail read calls the gateway's catalogue through the same layers. A request
that finds every thread busy waits in the accept queue (gunicorn's backlog, or
Tomcat's) and is still served when a thread frees, even after its client gave up,
as a server that has accepted the connection does. The client side is the load
generator's: a request still open at its endpoint's timeout is a ``TimeoutError``
row, one due while its endpoint's ``max-in-flight`` are open is dropped, one
refused by a full backlog is a ``ConnectionRefusedError``.

Thread time the shop spends besides waiting (routing, JSON, SQLite) is not in the
seed and is chosen once: ``REQUEST_CPU_S`` per request (a median, spread as
``clock.ServiceTimes`` spreads it, seeded).
"""

from __future__ import annotations

import random
import re
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.gateway.decide import APPROVE_PATH, CATALOGUE_PREFIX, catalogue_key
from harness.simulate.clock import Clock, Pool, ServiceTimes
from harness.simulate.gateway import Gateway
from harness.simulate.layers import Layers
from targets.shop.catalogue import product_key
from targets.shop.config import ShopConfig
from targets.shop.payments import outcome_of
from targets.shop.pg_client import PgRejected
from targets.shop.resilience import FallbackAnswer

REQUEST_CPU_S = 0.005
"""A request's own thread time in the shop (gunicorn, routing, JSON, SQLite): chosen once,
about what the CI seed-000 scenario measured for a product read here (p50 5-7 ms)."""
PAYMENT_STATEMENTS = (2, 1)
"""A payment's DB statements before its gateway call and after it (``targets.shop.db``)."""
_STATUS_CODE = {"APPROVED": 200, "FAILED": 402, "TIMEOUT_UNKNOWN": 503}


@dataclass(frozen=True)
class Route:
    """A route a modelled service answers: what it does (``name``), its method (None: any)
    and its path, as a pattern and as written (``shown``). A request no route's path
    matches is answered 404; one whose path matches a route of another method, 405."""

    name: str
    method: str | None
    pattern: re.Pattern[str]
    shown: str

    def serves(self, method: str, path: str) -> bool:
        """Whether the model answers ``method path`` as this route does."""
        return self.method in (None, method) and self.pattern.match(path) is not None


def route_of(routes: tuple[Route, ...], method: str, path: str) -> tuple[str, re.Match[str] | None]:
    """The name of the route of ``routes`` that answers ``method path``, and its path's
    match; ``("405", None)`` when only routes of other methods have the path, else
    ``("404", None)``."""
    other_method = False
    for route in routes:
        match = route.pattern.match(path)
        if match is not None and route.method in (None, method):
            return route.name, match
        other_method = other_method or match is not None
    return ("405" if other_method else "404"), None


_PAYMENT = Route("payment", "POST", re.compile(r"^/api/payments$"), "POST /api/payments")
_PRODUCT = Route("product", None, re.compile(r"^/api/products/(\d+)$"), "GET /api/products/{id}")
SHOP_ROUTES = (
    _PAYMENT,
    Route(
        "detail", "GET", re.compile(r"^/api/products/(\d{1,18})/detail$"),
        "GET /api/products/{id}/detail",
    ),
    _PRODUCT,
)  # fmt: skip
"""``targets/shop/app.py``'s routes (a product read answers any method, as the shop does)."""
SPRING_SHOP_ROUTES = (
    _PAYMENT,
    Route("product", "GET", _PRODUCT.pattern, _PRODUCT.shown),
)
"""``targets/spring-shop``'s ``ShopController``: no detail route."""


@dataclass
class Request:
    """One planned request, from the load generator's side and the shop's."""

    endpoint: str
    index: int
    intended: float
    path: str
    method: str
    key: str
    timeout_s: float
    end: float | None = None
    status: int = 0
    error: str = ""
    outcome: str = ""
    open: bool = True
    """Its client still waits for the answer."""


class Server:
    """The load generator's side of every request, and what a simulated service shares."""

    def __init__(self, clock: Clock, gateway: Gateway) -> None:
        self.clock = clock
        self.gateway = gateway
        self.rows: list[Request] = []
        self.open_by_endpoint: Counter[str] = Counter()
        self.service_time = ServiceTimes(f"{gateway.seed}:service")

    def arrive(self, request: Request, limit: int | None) -> None:
        """The load generator sends ``request`` now (or drops it at its endpoint's cap)."""
        self.rows.append(request)
        if limit is not None and self.open_by_endpoint[request.endpoint] >= limit:
            request.open, request.error = False, "Dropped"
            return
        self.open_by_endpoint[request.endpoint] += 1
        self.clock.after(request.timeout_s, self._client_gives_up, request)
        self.accept(request)

    def accept(self, request: Request) -> None:
        """The service takes the request (a subclass's)."""
        raise NotImplementedError

    def _client_gives_up(self, request: Request) -> None:
        if request.open:
            self._client_hears(request, 0, "", error="TimeoutError")

    def _client_hears(self, request: Request, status: int, outcome: str, error: str = "") -> None:
        if not request.open:
            return
        request.open = False
        self.open_by_endpoint[request.endpoint] -= 1
        request.end = self.clock.now
        request.status = status
        request.outcome = outcome
        request.error = error or (f"HTTP{status}" if status >= 400 else "")


class Shop(Server):
    """One build's shop: threads, backlog, DB pool and layers, and what they count."""

    def __init__(
        self,
        clock: Clock,
        config: ShopConfig,
        backlog: int,
        gateway: Gateway,
        rng: random.Random,
        routes: tuple[Route, ...] = SHOP_ROUTES,
    ) -> None:
        super().__init__(clock, gateway)
        self.config = config
        self.routes = routes
        self.backlog_limit = backlog
        self.layers = Layers(clock, self.config, rng)
        self.workers = self.config.workers
        self.busy = 0
        self.backlog: deque[Request] = deque()
        pool = self.config.db_pool
        self.db: Pool | None = (
            Pool(clock, pool.maximum_pool_size, pool.connection_timeout_s) if pool else None
        )
        self.query_time_s = pool.query_time_s if pool else 0.0
        self.payments: Counter[str] = Counter()

    def accept(self, request: Request) -> None:
        if self.busy < self.workers:
            self._start(request)
        elif len(self.backlog) < self.backlog_limit:
            self.backlog.append(request)
        else:
            self._client_hears(request, 0, "", error="ConnectionRefusedError")

    # ---------------------------------------------------------------- threads

    def _start(self, request: Request) -> None:
        self.busy += 1
        self.clock.after(self.service_time(REQUEST_CPU_S), self._route, request)

    def _answer(self, request: Request, status: int, outcome: str) -> None:
        """The thread writes the answer and takes the next queued request."""
        self._client_hears(request, status, outcome)
        self.busy -= 1
        if self.backlog:
            self._start(self.backlog.popleft())

    def _route(self, request: Request) -> None:
        name, match = route_of(self.routes, request.method, request.path)
        if name == "payment":
            self._statements(request, PAYMENT_STATEMENTS[0], lambda: self._pay(request))
        elif name == "detail" and match is not None:
            self._detail(request, int(match.group(1)))
        elif name == "product":
            self._statements(request, 1, lambda: self._answer(request, 200, ""))
        else:
            self._answer(request, int(name), "")

    def _statements(self, request: Request, n: int, then: Callable[[], None]) -> None:
        """``n`` DB statements one after another, each its own checkout of a connection."""
        db = self.db
        if n == 0 or db is None:
            then()
            return

        def granted() -> None:
            def finished() -> None:
                db.release()
                self._statements(request, n - 1, then)

            self.clock.after(self.query_time_s, finished)

        db.acquire(granted, lambda: self._answer(request, 503, "db_pool_timeout"))

    # ---------------------------------------------------------------- routes

    def _pay(self, request: Request) -> None:
        key = request.key

        def send(done: Callable[[BaseException | None], None]) -> None:
            self.gateway.call(APPROVE_PATH, key, {"Idempotency-Key": key}, done)

        def paid(answer: Any, error: BaseException | None) -> None:
            status, reason = "APPROVED", None
            code: int | None = None
            if isinstance(answer, FallbackAnswer):
                reason = outcome_of(answer.error)
                status = {"cached": "APPROVED", "value": "FAILED"}.get(
                    answer.kind, "TIMEOUT_UNKNOWN"
                )
                code = 503 if answer.kind == "error" else 200
            elif isinstance(error, PgRejected):
                status, reason = "FAILED", f"pg_{error.status}"
            elif error is not None:
                status, reason = "TIMEOUT_UNKNOWN", outcome_of(error)
            self.payments[status] += 1
            answer_code = code if code is not None else _STATUS_CODE[status]
            outcome = reason or status
            self._statements(
                request,
                PAYMENT_STATEMENTS[1],
                lambda: self._answer(request, answer_code, outcome),
            )

        self.layers.run(send, key, paid)

    def _detail(self, request: Request, product: int) -> None:
        fate_key = catalogue_key(product, request.key)
        path = f"{CATALOGUE_PREFIX}{product}"
        headers = {"X-Request-Id": request.key} if request.key else {}

        def send(done: Callable[[BaseException | None], None]) -> None:
            self.gateway.call(path, fate_key, headers, done)

        def read(answer: Any, error: BaseException | None) -> None:
            if isinstance(answer, FallbackAnswer):
                reason = outcome_of(answer.error)
                if answer.kind == "cached":
                    self._answer(request, 200, "cached")
                else:
                    self._answer(request, 200 if answer.kind == "value" else 503, reason)
            elif isinstance(error, PgRejected):
                self._answer(request, 404 if error.status == 404 else 502, f"pg_{error.status}")
            elif error is not None:
                self._answer(request, 503, outcome_of(error))
            else:
                self._answer(request, 200, "fresh")

        self.layers.run(send, product_key(product), read)
