"""What the kinds of the user's own service share (``command``, ``docker``, ``url``).

Each is a ``ServiceTarget``: what a build of the user's service says of its
metrics and health check is read the same way whatever starts it. The kinds
the harness starts (``command``, and ``docker``'s container) fill the same
placeholders (``harness.scenario.placeholders.fill``) with loopback ports it
picked now (``placeholder_values``), and are scraped at ``metrics_url``.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar

from harness.core.net import LOOPBACK, port_of
from harness.run.targets import Launch, TargetContext
from harness.scenario.builds.service import ServiceBuild

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

    def launch(
        self, url: str, metrics_url: str | None, health_url: str | None = None, **more: Any
    ) -> Launch:
        """The ``Launch`` of the build answering at ``url``: healthy when ``health_url``
        (default: ``health.path`` at ``url``) answers ``health.status`` within
        ``health.timeout``; ``more``: the rest."""
        health = self.build.health
        return Launch(
            url=url,
            health_urls=(health_url or url + health.path,),
            metrics_url=metrics_url,
            health_status=health.status,
            health_timeout_s=health.timeout,
            **more,
        )

    def started(self, values: Mapping[str, str], **more: Any) -> Launch:
        """The ``Launch`` of a process the harness starts, answering on ``{port}``: its health
        check, metrics and the ports it must listen on, from the build and ``values``
        (``placeholder_values``); ``more``: the process (``argv``, ``cwd`` ...)."""
        url = f"http://{LOOPBACK}:{values['port']}"
        return self.launch(
            url,
            metrics_url(self.build, values),
            health_url=health_url(self.build, url, values),
            listen_ports=listen_ports(self.build, values),
            **more,
        )


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports that were free a moment ago (for a process to bind)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(sock)
            sock.bind((LOOPBACK, 0))
        return [port_of(s) for s in socks]
    finally:
        for sock in socks:
            sock.close()


def placeholder_values(ctx: TargetContext, fixed_port: int | None) -> dict[str, str]:
    """What each placeholder stands for in one build's run (ports picked now)."""
    port, metrics_port = free_ports(2)
    return {
        "port": str(fixed_port or port),
        "metrics_port": str(metrics_port),
        "pg_url": ctx.pg_url,
        "run_dir": str(ctx.build_dir.parent.resolve()),
        "build": ctx.build_dir.name,
        **ctx.dependency_values,  # dep.NAME.url, .address, .host, .port
    }


def _port_number(port: int | str, values: Mapping[str, str]) -> str:
    """A ``PortChoice`` as the number it stands for in one build's run."""
    return str(port) if isinstance(port, int) else values[port.strip("{}")]


def health_url(build: ServiceBuild, url: str, values: Mapping[str, str]) -> str:
    """Where a started build's health is checked: ``health.path`` on ``health.port``
    (default: the service's own, ``url``)."""
    port = build.health.port
    if port is None:
        return url + build.health.path
    return f"http://{LOOPBACK}:{_port_number(port, values)}{build.health.path}"


def listen_ports(build: ServiceBuild, values: Mapping[str, str]) -> dict[int, str]:
    """The ports the started build was told to listen on, each with how it was told
    (``server.port``, ``{port}``): ``harness.run.health`` checks its processes do."""
    return {int(values[name]): told for name, told in build.ports_to_listen().items()}


def find_program(program: str, cwd: Path, env: Mapping[str, str]) -> str | None:
    """The executable ``program`` names, as the process would find it; ``None`` if none."""
    if "/" in program:
        path = cwd / program
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    search = env.get("PATH", os.environ.get("PATH", os.defpath))
    return shutil.which(program, path=search)


def metrics_url(build: ServiceBuild, values: Mapping[str, str]) -> str | None:
    """Where a started build's metrics are scraped; ``None`` when ``metrics.path`` is null."""
    if build.metrics.path is None:
        return None
    port = build.metrics.port
    if isinstance(port, int):
        number = str(port)
    elif build.metrics_on_side_port:
        number = values["metrics_port"]
    else:
        number = values["port"]
    return f"http://{LOOPBACK}:{number}{build.metrics.path}"
