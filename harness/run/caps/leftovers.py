"""The cgroups a capped build may leave, and how ``harness clean`` removes them.

A build's cgroup (``harness-<run id>-<build key>``) is removed when the build
ends; a run killed (``kill -9``) leaves it, empty once the orphan guards have
killed its processes. ``harness clean`` (and the start of every ``harness run``
with such builds) removes the harness's cgroups that hold no process and are
older than ``LEFTOVER_AGE_S`` (a live build's holds its processes from the
moment it is made), and a crashed run's own (``remove_of_run``), whatever is
left in them killed first.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from harness.core.errors import RunError
from harness.run.caps.cgroups import (
    LEFTOVER_AGE_S,
    PREFIX,
    BuildCgroup,
    Hierarchy,
    candidates,
)


def _hierarchies() -> list[Hierarchy]:
    try:
        found, _ = candidates(
            Path("/proc/self/mounts").read_text(), Path("/proc/self/cgroup").read_text()
        )
    except OSError:
        return []
    return found


def harness_cgroups(hierarchies: list[Hierarchy]) -> list[BuildCgroup]:
    """Every cgroup of the harness in ``hierarchies``, once per name."""
    found: dict[tuple[int, str], BuildCgroup] = {}
    for hierarchy in hierarchies:
        for folder in hierarchy.folders():
            with contextlib.suppress(OSError):
                for entry in folder.iterdir():
                    if entry.is_dir() and entry.name.startswith(PREFIX):
                        key = (hierarchy.version, entry.name)
                        found.setdefault(key, BuildCgroup(hierarchy, entry.name))
    return list(found.values())


def _age_s(group: BuildCgroup) -> float:
    ages = []
    for folder in group.dirs.values():
        with contextlib.suppress(OSError):
            ages.append(time.time() - folder.stat().st_mtime)
    return min(ages, default=0.0)


class Cgroups:
    """The ``Leftovers`` of the kinds whose processes the harness starts: their cgroups."""

    noun = "cgroups"

    def __init__(self, hierarchies: list[Hierarchy] | None = None) -> None:
        self.hierarchies = hierarchies
        """Where to look; ``None``: this machine's (``/proc/self/mounts``)."""

    def _groups(self) -> list[BuildCgroup]:
        hierarchies = self.hierarchies if self.hierarchies is not None else _hierarchies()
        return harness_cgroups(hierarchies)

    def remove_of_run(self, run_id: str) -> list[str]:
        removed = []
        for group in self._groups():
            if group.name.startswith(f"{PREFIX}{run_id}-"):
                group.remove()
                removed.append(group.name)
        return [f"removed cgroup(s) {', '.join(removed)}"] if removed else []

    def remove_of_ended_runs(self) -> tuple[list[str], list[str]]:
        removed: list[str] = []
        problems: list[str] = []
        for group in self._groups():
            if group.pids() or _age_s(group) < LEFTOVER_AGE_S:
                continue  # a live build's (or one being made)
            try:
                group.remove(timeout_s=1.0)
            except RunError as exc:
                problems.append(str(exc))
                continue
            removed.append(f"cgroup {group.name}")
        return removed, problems


CGROUPS = Cgroups()
"""This machine's cgroups of the harness."""
