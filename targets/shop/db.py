"""SQLite storage: products to read, payments to record. One connection per request thread.

With a ``db-pool`` (``targets.shop.dbpool``) every statement first checks out one
of the pool's connections and holds it for the pool's query time, as a Spring
service's repository calls do under HikariCP: a product read is one statement,
a payment two before its gateway call (is the key known? record it PENDING)
and one after (its outcome).
"""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from contextlib import AbstractContextManager, nullcontext

from targets.shop.dbpool import ConnectionPool

_SCHEMA = """
CREATE TABLE IF NOT EXISTS products (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL, price INTEGER NOT NULL, stock INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS payments (
    id TEXT PRIMARY KEY, idempotency_key TEXT UNIQUE NOT NULL, amount INTEGER NOT NULL,
    status TEXT NOT NULL, reason TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL
);
"""


class Store:
    """Thread-local SQLite connections over one database file (WAL, so reads never wait)."""

    def __init__(self, path: str, products: int, pool: ConnectionPool | None = None) -> None:
        self.pool = pool
        # A shared-cache in-memory database lets every thread see the same data.
        self.uri = (
            f"file:shop-{uuid.uuid4().hex}?mode=memory&cache=shared"
            if path == ":memory:"
            else f"file:{path}"
        )
        self._local = threading.local()
        self._keeper = self._connect()  # keeps an in-memory database alive
        with self._keeper:
            self._keeper.executescript(_SCHEMA)
            if path != ":memory:":
                self._keeper.execute("PRAGMA journal_mode=WAL")
            count = self._keeper.execute("SELECT COUNT(*) FROM products").fetchone()[0]
            if count == 0:
                self._keeper.executemany(
                    "INSERT INTO products VALUES (?, ?, ?, ?)",
                    ((i, f"product-{i}", 1000 + i % 97 * 100, 100) for i in range(1, products + 1)),
                )

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.uri, uri=True, timeout=10.0, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        return conn

    @property
    def conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        return conn

    def _statement(self) -> AbstractContextManager[None]:
        """One statement's hold on a pooled connection (nothing without a pool)."""
        return self.pool.connection() if self.pool is not None else nullcontext()

    def product(self, product_id: int) -> dict[str, object] | None:
        with self._statement():
            row = self.conn.execute(
                "SELECT id, name, price, stock FROM products WHERE id = ?", (product_id,)
            ).fetchone()
        return dict(row) if row else None

    def create_payment(self, key: str, amount: int) -> str:
        """Insert a PENDING payment, or return the existing one's id for a repeated key.

        Two statements, as a repository's ``findByIdempotencyKey`` then ``save``; the
        key's UNIQUE constraint settles two requests that race between them."""
        existing = self._payment_id(key)
        if existing is not None:
            return existing
        now = time.time()
        payment_id = uuid.uuid4().hex
        try:
            with self._statement(), self.conn as c:
                c.execute(
                    "INSERT INTO payments VALUES (?, ?, ?, 'PENDING', NULL, ?, ?)",
                    (payment_id, key, amount, now, now),
                )
        except sqlite3.IntegrityError:
            raced = self._payment_id(key)
            if raced is None:
                raise
            return raced
        return payment_id

    def _payment_id(self, key: str) -> str | None:
        with self._statement():
            row = self.conn.execute(
                "SELECT id FROM payments WHERE idempotency_key = ?", (key,)
            ).fetchone()
        return str(row[0]) if row else None

    def finish_payment(self, payment_id: str, status: str, reason: str | None) -> None:
        with self._statement(), self.conn as c:
            c.execute(
                "UPDATE payments SET status = ?, reason = ?, updated_at = ? WHERE id = ?",
                (status, reason, time.time(), payment_id),
            )

    def payments_by_status(self) -> dict[str, int]:
        with self._statement():
            rows = self.conn.execute(
                "SELECT status, COUNT(*) FROM payments GROUP BY status"
            ).fetchall()
        return {str(r[0]): int(r[1]) for r in rows}
