"""``sample_row`` writes the very line ``csv.writer`` would, quoting included."""

from __future__ import annotations

import csv
import io

import pytest

from harness.load.recorder import sample_row


@pytest.mark.parametrize(
    ("name", "end", "status", "error", "outcome"),
    [
        ("payments", 12.5, 200, "", ""),
        ("products", None, 0, "Unfinished", ""),
        ("p", 1.0, 503, "HTTP503", "not_permitted"),
        ("p", 1.0, 503, "HTTP503", 'a, "quoted" outcome'),
        ("p", 1.0, 200, "", "two\r\nlines"),
        ("odd,name", 1.0, 200, "", "x"),
    ],
)
def test_a_row_is_the_line_csv_writer_would_write(
    name: str, end: float | None, status: int, error: str, outcome: str
) -> None:
    out = io.StringIO()
    fields = ("" if end is None else f"{end:.6f}", status, error, outcome)
    csv.writer(out).writerow((name, 7, "1.000001", "1.250000", *fields, 1, 7, "refused"))
    line = sample_row(name, 7, 1.0000013, 1.25, end, status, error, outcome, kind="refused")
    assert line == out.getvalue()
    read = next(csv.reader(io.StringIO(line)))
    assert read == [name, "7", "1.000001", "1.250000", *map(str, fields), "1", "7", "refused"]


def test_a_retry_row_names_its_attempt_and_its_request() -> None:
    line = sample_row("pay", 1007, 2.0, 2.1, 2.5, 200, "", "", attempt=2, request=7)
    assert next(csv.reader(io.StringIO(line)))[-3:] == ["2", "7", ""]
