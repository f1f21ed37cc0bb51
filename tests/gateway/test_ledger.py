"""The gateway's ledger never stops quietly: bad keys are escaped and counted, failures are loud."""

from __future__ import annotations

import asyncio
import csv
import io
from pathlib import Path

import pytest

from harness.gateway.ledger import LEDGER_COLUMNS, Ledger, LedgerError, LedgerRow, escape_text

# What aiohttp hands over for the header bytes b"\xff\xfe" (decoded with surrogateescape).
RAW_KEY = b"pay-\xff\xfe".decode("utf-8", "surrogateescape")


def row(key: str) -> LedgerRow:
    return (1.7e9, key, 1, "only", "healthy", 200, "approved", 0.001, False, "/v1/payments/approve")


def test_escape_text_keeps_text_and_shows_raw_bytes() -> None:
    assert escape_text("pay-1") == "pay-1"
    assert escape_text("Zahlung-ü-€") == "Zahlung-ü-€"
    assert escape_text(RAW_KEY) == "pay-\\xff\\xfe"
    assert escape_text("lone-\ud800") == "lone-\\ud800"  # a surrogate that is no byte


def test_a_key_that_is_not_utf8_is_written_escaped_counted_and_said_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    counted: list[int] = []
    ledger = Ledger(tmp_path / "l.csv", on_escaped=lambda: counted.append(1))
    ledger.add(row("before"))
    ledger.add(row(RAW_KEY))
    ledger.flush()
    ledger.add(row(RAW_KEY + "2"))
    ledger.add(row("after"))
    ledger.close()
    with (tmp_path / "l.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == list(LEDGER_COLUMNS)
    assert [r[1] for r in rows[1:]] == ["before", "pay-\\xff\\xfe", "pay-\\xff\\xfe2", "after"]
    assert ledger.escaped == 2 and len(counted) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not valid UTF-8" in err and "pay-\\xff\\xfe" in err


class _BrokenFile(io.StringIO):
    """A ledger file on a disk that just filled up."""

    def write(self, text: str) -> int:
        raise OSError(28, "No space left on device")


def _on_a_full_disk(path: Path) -> Ledger:
    ledger = Ledger(path)
    assert ledger._file is not None
    ledger._file.close()
    ledger._file = _BrokenFile()
    ledger._writer = csv.writer(ledger._file, lineterminator="\n")
    return ledger


def test_a_write_that_fails_raises_instead_of_being_swallowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = _on_a_full_disk(tmp_path / "l.csv")
    ledger.add(row("a"))
    ledger.add(row("b"))
    with pytest.raises(LedgerError, match="No space left on device.*2 row\\(s\\) not written"):
        ledger.flush()
    ledger.add(row("c"))  # no longer kept: the gateway is stopping
    with pytest.raises(LedgerError):
        ledger.flush()
    ledger.close()  # the error was raised once (the gateway says it); closing does not again
    assert capsys.readouterr().err == ""


def test_the_writer_task_ends_with_the_error_instead_of_dying_quietly(tmp_path: Path) -> None:
    ledger = _on_a_full_disk(tmp_path / "l.csv")
    ledger.add(row("a"))

    async def body() -> None:
        with pytest.raises(LedgerError):
            await asyncio.wait_for(ledger.keep_flushing(), 5)

    asyncio.run(body())
    ledger.close()
