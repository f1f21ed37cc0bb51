"""A build's own cgroup: where its processes run, so a phase can cap their CPU and memory.

Every process of a ``command``, ``jar``, ``shop`` or ``replicas`` build (children
included) joins the build's cgroup before its command starts: its orphan guard
writes its own pid into each ``cgroup.procs`` (``HARNESS_CGROUP_PROCS``) and then
starts the command, whose forks are born inside. A cap is then a few file writes:

- cgroup v2, where mounted with the ``cpu`` and ``memory`` controllers and writable:
  ``cpu.max`` (``quota period``), ``memory.max`` and ``memory.swap.max`` (0 while capped);
- else cgroup v1, the ``cpu`` controller's ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``
  and the ``memory`` controller's ``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes``
  where swap is accounted, so the cap includes swap as Docker's does).

The build's cgroup is made under the orchestrator's own, per controller (as
``/proc/self/cgroup`` names it), so a machine's or a CI job's limits still hold
over it. It is named ``harness-<run id>-<build key>`` and removed after the build,
its processes killed first (one that left its group with ``setsid`` is still in it);
a run killed leaves it empty, and ``harness clean`` removes it (``CGROUPS``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import RunError
from harness.scenario.caps import TargetCap, format_bytes

CPU_PERIOD_US = 100_000
"""The CFS period a CPU cap is a share of (100 ms, Docker's and the kernel's default)."""
PREFIX = "harness-"
"""Every cgroup of the harness is named ``harness-<run id>-<build key>``."""
LEFTOVER_AGE_S = 60.0
"""An empty cgroup of the harness older than this is a leftover: a live build's holds its
processes from the moment it is made (a second or less)."""
CONTROLLERS = ("cpu", "memory")


@dataclass(frozen=True)
class Hierarchy:
    """Where the harness makes its cgroups: per controller, the folder they go in."""

    version: int
    """1 or 2."""
    bases: dict[str, Path]
    """Controller (``cpu``, ``memory``) -> folder; in v2 both are the same folder."""

    def folders(self) -> list[Path]:
        """Each distinct base folder once."""
        return list(dict.fromkeys(self.bases.values()))

    @property
    def label(self) -> str:
        return f"cgroup v{self.version} ({', '.join(map(str, self.folders()))})"


@dataclass(frozen=True)
class Mount:
    path: Path
    fstype: str
    options: frozenset[str]


def read_mounts(text: str) -> list[Mount]:
    """The cgroup mounts of ``/proc/self/mounts``."""
    found = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
            found.append(Mount(Path(parts[1]), parts[2], frozenset(parts[3].split(","))))
    return found


def own_paths(text: str) -> dict[str, str]:
    """``/proc/self/cgroup`` as controller -> path (``""`` for the v2 hierarchy)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                found[controller] = parts[2]
    return found


def _under(mount: Path, path: str) -> Path:
    return mount / path.lstrip("/")


def candidates(mounts_text: str, cgroup_text: str) -> tuple[list[Hierarchy], list[str]]:
    """Hierarchies that could take the harness's cgroups, v2 first; and why others cannot."""
    mounts, own = read_mounts(mounts_text), own_paths(cgroup_text)
    found: list[Hierarchy] = []
    why: list[str] = []
    for mount in (m for m in mounts if m.fstype == "cgroup2"):
        base = _under(mount.path, own.get("", "/"))
        try:
            controllers = set((base / "cgroup.controllers").read_text().split())
        except OSError as exc:
            why.append(f"cgroup v2 at {base}: cannot read cgroup.controllers ({exc.strerror})")
            continue
        missing = [c for c in CONTROLLERS if c not in controllers]
        if missing:
            why.append(
                f"cgroup v2 at {base}: no {' or '.join(missing)} controller (they are "
                f"bound to cgroup v1 here; it has {', '.join(sorted(controllers)) or 'none'})"
            )
            continue
        found.append(Hierarchy(2, {c: base for c in CONTROLLERS}))
    bases: dict[str, Path] = {}
    for controller in CONTROLLERS:
        v1 = next((m for m in mounts if m.fstype == "cgroup" and controller in m.options), None)
        if v1 is None:
            why.append(f"cgroup v1: no {controller} controller mounted")
            continue
        bases[controller] = _under(v1.path, own.get(controller, "/"))
    if len(bases) == len(CONTROLLERS):
        found.append(Hierarchy(1, bases))
    return found, why


