"""Debian's PostgreSQL server for the tests: a throwaway cluster in a temp folder.

``initdb`` and ``postgres`` refuse to run as root, so under root (CI) both run as the
``postgres`` user Debian's package creates, in a folder that user owns. The server listens
on 127.0.0.1 only (no Unix socket), on a free port, with a password (scram-sha-256), and
is stopped (SIGINT: fast shutdown, then SIGKILL) with its folder removed at the end.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

USER = "shop"
PASSWORD = "shop-secret"
DATABASE = "shop"


def bin_dir() -> Path | None:
    """Debian's server binaries (``/usr/lib/postgresql/<major>/bin``), the newest, if any."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/postgres"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1].parent
    on_path = shutil.which("postgres")
    return Path(on_path).resolve().parent if on_path else None


def why_not() -> str | None:
    """Why the server cannot be started here, or None."""
    found = bin_dir()
    if found is None or not (found / "initdb").is_file():
        return "needs Debian's PostgreSQL server (apt-get install postgresql; .ci/system-deps.sh)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root needs the 'postgres' user (Debian's package creates it)"
    return None


needs_postgres = pytest.mark.skipif(why_not() is not None, reason=why_not() or "")


@dataclass(frozen=True)
class Database:
    """A running server's address and credentials, as a Spring service is given them."""

    port: int
    folder: Path

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def jdbc_url(self, address: str | None = None) -> str:
        return f"jdbc:postgresql://{address or self.address}/{DATABASE}"

    def psql(self, sql: str) -> str:
        """Run one statement with Debian's psql; its unaligned output."""
        found = bin_dir()
        assert found is not None
        done = subprocess.run(
            [str(found / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", USER,
             "-d", DATABASE, "-At", "-v", "ON_ERROR_STOP=1", "-c", sql],
            env={**os.environ, "PGPASSWORD": PASSWORD},
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_user() -> tuple[int, int] | None:
    """The uid and gid to run the binaries as under root (they refuse root), else None."""
    if os.geteuid() != 0:
        return None
    entry = pwd.getpwnam("postgres")
    return entry.pw_uid, entry.pw_gid


def _ready(port: int, server: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    found = bin_dir()
    assert found is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"postgres exited {server.returncode}: {log.read_text()[-2000:]}")
        probe = subprocess.run(
            [str(found / "pg_isready"), "-h", "127.0.0.1", "-p", str(port), "-t", "1"],
            capture_output=True,
        )
        if probe.returncode == 0:
            return
        time.sleep(0.2)
    raise AssertionError(f"postgres not ready after {timeout_s} s: {log.read_text()[-2000:]}")


@contextmanager
def running_postgres(timeout_s: float = 60.0) -> Iterator[Database]:
    """A fresh cluster with database ``shop`` owned by ``shop``; stopped and removed after."""
    found = bin_dir()
    assert found is not None and why_not() is None, why_not()
    ids = _as_user()
    user, group = ids if ids else (None, None)
    # Not under pytest's tmp_path: its parents are 0700 root, which the postgres user
    # cannot enter.
    folder = Path(tempfile.mkdtemp(prefix="harness-pg-"))
    server: subprocess.Popen[bytes] | None = None
    try:
        if ids:
            os.chown(folder, *ids)
        pwfile = folder / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if ids:
            os.chown(pwfile, *ids)
        data = folder / "data"
        init = subprocess.run(
            [str(found / "initdb"), "-D", str(data), "-U", USER, f"--pwfile={pwfile}",
             "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C", "--no-sync"],
            capture_output=True, text=True, timeout=120, user=user, group=group,
        )  # fmt: skip
        assert init.returncode == 0, init.stdout + init.stderr
        port = _free_port()
        log = folder / "postgres.log"
        with log.open("wb") as out:
            server = subprocess.Popen(
                [str(found / "postgres"), "-D", str(data), "-p", str(port),
                 "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
                 "-c", "fsync=off", "-c", "synchronous_commit=off",
                 "-c", "full_page_writes=off", "-c", "max_connections=50"],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                user=user, group=group,
            )  # fmt: skip
        _ready(port, server, log, timeout_s)
        db = Database(port=port, folder=folder)
        created = subprocess.run(
            [str(found / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", USER, DATABASE],
            env={**os.environ, "PGPASSWORD": PASSWORD},
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        yield db
    finally:
        if server is not None:
            _stop(server)
        shutil.rmtree(folder, ignore_errors=True)


def _stop(server: subprocess.Popen[bytes]) -> None:
    """Fast shutdown (SIGINT to the postmaster ends its children too); SIGKILL after 10 s."""
    if server.poll() is None:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
