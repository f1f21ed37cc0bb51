"""Seed claims and the index page of a real run whose breakers flap.

The run (``tests.report.flaprun``): one shop, and two behind nginx, against a
gateway that hangs; three of its gates carry ``seed:``, one false on purpose.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.analysis.model import Report
from tests.analysis.test_model import _conforms
from tests.report.flaprun import flap_run, needs_nginx
from tests.report.test_index import _index

pytestmark = pytest.mark.integration


@needs_nginx
def test_a_real_run_reports_its_claims_beside_the_gates() -> None:
    run_dir = flap_run()
    data: dict[str, Any] = json.loads((run_dir / "report.json").read_text())
    assert _conforms(data, Report, "report") == []
    claims = data["seed_claims"]
    assert [(c["gate"], c["seed"], c["verdict"]) for c in claims] == [
        ("the breaker flaps in the outage", "flapped", "pass"),
        ("each replica flaps on its own", "each instance has its own state", "pass"),
        ("never opens (false on purpose)", "0 | none", "fail"),
    ]
    one = data["builds"]["one"]
    assert claims[0]["figures"] == {
        "one.breaker.opens[outage]": one["phases"]["outage"]["breaker"]["opens"]
    }
    replicas = data["builds"]["scaled"]["replicas"]
    least = min(r["phases"]["outage"]["breaker"]["opens"] for r in replicas.values())
    assert claims[1]["measured"] == least
    assert claims[2]["measured"] == data["builds"]["scaled"]["breaker"]["opens"] > 0
    md = (run_dir / "report.md").read_text()
    assert "## Seed claims" in md and "2/3 hold." in md
    assert "## Per replica" in md and "| scaled | 1 |" in md
    assert "breaker opens" in md  # the timeline table's column
    html = (run_dir / "report.html").read_text()
    assert '<section id="seed-claims">' in html and "0 | none" in html


@needs_nginx
def test_a_real_run_on_the_index(tmp_path: Path) -> None:
    run_dir = flap_run()
    out = tmp_path / "index.html"
    code, output = _index(str(run_dir), "--out", str(out), "--check")
    assert code == 1, output  # its false gate
    assert "3/4 gates pass" in output and "2/3 hold" in output
    page = out.read_text()
    assert "A breaker that flaps through an outage" in page
    assert "each instance has its own state" in page
    assert "scaled.replicas.min.breaker.opens[outage] = " in page
