"""Capture real /metrics text from targets/node-gateway (opossum + opossum-prometheus).

Writes ``opossum_sequence_{1_closed_busy,2_open,3_half_open,4_closed}.txt``: one
breaker taken through closed -> open -> half-open -> closed, with four slow
verifications in flight during the first scrape; and ``opossum_no_breaker.txt``
(profile ``before``: no breaker, so no ``circuit`` series at all). Each file
starts with ``#`` comment lines saying how it was made; the rest is the
gateway's answer to ``GET /metrics``, byte for byte.

Run it again (``npm ci`` in targets/node-gateway first) after an upgrade of
opossum, opossum-prometheus or prom-client::

    .venv/bin/python tests/data/capture_opossum.py
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
GATEWAY = HERE.parents[1] / "targets" / "node-gateway"
BREAKER = {"CB_VOLUME_THRESHOLD": "5", "CB_RESET_TIMEOUT_MS": "2000", "CB_TIMEOUT_MS": "3000"}


class Vendor(http.server.BaseHTTPRequestHandler):
    """A vendor that approves or fails, after a delay; the script switches it."""

    mode = {"status": 200, "delay": 0.0}

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        time.sleep(float(self.mode["delay"]))
        status = int(self.mode["status"])
        body = json.dumps({"status": "APPROVED" if status == 200 else "ERROR"}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def versions() -> str:
    found = []
    for pkg in ("opossum", "opossum-prometheus", "prom-client"):
        meta = json.loads((GATEWAY / "node_modules" / pkg / "package.json").read_text())
        found.append(f"{pkg} {meta['version']}")
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True)
    return ", ".join(found) + f", node {node.stdout.strip()}"


class Gateway:
    def __init__(self, vendor_port: int, profile: str, env: dict[str, str]) -> None:
        self.port = free_port()
        self.settings = {"PROFILE": profile, "MAX_CONCURRENCY": "10", **env}
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            ["node", "server.js"],
            cwd=GATEWAY,
            env={
                **os.environ,
                "PORT": str(self.port),
                "PG_URL": f"http://127.0.0.1:{vendor_port}",
                **self.settings,
            },
            stdout=subprocess.DEVNULL,
        )
        for _ in range(100):
            try:
                urllib.request.urlopen(self.base + "/health", timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("node-gateway did not become healthy")

    def verify(self) -> int:
        req = urllib.request.Request(
            self.base + "/api/verify",
            data=b'{"amount":1}',
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return int(r.status)
        except urllib.error.HTTPError as e:
            return int(e.code)

    def save(self, name: str, step: str) -> None:
        text = urllib.request.urlopen(self.base + "/metrics", timeout=5).read().decode()
        settings = " ".join(f"{k}={v}" for k, v in self.settings.items())
        by = "tests/data/capture_opossum.py"
        header = (
            f"# captured from targets/node-gateway by {by} ({versions()})\n"
            f"# settings: {settings}\n# step: {step}\n"
        )
        (HERE / name).write_text(header + text)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def main() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Vendor)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    vendor_port = int(server.server_address[1])
    gw = Gateway(vendor_port, "after", BREAKER)
    try:
        for _ in range(6):
            gw.verify()
        Vendor.mode["delay"] = 1.5
        slow = [threading.Thread(target=gw.verify) for _ in range(4)]
        for t in slow:
            t.start()
        time.sleep(0.5)
        gw.save(
            "opossum_sequence_1_closed_busy.txt",
            "6 approved verifications, then 4 slow ones (1.5 s) in flight during this scrape",
        )
        for t in slow:
            t.join()
        Vendor.mode.update(status=500, delay=0.0)
        for _ in range(14):
            gw.verify()
        gw.save(
            "opossum_sequence_2_open.txt",
            "vendor answers 500: 14 verifications; the breaker opened and refused the last ones",
        )
        time.sleep(2.5)
        gw.save(
            "opossum_sequence_3_half_open.txt",
            "2.5 s later (resetTimeout 2 s): half-open, no call since",
        )
        Vendor.mode["status"] = 200
        for _ in range(4):
            gw.verify()
        gw.save(
            "opossum_sequence_4_closed.txt",
            "vendor approves again: 4 verifications; the probe succeeded and the breaker closed",
        )
    finally:
        gw.stop()
    gw = Gateway(vendor_port, "before", {})
    try:
        for _ in range(3):
            gw.verify()
        gw.save("opossum_no_breaker.txt", "profile before (no breaker): 3 approved verifications")
    finally:
        gw.stop()
        server.shutdown()


if __name__ == "__main__":
    main()
