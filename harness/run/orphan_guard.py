"""A child's guard: runs one command and kills its whole process group if the orchestrator dies.

``python -I -S orphan_guard.py LIFELINE_FD -- ARGV...``: the orchestrator starts
every child through this guard, in a session of its own whose leader is the
guard, and keeps the write end of a pipe whose read end is ``LIFELINE_FD``.
The guard starts ``ARGV`` in the guard's own process group (with gunicorn's
worker, or anything else the command forks) and waits. Three ways it ends:

- The command exits: the guard kills what the command left in the group, then
  exits as the command did (same code, or the same signal), so the
  orchestrator sees the command's own exit.
- The lifeline reads end-of-file: every holder of the write end is gone, so the
  orchestrator died, even by ``kill -9`` (a pipe needs no signal handler and,
  unlike ``PR_SET_PDEATHSIG``, does not depend on which of the orchestrator's
  threads started the child). The guard sends SIGTERM to the group, so the
  gateway and Locust write what they hold, waits ``GRACE_S``, then SIGKILLs
  the group, itself included.
- The orchestrator stops the group itself (SIGTERM, then SIGKILL): the guard
  ignores SIGTERM, waits for the command and reports its exit as above.

A build whose phases cap the target names its cgroup in ``HARNESS_CGROUP_PROCS``:
the guard joins it before starting the command, so the command and all it forks
are born inside (``join_cgroups``).

Run by path with ``-I -S``: it imports only the standard library, so it starts
in milliseconds and does not load the harness package (pydantic, YAML).
A process that leaves the group on purpose (``setsid``) is not the guard's.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time

GRACE_S = 3.0
"""How long the group has, after the orchestrator died, to finish writing before SIGKILL."""


def _noop(signum: int, frame: object) -> None:
    """SIGTERM reaches the whole group; the guard outlives it to report the command's exit."""


def group_members(pgid: int) -> list[int]:
    """Live processes of process group ``pgid`` (Linux ``/proc``), the caller excluded."""
    me = os.getpid()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # Fields after the command name, which may itself hold spaces or parentheses.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 2 and fields[0] != b"Z" and int(fields[2]) == pgid:
            found.append(int(name))
    return found


def kill_the_rest(pgid: int) -> None:
    """SIGKILL every other member of the group (a worker its master left behind)."""
    for _ in range(10):  # a member may fork while we look: look again
        members = group_members(pgid)
        if not members:
            return
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def exit_as(returncode: int) -> None:
    """End this process the way the command ended: same exit code, or killed by the same signal."""
    if returncode < 0:
        sig = -returncode
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        time.sleep(1)  # a signal whose default is not to terminate: fall through
        os._exit(128 + sig)
    sys.exit(returncode)


def orphaned(child: subprocess.Popen[bytes]) -> None:
    """The orchestrator is gone: SIGTERM the group, give it ``GRACE_S``, then SIGKILL it all."""
    pgid = os.getpgrp()
    try:
        os.killpg(pgid, signal.SIGTERM)
        child.wait(timeout=GRACE_S)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        pass
    finally:
        os.killpg(pgid, signal.SIGKILL)  # the guard too: nobody is left to report to


def watch(child: subprocess.Popen[bytes], lifeline: int) -> int:
    """Wait until the command exits (its return code) or the lifeline breaks (never returns)."""
    poller = select.poll()
    poller.register(lifeline, select.POLLIN | select.POLLHUP | select.POLLERR)
    try:
        pidfd: int | None = os.pidfd_open(child.pid)
    except (AttributeError, OSError):  # before Linux 5.3: poll the child instead
        pidfd = None
    if pidfd is not None:
        poller.register(pidfd, select.POLLIN)
    while True:
        events = poller.poll(None if pidfd is not None else 200)
        code = child.poll()
        if code is not None:
            return code
        for fd, _ in events:
            # Only end-of-file ever arrives: the orchestrator never writes to the pipe.
            if fd == lifeline:
                orphaned(child)


CGROUP_ENV = "HARNESS_CGROUP_PROCS"
"""``cgroup.procs`` files (``:``-separated) to join before the command starts, so it and
every process it forks run in the build's cgroup (``harness.run.caps.cgroups``)."""


def join_cgroups() -> None:
    """Write our pid into each named ``cgroup.procs``; a failure stops the child (exit 126):
    a build whose caps would not hold must not run as if they did."""
    for procs in filter(None, os.environ.pop(CGROUP_ENV, "").split(":")):
        try:
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        except OSError as exc:
            print(f"harness: cannot join the build's cgroup {procs}: {exc}", file=sys.stderr)
            sys.exit(126)


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] != "--":
        sys.exit("usage: orphan_guard.py LIFELINE_FD -- ARGV...")
    lifeline, command = int(argv[0]), argv[2:]
    os.set_inheritable(lifeline, False)
    if os.getpgrp() != os.getpid():
        # Lead a group of our own whoever started us: the group is what gets killed.
        os.setsid()
    signal.signal(signal.SIGTERM, _noop)  # a handler, not SIG_IGN: exec resets it in the child
    signal.signal(signal.SIGINT, _noop)
    join_cgroups()
    # Everything else the orchestrator passed (listening sockets) goes through as it came.
    try:
        child = subprocess.Popen(command, close_fds=False)
    except OSError as exc:
        print(f"harness: cannot start {command[0]}: {exc}", file=sys.stderr)
        sys.exit(127)
    code = watch(child, lifeline)
    kill_the_rest(os.getpgrp())
    exit_as(code)


if __name__ == "__main__":
    main(sys.argv[1:])
