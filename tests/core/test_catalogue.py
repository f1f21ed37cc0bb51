"""The catalogue of figures: the docs' tables, the gate vocabulary and the report agree with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.analysis.model import read_report
from harness.analysis.presets import PRESETS
from harness.core.canonical import STATISTICS_BY_NAME
from harness.core.catalogue import (
    DEPENDENCY,
    ENDPOINT,
    FIGURES,
    GATED,
    SERIES,
    Figure,
    gated,
    unit_of,
)
from harness.core.figure_docs import gate_table, sync_docs
from harness.gates.evaluate import evaluate
from harness.scenario.gates import REPLICA_FIGURES, is_uncut, parse_gate

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs" / "scenario.md"
V1 = read_report(ROOT / "tests" / "data" / "run-quickstart-v1" / "report.json")


def test_the_docs_tables_are_the_catalogues() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert sync_docs(text) == text, (
        "docs/scenario.md's figure tables differ from harness/core/catalogue.py; "
        "rewrite them with: python -m harness.core.figure_docs docs/scenario.md"
    )
    assert "| `busy_workers.max` `.mean` `.p50` | busy request threads | fault window |" in (
        gate_table()
    )


def test_every_figure_is_read_from_a_known_source_and_named_once() -> None:
    sources = {s.name for s in SERIES} | {"samples", "gateway", "scrapes", "dependency"}
    assert {f.source for f in FIGURES} <= sources
    gates = [f.gate for f in FIGURES if f.gate is not None]
    assert len(gates) == len(set(gates)) == len(GATED)
    assert tuple(g for g, f in GATED.items() if f.replica_key) == REPLICA_FIGURES
    assert is_uncut("max_workers") and is_uncut("products.time_to_recover")
    assert not is_uncut("products.p95") and not is_uncut("busy_workers.max")


def test_every_figure_names_a_declared_statistic() -> None:
    for figure in FIGURES:
        assert figure.statistic is STATISTICS_BY_NAME[figure.stat], figure.key
    with pytest.raises(ValueError, match="'median' is not one of STATISTICS"):
        Figure("series.busy_workers.median", "busy_workers", "median", "fault")


def test_an_endpoint_name_wins_over_a_figure_name() -> None:
    assert gated("products.p95", {"products"}) == (GATED[f"{ENDPOINT}.p95"], "products")
    assert gated("products.p95") is None  # not an endpoint of this run
    assert gated("busy_workers.max", {"products"}) == (GATED["busy_workers.max"], None)
    assert unit_of("after.products.p95[outage]") == "s"
    assert unit_of("before.busy_workers.max") == ""  # threads, though latency has a .max
    assert unit_of("after.breaker.open_pct") == "%"


def test_every_gate_figure_of_an_old_report_is_read_where_the_catalogue_says() -> None:
    build = V1["builds"]["after"]
    direct = {
        "products.p95": build["endpoints"]["products"]["latency_s"]["p95"],
        "products.error_pct": 100.0 - (build["endpoints"]["products"]["success_pct"] or 0.0),
        "busy_workers.max": build["workers"]["busy_max_fault"],
        "max_workers": build["workers"]["max_workers"],
        "blocked.per_s": build["breaker"]["blocked_per_s_fault"],
        "pg.retries": build["pg"]["retries"],
        "time_to_open": build["timeline"]["time_to_open_s"],
    }
    for name, value in direct.items():
        result = evaluate(parse_gate(f"after.{name} >= -1"), V1)
        assert result.figures == ((f"after.{name}", value),), name
    phased = evaluate(parse_gate("after.blocked.total[outage] >= 0"), V1)
    assert phased.left == build["phases"]["outage"]["breaker"]["blocked"]
    for name, figure in GATED.items():
        if ENDPOINT in name or figure.key.startswith("series."):
            continue
        if DEPENDENCY in name:  # an old report has no named dependency: the absence is said
            result = evaluate(parse_gate(f"after.{name.replace(DEPENDENCY, 'db')} >= 0"), V1)
            assert "no such dependency" in result.detail, (name, result.detail)
            continue
        result = evaluate(parse_gate(f"after.{name} >= -1000000000"), V1)
        assert "no such figure" not in result.detail, (name, result.detail)


def test_the_report_docs_list_the_canonical_series_and_every_presets_selectors() -> None:
    text = (ROOT / "docs" / "report.md").read_text(encoding="utf-8")
    assert sync_docs(text) == text, "python -m harness.core.figure_docs docs/report.md"
    for preset in PRESETS.values():
        for name, source in preset.selectors.items():
            choices = getattr(source, "choices", (source,))  # a Fallback: each of them
            names = [s.series for c in choices for s in getattr(c, "plus", (c,))]
            assert all(f"`{n}" in text for n in names), (preset.name, name, names)
