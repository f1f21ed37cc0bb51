"""A service not written for the harness, with a TCP dependency (a database, say): for
``GET /q`` it opens a connection to DB_HOST:DB_PORT (its own environment; DB_ADDRESS must
say the same), sends one 64-byte line, reads the 64-byte answer and closes. Each call is
one line of LOG_FILE, its own record: start (Unix s), elapsed (s), bytes sent, bytes
received."""

import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOST, PORT = os.environ["DB_HOST"], int(os.environ["DB_PORT"])
assert os.environ["DB_ADDRESS"] == f"{HOST}:{PORT}", os.environ["DB_ADDRESS"]
LOG = os.environ["LOG_FILE"]
LINE = b"x" * 63 + b"\n"
lock = threading.Lock()


def query() -> tuple[float, float, int, int]:
    start = time.time()
    got = b""
    with socket.create_connection((HOST, PORT), timeout=5) as conn:
        conn.sendall(LINE)
        while len(got) < len(LINE):
            chunk = conn.recv(4096)
            if not chunk:
                break
            got += chunk
    return start, time.time() - start, len(LINE), len(got)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/health":
            return self._send(200, b"ok")
        start, elapsed, sent, received = query()
        with lock, open(LOG, "a") as f:
            f.write(f"{start:.6f},{elapsed:.6f},{sent},{received}\n")
        self._send(200 if received == sent else 502, b"done")

    def _send(self, code: int, data: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
