"""Processes the run starts: start, health waits, and a guaranteed stop.

Each child gets its own session (process group) so a Ctrl-C at the terminal
reaches only the orchestrator, which then stops the children in order and
keeps what they measured. Every child carries ``HARNESS_RUN_ID`` in its
environment so a leak can be found afterwards.

A process that leaves its group on purpose (a daemon calling ``setsid``)
escapes both; it still carries ``HARNESS_RUN_ID``, so ``stop_all`` ends by
stopping every process of the run that is left (``stop_leftovers``), and
``harness clean`` does the same for runs that are over.

Every child runs under ``orphan_guard.py``, which leads its process group and
holds the read end of a pipe whose write end only the orchestrator has: if
the orchestrator dies, even by ``kill -9``, the pipe closes and the guard
stops the whole group (gunicorn's master and worker, Locust), so nothing of
the run outlives it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import httpx

from harness.core.errors import ProcessDied, RunError

GUARD = Path(__file__).with_name("orphan_guard.py")
CGROUP_ENV = "HARNESS_CGROUP_PROCS"
"""What the guard reads to join a build's cgroup (``orphan_guard.CGROUP_ENV``: the guard
imports nothing of the harness, so the name is said in both)."""
"""Runs each child; kills the child's whole process group when the orchestrator dies."""


def guarded(argv: list[str], lifeline_fd: int) -> list[str]:
    """``argv`` run under the orphan guard, which watches ``lifeline_fd`` for the parent's death."""
    # -I -S: the guard needs only the standard library; it starts in milliseconds.
    return [sys.executable, "-I", "-S", str(GUARD), str(lifeline_fd), "--", *argv]


