"""A build's cgroup: which hierarchy is used, what is written for a cap and its lift, the
guard joining it, the schedule's clock, and leftovers.

The file writes are checked against a temporary folder laid out like cgroupfs (a
cgroup's files exist before anything writes them, as the kernel makes them), then
once against this machine's own cgroups where they are writable.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from harness.core.errors import RunError
from harness.results.manifest import BuildRecord
from harness.run.caps.cgroups import (
    LEFTOVER_AGE_S,
    BuildCgroup,
    Hierarchy,
    candidates,
    find_hierarchy,
)
from harness.run.caps.leftovers import Cgroups
from harness.run.caps.schedule import BuildCaps
from harness.run.processes import ProcessGroup
from harness.scenario.caps import TargetCap
from harness.scenario.loader import load_scenario_text

# As on these machines: cgroup v1 controllers, and a v2 hierarchy with none of them.
HYBRID_MOUNTS = """\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup {root}/cpu cgroup rw,relatime,cpu 0 0
cgroup {root}/memory cgroup rw,relatime,memory 0 0
cgroup2 {root}/unified cgroup2 rw,relatime 0 0
"""
HYBRID_SELF = """\
4:memory:/process_api/e28
1:cpu:/
0::/
"""
V2_MOUNTS = "cgroup2 {root} cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n"
V2_SELF = "0::/user.slice\n"

V1_FILES = {
    "cpu": {"cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": "100000", "cgroup.procs": ""},
    "memory": {
        "memory.limit_in_bytes": "9223372036854771712",
        "memory.memsw.limit_in_bytes": "9223372036854771712",
        "cgroup.procs": "",
    },
}
V2_FILES = {"cpu.max": "max 100000", "memory.max": "max", "memory.swap.max": "max"}


def _lay_out(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)


def _read(folder: Path, name: str) -> str:
    return (folder / name).read_text().strip()


def test_on_a_hybrid_machine_v1_is_used_and_v2_said_why_not(tmp_path: Path) -> None:
    (tmp_path / "unified").mkdir()
    (tmp_path / "unified" / "cgroup.controllers").write_text("hugetlb\n")
    found, why = candidates(HYBRID_MOUNTS.format(root=tmp_path), HYBRID_SELF)
    assert found == [
        Hierarchy(1, {"cpu": tmp_path / "cpu", "memory": tmp_path / "memory/process_api/e28"})
    ]
    assert why == [
        f"cgroup v2 at {tmp_path / 'unified'}: no cpu or memory controller (they are bound "
        "to cgroup v1 here; it has hugetlb)"
    ]


def test_v2_with_its_controllers_comes_first(tmp_path: Path) -> None:
    _lay_out(tmp_path / "user.slice", {"cgroup.controllers": "cpuset cpu io memory pids"})
    found, why = candidates(V2_MOUNTS.format(root=tmp_path), V2_SELF)
    assert found == [Hierarchy(2, dict.fromkeys(("cpu", "memory"), tmp_path / "user.slice"))]
    assert why == [
        "cgroup v1: no cpu controller mounted",
        "cgroup v1: no memory controller mounted",
    ]


def test_none_writable_is_refused_saying_what_was_tried(tmp_path: Path) -> None:
    mounts, self_cgroup = tmp_path / "mounts", tmp_path / "cgroup"
    mounts.write_text(HYBRID_MOUNTS.format(root=tmp_path / "gone"))
    self_cgroup.write_text(HYBRID_SELF)
    with pytest.raises(RunError) as caught:
        find_hierarchy(mounts, self_cgroup)
    text = str(caught.value)
    assert "none is writable here: tried cgroup v2 at" in text
    assert f"cgroup v1 ({tmp_path / 'gone' / 'cpu'}" in text and "cannot make a cgroup" in text


def test_v1_cap_and_lift_write_quota_and_memory_with_swap_in_order(tmp_path: Path) -> None:
    hierarchy = Hierarchy(1, {"cpu": tmp_path / "cpu", "memory": tmp_path / "memory"})
    group = BuildCgroup(hierarchy, "harness-r-b")
    for controller, files in V1_FILES.items():
        _lay_out(tmp_path / controller / "harness-r-b", files)
    cpu, memory = tmp_path / "cpu" / "harness-r-b", tmp_path / "memory" / "harness-r-b"

    group.apply(TargetCap(cpus=0.25, memory=256 * 1024**2))
    assert (_read(cpu, "cpu.cfs_quota_us"), _read(cpu, "cpu.cfs_period_us")) == ("25000", "100000")
    assert _read(memory, "memory.limit_in_bytes") == str(256 * 1024**2)
    assert _read(memory, "memory.memsw.limit_in_bytes") == str(256 * 1024**2)
    # Lowering: the limit first, then memsw (memsw >= limit at every step).
    assert [p.name for p, _ in group._limits(TargetCap(memory=128 * 1024**2))][-1] == (
        "memory.memsw.limit_in_bytes"
    )
    # Raising: memsw first.
    assert [p.name for p, _ in group._limits(TargetCap(memory=512 * 1024**2))][0] == (
        "memory.memsw.limit_in_bytes"
    )
    said = group.lift()
    assert _read(cpu, "cpu.cfs_quota_us") == "-1"
    assert _read(memory, "memory.limit_in_bytes") == "9223372036854771712"
    assert _read(memory, "memory.memsw.limit_in_bytes") == "9223372036854771712"
    assert "own limits" in said
    assert group.procs_files() == (cpu / "cgroup.procs", memory / "cgroup.procs")


def test_v2_cap_and_lift(tmp_path: Path) -> None:
    hierarchy = Hierarchy(2, dict.fromkeys(("cpu", "memory"), tmp_path))
    group = BuildCgroup(hierarchy, "harness-r-b")
    _lay_out(tmp_path / "harness-r-b", V2_FILES)
    folder = tmp_path / "harness-r-b"
    group.apply(TargetCap(cpus=1.5, memory=64 * 1024**2))
    assert _read(folder, "cpu.max") == "150000 100000"
    assert _read(folder, "memory.max") == str(64 * 1024**2)
    assert _read(folder, "memory.swap.max") == "0"
    group.lift()
    assert [_read(folder, n) for n in V2_FILES] == list(V2_FILES.values())
    assert group.procs_files() == (folder / "cgroup.procs",)


def test_a_cgroup_that_refuses_a_write_is_a_run_error(tmp_path: Path) -> None:
    hierarchy = Hierarchy(2, dict.fromkeys(("cpu", "memory"), tmp_path))
    _lay_out(tmp_path / "g", V2_FILES)
    (tmp_path / "g" / "cpu.max").unlink()
    (tmp_path / "g" / "cpu.max").mkdir()  # writing it fails, as a refused write does
    with pytest.raises(RunError, match=r"cannot write '50000 100000' to .*cpu.max"):
        BuildCgroup(hierarchy, "g").apply(TargetCap(cpus=0.5))


def test_the_guard_joins_the_cgroup_before_its_command(tmp_path: Path) -> None:
    procs = tmp_path / "cgroup.procs"
    procs.write_text("")
    group = ProcessGroup("caps-guard-test", tmp_path)
    with group:
        child = group.start("x", [sys.executable, "-c", "pass"], cgroup=(procs,))
        assert child.popen.wait(timeout=10) == 0
        bad = group.start("bad", [sys.executable, "-c", "pass"], cgroup=(tmp_path / "no" / "p",))
        assert bad.popen.wait(timeout=10) == 126
    assert procs.read_text() == str(child.popen.pid)  # the guard, whose command is its child
    assert "cannot join the build's cgroup" in (tmp_path / "bad.log").read_text()


class Recording:
    """A capper that records what it was asked, and when."""

    how = "recording"

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, float]] = []
        self.fail = fail

    def apply(self, cap: TargetCap) -> None:
        if self.fail:
            raise RunError("refused")
        self.calls.append((f"apply {cap.label}", time.time()))

    def lift(self) -> str:
        self.calls.append(("lift", time.time()))
        return "none"

    def close(self) -> None:
        self.calls.append(("close", time.time()))


class ItCapsItself:
    """A target that caps itself (as a docker build does)."""

    preset, breaker = "none", None
    metrics_map: dict[str, str] = {}

    def __init__(self, capper: Recording) -> None:
        self._capper = capper

    def capper(self) -> Recording:
        return self._capper


PHASES = """\
name: s
duration: 3s
pg:
  phases:
    - {name: a, start: 0.2s, duration: 0.3s, target: {cpus: 0.5}}
    - {name: b, start: 0.5s, duration: 2s, target: {memory: 64MiB}}
