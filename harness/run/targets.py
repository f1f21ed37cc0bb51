"""The Target seam: how the orchestrator starts a build, where it answers and how to read it.

A build's kind (``shop``, ``command``, ``docker``, ``url``: the scenario's
``harness.scenario.builds``) names an entry of ``harness.run.registry.TARGETS``;
the factory there turns the build's settings into a ``Target``. The orchestrator then asks it
to ``prepare`` (write its config, bind its ports) and gets back a ``Launch``:
the process to start, if any, and the URLs it answers on. The orchestrator
starts that process in its ``ProcessGroup``, which also stops it, whatever
happens; after the stop, ``collect`` turns what the target left behind into
result files. ``preset`` names how its metrics map to the canonical series
(``harness.analysis.series.PRESETS``), and ``metrics_map`` and ``breaker``
adjust it for one build.

``shop`` (the reference service in ``targets/shop``) is here; the other
kinds have a module each (``target_command``, ``target_docker``, ``target_url``),
each a ``ServiceTarget``: what a build of the user's service says of its metrics and
health check is read the same way whatever starts it.
A target that must check something before the whole run starts (an image)
is also a ``Preflight``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from harness.core.handoff import Handoff
from harness.core.net import LOOPBACK, listener, port_of
from harness.results.io import payments_from_sqlite, write_parquet_atomic, write_text_atomic
from harness.results.manifest import KindRecord
from harness.scenario.bounds import MAX_TIMEOUT_S
from harness.scenario.builds import ServiceBuild
from harness.scenario.schema import ShopBuild


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
    scenario_dir: Path = Path(".")
    """The scenario file's folder: a build's relative paths (``cwd``, a Docker context)
    start there."""
    client_timeout_s: float = MAX_TIMEOUT_S
    """The longest client timeout of the scenario's traffic: a proxy in front of the
    service (a replicated shop's nginx) must wait longer than that for an answer."""


@dataclass(frozen=True)
class Process:
    """One more process of a build besides ``Launch.argv``'s: a replica, a load balancer."""

    name: str
    """Its name in the run's process group; its output goes to ``<build>/<name>.log``."""
    argv: tuple[str, ...]
    pass_fds: tuple[int, ...] = ()
    """Descriptors it inherits; like ``Launch.pass_fds``, they belong to the ``Launch``."""
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    health_urls: tuple[str, ...] = ()
    """Each must answer ``Launch.health_status`` before the next process is checked."""


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
    cwd: Path | None = None
    """Working folder of the process; ``None``: the harness's own."""
    health_status: int = 200
    """The status each of ``health_urls`` must answer."""
    health_timeout_s: float = 60.0
    """How long the build may take to answer them all before the run fails (exit 3)."""
    hint: str = ""
    """Said when the build does not get healthy: what the user should check."""
    extra_metrics: Mapping[str, str] = field(default_factory=dict)
    """More scrape sources besides the target's own (source name -> URL of Prometheus
    text), e.g. a container's CPU and memory (``CONTAINER_SOURCE``)."""
    record: KindRecord = field(default_factory=lambda: KindRecord())
    """Entries the build's manifest records (a container's image: id, tags, digest)."""
    processes: tuple[Process, ...] = ()
    """More processes of the build, started in order (before ``argv``'s) and checked
    healthy in order, each a child of the run's process group: the build fails when
    any exits. A replicated shop is its replicas, then nginx in front of them."""


@dataclass(frozen=True)
class PreflightContext:
    """What a target is told to check its build before the run starts (no folder yet)."""

    build: str
    """The build's name in the scenario."""
    scenario: str
    """The scenario's name."""
    scenario_dir: Path
    """The scenario file's folder, where a build's relative paths start."""


@runtime_checkable
class Preflight(Protocol):
    """A target with something to check (or make) before any build of the run starts.

    The experiment calls ``preflight`` once per build, before the run folder is made and
    before any process starts: a Docker build checks its engine and image, or builds the
    image, so what is missing fails the run at once (``InputError`` for what the scenario
    names wrong, exit 2; ``RunError`` for what the environment lacks, exit 3).
    """

    def preflight(self, ctx: PreflightContext) -> None:
        """Check (or build) what the build needs; raise if it cannot run."""


class Target(Protocol):
    """One build of the service under test, as a run starts, watches and reads it.

    It stops with the run's process group (SIGTERM to the process's group, SIGKILL
    after a grace period); ``collect`` is called after that, even when the build failed.
    """

    @property
    def preset(self) -> str:
        """Name of the metrics preset that maps its series to the canonical ones."""

    @property
    def metrics_map(self) -> Mapping[str, str]:
        """Canonical series -> selector (``name{label="v"}``) that overrides the preset's."""

    @property
    def breaker(self) -> str | None:
        """The breaker to read (its ``name`` label) when the service has several."""

    def prepare(self, ctx: TargetContext) -> Launch:
        """Write its config and bind its ports; say what to start and where it answers."""

    def collect(self, build_dir: Path) -> None:
        """After its process stopped (whatever happened), write what it left as results."""


B = TypeVar("B", bound=ServiceBuild)


class ServiceTarget(Generic[B]):
    """A build of the user's service (``command``, ``docker``, ``url``): its ``metrics``
    settings and its health check, as the scenario gives them."""

    def __init__(self, build: B) -> None:
        self.build = build

    @property
    def preset(self) -> str:
        return self.build.metrics.preset

    @property
    def metrics_map(self) -> Mapping[str, str]:
        return self.build.metrics.map

    @property
    def breaker(self) -> str | None:
        return self.build.metrics.breaker

    def launch(self, url: str, metrics_url: str | None, **more: Any) -> Launch:
        """The ``Launch`` of the build answering at ``url``: healthy when ``health.path``
        there answers ``health.status`` within ``health.timeout``; ``more``: the rest."""
        health = self.build.health
        return Launch(
            url=url,
            health_urls=(url + health.path,),
            metrics_url=metrics_url,
            health_status=health.status,
            health_timeout_s=health.timeout,
            **more,
        )


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
