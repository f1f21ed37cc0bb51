"""A full disk is said as one, whatever it killed first (issue 32, item 10): the gateway
that cannot open its ledger exits 2 before the build starts, and the run said "pg exited
with code 2" and nothing of the disk. The build's, the run's and the raised error now
say "disk full", on which folder's disk and how much is left, then what died. No process
starts: the build's start is the test's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.core.errors import ProcessDied
from harness.results.io import WriteError
from harness.run.experiment import Experiment
from harness.scenario.loader import load_scenario_text
from tests.run.test_abort_watch import SCENARIO

DIED = (
    "pg exited with code 2; last lines of pg.log:\n"
    "error cannot write the ledger /x/pg-ledger.csv: No space left on device"
)


def test_a_process_a_full_disk_killed_is_said_as_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    experiment = Experiment(load_scenario_text(SCENARIO), tmp_path, builds=["first"])

    def start(*_: Any) -> None:
        raise ProcessDied(DIED)

    monkeypatch.setattr(experiment, "_start_processes", start)
    monkeypatch.setattr("harness.results.io.free_bytes", lambda path: 12 * 1024)
    with pytest.raises(WriteError) as raised:
        experiment.run()
    said = str(raised.value)
    assert raised.value.disk_full
    assert said.startswith(f"disk full: 12 KiB left on the disk of {experiment.run_dir}"), said
    assert "pg exited with code 2" in said  # and what it killed
    manifest = json.loads((experiment.run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["error"] == said
    assert manifest["builds"]["first"]["error"] == said


def test_a_process_that_died_on_a_disk_with_room_is_said_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    experiment = Experiment(load_scenario_text(SCENARIO), tmp_path, builds=["first"])

    def start(*_: Any) -> None:
        raise ProcessDied("pg exited with code 2; last lines of pg.log:\nbad scenario")

    monkeypatch.setattr(experiment, "_start_processes", start)
    with pytest.raises(ProcessDied, match="^pg exited with code 2"):
        experiment.run()
