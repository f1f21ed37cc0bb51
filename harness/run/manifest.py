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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.results.io import RunFolder, harness_version, host_info, utc_now
from harness.results.manifest import (
    SCHEMA,
    BuildRecord,
    HostInfo,
    ManifestRecord,
    ProcessIdentity,
    Status,
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


@dataclass
class Manifest:
    """The run's side of ``manifest.json`` (``results.manifest.ManifestRecord``, the file's
    type); ``builds`` maps a build key to what it recorded."""

    scenario_name: str
    scenario_file: str
    scenario_sha256: str
    seed: int
    harness_version: str
    host: HostInfo
    started_at: str
    run_id: str
    repeat: int = 1
    status: Status = "running"
    ended_at: str | None = None
    error: str | None = None
    orchestrator: ProcessIdentity = field(default_factory=process_identity)
    """The ``harness run`` process (``process_identity``): alive while the run is."""
    builds: dict[str, BuildRecord] = field(default_factory=dict)

    @classmethod
    def begin(cls, loaded: LoadedScenario, run_id: str, repeat: int = 1) -> Manifest:
        """A manifest for a run starting now, on this host, with this harness."""
        return cls(
            scenario_name=loaded.scenario.name,
            scenario_file=loaded.path,
            scenario_sha256=loaded.sha256,
            seed=loaded.scenario.seed,
            harness_version=harness_version(),
            host=host_info(),
            started_at=utc_now(),
            run_id=run_id,
            repeat=repeat,
        )

    def end(self, status: Status, error: str | None) -> None:
        """Record how the run ended (``completed``, ``interrupted`` or ``failed``)."""
        self.status = status
        self.error = error
        self.ended_at = utc_now()

    def record(self) -> ManifestRecord:
        """What ``manifest.json`` holds now (the build records are the live ones)."""
        return {
            "schema": SCHEMA,
            "scenario_name": self.scenario_name,
            "scenario_file": self.scenario_file,
            "scenario_sha256": self.scenario_sha256,
            "seed": self.seed,
            "harness_version": self.harness_version,
            "host": self.host,
            "started_at": self.started_at,
            "run_id": self.run_id,
            "repeat": self.repeat,
            "status": self.status,
            "ended_at": self.ended_at,
            "error": self.error,
            "orchestrator": self.orchestrator,
            "builds": self.builds,
        }

    def save(self, folder: RunFolder) -> None:
        folder.save_manifest(self.record())
