"""The typed report model describes report.json as it is written, old runs included."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pytest

from harness.analysis.combine import combine_repetitions
from harness.analysis.model import SCHEMA, BuildFigures, Report, read_report
from harness.core.conforms import conforms

V1 = Path(__file__).parents[1] / "data" / "run-quickstart-v1" / "report.json"
"""report.json of a quickstart run made before the report model was typed (re-rendered since)."""


def _conforms(value: Any, hint: Any, where: str) -> list[str]:
    """Where ``value`` departs from the type ``hint``, keys the model lacks included."""
    return conforms(value, hint, where)


def test_a_report_written_before_the_model_conforms_to_it() -> None:
    report = read_report(V1)
    assert report == json.loads(V1.read_text())
    assert report["schema"] == SCHEMA
    assert _conforms(report, Report, "report") == []
    assert report["builds"]["after"]["ledger"] is not None  # every optional part was exercised


def test_a_report_from_before_pg_source_still_conforms() -> None:
    report: dict[str, Any] = json.loads(V1.read_text())
    for build in report["builds"].values():
        assert build["pg"].pop("source") == "ledger"
    assert _conforms(report, Report, "report") == []
    report["builds"]["after"]["pg"]["source"] = "scrapes"
    assert _conforms(report, Report, "report") == [
        "report.builds.after.pg.source: expected one of ('ledger', 'metrics'), got 'scrapes'"
    ]


def test_repetitions_conform_too() -> None:
    build = read_report(V1)["builds"]["after"]
    figures: dict[str, Any] = {k: v for k, v in build.items() if k not in ("profile", "status")}
    combined = combine_repetitions([typing.cast(BuildFigures, figures)] * 2)
    assert combined["repetitions"] == 2 and combined["ci95"]
    assert _conforms(combined, BuildFigures, "build") == []


def test_the_checker_sees_a_renamed_key() -> None:
    report: dict[str, Any] = json.loads(V1.read_text())
    breaker = report["builds"]["after"]["breaker"]
    breaker["open_share_fault"] = breaker.pop("open_pct_fault")
    assert _conforms(report, Report, "report") == [
        "report.builds.after.breaker.open_pct_fault: missing",
        "report.builds.after.breaker.open_share_fault: not in the model",
    ]


@pytest.mark.parametrize("key", ["builds", "comparison", "phases"])
def test_read_report_keeps_the_order_of_the_file(key: str) -> None:
    assert list(read_report(V1)[key]) == list(json.loads(V1.read_text())[key])  # type: ignore[literal-required]
