"""A build's phase caps over its run: its cgroup, the capper, and the thread that keeps time.

``BuildCaps`` is made per build when the scenario's phases cap the target
(``pg.phases[].target``). Before the build's processes start it makes the
build's cgroup (``cgroup_procs``: what each of them joins), unless the target
caps itself (a container: ``harness.run.targets.CapsItself``). Once the load's
t0 is known (``start``), a thread applies each phase's cap at t0 + its start and
lifts it at t0 + its end, the gateway's phase clock, and records each in the
build's manifest entry (``caps``). A cap that cannot be applied or lifted fails
the build (``check``, each second of the watch). ``stop`` lifts a cap still in
force (the build ended early); ``close``, after the processes stopped, removes
the cgroup and what is left in it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

from harness.core.errors import RunError
from harness.results.manifest import BuildRecord, CapRecord
from harness.run.caps.cgroups import BuildCgroup, Hierarchy, cgroup_name, find_hierarchy
from harness.run.targets import Capper, CapsItself, Target
from harness.scenario.faults import Phase
from harness.scenario.schema import Scenario


def capped_phases(scenario: Scenario) -> list[Phase]:
    """The phases that cap the target, by start."""
    return [phase for phase in scenario.phases if phase.target is not None]


def preflight_caps(scenario: Scenario, targets: Iterable[Target]) -> Hierarchy | None:
    """Before any build: the cgroup the builds the harness starts will be capped in.

    ``None`` when nothing needs one (no caps, or every target caps itself); ``RunError``
    (exit 3) saying what was tried when no cgroup is writable.
    """
    if not capped_phases(scenario):
        return None
    if all(isinstance(target, CapsItself) for target in targets):
        return None
    return find_hierarchy()


class BuildCaps:
    """One build's phase caps (see the module)."""

    def __init__(
        self,
        scenario: Scenario,
        target: Target,
        hierarchy: Hierarchy | None,
        run_id: str,
        key: str,
        info: BuildRecord,
    ) -> None:
        self.phases = capped_phases(scenario)
        self.target = target
        self.info = info
        self.cgroup: BuildCgroup | None = None
        if self.phases and not isinstance(target, CapsItself):
            if hierarchy is None:  # pragma: no cover - the experiment's preflight found one
                raise RunError("the target is capped but no cgroup was found for it")
            self.cgroup = BuildCgroup(hierarchy, cgroup_name(run_id, key))
        self.capper: Capper | None = None
        self.error: RunError | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._in_force: CapRecord | None = None
        self._t0 = 0.0

    def cgroup_procs(self) -> tuple[Path, ...]:
        """Make the build's cgroup (if it has one); the ``cgroup.procs`` its processes join."""
        if self.cgroup is None:
            return ()
        self.cgroup.create()
        self.info["cgroup"] = self.cgroup.how
        return self.cgroup.procs_files()

    def start(self, t0: float) -> None:
        """Apply and lift each phase's cap on the phase clock (t0 + the phase's start and end)."""
        if not self.phases:
            return
        if isinstance(self.target, CapsItself):
            self.capper = self.target.capper()
        else:
            self.capper = self.cgroup
        self._t0 = t0
        self.info["caps"] = []
        self._thread = threading.Thread(target=self._run, name="caps", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        capper = self.capper
        assert capper is not None
        for phase in self.phases:
            cap = phase.target
            assert cap is not None
            record: CapRecord = {
                "phase": phase.name,
                "cpus": cap.cpus,
                "memory_bytes": cap.memory,
                "by": capper.how,
                "due_at": self._t0 + phase.start,
            }
            self.info.setdefault("caps", []).append(record)
            if self._wait_until(self._t0 + phase.start):
                return
            if not self._do(record, "applied", partial(capper.apply, cap)):
                return
            self._in_force = record
            if self._wait_until(self._t0 + phase.end):
                return
            if not self._lift():
                return

    def _wait_until(self, at: float) -> bool:
        """Sleep until unix time ``at``; ``True`` when stopped first."""
        while (left := at - time.time()) > 0:
            if self._stop.wait(min(left, 0.5)):
                return True
        return self._stop.is_set()

    def _do(self, record: CapRecord, what: str, step: Callable[[], object]) -> bool:
        """Run ``step`` and record when it took effect; ``False`` (and ``error``) if it failed."""
        try:
            result = step()
        except RunError as exc:
            record["error"] = f"not {what}: {exc}"
            self.error = RunError(
                f"phase {record['phase']!r}: the target's cap was {record['error']}"
            )
            return False
        now = time.time()
        if what == "applied":
            record["applied_at"], record["applied_at_s"] = now, round(now - self._t0, 4)
        else:
            record["lifted_at"], record["lifted_at_s"] = now, round(now - self._t0, 4)
            record["lifted_to"] = str(result)
        return True

    def _lift(self) -> bool:
        record, self._in_force = self._in_force, None
        if record is None or self.capper is None:
            return True
        capper = self.capper
        return self._do(record, "lifted", capper.lift)

    def check(self) -> None:
        """Raise the error of a cap that could not be applied or lifted."""
        if self.error is not None:
            raise self.error

    def stop(self) -> None:
        """Stop keeping time; lift a cap still in force (the build ended before its phase)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._lift()
        if self.capper is not None:
            self.capper.close()

    def close(self) -> list[int]:
        """After the build's processes stopped: remove its cgroup, killing what is left in it
        (a process that left its process group, ``setsid``); their pids."""
        if self.cgroup is None:
            return []
        return self.cgroup.remove()
