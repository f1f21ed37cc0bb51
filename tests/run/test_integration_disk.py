"""Integration: a disk that fills mid-run, and results folders that cannot take a run at all.

A real full disk (a small tmpfs, filled while the load runs): the run stops
within seconds, not at the end of its schedule, exits 3 with the manifest
saying "disk full", leaves no temporary file and no process. A folder that
cannot be written fails before any process starts (exit 3, or 2 for a name
the scenario should not have), never with a traceback.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.run.processes import ProcessGroup
from tests.conftest import ROOT, harness_cmd, leftover_processes, short_scenario
from tests.run.test_integration_crash import wait_for_samples
from tests.tmpfs import fill, tmpfs

pytestmark = pytest.mark.integration


def _manifest(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "manifest.json").read_text())


def test_a_disk_that_fills_mid_run_stops_it_early_and_says_why(tmp_path: Path) -> None:
    scenario = short_scenario(tmp_path, "60s", "50s")
    with tmpfs(tmp_path / "disk", "32m") as disk:
        results = disk / "results"
        proc = subprocess.Popen(
            harness_cmd("run", str(scenario), "--results", str(results), "-b", "before"),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            run_dir = wait_for_samples(results, "before", rows=20)
            fill(disk)
            filled_at = time.monotonic()
            out, err = proc.communicate(timeout=60)
            stopped_after_s = time.monotonic() - filled_at
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        manifest = _manifest(run_dir)
        assert proc.returncode == 3, out + err
        assert stopped_after_s < 15, f"ran on for {stopped_after_s:.0f} s with a full disk"
        assert "Traceback" not in err
        assert "disk full" in err and "no report" in err
        assert manifest["status"] == "failed" and manifest["error"].startswith("disk full")
        assert manifest["builds"]["before"]["status"] == "failed"
        assert not [p for p in disk.rglob("*") if p.name.endswith(".tmp")]
        assert leftover_processes(manifest["run_id"]) == []

        # Space freed: what the build recorded is kept and the run reads back.
        (disk / "ballast").unlink()
        clean = subprocess.run(
            harness_cmd("clean", "--results", str(results)),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert clean.returncode == 0, clean.stdout + clean.stderr
        assert _manifest(run_dir)["status"] == "failed"
        assert len(pd.read_parquet(run_dir / "before" / "samples.parquet")) >= 20


def _run(results: Path, scenario: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``harness run`` in-process, failing the test if it ever starts a process."""

    def no_process(*args: object, **kwargs: object) -> None:
        raise AssertionError("a process was started")

    monkeypatch.setattr(ProcessGroup, "start", no_process)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        return CliRunner().invoke(app, ["run", str(scenario), "--results", str(results)])
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize(
    ("make_root", "reason"),
    [
        (lambda p: (p / "file").write_text("x") and p / "file", "it is not a folder"),
        (lambda p: (p / "file").write_text("x") and p / "file" / "r", "Not a directory"),
        (lambda p: p / ("r" * 300), "File name too long"),
    ],
    ids=["a-regular-file", "a-missing-parent-under-a-file", "a-name-too-long"],
)
def test_results_that_cannot_be_written_fail_before_any_process_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_root: Any, reason: str
) -> None:
    scenario = short_scenario(tmp_path)
    result = _run(make_root(tmp_path), scenario, monkeypatch)
    assert result.exit_code == 3, result.output
    assert isinstance(result.exception, SystemExit)  # no traceback
    assert "cannot write results under" in result.stderr and reason in result.stderr


def test_a_read_only_results_folder_fails_before_any_process_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = short_scenario(tmp_path)
    with tmpfs(tmp_path / "ro", "1m", read_only=True) as ro:
        result = _run(ro, scenario, monkeypatch)
    assert result.exit_code == 3, result.output
    assert isinstance(result.exception, SystemExit)
    assert f"cannot write results under {ro}" in result.stderr
    assert "Read-only file system" in result.stderr


def test_a_results_disk_without_room_for_the_run_fails_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = short_scenario(tmp_path)
    with tmpfs(tmp_path / "small", "1m") as small:
        result = _run(small, scenario, monkeypatch)
    assert result.exit_code == 3, result.output
    assert "free, and this run needs about" in result.stderr


def test_a_scenario_name_too_long_for_a_folder_is_refused_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = short_scenario(tmp_path)
    scenario.write_text(scenario.read_text().replace("name: short", "name: " + "n" * 300))
    result = _run(tmp_path / "results", scenario, monkeypatch)
    # Exit 2 where the scenario's own check bounds names; 3 where only the disk does.
    assert result.exit_code in (2, 3), result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
