"""Who runs a tune folder: its ``tune.lock``.

The process running or resuming a tune (``harness tune``) holds an exclusive ``flock`` on
the folder's ``tune.lock`` while it lives (the kernel drops it when the process dies,
however it dies) and writes in it who it is: ``status`` ``running``, its ``orchestrator``
(pid, boot and start time: ``harness.run.manifest.process_identity``) and ``started_at``.
When it ends it writes ``ended`` or ``interrupted`` (Ctrl-C, SIGTERM) and ``ended_at``. So
a tune is live while its lock is held; its lock free and its record still ``running``
(the process gone) is a tune that was killed (``kill -9``, the OOM killer), which
``harness clean`` marks ``crashed`` as it marks a run (``harness.run.cleanup``).

A second ``--resume`` cannot take the lock and refuses, naming the pid; ``--report``
takes it while it writes the tune's report, and without it reads and writes nothing.
The record is written in place (a rename would put a new, unlocked file there), so a
reader may find it empty for an instant: ``record`` then answers ``None``.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from harness.results.io import lock_file, utc_now
from harness.run.manifest import identity_alive, process_identity

LOCK_NAME = "tune.lock"


def read_record(folder: Path) -> dict[str, Any] | None:
    """What ``folder``'s ``tune.lock`` says (``None``: nothing, or not a record)."""
    try:
        record = json.loads((folder / LOCK_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def holder(record: dict[str, Any] | None) -> str:
    """The process a record names, for a message: ``pid 123, since 2026-...``."""
    orchestrator = (record or {}).get("orchestrator")
    if not isinstance(orchestrator, dict) or "pid" not in orchestrator:
        return "another process"
    since = (record or {}).get("started_at")
    return f"pid {orchestrator['pid']}" + (f", since {since}" if since else "")


def died(record: dict[str, Any] | None) -> str | None:
    """Why the tune a (free) lock's record describes stopped before it ended, or ``None``
    when it ended or is live: its process died (``running``, the process gone, or
    ``crashed``: closed by ``harness clean``), or it was interrupted (Ctrl-C)."""
    if record is None:
        return None
    status = record.get("status")
    orchestrator = record.get("orchestrator")
    pid = orchestrator.get("pid") if isinstance(orchestrator, dict) else None
    if status == "running" and isinstance(orchestrator, dict):
        if identity_alive(orchestrator):
            return None  # a file system without flock: its process still runs it
        return f"its harness tune (pid {pid}) died before it ended (killed)"
    if status == "crashed":
        return (
            f"its harness tune (pid {pid}) died before it ended (killed; closed by harness clean)"
        )
    if status == "interrupted":
        return f"its harness tune (pid {pid}) was interrupted (Ctrl-C, SIGTERM)"
    return None


class TuneLock:
    """``tune.lock`` held by this process (``take``): ``hold`` says it runs the tune, ``end``
    how it ended; ``close`` lets it go."""

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self._fd = fd

    @classmethod
    def take(cls, folder: Path) -> TuneLock | None:
        """The lock of tune folder ``folder``, or ``None`` when another process holds it.
        A folder where no lock can be made (read-only) or a file system without ``flock``
        gives an empty hold: the record and the writes then decide."""
        path = folder / LOCK_NAME
        try:
            fd = lock_file(path)
        except OSError:
            return cls(path, None)
        return None if fd is None else cls(path, fd)

    def record(self) -> dict[str, Any] | None:
        return read_record(self.path.parent)

    def _write(self, record: dict[str, Any]) -> None:
        if self._fd is None:
            return
        data = (json.dumps(record, indent=2) + "\n").encode()
        with contextlib.suppress(OSError):  # a full disk: the lock itself still holds
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, data, 0)

    def hold(self) -> None:
        """Say this process runs the tune (``running``, who, since when)."""
        self._write(
            {"status": "running", "orchestrator": process_identity(), "started_at": utc_now()}
        )

    def end(self, status: str, error: str | None = None) -> None:
        """Say how the tune this process held ended (``ended``, ``interrupted``), or, for
        ``harness clean``, that its process died (``crashed``, with ``error``)."""
        record = self.record() or {}
        record.update({"status": status, "ended_at": utc_now()})
        if error is not None:
            record["error"] = error
        self._write(record)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
