"""A tiny service under test for ``command`` builds: standard library only, one thread a request.

    python tiny_service.py --port N [--metrics-port M] [--pg-url URL] [--health-status 503]

``GET /health`` answers ``--health-status``; ``GET /metrics`` (on the main port
and on ``--metrics-port``) is Prometheus text with ``tiny_in_flight`` (requests
being served) and ``tiny_pg_calls_total``; ``GET /api/products/<id>`` answers
at once; ``POST /api/payments`` calls the gateway's ``/v1/payments/approve``
with the request's Idempotency-Key (1 s timeout) and answers 200, or 502.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class State:
    def __init__(self, pg_url: str | None, health_status: int) -> None:
        self.pg_url = pg_url
        self.health_status = health_status
        self.lock = threading.Lock()
        self.in_flight = 0
        self.pg_calls = 0

    def metrics(self) -> bytes:
        with self.lock:
            return (
                "# TYPE tiny_in_flight gauge\n"
                f"tiny_in_flight {self.in_flight}\n"
                "# TYPE tiny_pg_calls counter\n"
                f"tiny_pg_calls_total {self.pg_calls}\n"
            ).encode()


def handler(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def answer(self, status: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/health":
                self.answer(state.health_status, b'{"status":"UP"}')
            elif self.path == "/metrics":
                self.answer(200, state.metrics(), "text/plain; version=0.0.4")
            elif self.path.startswith("/api/products/"):
                self.serve(lambda: (200, b'{"name":"thing"}'))
            else:
                self.answer(404, b"{}")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            if self.path == "/api/payments":
                self.serve(lambda: self.pay(body))
            else:
                self.answer(404, b"{}")

        def serve(self, work: object) -> None:
            with state.lock:
                state.in_flight += 1
            try:
                status, body = work()  # type: ignore[operator]
            finally:
                with state.lock:
                    state.in_flight -= 1
            self.answer(status, body)

        def pay(self, body: bytes) -> tuple[int, bytes]:
            if state.pg_url is None:
                return 200, b'{"status":"APPROVED"}'
            request = urllib.request.Request(
                state.pg_url + "/v1/payments/approve",
                data=body or b"{}",
                method="POST",
                headers={
                    "Content-Type": "application/json",
                    "Idempotency-Key": self.headers.get("Idempotency-Key") or "none",
                },
            )
            with state.lock:
                state.pg_calls += 1
            try:
                with urllib.request.urlopen(request, timeout=1.0) as answer:
                    answer.read()
                return 200, b'{"status":"APPROVED"}'
            except (urllib.error.URLError, OSError) as exc:
                return 502, json.dumps({"status": "FAILED", "error": str(exc)}).encode()

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--metrics-port", type=int)
    parser.add_argument("--pg-url")
    parser.add_argument("--health-status", type=int, default=200)
    args = parser.parse_args()
    state = State(args.pg_url, args.health_status)
    servers = [ThreadingHTTPServer(("127.0.0.1", args.port), handler(state))]
    if args.metrics_port:
        servers.append(ThreadingHTTPServer(("127.0.0.1", args.metrics_port), handler(state)))
    for server in servers:
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"tiny service on 127.0.0.1:{args.port}, health answers {args.health_status}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass
    for server in servers:
        server.shutdown()
    print("tiny service stopped", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
