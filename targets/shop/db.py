"""SQLite storage: products to read, payments to record. One connection per request thread."""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid

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

    def __init__(self, path: str, products: int) -> None:
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

    def product(self, product_id: int) -> dict[str, object] | None:
        row = self.conn.execute(
            "SELECT id, name, price, stock FROM products WHERE id = ?", (product_id,)
        ).fetchone()
        return dict(row) if row else None

    def create_payment(self, key: str, amount: int) -> str:
        """Insert a PENDING payment, or return the existing one's id for a repeated key."""
        now = time.time()
        payment_id = uuid.uuid4().hex
        with self.conn as c:
            row = c.execute("SELECT id FROM payments WHERE idempotency_key = ?", (key,)).fetchone()
            if row:
                return str(row[0])
            c.execute(
                "INSERT INTO payments VALUES (?, ?, ?, 'PENDING', NULL, ?, ?)",
                (payment_id, key, amount, now, now),
            )
        return payment_id

    def finish_payment(self, payment_id: str, status: str, reason: str | None) -> None:
        with self.conn as c:
            c.execute(
                "UPDATE payments SET status = ?, reason = ?, updated_at = ? WHERE id = ?",
                (status, reason, time.time(), payment_id),
            )

    def payments_by_status(self) -> dict[str, int]:
        rows = self.conn.execute("SELECT status, COUNT(*) FROM payments GROUP BY status")
        return {str(r[0]): int(r[1]) for r in rows}
