"""A tune's runs without processes, as the real ones leave them: ``harness.run.experiment.
Experiment`` faked by ``FakeExperiment``, which makes a locked run folder (``RunFolder``),
says ``running`` in its manifest with this process as its orchestrator while it runs, and
records each candidate's status build by build, but writes no ``report.json`` (a real run
leaves that to whoever reports it); and ``make_report`` faked by ``fake_make_report``,
which reads the manifest as the real one reads the run (a finished build has the figures
of ``tests.tune.test_rank.FIGURES``) and writes ``report.json`` through the results
writer, unless told not to. ``during`` is called after each candidate finishes (a reader
looking at the live tune); ``fail`` maps a candidate to the error its start raises."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from harness.analysis.model import Report
from harness.results.io import RunFolder, write_json_atomic
from harness.results.manifest import read_manifest
from harness.run.manifest import process_identity
from tests.tune.test_rank import FIGURES, _build


class FakeExperiment:
    started: list[list[str]] = []
    during: Callable[[FakeExperiment, str], None] | None = None
    fail: dict[str, BaseException] = {}

    def __init__(
        self, loaded: Any, results_root: Path, listener: Any, repeat: int = 1, **_: Any
    ) -> None:
        self.names = list(loaded.scenario.builds)
        self.folder = RunFolder.create(results_root, loaded.scenario.name)
        self.run_dir = self.folder.path
        self.manifest = _Manifest()
        self.record: dict[str, Any] = {
            "run_id": self.run_dir.name,
            "status": "running",
            "orchestrator": process_identity(),
            "builds": self.manifest.builds,
        }
        self._save()
        FakeExperiment.started.append(self.names)

    def _save(self) -> None:
        write_json_atomic(self.run_dir / "manifest.json", self.record)

    def run(self) -> Path:
        try:
            for name in self.names:
                self.manifest.builds[name] = {"build": name, "status": "running"}
                self._save()
                failure = self.fail.get(name)
                if failure is not None:
                    self.manifest.builds[name] = {
                        "build": name,
                        "status": "failed",
                        "error": str(failure),
                    }
                    self.record.update({"status": "failed", "error": str(failure)})
                    raise failure
                self.manifest.builds[name] = {"build": name, "status": "completed"}
                self._save()
                if FakeExperiment.during is not None:
                    FakeExperiment.during(self, name)
            self.record["status"] = "completed"
        finally:
            try:
                self._save()
            finally:
                self.folder.close()
        return self.run_dir


class _Manifest:
    def __init__(self) -> None:
        self.builds: dict[str, dict[str, Any]] = {}


def fake_make_report(run_dir: str | Path, charts: bool = True, write: bool = True) -> Report:
    path = Path(run_dir)
    manifest = read_manifest(path / "manifest.json")
    builds = {
        name: {**_build(*FIGURES.get(name, (0.6, 1.0, 99.0))), "status": info["status"]}
        for name, info in manifest["builds"].items()
    }
    report = cast(Report, {"builds": builds})
    if write:
        write_json_atomic(path / "report.json", report)
    return report


def install(monkeypatch: pytest.MonkeyPatch) -> type[FakeExperiment]:
    FakeExperiment.started = []
    FakeExperiment.during = None
    FakeExperiment.fail = {}
    monkeypatch.setattr("harness.run.experiment.Experiment", FakeExperiment)
    monkeypatch.setattr("harness.tune.folder.make_report", fake_make_report)
    return FakeExperiment


def files(folder: Path) -> dict[str, int]:
    """Every file under ``folder`` and when it was last written."""
    return {
        str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()
    }
