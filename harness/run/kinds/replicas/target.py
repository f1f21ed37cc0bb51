"""A shop build with ``replicas: N``: N shop processes behind nginx, as a service scaled out.

Seed 002 notes that a breaker's state lives in one instance's memory, so
several instances each have their own; seed 003 scaled out 2x during a
vendor slowdown and only raised the calls reaching the vendor. To measure
either, a build runs as production runs it: N replicas of the reference shop
(``targets/shop``), each its own gunicorn with its own request pool, breaker,
SQLite file and side metrics listener, behind a real load balancer
(``balancer``: nginx, round robin) that the load generator talks
to. ``replicas: 1`` (the default) is the shop alone, exactly as before
(``harness.run.kinds.shop``): no nginx, one scrape source ``target``.

Each replica is prepared as a shop of its own in ``<build>/replica-<i>/``
(``target.json``, ``shop.sqlite``) and runs as the child ``target.<i>``
(log ``<build>/target.<i>.log``); nginx is the child ``nginx`` (log
``<build>/nginx.log``, config ``<build>/nginx.conf``). Every one of them is a
child of the run's process group, under the orphan guard like any other, and
the build fails when any exits. Healthy means every replica answers its
``/health`` and its metrics, then nginx answers ``/health`` (through a replica).

Each replica's metrics are a scrape source of their own (``target.0``,
``target.1``, ...; ``harness.analysis.replicas`` reads them per replica and
summed), and ``collect`` merges every replica's payment records into
``payments.parquet`` with a ``replica`` column.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pandas as pd

from harness.analysis.replicas import replica_source
from harness.core.net import LOOPBACK, listener, port_of
from harness.results.io import payments_from_sqlite, write_parquet_atomic, write_text_atomic
from harness.run.caps.leftovers import CGROUPS
from harness.run.kinds.replicas.balancer import (
    TEMP_DIR,
    find_nginx,
    inherit_env,
    nginx_argv,
    nginx_config,
)
from harness.run.kinds.shop.target import ShopTarget
from harness.run.targets import Kind, Launch, PreflightContext, Process, TargetContext
from harness.scenario.builds.shop import ShopBuild

BALANCER = "nginx"
"""The load balancer's name in the run's process group (its log: ``<build>/nginx.log``)."""

KEEPALIVE_PER_REPLICA = 32
"""Idle upstream connections nginx keeps per replica (more are opened when needed)."""


def replica_dir(build_dir: Path, index: int) -> Path:
    """Where replica ``index`` keeps its config and its SQLite file."""
    return build_dir / f"replica-{index}"


class ReplicatedShopTarget:
    """``replicas`` shops (``ShopTarget`` each, in a folder of its own) behind nginx."""

    preset = "shop"
    metrics_map: Mapping[str, str] = {}
    breaker: str | None = None

    def __init__(self, build: ShopBuild) -> None:
        self.build = build
        self.replicas = build.replicas

    def preflight(self, ctx: PreflightContext) -> None:
        """nginx must be installed before anything starts (exit 3, saying how to get it)."""
        find_nginx()

    def prepare(self, ctx: TargetContext) -> Launch:
        binary = find_nginx()
        shops: list[Launch] = []
        owned: list[int] = []
        try:
            for i in range(self.replicas):
                folder = replica_dir(ctx.build_dir, i)
                folder.mkdir(exist_ok=True)
                shop = ShopTarget(self.build).prepare(replace(ctx, build_dir=folder))
                shops.append(shop)
                owned.extend(shop.pass_fds)
            front = listener()
            port = port_of(front)
            front_fd = front.detach()
            owned.append(front_fd)
            config = nginx_config(
                folder=ctx.build_dir,
                port=port,
                upstreams=[shop.url.removeprefix("http://") for shop in shops],
                read_timeout_s=ctx.client_timeout_s,
                keepalive=KEEPALIVE_PER_REPLICA * self.replicas,
            )
            (ctx.build_dir / TEMP_DIR).mkdir(exist_ok=True)
            write_text_atomic(ctx.build_dir / "nginx.conf", config)
        except BaseException:
            for fd in owned:
                os.close(fd)
            raise
        url = f"http://{LOOPBACK}:{port}"
        replicas = tuple(
            Process(
                name=replica_source(i),
                argv=shop.argv,
                pass_fds=shop.pass_fds,
                health_urls=shop.health_urls,
            )
            for i, shop in enumerate(shops)
        )
        balancer = Process(
            name=BALANCER,
            argv=nginx_argv(binary, ctx.build_dir),
            pass_fds=(front_fd,),
            env=inherit_env(front_fd),
            health_urls=(f"{url}/health",),
        )
        return Launch(
            url=url,
            health_urls=(),
            metrics_url=None,
            processes=(*replicas, balancer),
            extra_metrics={
                replica_source(i): shop.metrics_url
                for i, shop in enumerate(shops)
                if shop.metrics_url is not None
            },
            record={
                "replicas": self.replicas,
                "replica_urls": [shop.url for shop in shops],
                "replica_metrics_urls": [shop.metrics_url for shop in shops],
            },
        )

    def collect(self, build_dir: Path) -> None:
        """Every replica's payment records in one ``payments.parquet``, with a ``replica``
        column (the replica's index) to tell them apart."""
        frames = [
            payments_from_sqlite(replica_dir(build_dir, i) / "shop.sqlite").assign(replica=i)
            for i in range(self.replicas)
        ]
        payments = pd.concat(frames, ignore_index=True)
        payments["replica"] = payments["replica"].astype("int64")
        write_parquet_atomic(payments, build_dir / "payments.parquet")


KIND = Kind(
    "replicas",
    ShopBuild,
    ReplicatedShopTarget,
    runs=lambda build: build.replicas > 1,
    leftovers=CGROUPS,
)
"""A shop build with ``replicas`` above 1: its replicas behind nginx."""
