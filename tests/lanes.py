"""How ``make test`` lays the integration tests over pytest-xdist's workers (``--lanes``).

The integration tests mostly wait on a scenario's clock, so several run at once; what
must not pile up is the CPU some of them need at their own moments. So:

- a test module is a unit, given whole to one worker (as ``--dist loadfile``): a module's
  shared run is made once;
- units start longest first (largest first is the classic bound on the last worker's
  idle tail), by their seconds in ``DURATIONS``; a module not listed there counts
  ``UNLISTED_S``. ``make durations`` writes the file anew from a full run;
- the modules in ``PAIRED`` (JVMs starting, a Docker image building) run two at once at
  most (``PAIRED_AT_ONCE``), beside clock-bound modules;
- the modules in ``ALONE`` hold a timer to tens of milliseconds: they start before every
  other module and run with no other ``PAIRED`` or ``ALONE`` module beside them, so
  they meet only Python experiments, which mostly wait.
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

PAIRED = (
    "tests/spring/",
    "tests/seeds/test_seed_000_spring.py",
    "tests/seeds/test_seed_002_spring.py",
    "tests/run/test_integration_docker.py",
    "tests/run/test_integration_caps.py",
)
"""Modules (or folders, ending in ``/``) that need both cores for seconds at a time: a JVM
starting (7.6 s of CPU for the spring-shop jar), a Docker image building (the caps
module's Docker test, run beside three other modules, once read a 0.1-CPU container at
15.5 %)."""

PAIRED_AT_ONCE = 2
"""``PAIRED`` modules at once: two, as two workers of ``--dist loadfile`` always could (the
Spring tests' health timeouts and bounds were set on such runs)."""

ALONE = (
    "tests/seeds/test_seed_004.py",
    "tests/gateway/test_integration_capacity.py",
)
"""Modules whose figures need a timer kept to tens of milliseconds: seed 004's scrapes
every 100 ms (a 0.4 s stall beside a JVM blanked its figures, with the other core busy)
and the capacity tests' 25 ms bounds on the gateway's own timer."""

HEAVY = PAIRED + ALONE


def module_of(nodeid: str) -> str:
    """``tests/a/test_b.py::test_c[x]`` -> ``tests/a/test_b.py``."""
    return nodeid.split("::", 1)[0]


def _listed(module: str, table: tuple[str, ...]) -> bool:
    return any(module == h or (h.endswith("/") and module.startswith(h)) for h in table)


def is_heavy(module: str) -> bool:
    """In ``PAIRED`` or ``ALONE``: limited in what runs beside it."""
    return _listed(module, HEAVY)


def is_alone(module: str) -> bool:
    return _listed(module, ALONE)


def may_start(module: str, running: list[str]) -> bool:
    """Whether ``module`` may start while the modules ``running`` (on other workers) run."""
    if not is_heavy(module):
        return True
    heavy = [m for m in running if is_heavy(m)]
    if is_alone(module):
        return not heavy
    return not any(is_alone(m) for m in heavy) and len(heavy) < PAIRED_AT_ONCE


def read_durations(path: Path = DURATIONS) -> dict[str, float]:
    try:
        loaded = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    return {str(k): float(v) for k, v in loaded.items()}


def expected_s(nodeid: str, durations: dict[str, float]) -> float:
    """The seconds of the test's module, as measured (``UNLISTED_S`` if it was not)."""
    return durations.get(module_of(nodeid), UNLISTED_S)


def start_order(nodeid: str, durations: dict[str, float]) -> tuple[bool, float]:
    """The sort key of the order modules start in: ``ALONE`` ones first (each holds back
    every other heavy module, so done while clock-bound ones fill the other workers), then
    the longest first."""
    return (not is_alone(module_of(nodeid)), -expected_s(nodeid, durations))


def longest_first(nodeids: list[str], durations: dict[str, float]) -> list[str]:
    """The tests in the order their modules should start (``start_order``); within a
    module, the order collected (the sort is stable)."""
    return sorted(nodeids, key=lambda n: start_order(n, durations))


class LaneScheduling(LoadScopeScheduling):
    """xdist's module-at-a-time scheduling, in the order collected (which
    ``pytest_collection_modifyitems`` made ``start_order``), holding back heavy modules
    (``may_start``)."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        config.option.loadscopereorder = False
        super().__init__(config, log)

    def _split_scope(self, nodeid: str) -> str:
        return module_of(nodeid)

    def _next_unit(self, node: Any) -> str | None:
        """The first waiting module ``node`` may start now, if any. Its own modules do not
        count against the heavy limit: a worker runs its modules one after another."""
        running = self._running(node)
        return next((s for s in self.workqueue if may_start(s, running)), None)

    def _running(self, node: Any) -> list[str]:
        """The modules begun on other workers and not yet finished."""
        return [
            scope
            for other, work in self.assigned_work.items()
            if other is not node
            for scope, tests in work.items()
            if not all(tests.values())
        ]

    def _assign_work_unit(self, node: Any) -> None:
        scope = self._next_unit(node)
        if scope is None:
            # Only heavy modules wait, held back by modules of other workers. Wait for
            # them while one is ALONE (a worker shut down is lost for good, and an ALONE
            # module is soon over) or while every other worker is ending its last test
            # (else nobody would be left); each test's end reschedules this worker
            # (``mark_test_complete``). Otherwise the workers running heavy modules take
            # the rest after them (their own modules never hold them back): shut down,
            # running the test held back (xdist keeps a worker's last test until more
            # work or the end).
            others = [other for other in self.assigned_work if other is not node]
            if any(is_alone(m) for m in self._running(node)) or all(
                other.shutting_down for other in others
            ):
                return
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
        help="schedule modules whole, the longest first, the heavy ones held back (tests/lanes.py)",
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
    items.sort(key=lambda item: start_order(item.nodeid, durations))  # as longest_first


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
