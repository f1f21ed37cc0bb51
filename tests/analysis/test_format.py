"""One number format for every table: the report, the HTML page, compare and gate verdicts."""

from __future__ import annotations

from harness.analysis.format import cell, change, figure, number, seconds_tick


def test_figures_read_in_their_unit() -> None:
    assert [figure(v, "s") for v in (0.0044, 0.999, 3.456, None)] == [
        "4 ms",
        "999 ms",
        "3.46 s",
        "-",
    ]
    assert figure(41.25, "%") == "41.2%" and figure(100.0, "%") == "100.0%"
    assert (figure(20.0), figure(19.7), figure(0)) == ("20", "19.70", "0")


def test_cells_of_partial_reports_never_raise() -> None:
    assert (cell(None), cell(True), cell("n/a"), cell(3, "s")) == ("-", "True", "n/a", "3.00 s")


def test_changes_numbers_and_ticks() -> None:
    assert (change(-64.8), change(0.0), change(None)) == ("-64.8%", "+0.0%", "-")
    assert (number(0.004412), number(1.8234, 6), number(None)) == ("0.004412", "1.8234", "-")
    assert (seconds_tick(0), seconds_tick(0.2), seconds_tick(1.5)) == ("0", "200 ms", "1.5 s")
