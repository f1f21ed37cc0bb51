"""The typed report model describes report.json as it is written, old runs included."""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any

import pytest

from harness.analysis.combine import combine_repetitions
from harness.analysis.model import SCHEMA, BuildFigures, Report, read_report

V1 = Path(__file__).parents[1] / "data" / "run-quickstart-v1" / "report.json"
"""report.json of a quickstart run made before the report model was typed (re-rendered since)."""


def _conforms(value: Any, hint: Any, where: str) -> list[str]:
    """Where ``value`` departs from the type ``hint`` (TypedDicts checked key by key)."""
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {value!r}"]
        hints = typing.get_type_hints(hint)
        problems = [f"{where}.{k}: missing" for k in hint.__required_keys__ if k not in value]
        problems += [f"{where}.{k}: not in the model" for k in value if k not in hints]
        for key, item in value.items():
            if key in hints:
                problems += _conforms(item, hints[key], f"{where}.{key}")
        return problems
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.NotRequired:
        return _conforms(value, args[0], where)
    if origin is typing.Literal:
        return [] if value in args else [f"{where}: expected one of {args}, got {value!r}"]
    if origin in (typing.Union, types.UnionType):
        options = [_conforms(value, a, where) for a in args]
        return [] if any(not o for o in options) else min(options, key=len)
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {value!r}"]
        return [p for k, v in value.items() for p in _conforms(v, args[1], f"{where}.{k}")]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: expected a list, got {value!r}"]
        return [p for i, v in enumerate(value) for p in _conforms(v, args[0], f"{where}[{i}]")]
    if hint is type(None):
        return [] if value is None else [f"{where}: expected null, got {value!r}"]
    if hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return [] if ok else [f"{where}: expected a number, got {value!r}"]
    if hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{where}: expected an integer, got {value!r}"]
    return [] if isinstance(value, hint) else [f"{where}: expected {hint}, got {value!r}"]


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
