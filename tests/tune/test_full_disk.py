"""A disk that fills mid-sweep (issue 32, item 10): the tune said "pg exited with code 2",
blamed the candidate then running (recorded failed, as if its settings had stopped it),
and showed the candidate that had finished "not run" (its report could not be written,
so it was not read). Now the run's error says the disk, no candidate is blamed (the
tune stops, exit 3, saying how to go on), and what finished is shown from its run, read
without writing. The runs are faked (``tests.tune.fake_runs``); the disk fills as far as
the results writer can tell: every write but the manifest's (its reserve) fails ENOSPC."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.results import io
from harness.results.io import WriteError, write_error
from tests.tune.fake_runs import FakeExperiment, install
from tests.tune.test_rank import CI

FULL = "fr25-w20"
"""The candidate running when the disk fills (the third of the CI sweep's one batch)."""


def test_a_disk_filled_mid_sweep_is_said_and_what_finished_is_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakes = install(monkeypatch)
    full = {"on": False}
    write: Callable[..., None] = io.write_file_atomic

    def fill(path: Path, how: Callable[[Path], object]) -> None:
        if full["on"] and path.name != "manifest.json":
            raise write_error(path, OSError(errno.ENOSPC, "No space left on device"))
        write(path, how)

    monkeypatch.setattr(io, "write_file_atomic", fill)

    def filled(experiment: FakeExperiment, name: str) -> None:
        if name == "fr25-w10":  # the one before FULL: then the disk fills
            full["on"] = True

    fakes.during = filled
    fakes.fail = {
        FULL: WriteError(
            f"disk full: 12 KiB left on the disk of {tmp_path}; pg exited with code 2",
            disk_full=True,
        )
    }
    results = tmp_path / "results"
    done = CliRunner().invoke(app, ["tune", str(CI), "--results", str(results)])
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception
    said = done.output.replace("\n", " ")
    assert done.exit_code == 3, said
    assert "disk full: 12 KiB left on the disk of" in said, said
    (folder,) = results.glob("tune-short/tune-*")
    assert not (folder / "failed.json").exists()  # no candidate blamed for the disk
    assert f"--resume {folder}" in said
    rows = {line.split()[1]: line for line in done.output.splitlines() if "objective " in line}
    for finished in ("current", "fr25-w10"):
        assert "not run" not in rows[finished], rows[finished]
    assert "not run" in rows[FULL] and "failed" not in rows[FULL]
    assert "tune report not written" in said
