"""Closing runs a dead orchestrator left "running": found, told apart from live ones, finished."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.core.errors import RunError
from harness.results.io import RESERVE_NAME, RunFolder, write_json_atomic
from harness.run.cleanup import clean_results
from harness.run.manifest import process_identity
from harness.run.processes import leftover_processes
from tests.conftest import short_scenario

SAMPLES = "endpoint,index,intended_start,actual_start,end,status,error,outcome\n" + "".join(
    f"products,{i},{100 + i}.0,{100 + i}.001,{100 + i}.2,200,,\n" for i in range(30)
)
LEDGER = "arrival,key,attempt,phase,fault,status,decision,duration_s,client_gone\n" + "".join(
    f"{100 + i}.0,k{i},1,outage,timeout,504,timeout,0.8,false\n" for i in range(7)
)


def dead_identity() -> dict[str, Any]:
    """The identity of a process that has exited (recorded while it ran)."""
    proc = subprocess.Popen(["sleep", "30"])
    identity = process_identity(proc.pid)
    proc.kill()
    proc.wait()
    return identity


def crashed_run(
    root: Path, orchestrator: dict[str, Any] | None, status: str = "running", **extra: Any
) -> Path:
    """A run folder as a killed orchestrator leaves it: manifest running, live CSVs, debris."""
    # A run id of its own: `clean` stops every process on the machine carrying it, and
    # tests run side by side (pytest-xdist, or another checkout).
    run_dir = root / "short" / f"20260101T000000Z-{os.urandom(3).hex()}"
    bdir = run_dir / "before"
    bdir.mkdir(parents=True)
    (bdir / "samples.csv").write_text(SAMPLES + "products,30,130.0,13")  # cut mid-row
    (bdir / "pg-ledger.csv").write_text(LEDGER)
    (bdir / ".progress.json.tmp").write_text("{")
    (run_dir / RESERVE_NAME).write_bytes(b"\0" * 1024)
    short_scenario(run_dir).rename(run_dir / "scenario.yaml")
    manifest = {
        "run_id": run_dir.name,
        "status": status,
        "ended_at": None,
        "error": None,
        "host": {"hostname": socket.gethostname()},
        "builds": {"before": {"build": "before", "status": status}},
        **extra,
    }
    if orchestrator is not None:
        manifest["orchestrator"] = orchestrator
    write_json_atomic(run_dir / "manifest.json", manifest)
    os.utime(bdir / "samples.csv", (1_800_000_000, 1_800_000_000))
    return run_dir


def _manifest(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "manifest.json").read_text())


def test_a_run_whose_orchestrator_died_is_closed_as_crashed_with_its_samples(
    tmp_path: Path,
) -> None:
    dead = dead_identity()
    run_dir = crashed_run(tmp_path, dead)
    os.utime(run_dir / "manifest.json", (1_700_000_000, 1_700_000_000))
    os.utime(run_dir / RESERVE_NAME, (1_700_000_000, 1_700_000_000))
    os.utime(run_dir / "scenario.yaml", (1_700_000_000, 1_700_000_000))
    for name in ("pg-ledger.csv", ".progress.json.tmp"):
        os.utime(run_dir / "before" / name, (1_700_000_000, 1_700_000_000))

    report = clean_results(tmp_path)

    assert [c.run_dir for c in report.closed] == [run_dir] and not report.failed
    assert report.closed[0].status == "crashed"
    manifest = _manifest(run_dir)
    assert manifest["status"] == "crashed"
    assert manifest["ended_at"] == "2027-01-15T08:00:00Z"  # its last write: samples.csv
    assert f"pid {dead['pid']}" in manifest["error"]
    build = manifest["builds"]["before"]
    assert build["status"] == "crashed" and build["samples"] == 30 and build["pg_calls"] == 7
    assert len(pd.read_parquet(run_dir / "before" / "samples.parquet")) == 30
    assert len(pd.read_parquet(run_dir / "before" / "pg.parquet")) == 7
    assert (run_dir / "before" / "payments.parquet").exists()  # the target's collect ran
    assert not (run_dir / RESERVE_NAME).exists()
    assert not list(run_dir.rglob("*.tmp"))
    assert clean_results(tmp_path).closed == []  # once is enough


def _recycled(identity: dict[str, Any]) -> dict[str, Any]:
    """Our own pid, as if an earlier process had had it: same pid, another start time."""
    return {**identity, "start_ticks": identity["start_ticks"] - 1}


def _rebooted(identity: dict[str, Any]) -> dict[str, Any]:
    return {**identity, "boot_id": "another-boot"}


@pytest.mark.parametrize(
    "orchestrator",
    [lambda: dead_identity(), lambda: _recycled(process_identity())]
    + [lambda: _rebooted(process_identity())],
    ids=["exited", "pid-recycled", "rebooted"],
)
def test_a_gone_orchestrator_is_told_from_a_live_one(
    tmp_path: Path, orchestrator: Callable[[], dict[str, Any]]
) -> None:
    run_dir = crashed_run(tmp_path, orchestrator())
    assert [c.run_dir for c in clean_results(tmp_path).closed] == [run_dir]
    assert _manifest(run_dir)["status"] == "crashed"


@pytest.mark.parametrize(
    ("orchestrator", "host", "why"),
    [
        (process_identity, None, "still running"),
        (dead_identity, "elsewhere", "running on another host (elsewhere)"),
        (lambda: None, None, "does not name its orchestrator"),
    ],
    ids=["alive", "other-host", "older-harness"],
)
def test_runs_that_may_still_be_running_are_left_alone(
    tmp_path: Path,
    orchestrator: Callable[[], dict[str, Any] | None],
    host: str | None,
    why: str,
) -> None:
    run_dir = crashed_run(tmp_path, orchestrator())
    if host is not None:
        manifest = _manifest(run_dir)
        manifest["host"]["hostname"] = host
        write_json_atomic(run_dir / "manifest.json", manifest)
    before = (run_dir / "manifest.json").read_text()
    report = clean_results(tmp_path)
    assert report.closed == [] and len(report.left) == 1
    assert report.left[0][0] == run_dir and why in report.left[0][1]
    assert (run_dir / "manifest.json").read_text() == before
    assert not (run_dir / "before" / "samples.parquet").exists()


def test_a_locked_run_folder_is_left_alone_whatever_its_manifest_says(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, "short")  # what a live orchestrator holds
    write_json_atomic(
        folder.path / "manifest.json",
        {"run_id": "x", "status": "running", "orchestrator": dead_identity(), "builds": {}},
    )
    try:
        report = clean_results(tmp_path)
        assert report.closed == [] and report.left == [(folder.path, "still running")]
    finally:
        folder.close()
    assert _manifest(clean_results(tmp_path).closed[0].run_dir)["status"] == "crashed"


def test_a_failed_run_gets_its_csvs_converted_and_keeps_its_status(tmp_path: Path) -> None:
    run_dir = crashed_run(tmp_path, dead_identity(), status="failed", error="disk full: ...")
    report = clean_results(tmp_path)
    assert report.closed[0].status == "failed"
    manifest = _manifest(run_dir)
    assert manifest["status"] == "failed" and manifest["error"] == "disk full: ..."
    assert len(pd.read_parquet(run_dir / "before" / "samples.parquet")) == 30


def test_processes_a_crashed_run_left_are_stopped(tmp_path: Path) -> None:
    run_dir = crashed_run(tmp_path, dead_identity())
    stray = subprocess.Popen(["sleep", "60"], env={**os.environ, "HARNESS_RUN_ID": run_dir.name})
    try:
        report = clean_results(tmp_path)
        assert "stopped 1 leftover process(es)" in report.closed[0].done
        assert stray.wait(timeout=5) == -signal.SIGKILL
        assert leftover_processes(run_dir.name) == []
    finally:
        stray.kill()
        stray.wait()


def test_harness_clean_says_what_it_did(tmp_path: Path) -> None:
    runner = CliRunner()
    empty = runner.invoke(app, ["clean", "--results", str(tmp_path / "none")])
    assert empty.exit_code == 0 and "nothing to clean" in empty.stdout
    (tmp_path / "file").write_text("x")
    not_a_folder = runner.invoke(app, ["clean", "--results", str(tmp_path / "file")])
    assert not_a_folder.exit_code == 2 and "not a folder" in not_a_folder.stderr
    run_dir = crashed_run(tmp_path / "results", dead_identity())
    done = runner.invoke(app, ["clean", "--results", str(tmp_path / "results")])
    assert done.exit_code == 0, done.output
    assert f"{run_dir}: crashed — marked crashed; before: 30 samples" in done.stdout


def test_harness_run_closes_crashed_runs_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.run.experiment import Experiment

    def fail(self: Experiment) -> Path:
        raise RunError("stopped by the test before any process started")

    monkeypatch.setattr(Experiment, "run", fail)
    results = tmp_path / "results"
    crashed = crashed_run(results, dead_identity())
    previous = signal.getsignal(signal.SIGTERM)  # `run` installs its own SIGTERM handler
    try:
        result = CliRunner().invoke(
            app, ["run", str(short_scenario(tmp_path)), "--results", str(results)]
        )
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert result.exit_code == 3, result.output
    assert f"{crashed}: crashed" in result.stdout
    assert _manifest(crashed)["status"] == "crashed"
    assert len(list((results / "short").iterdir())) == 2  # and the new run's folder


def test_a_stale_engine_socket_is_a_run_error_and_leaks_no_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc
    import warnings

    from harness.run.kinds.docker.engine import connect

    stale = tmp_path / "docker.sock"  # a socket file nobody listens on: an Engine that died
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as bound:
        bound.bind(str(stale))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{stale}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RunError, match=f"no Docker Engine answers at unix://{stale}"):
            connect(timeout_s=2)
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)], caught


def test_processes_a_finished_run_left_are_stopped_by_clean(tmp_path: Path) -> None:
    # A process that left its build's process group (setsid) outlived a run that ended well.
    root = tmp_path / "results"
    run_dir = root / "short" / f"20260101T000000Z-{os.urandom(3).hex()}"
    run_dir.mkdir(parents=True)
    write_json_atomic(
        run_dir / "manifest.json", {"run_id": run_dir.name, "status": "completed", "builds": {}}
    )
    stray = subprocess.Popen(
        ["sleep", "60"], env={**os.environ, "HARNESS_RUN_ID": run_dir.name}, start_new_session=True
    )
    try:
        done = CliRunner().invoke(app, ["clean", "--results", str(root)])
        assert done.exit_code == 0, done.stdout + done.stderr
        assert f"stopped 1 process(es) of run {run_dir.name}" in done.stdout
        assert stray.wait(timeout=5) in (-signal.SIGTERM, -signal.SIGKILL)
        assert leftover_processes(run_dir.name) == []
    finally:
        stray.kill()
        stray.wait()
