"""Figures as text: the one place that decides how a number reads in a table.

Shared by the report (Markdown, terminal, HTML), compare, the gates' JUnit
and the charts' axes. It sits in ``analysis``, below ``gates`` and
``report``, so every layer that shows a figure can use it. A missing figure
(None) always reads ``-``.
"""

from __future__ import annotations

from typing import Literal

Unit = Literal["", "s", "%"]
MISSING = "-"


def figure(value: float | None, unit: Unit = "") -> str:
    """A report figure: seconds as ``850 ms`` / ``7.21 s``, percentages with one decimal,
    counts without decimals and other numbers with two."""
    if value is None:
        return MISSING
    if unit == "s":
        return f"{value * 1000:.0f} ms" if abs(value) < 1 else f"{value:.2f} s"
    if unit == "%":
        return f"{value:.1f}%"
    if float(value).is_integer():
        return f"{value:.0f}"
    return f"{value:.2f}"


def count(value: float | None) -> str:
    """A count (requests, errors) as a whole number, also when it is the mean of repetitions."""
    return MISSING if value is None else f"{value:.0f}"


def interval(text: str, low: str, high: str) -> str:
    """A figure with its 95% interval: ``3.46 s [3.40 s, 3.52 s]`` (``--repeat N``)."""
    return f"{text} [{low}, {high}]"


def cell(value: object, unit: Unit = "") -> str:
    """Like ``figure``, for values read from a report that may be partial or malformed."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return MISSING if value is None else str(value)
    return figure(float(value), unit)


def count_cell(value: object) -> str:
    """Like ``count``, for values read from a report that may be partial or malformed."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return MISSING if value is None else str(value)
    return count(float(value))


def change(pct: float | None) -> str:
    """A % change with its sign: ``-64.8%``, ``+0.0%``."""
    return MISSING if pct is None else f"{pct:+.1f}%"


def number(value: float | None, digits: int = 4) -> str:
    """A raw figure to ``digits`` significant digits (compare tables, gate verdicts)."""
    return MISSING if value is None else f"{value:.{digits}g}"


def seconds_tick(value: float, _pos: object = None) -> str:
    """A latency axis label: ``0``, ``200 ms``, ``1.5 s`` (three significant digits)."""
    if value <= 0:
        return "0"
    return f"{value * 1000:.3g} ms" if value < 1 else f"{value:.3g} s"
