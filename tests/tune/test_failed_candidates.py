"""A candidate that cannot start: recorded failed (infeasible, with its reason), the sweep
goes on with the next, the result lists it, and ``--resume`` does not retry it (issue 32,
item 3). ``Experiment`` is a fake here: each candidate's run is its figures written as the
report a real run leaves."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.core.errors import RunError
from tests.tune.test_rank import CI, FIGURES, _build

BAD = "fr25-w20"
"""The candidate whose target does not start (in the CI sweep's one batch)."""


class _FakeExperiment:
    """``harness.run.experiment.Experiment`` as the tune calls it: one run folder per batch,
    its candidates run in turn; ``BAD`` fails to start, as a real build's RunError does."""

    started: list[list[str]] = []

    def __init__(
        self, loaded: Any, results_root: Path, listener: Any, repeat: int = 1, **_: Any
    ) -> None:
        self.names = list(loaded.scenario.builds)
        self.run_dir = results_root / loaded.scenario.name / f"run-{len(self.started)}"
        self.manifest = SimpleNamespace(builds={})
        _FakeExperiment.started.append(self.names)

    def run(self) -> Path:
        self.run_dir.mkdir(parents=True)
        (self.run_dir / "manifest.json").write_text("{}")
        builds: dict[str, Any] = {}
        try:
            for name in self.names:
                if name == BAD:
                    why = "build fr25-w20: the target exited with 1 before it was ready"
                    self.manifest.builds[name] = {"build": name, "status": "failed", "error": why}
                    raise RunError(why)
                self.manifest.builds[name] = {"build": name, "status": "completed"}
                builds[name] = _build(*FIGURES.get(name, (0.6, 1.0, 99.0)))
        finally:
            (self.run_dir / "report.json").write_text(json.dumps({"builds": builds}))
        return self.run_dir


@pytest.fixture
def fake_runs(monkeypatch: pytest.MonkeyPatch) -> type[_FakeExperiment]:
    _FakeExperiment.started = []
    monkeypatch.setattr("harness.run.experiment.Experiment", _FakeExperiment)
    return _FakeExperiment


def _tune_folder(results: Path) -> Path:
    (folder,) = results.glob("tune-short/tune-*")
    return folder


def test_a_candidate_that_cannot_start_is_recorded_failed_and_the_sweep_goes_on(
    tmp_path: Path, fake_runs: type[_FakeExperiment]
) -> None:
    results = tmp_path / "results"
    done = CliRunner().invoke(app, ["tune", str(CI), "--results", str(results)])
    assert done.exception is None or isinstance(done.exception, SystemExit), done.output
    assert done.exit_code == 0, done.output  # the others ran: one is recommended
    ran = [n for batch in fake_runs.started for n in batch]
    assert set(ran) == set(FIGURES) | {"fr90-w60"} and ran.count(BAD) == 1
    assert f"{BAD} failed" in done.output and "going on" in done.output
    result = json.loads((_tune_folder(results) / "tune.json").read_text())
    by_name = {c["name"]: c for c in result["candidates"]}
    failed = by_name[BAD]
    assert failed["measured"] == "failed" and not failed["feasible"]
    assert "exited with 1" in failed["error"]
    assert result["failed"] == [{"name": BAD, "error": failed["error"]}]
    assert BAD not in result["missing"] and result["complete"]
    assert result["recommended"] not in (None, BAD)
    md = (_tune_folder(results) / "tune.md").read_text()
    assert f"| {BAD} |" in md and "failed to start" in md


def test_resume_does_not_retry_a_failed_candidate_and_says_how_to(
    tmp_path: Path, fake_runs: type[_FakeExperiment]
) -> None:
    results = tmp_path / "results"
    CliRunner().invoke(app, ["tune", str(CI), "--results", str(results)])
    folder = _tune_folder(results)
    fake_runs.started = []
    again = CliRunner().invoke(app, ["tune", "--resume", str(folder)])
    assert again.exit_code == 0, again.output
    assert fake_runs.started == []  # nothing retried: BAD failed, the rest finished
    assert BAD in again.output and "failed.json" in again.output
