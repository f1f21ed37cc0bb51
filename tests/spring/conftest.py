"""The spring-shop jar for the tests here: built once by ``make spring-jar`` (again only
when its sources changed); these tests skip, saying so, without java or mvn. And a tiny
jar that is no Spring app (``tiny/Tiny.java``), compiled once per session."""

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


TINY = Path(__file__).with_name("tiny") / "Tiny.java"

needs_jdk = pytest.mark.skipif(
    shutil.which("javac") is None or shutil.which("jar") is None,
    reason="needs javac and jar to build the tiny test jar",
)


@pytest.fixture(scope="session")
def tiny_jar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``Tiny.java`` as a runnable jar: listens where ``--listen=N`` says, forks with ``--fork``."""
    folder = tmp_path_factory.mktemp("tiny")
    classes = folder / "classes"
    subprocess.run(["javac", "-d", str(classes), str(TINY)], check=True, timeout=300)
    jar = folder / "tiny.jar"
    subprocess.run(
        ["jar", "--create", "--file", str(jar), "--main-class", "Tiny", "-C", str(classes), "."],
        check=True,
        timeout=300,
    )
    return jar