@dataclass
class Child:
    """One started process (its guard, whose exit is the command's) and where its output goes."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    lifeline: int | None = None
    """Write end of the pipe the child's guard watches; closing it stops the child's group."""

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])


class ProcessGroup:
    """Starts children and stops every one of them on exit, whatever happened."""

    def __init__(self, run_id: str, log_dir: Path) -> None:
        self.run_id = run_id
        self.log_dir = log_dir
        self.children: list[Child] = []
        self.escaped: list[int] = []
        """Processes of the run still alive after their groups stopped (they left them: setsid),
        stopped by ``stop_all``; said to the user."""

    def start(
        self,
        name: str,
        argv: list[str],
        *,
        pass_fds: tuple[int, ...] = (),
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        cgroup: tuple[Path, ...] = (),
    ) -> Child:
        """Start ``argv`` under its guard; ``cgroup``: the ``cgroup.procs`` files it joins
        before its command starts (a capped build's cgroup, ``harness.run.caps``)."""
        log_path = self.log_dir / f"{name}.log"
        child_env = {**os.environ, **(env or {}), "HARNESS_RUN_ID": self.run_id}
        child_env.pop(CGROUP_ENV, None)
        if cgroup:
            child_env[CGROUP_ENV] = ":".join(str(p) for p in cgroup)
        # Both ends are close-on-exec: only the guard inherits the read end (pass_fds),
        # and no other child ever holds the write end, so its end-of-file means our death.
        watch_end, lifeline = os.pipe()
        try:
            with open(log_path, "wb") as log:
                popen = subprocess.Popen(
                    guarded(argv, watch_end),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=(*pass_fds, watch_end),
                    env=child_env,
                    cwd=cwd,
                    start_new_session=True,
                )
        except BaseException:
            os.close(lifeline)
            raise
        finally:
            os.close(watch_end)
        child = Child(name, popen, log_path, lifeline)
        self.children.append(child)
        return child

    def check_alive(self, *names: str) -> None:
        """Raise ``ProcessDied`` if a named child (or any, with no names) has exited."""
        for child in self.children:
            if names and child.name not in names:
                continue
            code = child.popen.poll()
            if code is not None:
                raise ProcessDied(
                    f"{child.name} exited with code {code}; last lines of {child.log_path}:\n"
                    f"{child.log_tail()}"
                )

    def pids(self) -> dict[str, int]:
        return {c.name: c.popen.pid for c in self.children}

    def stop_all(self, grace_s: float = 5.0) -> None:
        """SIGTERM every child's process group, then SIGKILL what is left after ``grace_s``."""
        for child in reversed(self.children):
            signal_group(child.popen, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for child in reversed(self.children):
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
        for child in self.children:
            # Kill the whole group: gunicorn's worker or Locust's greenlets must not outlive us.
            signal_group(child.popen, signal.SIGKILL)
            try:
                child.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover - a zombie we cannot reap
                print(
                    f"harness: {child.name} (pid {child.popen.pid}) did not stop", file=sys.stderr
                )
            if child.lifeline is not None:  # its guard is gone: nothing watches it any more
                os.close(child.lifeline)
                child.lifeline = None
        # What left its group (setsid) carries the run's id: the run's processes are all stopped
        # now, between builds as at the end, so whatever still carries it is such an escapee.
        with contextlib.suppress(RunError):  # one that would not die is the guard's message
            self.escaped += stop_leftovers(self.run_id, grace_s=1.0)

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop_all()


def signal_group(popen: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """Signal the process's group, or the process alone while it has none yet: the orphan
    guard calls ``setsid`` after the fork, so a stop just after a start found no group and
    signalled nothing (a CI run's Ctrl-C, and a ``harness worker``'s, then waited for ever
    on a process never told to stop)."""
    try:
        os.killpg(popen.pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            popen.send_signal(sig)


@contextlib.contextmanager
def shielded_from_signals() -> Iterator[None]:
    """Hold off SIGINT/SIGTERM while cleaning up, so a second Ctrl-C cannot leak a process.

    A signal that arrives meanwhile is delivered (as KeyboardInterrupt) once the
    block ends. Outside the main thread signals cannot be handled, so it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {
        sig: signal.signal(sig, lambda signum, frame: pending.append(signum))
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if pending:
            raise KeyboardInterrupt


def wait_http(url: str, group: ProcessGroup, name: str, timeout_s: float = 60.0) -> None:
    """Poll ``url`` until it answers 200, failing fast if the process behind it dies."""
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        group.check_alive(name)
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        time.sleep(0.1)
    raise RunError(f"{name} did not become healthy at {url} within {timeout_s:g}s ({last})")


def processes_by_run() -> dict[str, list[int]]:
    """Live processes carrying ``HARNESS_RUN_ID`` (Linux ``/proc``), by run id: one scan."""
    found: dict[str, list[int]] = {}
    proc = Path("/proc")
    for entry in proc.iterdir() if proc.is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            ids = [v[len(RUN_ID_MARKER) :] for v in env if v.startswith(RUN_ID_MARKER)]
            if ids and "\nState:\tZ" not in (entry / "status").read_text():
                found.setdefault(ids[0].decode(errors="replace"), []).append(int(entry.name))
        except OSError:
            continue
    return found


RUN_ID_MARKER = b"HARNESS_RUN_ID="


def leftover_processes(run_id: str) -> list[int]:
    """Live processes whose environment carries ``HARNESS_RUN_ID=<run_id>``."""
    return processes_by_run().get(run_id, [])


def stop_leftovers(run_id: str, timeout_s: float = 5.0, grace_s: float = 0.0) -> list[int]:
    """Stop what carries the run's id: SIGTERM, ``grace_s`` to exit, then SIGKILL; their pids."""
    pids = leftover_processes(run_id)
    if not pids:
        return []
    if grace_s > 0:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while leftover_processes(run_id) and time.monotonic() < deadline:
            time.sleep(0.05)
    for pid in leftover_processes(run_id):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while leftover_processes(run_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    if leftover_processes(run_id):
        raise RunError(f"processes of run {run_id} would not stop: {leftover_processes(run_id)}")
    return pids
