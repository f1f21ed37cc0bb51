"""A small tmpfs of its own for a test: a real full disk or a real read-only folder.

Needs mount privileges (root, as on the development machines and CI); a test
that cannot have one is skipped, saying why.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(path: Path, size: str, read_only: bool = False) -> Iterator[Path]:
    """Mount a tmpfs of ``size`` (``"2m"``) at ``path`` for the block; unmount after."""
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path: Path) -> int:
    """Write a file under ``path`` until its disk is full; the bytes written."""
    written = 0
    chunk = b"\0" * 65536
    with open(path / "ballast", "wb", buffering=0) as f:
        try:
            while True:
                written += f.write(chunk)
        except OSError:
            pass
        for size in (4096, 512, 1):  # the last partial pages too
            try:
                while True:
                    written += f.write(chunk[:size])
            except OSError:
                continue
    return written
