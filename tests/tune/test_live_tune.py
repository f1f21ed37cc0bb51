"""Looking at a live tune leaves it as it was, and one tune folder is run by one process
(issue 32, item 2). ``harness tune --report DIR`` on a tune still running wrote a stale
``report.json`` into its live run, which the tune then read at its end: the candidates
that finished after it showed "not run", ``complete: false``, and the recommendation came
from one candidate of three. Two ``--resume DIR`` at once ran the same candidates twice.
The runs are faked (``tests.tune.fake_runs``); the lock and the live run are real."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.tune.folder import TuneFolder
from harness.tune.plan import load_plan
from tests.tune.fake_runs import FakeExperiment, files, install
from tests.tune.test_rank import CI, FIGURES, _build, _run


def _tune_folder(results: Path) -> Path:
    (folder,) = results.glob("tune-short/tune-*")
    return folder


def test_a_report_of_a_live_tune_writes_nothing_and_the_tune_ends_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakes = install(monkeypatch)
    results = tmp_path / "results"
    seen: dict[str, Any] = {}

    def look(experiment: FakeExperiment, name: str) -> None:
        if seen:
            return
        folder = _tune_folder(results)
        before = files(folder)
        seen["report"] = CliRunner().invoke(app, ["tune", "--report", str(folder)])
        seen["written"] = sorted(set(files(folder).items()) - set(before.items()))

    fakes.during = look
    done = CliRunner().invoke(app, ["tune", str(CI), "--results", str(results)])
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception
    live = seen["report"]
    assert live.exception is None or isinstance(live.exception, SystemExit), live.exception
    assert seen["written"] == [], seen["written"]  # neither the tune's files nor its run's
    said = live.output.replace("\n", " ")
    assert "running" in said and f"pid {os.getpid()}" in said and "nothing written" in said
    assert done.exit_code == 0, done.output
    result = json.loads((_tune_folder(results) / "tune.json").read_text())
    assert result["complete"] and result["missing"] == [], result["missing"]
    assert {c["measured"] for c in result["candidates"]} == {"measured"}
    assert result["recommended"] == "fr25-w20"  # the best of all seven, as test_rank finds


def test_a_second_resume_of_a_tune_being_run_refuses_naming_its_pid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = TuneFolder.create(tmp_path, load_plan(CI), 1)
    _run(folder, "a", {n: _build(*v) for n, v in list(FIGURES.items())[:3]})
    fakes = install(monkeypatch)
    seen: dict[str, Any] = {}

    def again(experiment: FakeExperiment, name: str) -> None:
        if "second" not in seen:
            seen["second"] = None
            seen["second"] = CliRunner().invoke(app, ["tune", "--resume", str(folder.path)])

    fakes.during = again
    first = CliRunner().invoke(app, ["tune", "--resume", str(folder.path)])
    second = seen["second"]
    assert second.exit_code == 2, second.output
    said = second.output.replace("\n", " ")
    assert f"pid {os.getpid()}" in said and str(folder.path) in said, said
    assert len(fakes.started) == 1, fakes.started  # the second ran nothing
    assert first.exit_code == 0, first.output
    result = json.loads((folder.path / "tune.json").read_text())
    assert result["complete"], result["missing"]
    # Once it has ended, the folder is free: a resume finds nothing left to run.
    third = CliRunner().invoke(app, ["tune", "--resume", str(folder.path)])
    assert third.exit_code == 0, third.output
    assert len(fakes.started) == 1
