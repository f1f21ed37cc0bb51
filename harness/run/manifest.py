"""The run's journal, ``manifest.json``: what ran, on what, and how it ended.

Someone who finds a run folder a year later can tell from it which scenario
ran (a copy and its hash), with which harness on which host, and whether the
run completed, was interrupted, failed or crashed. It is rewritten atomically
at every step, so even a run killed half-way leaves one that says how far it
got; it names the orchestrator process (pid, boot and start time), so a run
left "running" by a crash can be told from a live one and closed later
(``harness.run.cleanup``).

Statuses: ``running`` (or its orchestrator died: see ``cleanup``),
``completed``, ``interrupted`` (SIGINT/SIGTERM), ``failed`` (``error`` says
why), ``crashed`` (the orchestrator died without closing the run, found and
closed afterwards).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.core.errors import InputError
from harness.results.io import RunFolder, harness_version, host_info, lock_dir, utc_now
from harness.results.manifest import (
    SCHEMA,
    BuildRecord,
    ManifestRecord,
    ProcessIdentity,
    Status,
    read_manifest,
)
from harness.scenario.schema import LoadedScenario


def boot_id() -> str | None:
    """This boot of the machine (Linux); a pid recorded in another boot is not ours."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``/proc/<pid>/stat``, field 22);
    ``None`` if there is no such live process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    if fields[0] == b"Z":  # dead, not yet reaped
        return None
    return int(fields[19])


def process_identity(pid: int | None = None) -> ProcessIdentity:
    """What tells this process (or ``pid``) apart from a later one that reuses its pid."""
    pid = os.getpid() if pid is None else pid
    return {"pid": pid, "boot_id": boot_id(), "start_ticks": start_ticks(pid)}


def identity_alive(identity: Mapping[str, Any]) -> bool:
    """Whether the process ``process_identity`` described is still running."""
    pid = identity.get("pid")
    if not isinstance(pid, int):
        return False
    recorded_boot = identity.get("boot_id")
    if recorded_boot is not None and boot_id() is not None and recorded_boot != boot_id():
        return False  # the machine rebooted since
    if Path("/proc/self/stat").exists():
        ticks = start_ticks(pid)
        return ticks is not None and ticks == identity.get("start_ticks")
    try:  # no /proc: the pid alone
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def in_progress(run_dir: Path) -> str | None:
    """Why ``run_dir`` is a run still going on, which a reader must not write into
    (``running (pid 123)``, ``running on host h``), or ``None``: it ended, or it was left
    ``running`` by an orchestrator that died (``harness clean`` closes it), or it is no run
    folder (the reader says what is wrong with it)."""
    try:
        manifest = read_manifest(run_dir / "manifest.json")
    except (InputError, OSError):
        return None
    if manifest.get("status") != "running":
        return None
    host = manifest.get("host", {}).get("hostname")
    if host is not None and host != socket.gethostname():
        return f"running on host {host}"
    orchestrator = manifest.get("orchestrator")
    if isinstance(orchestrator, dict):
        return f"running (pid {orchestrator['pid']})" if identity_alive(orchestrator) else None
    try:  # written before manifests named their orchestrator: its lock says
        lock = lock_dir(run_dir)
    except OSError:
        return None
    if lock is None:
        return "running (its folder is locked by its orchestrator)"
    os.close(lock)
    return None


class Manifest:
    """The run's ``manifest.json`` as it is written: one ``ManifestRecord`` (the file's type,
    ``harness.results.manifest``), changed in place and saved after every step."""

    def __init__(self, record: ManifestRecord) -> None:
        self.record = record

    @property
    def builds(self) -> dict[str, BuildRecord]:
        """Build key -> what the build recorded (the live records: change them, then save)."""
        return self.record["builds"]

    @classmethod
    def begin(cls, loaded: LoadedScenario, run_id: str, repeat: int = 1) -> Manifest:
        """A manifest for a run starting now, on this host, with this harness."""
        return cls(
            {
                "schema": SCHEMA,
                "scenario_name": loaded.scenario.name,
                "scenario_file": loaded.path,
                "scenario_sha256": loaded.sha256,
                "seed": loaded.scenario.seed,
                "harness_version": harness_version(),
                "host": host_info(),
                "started_at": utc_now(),
                "run_id": run_id,
                "repeat": repeat,
                "status": "running",
                "ended_at": None,
                "error": None,
                "orchestrator": process_identity(),
                "builds": {},
            }
        )

    def end(self, status: Status, error: str | None) -> None:
        """Record how the run ended (``completed``, ``interrupted`` or ``failed``)."""
        self.record.update({"status": status, "error": error, "ended_at": utc_now()})

    def save(self, folder: RunFolder) -> None:
        folder.save_manifest(self.record)
