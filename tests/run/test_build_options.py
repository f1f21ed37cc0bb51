"""``harness run --build`` is checked before anything starts (issue 22, item 12):
``--build before --build before`` ran the build, then failed with exit 3 "File exists".
A repeated build is bad input: exit 2, nothing run, no results folder; the same for
``harness compare`` and ``harness simulate``, which take ``--build`` too."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from harness.cli import app
from tests.conftest import ROOT


def test_a_build_given_twice_is_refused_up_front(tmp_path: Path) -> None:
    results = tmp_path / "results"
    scenario = ROOT / "scenarios" / "quickstart.yaml"
    argv = ["run", str(scenario), "--results", str(results), "-b", "before", "--build", "before"]
    done = CliRunner().invoke(app, argv)
    assert done.exit_code == 2, done.output
    assert "build 'before' is given twice" in done.output, done.output
    assert "Traceback" not in done.output
    assert not results.exists()  # refused before a run folder was made


def test_compare_and_simulate_refuse_a_build_given_twice(tmp_path: Path) -> None:
    scenario = ROOT / "scenarios" / "quickstart.yaml"
    results = tmp_path / "results"
    for argv in (
        ["simulate", str(scenario), "--results", str(results), "-b", "after", "-b", "after"],
        ["compare", str(tmp_path / "no-such-run"), "-b", "after", "-b", "after"],
    ):
        done = CliRunner().invoke(app, argv)
        assert done.exit_code == 2, done.output
        assert "build 'after' is given twice" in done.output, done.output
        assert "Traceback" not in done.output
    assert not results.exists()  # simulate refused before its run folder was made
