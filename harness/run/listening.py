"""Which TCP ports a started build's processes listen on, read from ``/proc`` (Linux).

A service told ``server.port=N`` that listens on 8080 instead (its own config wins, or it is
no Spring app at all) otherwise shows only as a health check refused until its timeout, or,
when its health is on another port, as a run whose every request is refused. Every child
of the run leads a session of its own (``harness.run.processes``), so the sockets of a
build's whole process tree are those held by the processes of that session: each
``/proc/<pid>/fd`` entry ``socket:[inode]`` matched against the listening rows of
``/proc/net/tcp`` and ``tcp6``. Where ``/proc`` cannot tell, nothing is said.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable
from pathlib import Path

PROC = Path("/proc")
_LISTEN = "0A"
"""``st`` of a listening socket in ``/proc/net/tcp``."""


def _session_of(pid: str) -> int | None:
    try:
        stat = (PROC / pid / "stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) "
    return int(fields[3]) if len(fields) > 3 else None  # state ppid pgrp session


def _socket_inodes(pid: str) -> set[str]:
    found: set[str] = set()
    folder = PROC / pid / "fd"
    try:
        names = os.listdir(folder)
    except OSError:
        return found
    for name in names:
        try:
            target = os.readlink(folder / name)
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(target[8:-1])
    return found


def _address(hex_address: str) -> tuple[str, int]:
    """``0100007F:1F90`` -> ``("127.0.0.1", 8080)``: the kernel's words are little-endian."""
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    if len(words) == 4:
        return str(ipaddress.IPv4Address(words)), int(port, 16)
    v6 = ipaddress.IPv6Address(words)
    text = str(v6.ipv4_mapped) if v6.ipv4_mapped is not None else f"[{v6.compressed}]"
    return text, int(port, 16)


def _listening_rows() -> Iterable[tuple[str, tuple[str, int]]]:
    """``(inode, (address, port))`` of every listening TCP socket this machine shows."""
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) > 9 and parts[3] == _LISTEN:
                yield parts[9], _address(parts[1])


def listening_in_session(session: int) -> set[tuple[str, int]] | None:
    """Addresses the processes of ``session`` listen on; ``None`` when ``/proc`` cannot tell."""
    if not (PROC / "net" / "tcp").is_file():
        return None
    inodes: set[str] = set()
    try:
        pids = [p for p in os.listdir(PROC) if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        if _session_of(pid) == session:
            inodes |= _socket_inodes(pid)
    return {address for inode, address in _listening_rows() if inode in inodes}


def listened_ports() -> set[int] | None:
    """Every TCP port something on this machine listens on; ``None`` when ``/proc`` cannot tell."""
    if not (PROC / "net" / "tcp").is_file():
        return None
    return {port for _, (_, port) in _listening_rows()}


def shown(addresses: Iterable[tuple[str, int]]) -> str:
    """``127.0.0.1:8080 and [::]:9090``, in order."""
    return " and ".join(f"{host}:{port}" for host, port in sorted(addresses, key=lambda a: a[1]))
