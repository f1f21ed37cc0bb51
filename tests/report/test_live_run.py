"""A run still going on is read, never written into (issue 32, item 2): ``harness report
RUN`` and ``harness compare`` of a live run (its manifest ``running``, its orchestrator
alive and holding the folder's lock) show its figures as they stand and leave its folder
as it was (``harness plot``, which only draws into it, refuses); the report is written
when the run ends (or by ``harness report`` then)."""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

from typer.testing import CliRunner

from harness.cli import app
from harness.results.io import lock_dir
from harness.run.manifest import process_identity
from tests.report.runfolders import RUN
from tests.tune.fake_runs import files


def test_a_report_of_a_live_run_writes_nothing_into_it(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(RUN, run_dir)
    for name in ("report.json", "report.md"):
        (run_dir / name).unlink()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest.update({"status": "running", "ended_at": None, "orchestrator": process_identity()})
    manifest["host"]["hostname"] = socket.gethostname()  # a live run is on this machine
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    lock = lock_dir(run_dir)  # as its orchestrator holds it while it runs
    assert lock is not None
    try:
        before = files(run_dir)
        shown = CliRunner().invoke(app, ["report", str(run_dir)])
        assert shown.exit_code == 0, shown.output
        said = shown.output.replace("\n", " ")
        assert f"running (pid {os.getpid()})" in said and "nothing written" in said, said
        assert "p99" in said  # its figures, as they stand
        compared = CliRunner().invoke(app, ["compare", str(run_dir), "-b", "before", "-b", "after"])
        assert compared.exit_code == 0, compared.output
        plotted = CliRunner().invoke(app, ["plot", str(run_dir)])
        assert plotted.exit_code == 2 and "drawn when it ends" in plotted.output
        assert files(run_dir) == before
    finally:
        os.close(lock)
