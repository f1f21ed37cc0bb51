"""A service not written for the harness: ``GET /owners/{id}`` joins two downstream HTTP
services on their own APIs (owners: ``GET /api/owners/{id}?expand=pets``; visits:
``GET /visits?petId={id}`` with a bearer token), answers an empty visit list when visits
fails (a fallback that answers 200), and asks owners for a path nobody stubbed
(``/api/owners/{id}/photo``), ignoring its failure. Its base URLs come from its own
environment (OWNERS_URL, VISITS_URL); it counts every call it makes in COUNTS_FILE, its
own counters, rewritten after each request."""

import contextlib
import json
import os
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OWNERS, VISITS = os.environ["OWNERS_URL"], os.environ["VISITS_URL"]
COUNTS = os.environ["COUNTS_FILE"]
counts = {"owners": 0, "photo": 0, "visits": 0, "visits_failed": 0}
lock = threading.Lock()


def count(name: str) -> None:
    with lock:
        counts[name] += 1
        with open(COUNTS + ".tmp", "w") as f:
            json.dump(counts, f)
        os.replace(COUNTS + ".tmp", COUNTS)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/health":
            return self._send(200, {"ok": True})
        oid = self.path.rsplit("/", 1)[-1]
        count("owners")
        asked = f"{OWNERS}/api/owners/{oid}?expand=pets"
        owner = json.load(urllib.request.urlopen(asked, timeout=2))
        count("photo")
        with contextlib.suppress(urllib.error.HTTPError):
            urllib.request.urlopen(f"{OWNERS}/api/owners/{oid}/photo", timeout=2)
        count("visits")
        try:
            with_token = urllib.request.Request(
                f"{VISITS}/visits?petId={oid}", headers={"Authorization": "Bearer t0k3n"}
            )
            owner["visits"] = json.load(urllib.request.urlopen(with_token, timeout=0.5))["items"]
        except Exception:
            count("visits_failed")
            owner["visits"] = []
        self._send(200, owner)

    def _send(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
