"""A ``command`` build that burns CPU in a child process, for the phase caps' test.

    python busy_service.py --port N --out FILE

Serves ``GET /health`` (and every other path: 200) on 127.0.0.1:N, starts a child
that spins forever, and every 0.2 s appends ``<unix time> <child's CPU seconds>
<memory limit>`` to FILE (utime + stime from ``/proc/<child>/stat``; the limit of
its own memory cgroup as the kernel shows it, ``-`` when unreadable). The first line is the child's
pid and its ``/proc/<pid>/cgroup``'s cpu line, so the test can see the child is in
the build's cgroup (children included).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TICK = os.sysconf("SC_CLK_TCK")


def memory_limit_file() -> str:
    """Our memory cgroup's limit file: v1 ``memory.limit_in_bytes``, v2 ``memory.max``."""
    with open("/proc/self/cgroup") as f:
        lines = [line.strip().split(":", 2) for line in f]
    for _, controllers, path in lines:
        if "memory" in controllers.split(","):
            return f"/sys/fs/cgroup/memory{path}/memory.limit_in_bytes"
    path = next((p for _, c, p in lines if c == ""), "/")
    return f"/sys/fs/cgroup{path}/memory.max"


def memory_limit(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return "-"


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = b'{"status":"UP"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    with open(f"/proc/{child.pid}/cgroup") as f:
        cpu_line = next(
            (line.strip() for line in f if ":cpu:" in line or line.startswith("0::")), ""
        )
    with open(args.out, "w") as out:
        out.write(f"{child.pid} {cpu_line}\n")

    limit_file = memory_limit_file()

    def sample() -> None:
        while True:
            limit = memory_limit(limit_file)
            with open(args.out, "a") as out:
                out.write(f"{time.time():.4f} {cpu_seconds(child.pid):.4f} {limit}\n")
            time.sleep(0.2)

    threading.Thread(target=sample, daemon=True).start()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    try:
        server.serve_forever()
    finally:
        child.kill()


if __name__ == "__main__":
    main()
