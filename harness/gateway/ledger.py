"""The gateway's ledger: one CSV row per call it received (approve calls and product reads,
told apart by ``path``), for the report to reconcile.

The hot path only appends a tuple; a background task formats and writes the
rows every ``LEDGER_FLUSH_S`` and flushes (no fsync), and shutdown writes the
rest, so a killed gateway loses at most that much.

The ledger is the source of truth for reconciliation, so it never stops
quietly. A key that is not valid UTF-8 (raw bytes a client sent) is written
escaped (``\\xff``), counted and reported once; a write that fails (a full
disk, an I/O error) raises ``LedgerError``: the gateway stops, says why on
stderr and exits 3.
"""

from __future__ import annotations

import asyncio
import csv
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, cast

from harness.core.errors import RunError

LEDGER_COLUMNS = (
    "arrival",
    "key",
    "attempt",
    "phase",
    "fault",
    "status",
    "decision",
    "duration_s",
    "client_gone",
    "path",
)
ROUTE_COLUMNS = ("method", "route")
"""Written after ``path`` by a named dependency (``dependencies.<name>``): the request's method
and the route it matched (``unmatched`` when none did; the gateway ``pg`` has two fixed routes
told apart by ``path``)."""
CAPACITY_COLUMNS = ("queue_s", "service_s", "abandoned", "rejected")
"""Written after ``path`` by a gateway with ``pg.capacity`` (and only then: a ledger without
them reads as no queue, ``harness.results.io.ledger_from_csv``)."""
LEDGER_FLUSH_S = 0.1
"""The ledger reaches the file at least this often, so a killed gateway loses at most this much.
Short, so that each write is short: it runs on the event loop, and at 1,000 calls/s a
0.5 s batch held every call arriving meanwhile for a few ms (the gateway's p99)."""

LedgerRow = tuple[object, ...]
"""Values in ``LEDGER_COLUMNS`` order, then ``ROUTE_COLUMNS``'s (written only by a named
dependency), then ``CAPACITY_COLUMNS``'s under a capacity. ``path`` came last, so a ledger
written before it had one reads the same up to there (``harness.results.io.ledger_from_csv``)."""


class LedgerError(RunError):
    """The ledger cannot be written: the gateway must stop rather than lose rows quietly."""


def escape_text(text: str) -> str:
    """``text`` if it is valid UTF-8 text, else the same with its raw bytes as ``\\xNN``.

    HTTP headers are decoded with ``surrogateescape``, so a byte that is not
    UTF-8 arrives as a lone surrogate, which no UTF-8 file can hold.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:
            raw = text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # a surrogate that stands for no byte
            return text.encode("utf-8", "backslashreplace").decode("utf-8")
        return raw.decode("utf-8", "backslashreplace")
    return text


class Ledger:
    """Every call the gateway received, as CSV with a header (``LEDGER_COLUMNS``).

    Without a path, rows are not kept at all. ``on_escaped`` is called for
    each row whose key had to be escaped. An existing file is refused
    (``FileExistsError``) unless ``overwrite``: not appended to, because a
    ledger is one gateway run's calls, reconciled against that run's samples,
    and a second run's rows (and header) in it would be counted as the first's.
    A device or FIFO (``/dev/stdout``) has no rows to lose and is written into.
    """

    def __init__(
        self,
        path: str | Path | None,
        on_escaped: Callable[[], None] | None = None,
        *,
        overwrite: bool = False,
        capacity: bool = False,
        routes: bool = False,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.routes = routes
        self.escaped = 0
        """Rows written with their key escaped (not valid UTF-8)."""
        self._on_escaped = on_escaped
        self._rows: list[LedgerRow] = []
        self._file: IO[str] | None = None
        self._broken: LedgerError | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            into = overwrite or (self.path.exists() and not self.path.is_file())
            self._file = self.path.open("w" if into else "x", newline="", encoding="utf-8")
            self._writer = csv.writer(self._file, lineterminator="\n")
            self._writer.writerow(
                LEDGER_COLUMNS
                + (ROUTE_COLUMNS if routes else ())
                + (CAPACITY_COLUMNS if capacity else ())
            )
            self._file.flush()

    def add(self, row: LedgerRow) -> None:
        if self._file is not None and self._broken is None:
            self._rows.append(row)

    def _key(self, key: str) -> str:
        if key.isascii():
            return key
        safe = escape_text(key)
        if safe != key:
            self.escaped += 1
            if self.escaped == 1:
                print(
                    f"pg: a call's Idempotency-Key is not valid UTF-8: the ledger {self.path} "
                    f"holds it escaped ({safe}); such rows are counted in "
                    "pg_ledger_escaped_rows_total",
                    file=sys.stderr,
                    flush=True,
                )
            if self._on_escaped is not None:
                self._on_escaped()
        return safe

    def flush(self) -> None:
        """Write the buffered rows and hand them to the OS; ``LedgerError`` if that fails."""
        if self._broken is not None:
            raise self._broken
        if self._file is None or not self._rows:
            return
        rows, self._rows = self._rows, []
        try:
            self._writer.writerows(self._fields(row) for row in rows)
            self._file.flush()
        except Exception as exc:  # whatever it is, the rows are lost: never carry on quietly
            self._broken = LedgerError(
                f"cannot write the ledger {self.path}: {exc}; the gateway stops "
                f"({len(rows)} row(s) not written)"
            )
            raise self._broken from exc

    def _fields(self, row: LedgerRow) -> tuple[object, ...]:
        arrival, key, attempt, phase, fault, status, decision, duration, gone, path = cast(
            tuple[float, str, int, str, str, int, str, float, bool, str], row[:10]
        )
        fields: tuple[object, ...] = (
            f"{arrival:.6f}",
            self._key(key),
            attempt,
            phase,
            fault,
            status,
            decision,
            f"{duration:.6f}",
            "true" if gone else "false",
            escape_text(path),
        )
        rest = row[10:]
        if self.routes:
            fields += (rest[0], escape_text(cast(str, rest[1])))
            rest = rest[2:]
        if rest:
            queue_s, service_s, abandoned, rejected = cast(tuple[float, float, bool, bool], rest)
            fields += (
                f"{queue_s:.6f}",
                f"{service_s:.6f}",
                "true" if abandoned else "false",
                "true" if rejected else "false",
            )
        return fields

    async def keep_flushing(self) -> None:
        """Write the rows every ``LEDGER_FLUSH_S``; ends (raising) only if the ledger breaks."""
        while True:
            await asyncio.sleep(LEDGER_FLUSH_S)
            self.flush()

    def close(self) -> None:
        """Write the rest and close the file (``LedgerError`` if the rest cannot be written)."""
        try:
            if self._broken is None:
                self.flush()
        finally:
            if self._file is not None:
                file, self._file = self._file, None
                try:
                    file.close()
                except OSError as exc:
                    if self._broken is None:
                        self._broken = LedgerError(f"cannot write the ledger {self.path}: {exc}")
                        raise self._broken from exc