traffic:
  x: {path: /x, rate: 5}
builds:
  a: {profile: retry-only}
"""


def _info() -> BuildRecord:
    return {  # type: ignore[typeddict-item]
        "build": "a",
        "repetition": 1,
        "status": "running",
        "started_at": "",
        "kind": "docker",
    }


def test_caps_keep_the_phase_clock_and_a_cap_in_force_is_lifted_at_the_stop() -> None:
    scenario = load_scenario_text(PHASES).scenario
    capper, info = Recording(), _info()
    caps = BuildCaps(scenario, ItCapsItself(capper), None, "r", "a", info)  # type: ignore[arg-type]
    assert caps.cgroup_procs() == ()  # it caps itself: no cgroup
    t0 = time.time()
    caps.start(t0)
    time.sleep(0.8)
    caps.check()
    caps.stop()  # phase b (0.5 s to 2.5 s) is still in force: lifted now
    names = [name for name, _ in capper.calls]
    assert names == ["apply cpus 0.5", "lift", "apply memory 64MiB", "lift", "close"]
    at = [round(t - t0, 2) for _, t in capper.calls]
    assert at[0] == pytest.approx(0.2, abs=0.05) and at[1] == pytest.approx(0.5, abs=0.05)
    assert at[2] == pytest.approx(0.5, abs=0.05) and at[3] < 1.0
    first, second = info["caps"]
    assert (first["phase"], first["cpus"], first["memory_bytes"]) == ("a", 0.5, None)
    assert first["applied_at_s"] == pytest.approx(0.2, abs=0.05)
    assert first["lifted_at_s"] == pytest.approx(0.5, abs=0.05) and first["lifted_to"] == "none"
    assert second["memory_bytes"] == 64 * 1024**2 and second["lifted_at_s"] < 1.0


def test_a_cap_that_fails_fails_the_build() -> None:
    scenario = load_scenario_text(PHASES).scenario
    info = _info()
    caps = BuildCaps(scenario, ItCapsItself(Recording(fail=True)), None, "r", "a", info)  # type: ignore[arg-type]
    caps.start(time.time() - 1)  # phase a is due already
    time.sleep(0.2)
    with pytest.raises(RunError, match="phase 'a': the target's cap was not applied: refused"):
        caps.check()
    caps.stop()
    assert info["caps"][0]["error"] == "not applied: refused"
    assert "applied_at" not in info["caps"][0]


def test_clean_removes_old_empty_cgroups_of_the_harness_only(tmp_path: Path) -> None:
    hierarchy = Hierarchy(1, {"cpu": tmp_path / "cpu", "memory": tmp_path / "memory"})
    old = time.time() - LEFTOVER_AGE_S - 5
    for controller in ("cpu", "memory"):
        for name in ("harness-r1-a", "harness-r2-a", "other"):
            (tmp_path / controller / name).mkdir(parents=True)
        for name in ("harness-r1-a", "other"):
            os.utime(tmp_path / controller / name, (old, old))
    removed, problems = Cgroups([hierarchy]).remove_of_ended_runs()
    assert (removed, problems) == (["cgroup harness-r1-a"], [])
    assert sorted(p.name for p in (tmp_path / "cpu").iterdir()) == ["harness-r2-a", "other"]
    # A crashed run's own, whatever their age.
    assert Cgroups([hierarchy]).remove_of_run("r2") == ["removed cgroup(s) harness-r2-a"]
    assert [p.name for p in (tmp_path / "memory").iterdir()] == ["other"]


def _real_hierarchy() -> Hierarchy | None:
    try:
        return find_hierarchy()
    except RunError:
        return None


@pytest.mark.skipif(_real_hierarchy() is None, reason="no writable cgroup here")
def test_this_machines_cgroup_takes_a_cap_and_is_removed() -> None:
    hierarchy = _real_hierarchy()
    assert hierarchy is not None
    group = BuildCgroup(hierarchy, f"harness-unit-{os.getpid()}")
    group.create()
    try:
        group.apply(TargetCap(cpus=0.3, memory=64 * 1024**2))
        cpu = group.dirs["cpu"]
        if hierarchy.version == 1:
            assert _read(cpu, "cpu.cfs_quota_us") == "30000"
            assert _read(group.dirs["memory"], "memory.limit_in_bytes") == str(64 * 1024**2)
        else:
            assert _read(cpu, "cpu.max") == "30000 100000"
        group.lift()
        if hierarchy.version == 1:
            assert _read(cpu, "cpu.cfs_quota_us") == "-1"
    finally:
        group.remove()
    assert not any(folder.exists() for folder in group.dirs.values())
