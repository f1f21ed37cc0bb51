"""An HTTP/1.1 server whose answers follow a script chosen by the path: standard library only.

    python scripted_server.py LOG_FILE [CERT KEY]   (prints its port, serves until killed)

One thread per connection, keep-alive, requests read one after the other.
Every request is appended to LOG_FILE as a JSON line (connection number,
method, path, headers in lower case, body), so a test sees what was sent and
on which connection. Paths:

  /cl            200, Content-Length, X-Outcome: cl
  /chunked       200, chunked (with a chunk extension and a trailer)
  /interim       100 Continue, then 200
  /nocontent     204, no body
  /until-close   200 without a length: the body runs until the server closes
  /http10        an HTTP/1.0 answer (no keep-alive): then closes
  /close         200 with Connection: close, then closes
  /drop-idle     200, then closes the idle connection (a keep-alive timeout)
  /drop-next     200; the next request on that connection is read and not answered:
                 the connection is closed at once
  /status/N      status N, X-Outcome: scripted
  /hang          never answers (until the client goes)
  /garbage       not HTTP
  /slow          200, half the body, 0.3 s, the rest
  anything else  200, Content-Length
"""

from __future__ import annotations

import itertools
import json
import socket
import socketserver
import ssl
import sys
import threading
import time

_LOCK = threading.Lock()
_IDS = itertools.count()


def _answer(status: int, body: bytes = b"ok", extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


class Handler(socketserver.BaseRequestHandler):
    log_path = ""

    def handle(self) -> None:
        sock: socket.socket = self.request
        conn, buf, drop_next = next(_IDS), b"", False
        while True:
            while b"\r\n\r\n" not in buf:
                data = sock.recv(65536)
                if not data:
                    return
                buf += data
            head, _, buf = buf.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ")
            headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
            length = int(headers.get("content-length", "0"))
            while len(buf) < length:
                buf += sock.recv(65536)
            body, buf = buf[:length], buf[length:]
            with _LOCK, open(self.log_path, "a") as log:
                entry = {"conn": conn, "method": method, "path": path, "headers": headers}
                log.write(json.dumps({**entry, "body": body.decode("latin-1")}) + "\n")
            if drop_next:
                return  # read, never answered
            if not self.reply(sock, path):
                return
            drop_next = path == "/drop-next"

    def reply(self, sock: socket.socket, path: str) -> bool:
        """Answer one request; False when the connection ends after it."""
        if path == "/chunked":
            sock.sendall(
                b"HTTP/1.1 200 X\r\nTransfer-Encoding: chunked\r\nX-Outcome: chunked\r\n\r\n"
                b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: t\r\n\r\n"
            )
        elif path == "/interim":
            sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n" + _answer(200, b"after"))
        elif path == "/nocontent":
            sock.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")
        elif path == "/until-close":
            sock.sendall(b"HTTP/1.1 200 X\r\n\r\nbody until the end")
            return False
        elif path == "/http10":
            sock.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
            return False
        elif path == "/close":
            sock.sendall(_answer(200, extra="Connection: close\r\n"))
            return False
        elif path == "/drop-idle":
            sock.sendall(_answer(200))
            return False
        elif path.startswith("/status/"):
            sock.sendall(_answer(int(path[8:]), b"no", "X-Outcome: scripted\r\n"))
        elif path == "/hang":
            while sock.recv(65536):
                pass
            return False
        elif path == "/garbage":
            sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            return False
        elif path == "/slow":
            sock.sendall(b"HTTP/1.1 200 X\r\nContent-Length: 10\r\n\r\n12345")
            time.sleep(0.3)
            sock.sendall(b"67890")
        elif path == "/cl":
            sock.sendall(_answer(200, b"hello", "X-Outcome: cl\r\n"))
        else:
            sock.sendall(_answer(200))
        return True


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main() -> None:
    Handler.log_path = sys.argv[1]
    with Server(("127.0.0.1", 0), Handler) as server:
        if len(sys.argv) > 3:  # TLS, with this certificate and key
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(sys.argv[2], sys.argv[3])
            server.socket = context.wrap_socket(server.socket, server_side=True)
        print(server.server_address[1], flush=True)
        server.serve_forever()


if __name__ == "__main__":
    main()
