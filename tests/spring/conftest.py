"""The spring-shop jar for the tests here: built once by ``make spring-jar`` (again only
when its sources changed); these tests skip, saying so, without java or mvn."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

JAR = ROOT / "targets" / "spring-shop" / "target" / "spring-shop.jar"

needs_java = pytest.mark.skipif(
    shutil.which("java") is None or shutil.which("mvn") is None,
    reason="needs java and mvn to build and run targets/spring-shop",
)


@pytest.fixture(scope="session")
def spring_jar() -> Path:
    """The built jar (``make spring-jar``: a no-op when it is newer than its sources)."""
    built = subprocess.run(
        ["make", "--no-print-directory", "spring-jar"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert built.returncode == 0 and JAR.is_file(), built.stdout + built.stderr
    return JAR