def probe(hierarchy: Hierarchy) -> str | None:
    """Why the harness cannot make its cgroups in ``hierarchy``; ``None`` when it can."""
    name = f"{PREFIX}probe-{os.getpid()}"
    made: list[Path] = []
    try:
        if hierarchy.version == 2:
            _enable_controllers(hierarchy.folders()[0])
        for folder in hierarchy.folders():
            (folder / name).mkdir()
            made.append(folder / name)
        probe_group = BuildCgroup(hierarchy, name)
        probe_group.apply(TargetCap(cpus=1.0, memory=None))
        probe_group.lift()
    except (OSError, RunError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return f"{hierarchy.label}: cannot make a cgroup there ({detail})"
    finally:
        for path in reversed(made):
            with contextlib.suppress(OSError):
                path.rmdir()
    return None


def _enable_controllers(base: Path) -> None:
    """v2: the base hands ``cpu`` and ``memory`` to its children (``cgroup.subtree_control``)."""
    control = base / "cgroup.subtree_control"
    enabled = set(control.read_text().split())
    wanted = [c for c in CONTROLLERS if c not in enabled]
    if wanted:
        control.write_text(" ".join(f"+{c}" for c in wanted))


def find_hierarchy(
    mounts: Path = Path("/proc/self/mounts"), cgroup: Path = Path("/proc/self/cgroup")
) -> Hierarchy:
    """The first hierarchy the harness can make its cgroups in; ``RunError`` saying what was
    tried when there is none (exit 3, before any load)."""
    try:
        found, why = candidates(mounts.read_text(), cgroup.read_text())
    except OSError as exc:
        raise RunError(
            f"target caps need cgroups, and {exc.filename} cannot be read ({exc.strerror})"
        ) from None
    for hierarchy in found:
        problem = probe(hierarchy)
        if problem is None:
            return hierarchy
        why.append(problem)
    raise RunError(
        "the scenario caps the target (pg.phases[].target), which for builds the harness "
        "starts needs a cgroup of their own, and none is writable here: tried "
        + "; ".join(why or ["no cgroup filesystem is mounted"])
        + ". Run as root (or in a delegated cgroup v2 with cpu and memory), or drop the "
        "phases' target caps"
    )


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as exc:
        raise RunError(f"cannot write {value!r} to {path}: {exc.strerror}") from None


@dataclass
class BuildCgroup:
    """One build's cgroup (a folder per controller in v1, one in v2) and its caps."""

    hierarchy: Hierarchy
    name: str
    own: dict[str, str] = field(default_factory=dict)
    """The limits the cgroup had before the first cap (file -> text), restored by ``lift``."""

    @property
    def dirs(self) -> dict[str, Path]:
        return {c: base / self.name for c, base in self.hierarchy.bases.items()}

    @property
    def how(self) -> str:
        folders = ", ".join(str(p) for p in dict.fromkeys(self.dirs.values()))
        return f"cgroup v{self.hierarchy.version} {folders}"

    def create(self) -> None:
        """Make the cgroup (a leftover of the same name is removed first)."""
        self.remove()
        if self.hierarchy.version == 2:
            _enable_controllers(self.hierarchy.folders()[0])
        for folder in dict.fromkeys(self.dirs.values()):
            try:
                folder.mkdir()
            except OSError as exc:
                raise RunError(f"cannot make the build's cgroup {folder}: {exc.strerror}") from None

    def procs_files(self) -> tuple[Path, ...]:
        """The ``cgroup.procs`` a process writes its pid in to join (one per folder)."""
        return tuple(folder / "cgroup.procs" for folder in dict.fromkeys(self.dirs.values()))

    def _limits(self, cap: TargetCap | None) -> list[tuple[Path, str]]:
        """The files to write for ``cap`` (``None``: the own limits back), in a safe order."""
        cpu, memory = self.dirs["cpu"], self.dirs["memory"]
        if cap is None:
            return list(self._own_order())
        writes: list[tuple[Path, str]] = []
        if self.hierarchy.version == 2:
            if cap.cpus is not None:
                writes.append(
                    (cpu / "cpu.max", f"{round(cap.cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}")
                )
            if cap.memory is not None:
                writes.append((memory / "memory.max", str(cap.memory)))
                if (memory / "memory.swap.max").exists():
                    writes.append((memory / "memory.swap.max", "0"))
            return writes
        if cap.cpus is not None:
            writes.append((cpu / "cpu.cfs_period_us", str(CPU_PERIOD_US)))
            writes.append((cpu / "cpu.cfs_quota_us", str(round(cap.cpus * CPU_PERIOD_US))))
        if cap.memory is not None:
            limit, memsw = memory / "memory.limit_in_bytes", memory / "memory.memsw.limit_in_bytes"
            pair = [(limit, str(cap.memory))]
            if memsw.exists():  # memsw >= limit always: raise memsw first, lower it last
                now = _read_int(limit)
                if now is not None and 0 <= now < cap.memory:
                    pair.insert(0, (memsw, str(cap.memory)))
                else:
                    pair.append((memsw, str(cap.memory)))
            writes += pair
        return writes

    def _own_order(self) -> Iterator[tuple[Path, str]]:
        """The own limits back, memsw before the memory limit (v1: memsw >= limit)."""
        keys = sorted(self.own, key=lambda p: "memory.limit_in_bytes" in p)
        for path in keys:
            yield Path(path), self.own[path]

    def apply(self, cap: TargetCap) -> None:
        """Put ``cap`` in force (the own limits read first, once)."""
        writes = self._limits(cap)
        if not self.own:
            for path in {p for p, _ in self._all_limit_files()}:
                with contextlib.suppress(OSError):
                    self.own[str(path)] = path.read_text().strip()
        for path, value in writes:
            try:
                path.write_text(value)
            except OSError as exc:
                if exc.errno == errno.EBUSY and "memory" in path.name:
                    raise RunError(
                        f"the memory cap {format_bytes(int(value))} is below what the target "
                        f"holds, and the kernel could not reclaim enough ({path}: busy)"
                    ) from None
                raise RunError(f"cannot write {value!r} to {path}: {exc.strerror}") from None

    def _all_limit_files(self) -> list[tuple[Path, str]]:
        cpu, memory = self.dirs["cpu"], self.dirs["memory"]
        if self.hierarchy.version == 2:
            names = [(cpu, "cpu.max"), (memory, "memory.max"), (memory, "memory.swap.max")]
        else:
            names = [
                (cpu, "cpu.cfs_quota_us"),
                (cpu, "cpu.cfs_period_us"),
                (memory, "memory.memsw.limit_in_bytes"),
                (memory, "memory.limit_in_bytes"),
            ]
        return [(folder / name, "") for folder, name in names if (folder / name).exists()]

    def lift(self) -> str:
        """Put the cgroup's own limits back (a fresh one's: none); what is in force, in words."""
        for path, value in self._own_order():
            _write(path, value)
        return "the build's own limits (none: its cgroup was made by the run)"

    def close(self) -> None:
        """Nothing held: the cgroup itself goes with ``remove``, after its processes."""

    def pids(self) -> list[int]:
        """Every process in the cgroup now."""
        found: set[int] = set()
        for procs in self.procs_files():
            with contextlib.suppress(OSError):
                found.update(int(line) for line in procs.read_text().split())
        return sorted(found)

    def remove(self, timeout_s: float = 5.0) -> list[int]:
        """Kill what is left in the cgroup and remove it; the pids that were killed."""
        killed: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while (left := self.pids()) and time.monotonic() < deadline:
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            time.sleep(0.05)
        for folder in dict.fromkeys(self.dirs.values()):
            while folder.exists():
                try:
                    folder.rmdir()
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if time.monotonic() > deadline:
                        raise RunError(
                            f"cannot remove the build's cgroup {folder}: {exc.strerror}"
                        ) from None
                    time.sleep(0.05)
        return sorted(killed)


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def cgroup_name(run_id: str, key: str) -> str:
    return f"{PREFIX}{run_id}-{key}"
