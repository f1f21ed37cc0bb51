"""Building a jar build's jar with Maven first, when ``maven:`` names its project.

Built once before the run (``JarTarget.preflight``), and only when the jar is missing or
older than the project's ``pom.xml`` or anything under ``src/``; a build that fails ends
the run before any process starts (exit 3) with the end of Maven's output, where its
error is. Maven's own cache (``~/.m2``) is the only cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from harness.core.errors import RunError

MAVEN_ARGV = ("mvn", "-q", "-B", "-DskipTests", "package")
MAVEN_TIMEOUT_S = 1800.0
"""A cold resolve of a Spring Boot project's dependencies takes minutes; this is a hang."""
MAVEN_TAIL_LINES = 20
"""Lines of Maven's output quoted when it fails (its error and the reactor summary)."""


def newest_source(project: Path) -> float:
    """The latest change to the project's ``pom.xml`` or to a file under its ``src/``."""
    newest = (project / "pom.xml").stat().st_mtime
    for folder, _, files in os.walk(project / "src"):
        for name in files:
            try:
                newest = max(newest, (Path(folder) / name).stat().st_mtime)
            except OSError:
                continue
    return newest


def stale(jar: Path, project: Path) -> bool:
    """Whether the jar must be built: missing, or older than its sources."""
    try:
        built = jar.stat().st_mtime
    except OSError:
        return True
    return built < newest_source(project)


def build_jar(jar: Path, project: Path) -> None:
    """Run Maven in ``project`` if ``jar`` is stale; ``RunError`` when it fails or makes no jar."""
    if not stale(jar, project):
        return
    mvn = shutil.which(MAVEN_ARGV[0])
    if mvn is None:
        raise RunError(
            f"{jar} must be built (maven: {project}), but there is no mvn on PATH: install "
            "Maven, or build the jar yourself and drop maven:"
        )
    command = " ".join(MAVEN_ARGV)
    try:
        done = subprocess.run(
            [mvn, *MAVEN_ARGV[1:]],
            cwd=project,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            timeout=MAVEN_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise RunError(
            f"`{command}` in {project} did not end within {MAVEN_TIMEOUT_S:g}s"
        ) from None
    if done.returncode != 0:
        tail = "\n".join(done.stdout.strip().splitlines()[-MAVEN_TAIL_LINES:])
        raise RunError(
            f"`{command}` in {project} failed (exit {done.returncode}); the last "
            f"{MAVEN_TAIL_LINES} lines of its output:\n{tail}"
        )
    if not jar.is_file():
        raise RunError(
            f"`{command}` in {project} succeeded but made no {jar}: jar: must name the jar "
            "the project builds (target/<artifactId>-<version>.jar, or its finalName)"
        )
    jar.touch()  # newer than its sources even when Maven found nothing to repackage
