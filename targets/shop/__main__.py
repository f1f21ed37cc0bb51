"""Start the shop under gunicorn's ``gthread`` worker: one process, ``workers`` request threads.

When every thread is busy, gunicorn keeps accepting connections and queues
them for the next free thread, the way Tomcat queues behind its 200 threads.
A second, tiny listener serves ``/metrics`` outside that pool (like Spring's
``management.server.port``), so scrapes are not stuck in the very queue they
measure.
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
from http.server import ThreadingHTTPServer
from typing import Any

from gunicorn.app.base import BaseApplication
from prometheus_client.exposition import MetricsHandler

from targets.shop.app import ShopApp
from targets.shop.config import ShopConfig


def _serve_metrics(app: ShopApp, sock: socket.socket) -> None:
    handler = MetricsHandler.factory(app.registry)
    server = ThreadingHTTPServer(sock.getsockname()[:2], handler, bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()


class ShopServer(BaseApplication):  # type: ignore[misc]
    """gunicorn application that builds the shop inside the worker process."""

    def __init__(self, config: ShopConfig) -> None:
        self.config_ = config
        super().__init__()

    def load_config(self) -> None:
        c = self.config_
        bind = f"fd://{c.listen_fd}" if c.listen_fd is not None else f"{c.host}:{c.port}"
        settings: dict[str, Any] = {
            "bind": [bind],
            "workers": 1,
            "worker_class": "gthread",
            "threads": c.workers,
            "worker_connections": 10000,
            "backlog": 2048,
            "timeout": 600,
            "graceful_timeout": 2,
            "keepalive": 30,
            "loglevel": "warning",
            "accesslog": None,
        }
        for key, value in settings.items():
            self.cfg.set(key, value)

    def load(self) -> ShopApp:
        app = ShopApp(self.config_)
        if self.config_.metrics_fd is not None:
            _serve_metrics(app, socket.socket(fileno=self.config_.metrics_fd))
        return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m targets.shop")
    parser.add_argument(
        "--config", required=True, help="settings file (see targets/shop/config.py)"
    )
    args = parser.parse_args(argv)
    try:
        config = ShopConfig.from_file(args.config)
    except ValueError as exc:  # said in target.log, which the harness shows: no traceback
        sys.exit(f"shop: {exc}")
    ShopServer(config).run()


if __name__ == "__main__":
    main()
