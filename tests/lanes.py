"""How ``make test`` lays the integration tests over pytest-xdist's workers (``--lanes``).

The integration tests mostly wait on a scenario's clock, so several run at once; what
must not pile up is the CPU they sometimes need all at once, JVMs starting or a Docker
image building. So:

- a test module is a unit, given whole to one worker (as ``--dist loadfile``): a module's
  shared run is made once;
- units start longest first (largest first is the classic bound on the last worker's
  idle tail), by their seconds in ``DURATIONS``; a module not listed there counts
  ``UNLISTED_S``. ``make durations`` writes the file anew from a full run;
- the modules in ``HEAVY`` (a JVM, a Docker image built, 100 ms scrapes) run one at a
  time while clock-bound modules still wait to start, so a JVM shares the machine with
  Python experiments only; once every clock-bound module has started, a worker that
  would idle takes a heavy module too, ``HEAVY_AT_ONCE_AT_THE_END`` at most.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

DURATIONS = Path(__file__).with_name("durations.json")
"""Seconds per integration test module (setup, call and teardown of its tests), measured."""

UNLISTED_S = 60.0
"""A module missing from ``DURATIONS`` (a new one) counts this long: about a short run."""

HEAVY = (
    "tests/spring/",
    "tests/seeds/test_seed_000_spring.py",
    "tests/seeds/test_seed_002_spring.py",
    "tests/run/test_integration_docker.py",
    "tests/run/test_integration_caps.py",
    "tests/seeds/test_seed_004.py",
    "tests/gateway/test_integration_capacity.py",
    "tests/stubs/test_integration_wiremock.py",
)
"""Modules (or folders, ending in ``/``) that need the CPU at their own moments: a JVM
starting, a Docker image building (the caps module's Docker test, left out at first, read
a 0.1-CPU container at 15.5 % once beside three other modules), scrapes every 100 ms whose
figures a test reads (seed 004's short scenario: a 0.4 s stall blanked its figures once,
with the other core busy), or the gateway's timer held to 25 ms (the capacity tests).
``scenarios/ci/tune-short.yaml`` scrapes every 100 ms too, but its figures are the load
generator's; what made it miss its early stop on a loaded machine was the check's own
cost (every finished candidate analysed again; now only those its gates name), so it is
clock-bound: ~4 minutes the heavy modules no longer wait through."""

HEAVY_AT_ONCE_AT_THE_END = 2
"""Heavy modules at once once no clock-bound module waits (one before): two, as two
workers of ``--dist loadfile`` always could."""


def module_of(nodeid: str) -> str:
    """``tests/a/test_b.py::test_c[x]`` -> ``tests/a/test_b.py``."""
    return nodeid.split("::", 1)[0]


def is_heavy(module: str) -> bool:
    return any(module == h or (h.endswith("/") and module.startswith(h)) for h in HEAVY)


def read_durations(path: Path = DURATIONS) -> dict[str, float]:
    try:
        loaded = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    return {str(k): float(v) for k, v in loaded.items()}


def expected_s(nodeid: str, durations: dict[str, float]) -> float:
    """The seconds of the test's module, as measured (``UNLISTED_S`` if it was not)."""
    return durations.get(module_of(nodeid), UNLISTED_S)


def longest_first(nodeids: list[str], durations: dict[str, float]) -> list[str]:
    """The tests in the order their modules should start, the longest module first; within
    a module, the order collected (the sort is stable)."""
    return sorted(nodeids, key=lambda n: -expected_s(n, durations))


class LaneScheduling(LoadScopeScheduling):
    """xdist's module-at-a-time scheduling, in the order collected (which
    ``pytest_collection_modifyitems`` made longest first), holding back heavy modules."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        config.option.loadscopereorder = False
        super().__init__(config, log)

    def _split_scope(self, nodeid: str) -> str:
        return module_of(nodeid)

    def _own_heavy_left(self, node: Any) -> int:
        """Tests of heavy modules ``node`` holds and has not finished."""
        return sum(
            not done
            for scope, tests in self.assigned_work.get(node, {}).items()
            if is_heavy(scope)
            for done in tests.values()
        )

    def _next_unit(self, node: Any) -> str | None:
        """The first waiting module ``node`` may start now, if any. Its own modules do not
        count against the heavy limit: a worker runs its modules one after another. But it
        is given a heavy module only once its own heavy one is down to its last test (which
        xdist holds back until more work comes): else, asked at each test's end anywhere,
        a worker holding one heavy module took every other one queued behind it, and ran
        the whole heavy tail alone (900 s) while the limit allowed two."""
        heavy_now = sum(  # workers, not modules: one may hold its next behind its last test
            1
            for other in self.assigned_work
            if other is not node and self._own_heavy_left(other) > 0
        )
        clock_waits = any(not is_heavy(scope) for scope in self.workqueue)
        limit = 1 if clock_waits else HEAVY_AT_ONCE_AT_THE_END
        may_take_heavy = heavy_now < limit and self._own_heavy_left(node) <= 1
        return next((s for s in self.workqueue if not is_heavy(s) or may_take_heavy), None)

    def _assign_work_unit(self, node: Any) -> None:
        scope = self._next_unit(node)
        if scope is None and self._own_heavy_left(node) > 1:
            return  # asked again when its heavy module is down to its last test
        if scope is None:
            # Only heavy modules wait and the workers holding the limit's worth will take
            # them: this one is not needed. Shut down, it runs the test it holds back
            # (xdist keeps a worker's last test until more work or the end) and exits.
            node.shutdown()
            return
        work_unit = self.workqueue.pop(scope)
        self.assigned_work.setdefault(node, {})[scope] = work_unit
        collection = self.registered_collections[node]
        node.send_runtest_some([collection.index(n) for n, done in work_unit.items() if not done])

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        super().mark_test_complete(node, item_index, duration)
        for other in self.assigned_work:  # a module's end may let a waiting worker start
            if other is not node:
                self._reschedule(other)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lanes", "integration lanes (tests/lanes.py)")
    group.addoption(
        "--lanes",
        action="store_true",
        help="schedule modules whole, the longest first, the heavy ones one at a time",
    )
    group.addoption(
        "--store-durations",
        metavar="PATH",
        help="write each module's measured seconds to PATH (JSON) at the end of the run",
    )


@pytest.hookimpl(optionalhook=True)  # xdist's hook: absent under ``-p no:xdist``
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LaneScheduling | None:
    return LaneScheduling(config, log) if config.getoption("lanes") else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("lanes"):
        return
    durations = read_durations()
    items.sort(key=lambda item: -expected_s(item.nodeid, durations))  # as longest_first


_measured: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each phase's seconds, summed per module (under xdist: in the controller)."""
    module = module_of(report.nodeid)
    _measured[module] = _measured.get(module, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("store_durations")
    if path and _measured and not hasattr(session.config, "workerinput"):
        rounded = {m: round(s, 1) for m, s in sorted(_measured.items())}
        Path(path).write_text(json.dumps(rounded, indent=1) + "\n")
