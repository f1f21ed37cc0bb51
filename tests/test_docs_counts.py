"""docs/testing.md's test counts are the suite's: its table says how many tests each half
runs (``~1,600``), and a reader sizing a change by them must not be misled by a figure
written rounds ago (it said ~1,050 unit tests when there were 1,619).

An integration test although it starts no server: it collects the whole suite in a
child pytest (half a minute of CPU), cheap in a clock-bound lane, dear in the unit half.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration

TESTING = ROOT / "docs" / "testing.md"
SLACK = 0.10
"""How far a ``~N`` may be from the count collected: a round figure, kept within 10 %."""


def _said(row: str) -> int:
    """The ``~N`` in the table row of ``make <row>``."""
    for line in TESTING.read_text().splitlines():
        if line.startswith(f"| `make {row}`"):
            (count,) = re.findall(r"~(\d[\d,]*)", line)
            return int(count.replace(",", ""))
    raise AssertionError(f"docs/testing.md has no row for make {row}")


def _collected(marker: str) -> int:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", "-m", marker],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (count,) = re.findall(r"^(\d+)(?:/\d+)? tests? collected", done.stdout, re.MULTILINE)
    return int(count)


@pytest.mark.parametrize(
    ("row", "marker"),
    [("check", "not integration"), ("test", "integration")],
    ids=["unit", "integration"],
)
def test_the_counts_docs_testing_gives_are_the_suite_s(row: str, marker: str) -> None:
    said, collected = _said(row), _collected(marker)
    assert abs(said - collected) <= SLACK * collected, (
        f"docs/testing.md says ~{said:,} tests for make {row}; {collected:,} are collected"
    )
