"""The orphan guard: a child's whole process group dies with the orchestrator, and otherwise
the guard is invisible (the command's exit code, signal and inherited sockets come through)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

from harness.run.orphan_guard import GRACE_S
from harness.run.processes import ProcessGroup, guarded, signal_group
from tests.conftest import leftover_processes

GRANDCHILDREN = "sleep 60 & (trap '' TERM; sleep 60) & sleep 60"
"""A command with two grandchildren in its group, one of which ignores SIGTERM."""


def _wait_gone(run_id: str, timeout_s: float) -> float:
    """Seconds until no process of ``run_id`` is left (or ``timeout_s``)."""
    start = time.monotonic()
    while leftover_processes(run_id) and time.monotonic() - start < timeout_s:
        time.sleep(0.05)
    return time.monotonic() - start


def _wait_for(run_id: str, count: int) -> None:
    deadline = time.monotonic() + 10
    while len(leftover_processes(run_id)) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(leftover_processes(run_id)) >= count


def test_a_lost_orchestrator_takes_the_whole_group_down(tmp_path: Path) -> None:
    run_id = f"guard-test-{os.getpid()}-lost"
    group = ProcessGroup(run_id, tmp_path)
    child = group.start("target", ["sh", "-c", GRANDCHILDREN])
    try:
        _wait_for(run_id, 5)  # guard, sh, three sleeps
        assert child.lifeline is not None
        # What the kernel does when the orchestrator dies, however it dies: its end closes.
        os.close(child.lifeline)
        child.lifeline = None
        gone_after = _wait_gone(run_id, GRACE_S + 5)
        assert leftover_processes(run_id) == [], "the group outlived its orchestrator"
        assert gone_after < GRACE_S + 2  # SIGTERM first, SIGKILL for the one that ignores it
    finally:
        group.stop_all()


def test_the_command_s_own_exit_comes_through_and_its_leftovers_die(tmp_path: Path) -> None:
    run_id = f"guard-test-{os.getpid()}-exit"
    with ProcessGroup(run_id, tmp_path) as group:
        code3 = group.start("code3", ["sh", "-c", "sleep 60 & exit 3"])
        termed = group.start("termed", ["sh", "-c", "kill -TERM $$"])
        missing = group.start("missing", ["no-such-command-here"])
        assert code3.popen.wait(timeout=10) == 3
        assert termed.popen.wait(timeout=10) == -signal.SIGTERM
        assert missing.popen.wait(timeout=10) == 127
        assert "cannot start no-such-command-here" in missing.log_tail()
        assert _wait_gone(run_id, 5) < 5  # the `sleep 60` its shell left behind too


def test_the_guard_hands_sockets_through_and_stops_with_the_group(tmp_path: Path) -> None:
    run_id = f"guard-test-{os.getpid()}-fds"
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = (
        "import http.server, socket, sys\n"
        "s = socket.socket(fileno=int(sys.argv[1]))\n"
        "h = http.server.HTTPServer(s.getsockname(), http.server.SimpleHTTPRequestHandler,"
        " bind_and_activate=False)\n"
        "h.socket.close(); h.socket = s; h.serve_forever()\n"
    )
    group = ProcessGroup(run_id, tmp_path)
    try:
        child = group.start(
            "srv",
            ["python3", "-c", server, str(sock.fileno())],
            pass_fds=(sock.fileno(),),
        )
        sock.close()
        deadline = time.monotonic() + 10
        while True:
            try:
                assert httpx.get(f"http://127.0.0.1:{port}/", timeout=1).status_code == 200
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and child.popen.poll() is None
                time.sleep(0.05)
    finally:
        group.stop_all()
    assert child.popen.returncode == -signal.SIGTERM
    assert leftover_processes(run_id) == []


def test_the_guard_leads_a_group_of_its_own_even_if_started_without_one() -> None:
    watch_end, lifeline = os.pipe()
    try:
        # Not in a session of its own: killing "its" group must not take this test down.
        done = subprocess.run(
            guarded(["sh", "-c", "sleep 30 & exit 4"], watch_end), pass_fds=(watch_end,), timeout=10
        )
    finally:
        os.close(watch_end)
        os.close(lifeline)
    assert done.returncode == 4


def test_a_stop_before_the_guard_has_its_own_group_still_reaches_the_process() -> None:
    """The state between the guard's fork and its ``setsid``, held open: a process in the
    caller's group, with no group of its own. ``killpg`` on its pid finds nothing; the stop
    must reach the process all the same (it found no group and signalled nothing, and a
    Ctrl-C just after a start waited for ever: two CI failures)."""
    popen = subprocess.Popen(["sleep", "60"])  # no start_new_session: no group of its own
    try:
        assert os.getpgid(popen.pid) == os.getpgrp() != popen.pid
        signal_group(popen, signal.SIGTERM)
        assert popen.wait(timeout=5) == -signal.SIGTERM
    finally:
        popen.kill()
        popen.wait()
