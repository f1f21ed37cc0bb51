"""The split of ``make test``: unit tests in parallel, integration tests two files at a time.

``.ci/pytest-halves.sh`` runs the halves; here with a stand-in ``pytest`` that records its
arguments and exits as told, to check the exit status CI relies on. The rule that keeps a
server out of the parallel half (tests/conftest.py) is checked on a few tests of its own,
run by a real pytest with the project's conftest loaded as a plugin.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

HALVES = ROOT / ".ci" / "pytest-halves.sh"


def _halves(
    tmp_path: Path, what: str, *codes: int, env: dict[str, str] | None = None
) -> tuple[int, list[str]]:
    """Run the script with a pytest that exits with ``codes`` in turn; its exit and calls."""
    fake = tmp_path / "pytest"
    (tmp_path / "codes").write_text("".join(f"{c}\n" for c in codes))
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {tmp_path}/calls\n'
        f"code=$(head -n 1 {tmp_path}/codes); sed -i 1d {tmp_path}/codes; exit $code\n"
    )
    fake.chmod(0o755)
    done = subprocess.run(
        ["bash", str(HALVES), what, "-x"],
        env={"PATH": "/usr/bin:/bin", "PYTEST": str(fake), "JOBS": "3", **(env or {})},
        capture_output=True,
        text=True,
        timeout=30,
    )
    calls = (tmp_path / "calls").read_text().splitlines()
    return done.returncode, calls


@pytest.mark.parametrize(
    ("codes", "expected"),
    [
        ((0, 0), 0),
        ((5, 0), 0),  # no unit test collected: the integration tests ran
        ((0, 5), 0),
        ((5, 5), 5),  # nothing ran at all: not a pass
        ((1, 0), 1),
        ((0, 1), 1),
        ((1, 5), 1),
        ((5, 2), 2),
        ((3, 1), 3),
    ],
)
def test_both_halves_run_and_the_exit_is_the_first_failure(
    tmp_path: Path, codes: tuple[int, int], expected: int
) -> None:
    code, calls = _halves(tmp_path, "all", *codes)
    assert code == expected
    assert calls == [
        "-q -p xdist -n 3 -m not integration -x",
        "-q -p xdist -n 4 --lanes --durations=15 -m integration -x",
    ]


def test_the_integration_workers_are_a_setting(tmp_path: Path) -> None:
    """Two by default (a test file per worker, so a module's shared run is made once);
    ``INTEGRATION_JOBS=0``: one at a time in pytest's own process."""
    _, calls = _halves(tmp_path, "all", 0, 0, env={"INTEGRATION_JOBS": "0"})
    assert calls[1] == "-q -p xdist -n 0 --lanes --durations=15 -m integration -x"


def test_an_interrupted_unit_half_stops_there(tmp_path: Path) -> None:
    assert _halves(tmp_path, "all", 2, 0) == (2, ["-q -p xdist -n 3 -m not integration -x"])


@pytest.mark.parametrize(("unit", "expected"), [(0, 0), (1, 1), (5, 5)])
def test_unit_runs_the_parallel_half_only(tmp_path: Path, unit: int, expected: int) -> None:
    code, calls = _halves(tmp_path, "unit", unit)
    assert (code, calls) == (expected, ["-q -p xdist -n 3 -m not integration -x"])


TESTS = """\
import subprocess, sys, pytest

@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield
    proc.kill()
    proc.wait()

def test_a_command_that_exits():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_a_process_left_running(sleeper):
    pass

@pytest.mark.integration
def test_a_process_left_running_marked(sleeper):
    pass

def test_a_gateway_started_and_stopped():
    subprocess.run([sys.executable, "-m", "harness", "pg", "--help"], capture_output=True)
"""


def _pytest(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_rule.py").write_text(text)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers = integration: real processes\n")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.conftest",
            "-q",
            "-rf",
            "-p",
            "no:xdist",
            "-p",
            "no:cacheprovider",
            "test_rule.py",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_unit_test_that_starts_a_server_fails_saying_to_mark_it(tmp_path: Path) -> None:
    done = _pytest(tmp_path, TESTS)
    assert done.returncode == 1, done.stdout + done.stderr
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAILED")]
    assert [line.split(" ")[1] for line in failed] == [
        "test_rule.py::test_a_process_left_running",
        "test_rule.py::test_a_gateway_started_and_stopped",
    ], done.stdout
    assert "so it is an integration test: mark it `pytest.mark.integration`" in done.stdout
    assert "-m harness pg --help" in done.stdout
    assert "2 failed, 2 passed" in done.stdout


def test_reading_the_shared_run_without_the_mark_fails_before_making_it(tmp_path: Path) -> None:
    done = _pytest(tmp_path, "def test_reads(short_run):\n    pass\n")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "test_rule.py::test_reads uses short_run, a real run, but is not marked" in done.stdout
    assert "1 error" in done.stdout and "harness run" not in done.stdout
