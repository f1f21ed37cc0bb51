"""The gateway's ledger: one CSV row per approve call it received, for the report to reconcile.

The hot path only appends a tuple; a background task formats and writes the
rows every ``LEDGER_FLUSH_S`` and flushes (no fsync), and shutdown writes the
rest, so a killed gateway loses at most that much.
"""

from __future__ import annotations

import asyncio
import csv
import sys
from pathlib import Path
from typing import IO

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
)
LEDGER_FLUSH_S = 0.5
"""The ledger reaches the file at least this often, so a killed gateway loses at most this much."""

LedgerRow = tuple[float, str, int, str, str, int, str, float, bool]
"""Values in ``LEDGER_COLUMNS`` order."""


class Ledger:
    """Every approve call the gateway received, as CSV with a header (``LEDGER_COLUMNS``).

    Without a path, rows are not kept at all.
    """

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self._rows: list[LedgerRow] = []
        self._file: IO[str] | None = None
        self._failed = False
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("w", newline="", encoding="utf-8")
            self._writer = csv.writer(self._file, lineterminator="\n")
            self._writer.writerow(LEDGER_COLUMNS)
            self._file.flush()

    def add(self, row: LedgerRow) -> None:
        if self._file is not None:
            self._rows.append(row)

    def flush(self) -> None:
        """Write the buffered rows and hand them to the OS."""
        if self._file is None or not self._rows:
            return
        rows, self._rows = self._rows, []
        try:
            self._writer.writerows(
                (
                    f"{arrival:.6f}",
                    key,
                    attempt,
                    phase,
                    fault,
                    status,
                    decision,
                    f"{duration:.6f}",
                    "true" if gone else "false",
                )
                for arrival, key, attempt, phase, fault, status, decision, duration, gone in rows
            )
            self._file.flush()
        except OSError as exc:  # a full disk must not take the gateway down mid-experiment
            if not self._failed:
                print(f"pg: cannot write the ledger {self.path}: {exc}", file=sys.stderr)
            self._failed = True

    async def keep_flushing(self) -> None:
        while True:
            await asyncio.sleep(LEDGER_FLUSH_S)
            self.flush()

    def close(self) -> None:
        self.flush()
        if self._file is not None:
            self._file.close()
            self._file = None
