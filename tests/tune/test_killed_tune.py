"""A killed tune is seen as such (issue 32, item 9): ``kill -9`` of a ``harness tune
--resume`` in the middle of a candidate leaves its ``tune.lock`` free and still saying
``running`` and its live run ``running``. ``harness tune --report`` says it was
interrupted (not running), and ``harness clean`` does for it what it does for a killed
run: the run is closed (``crashed``) and the tune marked ``crashed``, with how to resume;
it said "nothing to clean". The tune runs in a child process, its runs faked
(``tests.tune.fake_runs``); the kill, the locks and the clean are real."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.tune.folder import TuneFolder
from harness.tune.plan import load_plan
from tests.conftest import ROOT
from tests.tune.fake_runs import install
from tests.tune.test_rank import CI, FIGURES, _build, _run

CHILD = """
import sys, time
import harness.run.experiment, harness.tune.folder
from tests.tune.fake_runs import FakeExperiment, fake_make_report

def stall(experiment, name):
    print(experiment.run_dir, flush=True)
    time.sleep(120)

FakeExperiment.during = stall
harness.run.experiment.Experiment = FakeExperiment
harness.tune.folder.make_report = fake_make_report
from harness.cli import app
app(["tune", "--resume", sys.argv[1]])
"""


def test_a_killed_tune_is_said_interrupted_and_closed_by_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = tmp_path / "results"
    folder = TuneFolder.create(results, load_plan(CI), 1)
    _run(folder, "a", {n: _build(*v) for n, v in FIGURES.items()})  # fr90-w60 is left
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(folder.path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = ""
        while child.poll() is None and not line.startswith(str(folder.path)):
            line = child.stdout.readline().strip()
        assert child.poll() is None, child.stderr.read() if child.stderr else ""
        run_dir = Path(line)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.communicate()
    install(monkeypatch)
    runner = CliRunner()

    reported = runner.invoke(app, ["tune", "--report", str(folder.path)])
    said = reported.output.replace("\n", " ")
    assert "interrupted" in said and f"pid {child.pid}" in said, said
    assert "is running" not in said
    assert reported.exit_code == 0, said

    cleaned = runner.invoke(app, ["clean", "--results", str(results)])
    said = cleaned.output.replace("\n", " ")
    assert cleaned.exit_code == 0, said
    assert "nothing to clean" not in said
    assert f"{run_dir}: crashed" in said, said
    assert f"{folder.path}: crashed" in said and f"--resume {folder.path}" in said, said
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "crashed"
    assert json.loads((folder.path / "tune.lock").read_text())["status"] == "crashed"

    again = runner.invoke(app, ["tune", "--report", str(folder.path)])
    assert "interrupted" in again.output and "closed by harness clean" in again.output
    # Closed once: a second clean has nothing left to do.
    assert "nothing to clean" in runner.invoke(app, ["clean", "--results", str(results)]).output
