"""Running a scenario through the real ``harness run`` in a test, and reading what it left.

Shared by the tests that run whole scenarios (the seeds, seed 003's vendor latency).
"""

from __future__ import annotations

import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from harness.gates.evaluate import evaluate
from harness.scenario.gates import parse_gate
from harness.scenario.loader import load_scenario
from tests.conftest import ROOT, harness_cmd, leftover_processes


def run_harness(args: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``harness ARGS`` from the repository root, its output captured, never raising."""
    return subprocess.run(
        harness_cmd(*args), cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


def run_with_passing_gates(
    scenario: Path, tmp_path: Path, min_gates: int, timeout: float = 300
) -> tuple[Path, dict[str, Any]]:
    """``harness run SCENARIO`` into ``tmp_path``: it must exit 0 with at least ``min_gates``
    gates, every one passing. The run folder and its ``report.json``."""
    results, junit = tmp_path / "results", tmp_path / "gates.xml"
    done = run_harness(
        ["run", str(scenario), "--results", str(results), "--junit", str(junit)], timeout
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    run_dir = only_run(results)
    verdicts = junit_verdicts(junit)
    assert len(verdicts) >= min_gates and set(verdicts.values()) == {"pass"}, verdicts
    return run_dir, json.loads((run_dir / "report.json").read_text())


def only_run(results: Path) -> Path:
    """The one run folder under ``results`` (``<scenario>/<run id>``)."""
    runs = [p for p in results.glob("*/*") if (p / "manifest.json").is_file()]
    assert len(runs) == 1, runs
    return runs[0]


def junit_verdicts(junit: Path) -> dict[str, str]:
    """Gate name -> pass / failure / error, from the run's JUnit XML."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error")]
        out[case.get("name", "")] = kinds[0] if kinds else "pass"
    return out


def assert_nothing_left(run_dir: Path) -> None:
    """No process of the run outlived it."""
    run_id = json.loads((run_dir / "manifest.json").read_text())["run_id"]
    assert leftover_processes(run_id) == []


def assert_mutants_fail(
    scenario: Path,
    report: dict[str, Any],
    verdicts: dict[str, str],
    build: str = "after",
    instead: str = "before",
) -> None:
    """Each named gate passes on the run; read again with ``instead`` in place of ``build``
    (the same build without its mechanism) it gets the verdict given: ``fail``, or ``error``
    for a figure the other build does not measure. So the gates are known to be able to fail."""
    gates = {g.name: g.expr for g in load_scenario(scenario).scenario.gate_specs()}
    for name, expected in verdicts.items():
        expr = gates[name]
        assert evaluate(parse_gate(expr), report).verdict == "pass", name
        mutant = re.sub(rf"\b{re.escape(build)}\.", f"{instead}.", expr)
        assert mutant != expr and f"{build}." not in mutant
        result = evaluate(parse_gate(mutant), report)
        assert result.verdict == expected, (name, result)


def assert_gates_fail(run_dir: Path, gates: list[str], junit: Path) -> None:
    """``harness gate RUN_DIR -g GATE ...`` (the scenario's own gates left out): each gate must
    fail on a measured figure (a JUnit ``failure``, not an ``error``), so exit 1."""
    args = [arg for gate in gates for arg in ("-g", gate)]
    gated = run_harness(["gate", str(run_dir), "--no-scenario-gates", "--junit", str(junit), *args])
    assert gated.returncode == 1, gated.stdout[-4000:]
    failed = junit_verdicts(junit)
    assert len(failed) == len(gates) and set(failed.values()) == {"failure"}, failed
