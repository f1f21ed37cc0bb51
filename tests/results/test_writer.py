"""The one writer of results: probes before a run, says why a write failed, never leaves .tmp."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pandas as pd
import pytest

from harness.core.errors import RunError
from harness.results.io import (
    RESERVE_NAME,
    RunFolder,
    WriteError,
    keep_live_logs,
    lock_dir,
    write_file_atomic,
    write_json_atomic,
    write_parquet_atomic,
)
from tests.tmpfs import fill, tmpfs


def _full_disk(tmp: Path) -> None:
    tmp.write_bytes(b"half a file")
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp))


def test_a_failed_write_says_disk_full_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text("old")
    with pytest.raises(WriteError, match=r"^disk full: cannot write .*report\.json") as caught:
        write_file_atomic(tmp_path / "report.json", _full_disk)
    assert isinstance(caught.value, RunError) and caught.value.disk_full
    assert os.listdir(tmp_path) == ["report.json"]
    assert (tmp_path / "report.json").read_text() == "old"  # the old file is untouched


def test_writing_into_a_missing_folder_is_a_write_error(tmp_path: Path) -> None:
    with pytest.raises(WriteError, match="No such file or directory") as caught:
        write_json_atomic(tmp_path / "gone" / "manifest.json", {})
    assert not caught.value.disk_full
    with pytest.raises(WriteError):
        write_parquet_atomic(pd.DataFrame({"a": [1]}), tmp_path / "gone" / "x.parquet")
    assert os.listdir(tmp_path) == []


def test_a_run_folder_is_locked_and_holds_a_reserve_while_it_lives(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, "s")
    assert folder.path.parent == tmp_path / "s"
    assert (folder.path / RESERVE_NAME).stat().st_size == RunFolder.RESERVE_BYTES
    assert lock_dir(folder.path) is None  # another process cannot take it
    folder.close()
    assert not (folder.path / RESERVE_NAME).exists()
    fd = lock_dir(folder.path)
    assert fd is not None
    os.close(fd)


@pytest.mark.parametrize(
    ("make_root", "reason"),
    [
        (lambda p: (p / "file").write_text("x") and p / "file", "it is not a folder"),
        (lambda p: (p / "file").write_text("x") and p / "file" / "results", "Not a directory"),
        (lambda p: p / ("x" * 300), "File name too long"),
    ],
    ids=["a-file", "under-a-file", "name-too-long"],
)
def test_a_root_that_cannot_take_results_fails_before_any_folder_is_made(
    tmp_path: Path, make_root: object, reason: str
) -> None:
    root = make_root(tmp_path)  # type: ignore[operator]
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(WriteError, match=f"cannot write results under {root}.*{reason}"):
        RunFolder.create(root, "s")
    assert sorted(tmp_path.rglob("*")) == before


def test_a_root_without_room_for_the_run_fails_before_it_starts(tmp_path: Path) -> None:
    with pytest.raises(WriteError, match=r"only .* free, and this run needs about") as caught:
        RunFolder.create(tmp_path, "s", need_bytes=1 << 60)
    assert caught.value.disk_full
    assert not list((tmp_path / "s").iterdir())


def test_a_read_only_root_fails_before_any_folder_is_made(tmp_path: Path) -> None:
    with (
        tmpfs(tmp_path / "ro", "1m", read_only=True) as ro,
        pytest.raises(WriteError, match="Read-only file system"),
    ):
        RunFolder.create(ro, "s")


def test_on_a_full_disk_the_manifest_is_still_written_and_nothing_half_written_stays(
    tmp_path: Path,
) -> None:
    with tmpfs(tmp_path / "disk", "1m") as disk:
        folder = RunFolder.create(disk, "s")
        bdir = folder.make_dir("before")
        (bdir / "samples.csv").write_text(
            "endpoint,index,intended_start,actual_start,end,status,error,outcome\n"
            + "".join(f"p,{i},10.0,10.001,10.2,200,,\n" for i in range(5000))
        )
        folder.check_space()  # room left: no error
        fill(disk)
        with pytest.raises(WriteError, match="^disk full"):
            folder.check_space()
        with pytest.raises(WriteError, match="^disk full: cannot write .*samples.parquet"):
            keep_live_logs(bdir)
        folder.save_manifest({"status": "failed", "error": "disk full: ..."})  # the reserve
        assert (folder.path / "manifest.json").read_text().count('"failed"') == 1
        assert not (folder.path / RESERVE_NAME).exists()
        folder.close()
        assert not [p for p in disk.rglob("*") if p.name.endswith(".tmp")]
