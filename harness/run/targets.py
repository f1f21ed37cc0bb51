"""The Target seam: how the orchestrator starts a build, where it answers and how to read it.

A build's ``target`` key names an entry of ``TARGETS``; the factory there
turns the build's settings into a ``Target``. The orchestrator then asks it
to ``prepare`` (write its config, bind its ports) and gets back a ``Launch``:
the process to start, if any, and the URLs it answers on. The orchestrator
starts that process in its ``ProcessGroup``, which also stops it, whatever
happens; after the stop, ``collect`` turns what the target left behind into
result files. ``preset`` names how its metrics map to the canonical series
(``harness.analysis.series.PRESETS``).

``shop`` (the reference service in ``targets/shop``) is the first kind.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from harness.core.net import LOOPBACK, listener, port_of
from harness.results.io import payments_from_sqlite, write_parquet_atomic
from harness.scenario.schema import Build


@dataclass(frozen=True)
class TargetContext:
    """What a run gives a build's target to prepare it."""

    build_dir: Path
    """The build's folder: the target may write its config here and leave files to collect."""
    pg_url: str
    """The fault-injecting gateway the target must call."""
    run_id: str
    """Marks what the target starts (processes carry it as ``HARNESS_RUN_ID``), so a leak
    can be traced to its run."""


@dataclass(frozen=True)
class Launch:
    """A prepared target: the process to start (if any) and the URLs it answers on."""

    url: str
    """Base URL the load generator sends the scenario's traffic to."""
    health_urls: tuple[str, ...]
    """Each must answer 200 before the load starts."""
    metrics_url: str | None
    """Prometheus text exposition, scraped every interval; ``None``: nothing to scrape."""
    argv: tuple[str, ...] = ()
    """Command of the target's process; empty when there is nothing to start."""
    pass_fds: tuple[int, ...] = ()
    """Descriptors the process inherits (bound listeners); the orchestrator closes its
    own copies once the process has started, so they belong to the ``Launch``."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment of the process."""


class Target(Protocol):
    """One build of the service under test, as a run starts, watches and reads it.

    It stops with the run's process group (SIGTERM to the process's group, SIGKILL
    after a grace period); ``collect`` is called after that, even when the build failed.
    """

    @property
    def preset(self) -> str:
        """Name of the metrics preset that maps its series to the canonical ones."""

    def prepare(self, ctx: TargetContext) -> Launch:
        """Write its config and bind its ports; say what to start and where it answers."""

    def collect(self, build_dir: Path) -> None:
        """After its process stopped (whatever happened), write what it left as results."""


TargetFactory = Callable[[Build], Target]


class ShopTarget:
    """The reference shop (``python -m targets.shop``) on two loopback listeners it inherits.

    Its config file is the build's settings as the scenario gives them (kebab
    case, durations in seconds) plus where to listen and which gateway to call;
    ``targets/shop/config.py`` is the one place that reads them.
    """

    preset = "shop"

    def __init__(self, build: Build) -> None:
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
                **self.build.model_dump(mode="json", by_alias=True),
                "pg-url": ctx.pg_url,
                "listen-fd": fds[0],
                "metrics-fd": fds[1],
                "db-path": str(ctx.build_dir / "shop.sqlite"),
            }
            path = ctx.build_dir / "target.json"
            path.write_text(json.dumps(config, indent=2))
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


TARGETS: dict[str, TargetFactory] = {"shop": ShopTarget}
"""Kinds of target by the ``target`` key of a scenario's build."""


def target_for(build: Build) -> Target:
    """The target a build names (the scenario's schema already checked the key)."""
    return TARGETS[build.target](build)
