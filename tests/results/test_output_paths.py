"""Output paths are written through, never replaced (issue 22, item 3).

``--junit``, ``--markdown``, ``schema -o``, ``init`` and ``index --out`` name a
path; what is there is the user's: a symlink is written through to its target
(and stays a link), a device or a FIFO is written into (and stays one). Only a
regular file, or nothing, is written by a temporary file and a rename.
"""

from __future__ import annotations

import os
import stat
import subprocess
import threading
from pathlib import Path
from typing import IO

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.results.io import WriteError, write_text_atomic
from tests.conftest import ROOT, harness_cmd


def _device(path: Path, minor: int) -> Path:
    """A character device of the memory driver (3: like /dev/null, 7: like /dev/full)."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    return path


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    target = tmp_path / "real" / "out.xml"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "link.xml"
    link.symlink_to(target)
    write_text_atomic(link, "new")
    assert link.is_symlink()
    assert target.read_text() == "new"
    assert not list(tmp_path.glob("**/.*.tmp"))


def test_a_dangling_symlink_creates_its_target(tmp_path: Path) -> None:
    link = tmp_path / "link.md"
    link.symlink_to(tmp_path / "made.md")
    write_text_atomic(link, "text")
    assert link.is_symlink()
    assert (tmp_path / "made.md").read_text() == "text"


def test_a_device_like_dev_null_is_written_into_not_replaced(tmp_path: Path) -> None:
    node = _device(tmp_path / "null", 3)
    write_text_atomic(node, "swallowed")
    assert stat.S_ISCHR(node.stat().st_mode)
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_device_like_dev_full_says_disk_full_and_stays_a_device(tmp_path: Path) -> None:
    node = _device(tmp_path / "full", 7)
    with pytest.raises(WriteError, match="disk full") as caught:
        write_text_atomic(node, "x" * 100_000)
    assert caught.value.disk_full
    assert stat.S_ISCHR(node.stat().st_mode)


def test_a_fifo_is_written_into(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    write_text_atomic(fifo, "through the pipe")
    reader.join(10)
    assert got == ["through the pipe"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(WriteError, match="is a folder"):
        write_text_atomic(tmp_path, "x")


def _schema_to_stdout(tmp_path: Path, stdout: IO[str] | int) -> subprocess.CompletedProcess[str]:
    """``harness schema -o`` a link like ``/dev/stdout`` (to ``/proc/self/fd/1``) of the
    test's own: a harness that renames over it replaces this one, not the machine's (as
    it did once)."""
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    command = harness_cmd("schema", "-o", str(link))
    return subprocess.run(command, cwd=ROOT, stdout=stdout, text=True, timeout=60)


def test_schema_o_dev_stdout_prints_the_schema(tmp_path: Path) -> None:
    """``/dev/stdout`` is a link to the process's fd 1 (here a pipe): written through."""
    done = _schema_to_stdout(tmp_path, subprocess.PIPE)
    assert (done.returncode, '"$schema"' in done.stdout) == (0, True)


def test_schema_o_dev_stdout_redirected_to_a_file_writes_that_file(tmp_path: Path) -> None:
    """fd 1 a regular file: written through the fd, not a new file renamed over the old."""
    out = tmp_path / "out.json"
    with out.open("w") as stdout:
        assert _schema_to_stdout(tmp_path, stdout).returncode == 0
        inode = os.fstat(stdout.fileno()).st_ino
    assert out.stat().st_ino == inode
    assert '"$schema"' in out.read_text()


def test_compare_markdown_onto_a_symlink_writes_its_target(tmp_path: Path) -> None:
    target = tmp_path / "comment.md"
    link = tmp_path / "link.md"
    link.symlink_to(target)
    run = ROOT / "tests" / "data" / "run-quickstart-v1"
    result = CliRunner().invoke(
        app, ["compare", str(run), "-b", "before", "-b", "after", "--markdown", str(link)]
    )
    assert result.exit_code == 0, result.output
    assert link.is_symlink()
    assert "### before vs after" in target.read_text()


def test_gate_junit_onto_a_device_leaves_the_device(tmp_path: Path) -> None:
    node = _device(tmp_path / "null", 3)
    run = ROOT / "tests" / "data" / "run-quickstart-v1"
    result = CliRunner().invoke(app, ["gate", str(run), "--junit", str(node)])
    assert result.exit_code in (0, 1), result.output
    assert stat.S_ISCHR(node.stat().st_mode)
