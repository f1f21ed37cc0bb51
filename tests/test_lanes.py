"""The integration lanes' scheduler (tests/lanes.py) against a model of xdist's workers.

A worker runs a test only when it holds two or more (it keeps its last one until it is
given more work or shut down, as xdist's worker does, to know the test after it); the
model steps the workers in turn and checks what ``make test`` relies on: every test runs
once, modules start longest first, a heavy module never runs beside another while a
clock-bound one waits, at most ``HEAVY_AT_ONCE_AT_THE_END`` after, and nothing deadlocks
on a held-back test.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from tests.lanes import HEAVY_AT_ONCE_AT_THE_END, LaneScheduling, is_heavy, longest_first


class Worker:
    """What the scheduler sees of an xdist worker, and the order it would run tests in."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.gateway = SimpleNamespace(id=name)
        self.queue: list[int] = []
        self.shutting_down = False
        self.ran: list[str] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        assert not self.shutting_down
        self.queue += indices

    def shutdown(self) -> None:
        self.shutting_down = True

    def can_run(self) -> bool:
        return len(self.queue) >= 2 or (self.shutting_down and bool(self.queue))


def _modules(tests: dict[str, int]) -> list[str]:
    return [f"{m}::test_{i}" for m, n in tests.items() for i in range(n)]


def _run(tests: dict[str, int], durations: dict[str, float], workers: int) -> list[Worker]:
    nodeids = longest_first(_modules(tests), durations)
    config = SimpleNamespace(getvalue=lambda name: [f"{workers}*popen"], option=SimpleNamespace())
    sched = LaneScheduling(config)  # type: ignore[arg-type]
    nodes = [Worker(f"gw{i}") for i in range(workers)]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, nodeids)
    sched.schedule()
    for step in itertools.count():
        assert step < 10_000, "the workers stopped with tests left: a deadlock"
        runnable = [n for n in nodes if n.can_run()]
        if not runnable:
            break
        node = runnable[step % len(runnable)]
        index = node.queue.pop(0)
        node.ran.append(nodeids[index])
        _check_heavy_at_once(sched, nodes)
        sched.mark_test_complete(node, index)
    assert sched.tests_finished
    return nodes


def _check_heavy_at_once(sched: LaneScheduling, nodes: list[Worker]) -> None:
    """Modules begun and not finished, per worker: heavy ones within the limit."""
    running = []
    for node in nodes:
        for scope, done in sched.assigned_work.get(node, {}).items():
            begun = any(n in node.ran for n in done) or any(done.values())
            if begun and not all(done.values()) and is_heavy(scope):
                running.append(scope)
    clock_waits = any(not is_heavy(scope) for scope in sched.workqueue)
    assert len(running) <= (1 if clock_waits else HEAVY_AT_ONCE_AT_THE_END), running


TESTS = {
    "tests/spring/test_a.py": 3,
    "tests/spring/test_b.py": 1,
    "tests/seeds/test_seed_000_spring.py": 2,
    "tests/run/test_integration_docker.py": 4,
    "tests/run/test_x.py": 1,
    "tests/run/test_y.py": 5,
    "tests/gates/test_z.py": 2,
    "tests/report/test_w.py": 1,
}
DURATIONS = {
    "tests/spring/test_a.py": 160,
    "tests/spring/test_b.py": 140,
    "tests/seeds/test_seed_000_spring.py": 100,
    "tests/run/test_integration_docker.py": 40,
    "tests/run/test_x.py": 200,
    "tests/run/test_y.py": 30,
    "tests/gates/test_z.py": 10,
}


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 6])
def test_every_test_runs_once_and_heavy_modules_keep_their_limit(workers: int) -> None:
    nodes = _run(TESTS, DURATIONS, workers)
    ran = [t for n in nodes for t in n.ran]
    assert sorted(ran) == sorted(_modules(TESTS))
    for node in nodes:  # a module's tests run together, in their order, on one worker
        modules = [t.split("::")[0] for t in node.ran]
        assert modules == sorted(modules, key=modules.index)
        for module in set(modules):
            own = [t for t in node.ran if t.startswith(module + "::")]
            assert own == [t for t in _modules(TESTS) if t.startswith(module + "::")]


def test_modules_start_longest_first_an_unlisted_one_as_a_short_run() -> None:
    order = list(dict.fromkeys(t.split("::")[0] for t in longest_first(_modules(TESTS), DURATIONS)))
    assert order == [
        "tests/run/test_x.py",
        "tests/spring/test_a.py",
        "tests/spring/test_b.py",
        "tests/seeds/test_seed_000_spring.py",
        "tests/report/test_w.py",  # not listed: UNLISTED_S, 60 s
        "tests/run/test_integration_docker.py",
        "tests/run/test_y.py",
        "tests/gates/test_z.py",
    ]


def test_only_heavy_modules_run_two_at_once_and_spare_workers_stop() -> None:
    heavy = {m: n for m, n in TESTS.items() if is_heavy(m)}
    nodes = _run(heavy, DURATIONS, 4)
    assert sum(bool(n.ran) for n in nodes) == HEAVY_AT_ONCE_AT_THE_END


def test_a_worker_holding_a_heavy_module_does_not_take_the_others_behind_it() -> None:
    # Modules of one test each, as the seeds' Spring runs: a worker asked at every test's
    # end anywhere took every heavy module while its first ran, and ran the tail alone.
    heavy = {f"tests/spring/test_{i}.py": 1 for i in range(8)}
    clock = {f"tests/run/test_{i}.py": 1 for i in range(3)}
    durations = {m: 100.0 - i for i, m in enumerate(heavy)} | dict.fromkeys(clock, 50.0)
    nodes = _run(heavy | clock, durations, 4)
    per_worker = [sum(is_heavy(t.split("::")[0]) for t in n.ran) for n in nodes]
    assert sum(per_worker) == len(heavy)
    assert max(per_worker) <= len(heavy) - 2, per_worker  # the tail is shared
