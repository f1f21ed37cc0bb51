"""The example CI files pass their linters (issue 31, part 4).

``.github/workflows/resilience.yml`` through actionlint (``make actionlint``: the Go
module proxy's v1.7.12) and GitHub's workflow schema; ``docs/ci/gitlab-ci.yml`` through
GitLab's CI schema (both schemas as check-jsonschema vendors them, a dev dependency).
Each linter is also shown a broken copy, so a linter that passes everything fails here.
Marked integration: actionlint is built beside the unit half (``make test``'s SETUP).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration

WORKFLOW = ROOT / ".github" / "workflows" / "resilience.yml"
GITLAB = ROOT / "docs" / "ci" / "gitlab-ci.yml"
ACTIONLINT = ROOT / "build" / "bin" / "actionlint"


def _schema(schema: str, path: Path) -> subprocess.CompletedProcess[str]:
    checker = Path(sys.executable).with_name("check-jsonschema")
    return subprocess.run(
        [str(checker), "--builtin-schema", schema, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("schema", "path", "typo"),
    [
        ("vendor.github-workflows", WORKFLOW, ("runs-on:", "run-on:")),
        ("vendor.gitlab-ci", GITLAB, ("  script:", "  scirpt:")),
    ],
    ids=["github", "gitlab"],
)
def test_each_example_matches_its_ci_s_schema(
    tmp_path: Path, schema: str, path: Path, typo: tuple[str, str]
) -> None:
    done = _schema(schema, path)
    assert done.returncode == 0, done.stdout + done.stderr
    broken = tmp_path / path.name
    broken.write_text(path.read_text().replace(*typo, 1))
    assert _schema(schema, broken).returncode != 0  # the schema does catch a wrong key


@pytest.mark.skipif(not ACTIONLINT.exists(), reason="no build/bin/actionlint: make actionlint")
def test_the_github_workflow_passes_actionlint(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(ACTIONLINT), "-no-color", str(WORKFLOW)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    broken = tmp_path / ".github" / "workflows" / "resilience.yml"
    broken.parent.mkdir(parents=True)
    shutil.copy(WORKFLOW, broken)
    text = broken.read_text().replace("steps.run.outputs.run_dir", "steps.nowhere.outputs.run_dir")
    broken.write_text(text)
    failed = subprocess.run(
        [str(ACTIONLINT), "-no-color", str(broken)], capture_output=True, text=True, timeout=120
    )
    assert failed.returncode == 1 and "nowhere" in failed.stdout, failed.stdout
