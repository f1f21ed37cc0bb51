"""Shared helpers for tests that start real processes on loopback, and the rule that keeps
those tests apart from the unit tests.

``make test`` runs the unit tests in parallel (pytest-xdist) and then, in the lanes of
``tests/lanes.py``, the tests marked ``integration``: those start real processes (gateway,
shop, Locust, nginx, docker, node) whose timing a neighbour's load disturbs. A test that is
not marked so and still starts one fails, saying to mark it (``_servers_need_the_marker``
below), so the split cannot silently go wrong when a test is added.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest_plugins = ["tests.lanes"]  # --lanes: how make test lays out the integration tests


def leftover_processes(run_id: str) -> list[int]:
    """PIDs of live processes whose environment carries this run's HARNESS_RUN_ID."""
    marker = f"HARNESS_RUN_ID={run_id}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                status = (entry / "status").read_text()
                if "\nState:\tZ" not in status:
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` s pass: a state a process reaches
    in its own time, never a fixed sleep (a loaded machine outlasts it); whether it held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def harness_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "harness", *args]


def ignore_sigint() -> None:
    """A ``preexec_fn``: the child starts with SIGINT ignored, as a script's background job
    (``cmd &``) or a ``nohup`` one does. Python keeps it ignored unless told otherwise, so a
    command that must stop on Ctrl-C is tested started this way, the case a plain start
    cannot show."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class PgServer:
    """A real PG fault server process on a free loopback port."""

    def __init__(self, scenario: Path, t0: float | None = None, ledger: Path | None = None) -> None:
        sock = socket.create_server(("127.0.0.1", 0), backlog=4096)
        sock.set_inheritable(True)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        argv = [
            sys.executable,
            "-m",
            "harness.pg",
            "--scenario",
            str(scenario),
            "--fd",
            str(sock.fileno()),
        ]
        if t0 is not None:
            argv += ["--t0", str(t0)]
        if ledger is not None:
            argv += ["--ledger", str(ledger)]
        self.proc = subprocess.Popen(argv, pass_fds=(sock.fileno(),), cwd=ROOT)
        sock.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("PG server did not start")

    def metric(self, name: str, **labels: str) -> float:
        from prometheus_client.parser import text_string_to_metric_families

        total = 0.0
        text = httpx.get(f"{self.url}/metrics", timeout=5).text
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                    total += s.value
        return total

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def pg_scenario(tmp_path: Path, fault: str, name: str = "pg") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"""\
name: {name}
seed: 1
duration: 1h
traffic:
  x: {{path: /x, rate: 1}}
pg:
  phases:
    - {{name: only, start: 0s, duration: 1h, fault: {fault}}}
builds:
  b: {{profile: retry-only}}
"""
    )
    return path


CAPACITY_SCENARIO = """\
name: cap
seed: 1
duration: 1h
traffic:
  x: {{path: /x, rate: 1}}
pg:
{capacity}
  phases:
{phases}
builds:
  b: {{profile: retry-only}}
"""


def capacity_scenario(capacity: str, phases: str) -> str:
    """A gateway-only scenario: ``capacity`` is line 7 (``  capacity: {...}``, or a comment),
    ``phases`` the lines from 9 (``    - {name: ..., fault: ...}``)."""
    return CAPACITY_SCENARIO.format(capacity=capacity, phases=phases)


@pytest.fixture
def pg_factory(tmp_path: Path) -> Iterator[object]:
    servers: list[PgServer] = []

    def start(fault: str) -> PgServer:
        server = PgServer(pg_scenario(tmp_path, fault, f"pg{len(servers)}"), t0=time.time())
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never need a proxy; make sure none redirects loopback traffic."""
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    os.environ.setdefault("PYTHONUNBUFFERED", "1")


# 8 threads; a payment meeting the hung gateway holds one for 2 x 0.8 s + 0.1 s,
# so 8 payments/s need ~14 threads: the retry-only pool must saturate.
SHORT = """\
name: short
seed: 3
warmup: 2s
duration: {duration}
traffic:
  payments:
    method: POST
    path: /api/payments
    rate: 8
    timeout: 8s
    body: {{amount: 1000}}
    idempotency-key: true
    calls-gateway: true
  products: {{path: "/api/products/{{id}}", params: {{id: [1, 100]}}, rate: 4, timeout: 8s}}
pg:
  phases:
    - {{name: baseline, start: 0s, duration: 3s, fault: {{type: healthy}}}}
    - {{name: outage, start: 3s, duration: {outage}, fault: {{type: timeout}}}}
builds:
  before:
    profile: retry-only
    workers: 8
    pg-client: {{connect-timeout: 500ms, read-timeout: 800ms}}
    resilience4j: {{retry: {{max-attempts: 2, wait-duration: 100ms}}}}
  after:
    profile: retry-circuit-breaker
    workers: 8
    pg-client: {{connect-timeout: 500ms, read-timeout: 800ms}}
    resilience4j:
      retry: {{max-attempts: 2, wait-duration: 100ms}}
      circuitbreaker:
        sliding-window-size: 10
        minimum-number-of-calls: 10
        failure-rate-threshold: 50
        wait-duration-in-open-state: 5s
        permitted-number-of-calls-in-half-open-state: 3
        automatic-transition-from-open-to-half-open-enabled: true
gates:
  - name: product reads protected
    expr: "after.products.p95[outage] <= 0.5 * before.products.p95[outage]"
  - "after.busy_workers.p50[outage] <= 0.5 * after.max_workers"
  - "after.pg.amplification[outage] <= 1.0"
  # Must fail: a breaker cannot make payments succeed against a dead gateway.
  - name: payments succeed during the outage
    expr: "after.payments.success_pct[outage] >= 50"
"""


def short_scenario(tmp_path: Path, duration: str = "21s", outage: str = "18s") -> Path:
    """A short before/after experiment (about 30 s per build) in ``tmp_path``."""
    path = tmp_path / "short.yaml"
    path.write_text(SHORT.format(duration=duration, outage=outage))
    return path


def once_per_session(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], Path]
) -> Path:
    """``make(folder)`` once per test session, however many xdist workers ask: the first
    makes it under a lock, the others wait and read the path it returned (a failure is
    said to them too, not made again). Under xdist the workers share the session's base
    folder and ``PYTEST_XDIST_TESTRUNUID``; alone, this is a plain session fixture's body."""
    uid = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if uid is None:
        return make(tmp_path_factory.mktemp(name))
    folder = tmp_path_factory.getbasetemp().parent / f"{name}-{uid}"
    folder.mkdir(exist_ok=True)
    record = folder / "made.json"
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if record.exists():
            made = json.loads(record.read_text())
            if made["error"]:
                pytest.fail(f"{name}, made by another worker, failed: {made['error']}")
            return Path(made["path"])
        try:
            path = make(folder / "made")
        except BaseException as exc:
            record.write_text(json.dumps({"path": None, "error": str(exc) or repr(exc)}))
            raise
        record.write_text(json.dumps({"path": str(path), "error": None}))
        return path


@pytest.fixture(scope="session")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real short experiment through the real CLI, shared by every test that reads a run.

    Real PG server, real target under gunicorn, real Locust; ~70 s, made once per session
    (``once_per_session``: one worker makes it, the others read it).
    """
    return once_per_session(tmp_path_factory, "short-run", _make_short_run)


def _make_short_run(tmp: Path) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    results = tmp / "results"
    junit = tmp / "gates.xml"
    done = subprocess.run(
        harness_cmd(
            "run", str(short_scenario(tmp)), "--results", str(results), "--junit", str(junit)
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # Exit 1: the run completed and its gate that must fail (payments cannot succeed
    # against a dead gateway, breaker or not) failed; the others passed.
    assert done.returncode == 1, done.stdout + done.stderr
    assert junit.exists()
    (tmp / "run-output.txt").write_text(done.stdout)
    assert "Traceback" not in done.stderr
    runs = sorted((results / "short").iterdir())
    assert len(runs) == 1
    return runs[0]


# ----------------------------------------------------------------- the integration marker

SHARED_RUNS = frozenset({"short_run"})
"""Fixtures holding one real run for several tests: only integration tests may read them
(the run would otherwise be made in the parallel half, or not at all in `make check`)."""

SERVING = (
    "-m harness run ",
    "-m harness pg ",
    "-m harness proxy ",
    "-m harness.pg ",
    "-m harness.gateway ",
    "-m harness.proxy ",
    "-m targets.shop ",
    "-m locust ",
)
"""Commands that start a server even when the test stops it within its own body."""


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """A parallel worker's ``tmp_path`` as long as a serial run's, give or take two characters.

    pytest-xdist gives worker gwN ``<basetemp>/popen-gwN``: ten characters more, enough to
    fold a long path in a table cell or line of the CLI's 140 columns, which a few tests
    read (test_index, test_cli_init). ``<basetemp>/N`` instead.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    base = config.option.basetemp
    if worker and base and Path(base).name == f"popen-{worker}":
        config.option.basetemp = str(Path(base).parent / worker.removeprefix("gw"))


SPAWNS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.spawn", "os.fork", "os.system"})
"""Audit events of a new process (asyncio's subprocesses are ``subprocess.Popen`` too)."""

_started: list[str] = []
"""The commands the current test (its fixtures included) started with ``subprocess``."""
_before: list[set[int]] = []
"""This process's children when the current test first started one (scanned only then)."""


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event not in SPAWNS:
        return
    if not _before:
        _before.append(set(_children()))
    if event == "subprocess.Popen":
        argv = args[1]
        words = [os.fsdecode(a) for a in argv] if isinstance(argv, list | tuple) else [str(argv)]
        _started.append(" ".join(words))


sys.addaudithook(_audit)


def live_parents() -> dict[int, int]:
    """Every live process (zombies not counted) and its parent's PID, from /proc."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
            state, ppid = stat.rsplit(")", 1)[1].split()[:2]
            if state != "Z":
                parents[int(entry.name)] = int(ppid)
        except (OSError, ValueError, IndexError):
            continue
    return parents


def descendants(pid: int) -> set[int]:
    """Live processes under ``pid``: its children, their children, and so on."""
    parents = live_parents()
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


def _children() -> dict[int, str]:
    """This process's live children (zombies not counted): pid -> command line."""
    found = {}
    for pid, ppid in live_parents().items():
        if ppid != os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        found[pid] = cmd.decode(errors="replace").strip()
    return found


_UNMARKED = pytest.StashKey[str]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that reads a shared run must be an integration test: one that is not fails
    before its fixtures make the run (a collection error would not read well under xdist)."""
    for item in items:
        shared = sorted(SHARED_RUNS & set(item.fixturenames))
        if shared and item.get_closest_marker("integration") is None:
            item.stash[_UNMARKED] = (
                f"{item.nodeid} uses {', '.join(shared)}, a real run, but is not marked "
                "integration: mark it `pytest.mark.integration`"
            )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test starts with nothing started, before its fixtures start anything."""
    if _UNMARKED in item.stash:
        pytest.fail(item.stash[_UNMARKED], pytrace=False)
    _started.clear()
    _before.clear()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """A unit test (not marked integration) may run commands that exit, never a server: it
    fails if it or its fixtures started one (``SERVING``) or left a process running past its
    body (one a fixture stops afterwards, say)."""
    result = yield
    if _before and item.get_closest_marker("integration") is None:
        servers = [cmd for cmd in _started if any(f" {s}" in f" {cmd} " for s in SERVING)]
        servers += [cmd for pid, cmd in _children().items() if pid not in _before[0]]
        if servers:
            pytest.fail(
                f"{item.nodeid} starts a server or leaves a process running, so it is an "
                "integration test: mark it `pytest.mark.integration` (run serially, apart "
                "from the parallel unit tests). Started: " + "; ".join(dict.fromkeys(servers)),
                pytrace=False,
            )
    return result
