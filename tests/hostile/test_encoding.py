"""A stdout that cannot encode every character never crashes a command (issue 22, item 18).

``harness validate`` printed "ok —" and ``harness clean`` "crashed — ..." and died on
the dash with a ``UnicodeEncodeError`` when stdout was ASCII (``PYTHONIOENCODING``,
a CI runner's locale) or a latin-1 pipe. Each command is run as a process, its stdout
a pipe in that encoding.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, harness_cmd
from tests.run.test_cleanup import crashed_run, dead_identity


def _run(args: list[str], encoding: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONIOENCODING": encoding, "LANG": "C", "LC_ALL": "C"}
    return subprocess.run(harness_cmd(*args), cwd=ROOT, env=env, capture_output=True, timeout=120)


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_validate_prints_in_any_encoding(encoding: str) -> None:
    done = _run(["validate", "scenarios/quickstart.yaml"], encoding)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert b"Traceback" not in done.stderr
    assert b"scenarios/quickstart.yaml: ok " in done.stdout


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_clean_prints_in_any_encoding(tmp_path: Path, encoding: str) -> None:
    root = tmp_path / "results"
    run_dir = crashed_run(root, dead_identity())
    done = _run(["clean", "--results", str(root)], encoding)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert b"Traceback" not in done.stderr
    assert f"{run_dir}: crashed ".encode() in done.stdout


def test_an_error_prints_in_ascii_too(tmp_path: Path) -> None:
    """A scenario's problem quoting a character stdout cannot show: exit 2, not 1."""
    bad = tmp_path / "s.yaml"
    bad.write_text("name: caf\u00e9 \u2014 run\n", encoding="utf-8")
    done = _run(["validate", str(bad)], "ascii")
    assert done.returncode == 2, done.stderr.decode(errors="replace")
    assert b"Traceback" not in done.stderr
