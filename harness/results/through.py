"""Output paths written through, never replaced: what a user's path names stays what it is.

``results.io.write_file_atomic`` writes a temporary file and renames it over
its path, which is right for a regular file (a reader never sees half of it)
and wrong for anything else: renamed over, a symlink becomes a regular file
and its target is never written, a device node (``/dev/full``) is replaced by
a file, ``/dev/stdout`` stops being the terminal. These tell those paths apart
and write into them instead. Each raises ``OSError``; the writer says it.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path


def is_special(path: Path) -> bool:
    """``path`` (followed through links) is something other than a regular file or nothing:
    a device, a FIFO, a socket. A folder raises ``IsADirectoryError``."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "it is a folder", str(path))
    return not stat.S_ISREG(mode)


def behind_fd(path: Path) -> tuple[bool, int | None]:
    """Whether ``path``'s links go through ``/proc/<pid>/fd/N`` (``/dev/stdout``,
    ``/dev/fd/3``: a process's open file, which a rename would miss), and ``N`` when the
    process is this one."""
    for _ in range(40):  # the kernel's own limit on links followed
        if not path.is_symlink():
            return False, None
        path = Path(os.path.normpath(path.parent / os.readlink(path)))
        parts = path.parts
        if len(parts) == 5 and parts[:2] == ("/", "proc") and parts[3] == "fd":
            own = parts[2] in ("self", str(os.getpid())) and parts[4].isdigit()
            return True, int(parts[4]) if own else None
    return False, None


def write_through(path: Path, write: Callable[[Path], object], fd: int | None) -> None:
    """Write into the special file ``path`` (never replace it): ``write`` makes the bytes in
    a private temporary folder, then they are copied into ``path``, or into our own ``fd``
    (``/dev/stdout``) at its offset, so what the console printed before stays."""
    with tempfile.TemporaryDirectory(prefix="harness-out-") as tmp_dir:
        tmp = Path(tmp_dir) / path.name
        write(tmp)
        data = tmp.read_bytes()
    if fd is None:
        with open(path, "wb") as dst:  # noqa: PTH123 - a device, a FIFO
            dst.write(data)
        return
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
