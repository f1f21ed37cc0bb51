"""The shop's DB connection pool: bounded, first come first served, timed out like Hikari.

Real threads contend for the pool; no clock is faked. Order is checked by
making each thread wait (``pending`` says so) before the next one starts.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from targets.shop.config import ShopConfig
from targets.shop.db import Store
from targets.shop.dbpool import ConnectionPool, DbPoolConfig, PoolTimeoutError


def _wait_for(check: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.005)


def _hold(pool: ConnectionPool) -> tuple[threading.Thread, threading.Event]:
    """A thread that takes one of ``pool``'s connections and keeps it until the event is
    set; returned once it holds the connection."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with pool.connection():
            held.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    return holder, release


def test_never_more_connections_out_than_the_pool_has() -> None:
    pool = ConnectionPool(DbPoolConfig(maximum_pool_size=3, query_time_s=0.01))
    inside = 0
    most = 0
    lock = threading.Lock()

    def statement() -> None:
        nonlocal inside, most
        for _ in range(5):
            with pool.connection():
                with lock:
                    inside += 1
                    most = max(most, inside)
                time.sleep(0.01)  # the whole query time: counted inside while held
                with lock:
                    inside -= 1

    threads = [threading.Thread(target=statement) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = pool.stats()
    assert most == 3  # 12 threads wanted it: the pool was full and held at its size
    assert stats.acquired == stats.released == 60
    assert (stats.active, stats.idle, stats.pending) == (0, 3, 0)
    assert stats.usage_seconds >= 60 * 0.01  # each statement held its query time


def test_a_returned_connection_goes_to_the_longest_waiting_thread() -> None:
    pool = ConnectionPool(DbPoolConfig(maximum_pool_size=1, query_time_s=0.0))
    order: list[int] = []

    def statement(n: int) -> None:
        with pool.connection():
            order.append(n)

    first, release = _hold(pool)
    threads = []
    for n in range(6):
        t = threading.Thread(target=statement, args=(n,))
        t.start()
        threads.append(t)
        _wait_for(lambda n=n: pool.stats().pending == n + 1)  # type: ignore[misc]
    release.set()
    for t in [first, *threads]:
        t.join()
    assert order == list(range(6))


def test_a_thread_that_waits_past_connection_timeout_fails_and_leaves_the_queue() -> None:
    pool = ConnectionPool(DbPoolConfig(maximum_pool_size=1, connection_timeout_s=0.2))
    holder, release = _hold(pool)
    with pytest.raises(PoolTimeoutError, match="request timed out after 200ms"), pool.connection():
        pass
    stats = pool.stats()
    assert (stats.timeouts, stats.pending, stats.active) == (1, 0, 1)
    release.set()
    holder.join()
    with pool.connection():  # the pool still has its one connection
        assert pool.stats().active == 1
    assert pool.stats().active == 0


@pytest.mark.parametrize(
    "settings",
    [{"maximum_pool_size": 0}, {"connection_timeout_s": 0.0}, {"query_time_s": -0.1}],
)
def test_impossible_settings_are_refused(settings: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="db-pool"):
        DbPoolConfig(**settings)  # type: ignore[arg-type]


def test_statements_per_request_check_out_one_connection_each() -> None:
    pool = ConnectionPool(DbPoolConfig(maximum_pool_size=2))
    store = Store(":memory:", products=5, pool=pool)
    assert store.product(3) is not None
    assert pool.stats().acquired == 1  # a product read: one statement
    payment = store.create_payment("key-1", 1000)
    assert pool.stats().acquired == 3  # is the key known? record it PENDING
    store.finish_payment(payment, "APPROVED", None)
    assert pool.stats().acquired == 4  # its outcome
    assert store.create_payment("key-1", 1000) == payment  # a repeated key: found, not added
    assert pool.stats().acquired == 5
    assert store.payments_by_status() == {"APPROVED": 1}


def test_racing_requests_with_one_key_make_one_payment(tmp_path: Path) -> None:
    # A database file, as the harness gives the shop (WAL; concurrent writers wait).
    pool = ConnectionPool(DbPoolConfig(maximum_pool_size=4))
    store = Store(str(tmp_path / "shop.sqlite"), products=1, pool=pool)
    ids: list[str] = []
    start = threading.Barrier(8)

    def pay() -> None:
        start.wait(5)
        ids.append(store.create_payment("same-key", 500))

    threads = [threading.Thread(target=pay) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 1 and len(ids) == 8
    assert store.payments_by_status() == {"PENDING": 1}


def test_the_shop_reads_db_pool_from_the_harness_settings() -> None:
    config = ShopConfig.from_dict(
        {
            "pg-url": "http://127.0.0.1:1",
            "profile": "retry-only",
            "db-pool": {"maximum-pool-size": 8, "connection-timeout": 2.5, "query-time": 0.06},
        }
    )
    assert config.db_pool == DbPoolConfig(8, 2.5, 0.06)
    assert ShopConfig.from_dict({"pg-url": "x", "db-pool": None}).db_pool is None
    with pytest.raises(ValueError, match="unknown setting 'size'"):
        ShopConfig.from_dict({"pg-url": "x", "db-pool": {"size": 8}})
