"""A gate naming a build the run did not run (``--build``) is skipped, listed, and passes the
run (issue 18, friction 6); a build the scenario lacks is still refused (exit 2)."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, cast

import pytest
from typer.testing import CliRunner

from harness.analysis.model import Report
from harness.cli import app
from harness.gates.evaluate import evaluate
from harness.report.index import run_entry
from harness.scenario.gates import parse_gate
from tests.conftest import ROOT

V1 = ROOT / "tests" / "data" / "run-quickstart-v1"
NAMES_BEFORE = ["product reads protected during the outage", "retry-only saturates its pool"]


@pytest.fixture(scope="module")
def after_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The quickstart run as ``harness run --build after`` leaves it: no ``before`` build."""
    run = tmp_path_factory.mktemp("runs") / "run-quickstart-v1"
    shutil.copytree(V1, run, ignore=shutil.ignore_patterns("before", "charts", "report.*"))
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["builds"]["before"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    rendered = CliRunner().invoke(app, ["report", str(run)])
    assert rendered.exit_code == 0, rendered.output
    return run


def test_the_gates_command_skips_them_and_passes(after_only: Path, tmp_path: Path) -> None:
    junit = tmp_path / "gates.xml"
    done = CliRunner().invoke(app, ["gate", str(after_only), "--junit", str(junit)])
    assert done.exit_code == 0, done.output
    assert "3/3 pass, 2 skipped" in done.output
    assert done.output.count("skip (build 'before' was not run") == 2, done.output
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("skipped") == "2" and suite.get("errors") == "0"
    skipped = {
        case.get("name"): mark.get("message")
        for case in suite.findall("testcase")
        if (mark := case.find("skipped")) is not None
    }
    assert sorted(skipped) == NAMES_BEFORE
    assert all("'before' was not run" in (m or "") for m in skipped.values())


def test_report_json_and_md_list_them(after_only: Path) -> None:
    report = json.loads((after_only / "report.json").read_text())
    assert [g["gate"] for g in report["skipped_gates"]] == NAMES_BEFORE
    assert all("build 'before' was not run" in g["reason"] for g in report["skipped_gates"])
    text = (after_only / "report.md").read_text()
    assert "## Gates skipped" in text and "retry-only saturates its pool" in text


def test_a_full_run_lists_none() -> None:
    report = json.loads((V1 / "report.json").read_text())
    assert "skipped_gates" not in report


def _report(status: str) -> Report:
    stats: dict[str, Any] = {"latency_s": {"p95": 1.0}}
    return cast(
        Report,
        {"status": status, "builds": {"after": {"endpoints": {"products": stats}}}},
    )


def test_only_a_completed_run_skips_a_build_without_results() -> None:
    gate = parse_gate("after.products.p95 <= before.products.p95")
    skipped = evaluate(gate, _report("completed"))
    assert skipped.verdict == "skip" and not skipped.failed and not skipped.passed
    # A failed run may have lost the build that broke: that stays an error (a failure).
    broken = evaluate(gate, _report("failed"))
    assert broken.verdict == "error" and broken.failed
    baseline = evaluate(
        parse_gate("after.products.p95 <= baseline.before.products.p95"), _report("completed")
    )
    assert baseline.verdict == "error"  # a baseline figure reads the baseline run, not this one


def test_a_build_the_scenario_lacks_is_refused(after_only: Path) -> None:
    done = CliRunner().invoke(app, ["gate", str(after_only), "--gate", "nope.products.p95 < 1"])
    assert done.exit_code == 2 and "unknown build 'nope'" in done.output


def test_the_index_page_counts_them_apart(after_only: Path) -> None:
    entry = run_entry(after_only)
    assert entry.ok and entry.verdict() == "3/3 gates pass, 2 skipped"
