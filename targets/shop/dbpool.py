"""A bounded pool of database connections, as HikariCP gives a Spring service.

Seed 000's shop runs product reads and payments on "the same Tomcat thread pool
and DB connection pool" (같은 Tomcat 스레드풀과 DB 커넥션풀). With a pool, a
request thread that needs the database waits for a free connection; every
statement checks one out and gives it back (autocommit, no transaction held
across statements), so a payment's two statements before its gateway call and
one after meet the queue three times. That queue is what makes product reads
slow when a breaker opens and the payments held behind the full thread pool all
reach the database at once.

Waiters are served first come, first served: a returned connection is handed to
the longest waiting thread, never to one that arrives later (Python's
``Semaphore`` and ``Queue`` let a newcomer take it, and a woken waiter goes to the
back). A thread that waits longer than ``connection_timeout_s`` gets
:class:`PoolTimeoutError` (Hikari's ``SQLTransientConnectionException``).

``query_time_s`` is how long one statement holds its connection, the database's
own time (SQLite here answers in microseconds, a networked database does not):
the statement runs, then the thread sleeps out the rest of it while holding the
connection. The counters are read by the exporter under Micrometer's HikariCP
names (``hikaricp_connections_active``, ``..._pending``, ...).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from targets.shop.resilience._checks import require_int_at_least, require_seconds

POOL_NAME = "HikariPool-1"
"""The ``pool`` label of the series: Hikari's default name for a service's first pool."""


class PoolTimeoutError(Exception):
    """No connection became free within the pool's ``connection-timeout``."""


@dataclass(frozen=True)
class DbPoolConfig:
    """``db-pool:`` of a build (Spring's ``spring.datasource.hikari.*`` names)."""

    maximum_pool_size: int = 10
    """Connections in the pool (Hikari's default: 10)."""
    connection_timeout_s: float = 30.0
    """How long a thread waits for a connection before it fails (Hikari's default: 30 s)."""
    query_time_s: float = 0.0
    """How long one statement holds its connection."""

    def __post_init__(self) -> None:
        require_int_at_least("db-pool: maximum_pool_size", self.maximum_pool_size, 1)
        require_seconds("db-pool: connection_timeout_s", self.connection_timeout_s, positive=True)
        require_seconds("db-pool: query_time_s", self.query_time_s)


@dataclass(frozen=True)
class PoolStats:
    """A consistent copy of the pool's gauges and counters."""

    active: int
    idle: int
    pending: int
    max: int
    timeouts: int
    acquired: int
    acquire_seconds: float
    """Total time threads waited for a connection (the ``acquire`` summary's sum)."""
    usage_seconds: float
    """Total time connections were held (the ``usage`` summary's sum)."""
    released: int


class _Waiter:
    __slots__ = ("event", "granted")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.granted = False


class ConnectionPool:
    """``maximum_pool_size`` permits handed out in arrival order."""

    def __init__(self, config: DbPoolConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._free = config.maximum_pool_size
        self._waiters: deque[_Waiter] = deque()
        self._timeouts = 0
        self._acquired = 0
        self._acquire_s = 0.0
        self._released = 0
        self._usage_s = 0.0

    def _acquire(self) -> None:
        started = time.monotonic()
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                self._acquired += 1
                return
            waiter = _Waiter()
            self._waiters.append(waiter)
        waiter.event.wait(self.config.connection_timeout_s)
        with self._lock:
            if not waiter.granted:  # timed out, and no release granted it meanwhile
                self._waiters.remove(waiter)
                self._timeouts += 1
                raise PoolTimeoutError(
                    f"{POOL_NAME} - Connection is not available, request timed out after "
                    f"{self.config.connection_timeout_s * 1000:.0f}ms"
                )
            self._acquired += 1
            self._acquire_s += time.monotonic() - started

    def _release(self, held_s: float) -> None:
        with self._lock:
            self._released += 1
            self._usage_s += held_s
            if self._waiters:
                waiter = self._waiters.popleft()  # the connection passes to it directly
                waiter.granted = True
                waiter.event.set()
            else:
                self._free += 1

    @contextmanager
    def connection(self) -> Iterator[None]:
        """Hold one connection for one statement: at least ``query_time_s``, in all."""
        self._acquire()
        started = time.monotonic()
        try:
            yield
            rest = self.config.query_time_s - (time.monotonic() - started)
            if rest > 0:
                time.sleep(rest)
        finally:
            self._release(time.monotonic() - started)

    def stats(self) -> PoolStats:
        with self._lock:
            size = self.config.maximum_pool_size
            return PoolStats(
                active=size - self._free,
                idle=self._free,
                pending=len(self._waiters),
                max=size,
                timeouts=self._timeouts,
                acquired=self._acquired,
                acquire_seconds=self._acquire_s,
                usage_seconds=self._usage_s,
                released=self._released,
            )
