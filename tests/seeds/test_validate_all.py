"""Every seed scenario, full and short, passes ``harness validate`` through the real CLI.

The full seed runs are minutes long and stay out of CI, so a typo in one of their
gates or builds would otherwise be found only by ``make seeds``. The list is read
from the folders, so a scenario added later is checked without editing this file.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, harness_cmd

FULL = sorted((ROOT / "scenarios" / "seeds").glob("*.yaml"))
SHORT = sorted((ROOT / "scenarios" / "ci" / "seeds").glob("*.yaml"))


def test_the_seed_scenarios_are_there() -> None:
    names = {p.name for p in FULL}
    assert {"000-pg-timeout.yaml", "003-scale-out.yaml"} <= names, names
    assert {"000-pg-timeout-short.yaml", "003-scale-out-short.yaml"} <= {p.name for p in SHORT}


@pytest.mark.parametrize("path", FULL + SHORT, ids=lambda p: str(p.relative_to(ROOT)))
def test_seed_scenario_validates(path: Path) -> None:
    done = subprocess.run(
        harness_cmd("validate", str(path)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert ": ok" in done.stdout, done.stdout
