"""The ``shop`` kind: the reference shop (``targets/shop``), alone, on two loopback listeners.

With ``replicas`` above 1 the shop kind is ``harness.run.kinds.replicas``,
which prepares each replica as a ``ShopTarget``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.core.handoff import Handoff
from harness.core.net import LOOPBACK, listener, port_of
from harness.results.io import payments_from_sqlite, write_parquet_atomic, write_text_atomic
from harness.run.caps.leftovers import CGROUPS
from harness.run.targets import Kind, Launch, TargetContext
from harness.scenario.builds.shop import ShopBuild


def shop_settings(build: ShopBuild) -> dict[str, Any]:
    """The build's settings as the shop reads them (``targets/shop/config.py`` maps them once).

    ``replicas`` is how many shops the harness starts, not a setting of one shop.
    """
    return build.model_dump(mode="json", by_alias=True, exclude={"replicas"})


SHOP_CONFIG: Handoff[dict[str, Any]] = Handoff("shop-config", 1, ("pg-url", "db-path"))
"""The shop's ``target.json`` (``harness.core.handoff``). The shop checks the schema itself
(``targets.shop.config.SCHEMA``, which must say the same): it never imports the harness."""


class ShopTarget:
    """The reference shop (``python -m targets.shop``) on two loopback listeners it inherits.

    Its config file is the build's settings as the scenario gives them (kebab
    case, durations in seconds) plus where to listen and which gateway to call;
    ``targets/shop/config.py`` is the one place that reads them.
    """

    preset = "shop"
    metrics_map: Mapping[str, str] = {}
    breaker: str | None = None

    def __init__(self, build: ShopBuild) -> None:
        self.build = build

    def prepare(self, ctx: TargetContext) -> Launch:
        # The metrics listener sits outside the worker pool, like Spring's management port,
        # so scrapes do not wait in the queue they measure.
        sock, metrics_sock = listener(), listener(backlog=64)
        url = f"http://{LOOPBACK}:{port_of(sock)}"
        metrics_url = f"http://{LOOPBACK}:{port_of(metrics_sock)}/metrics"
        fds = (sock.detach(), metrics_sock.detach())
        try:
            config = {
                **shop_settings(self.build),
                "pg-url": ctx.pg_url,
                "listen-fd": fds[0],
                "metrics-fd": fds[1],
                "db-path": str(ctx.build_dir / "shop.sqlite"),
            }
            path = ctx.build_dir / "target.json"
            write_text_atomic(path, SHOP_CONFIG.text(config))
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return Launch(
            url=url,
            health_urls=(f"{url}/health", metrics_url),
            metrics_url=metrics_url,
            argv=(sys.executable, "-m", "targets.shop", "--config", str(path)),
            pass_fds=fds,
        )

    def collect(self, build_dir: Path) -> None:
        # Read after the shop stopped: recording payments costs its hot path nothing extra.
        payments = payments_from_sqlite(build_dir / "shop.sqlite")
        write_parquet_atomic(payments, build_dir / "payments.parquet")


KIND = Kind(
    "shop", ShopBuild, ShopTarget, runs=lambda build: build.replicas == 1, leftovers=CGROUPS
)
"""The reference shop alone (``replicas: 1``, the default): no load balancer."""
