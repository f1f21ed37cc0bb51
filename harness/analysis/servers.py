"""What server a target runs on, told from the series it exposes: whether it has a worker pool.

Busy and max workers are a thread pool's gauges. A thread-per-request server (Tomcat, Jetty)
has one; Reactor Netty (Spring WebFlux, Spring Cloud Gateway) and Node serve every request
on a few event-loop threads, and a request waiting on a call holds none of them, so there is
no pool to read and advice on exposing one (``server.tomcat.mbeanregistry.enabled=true``)
cannot apply. When a pool series is not measured, ``pool_note`` says why in the service's
own terms, decided only from the series it exposed (never from our targets' names), and
points a server without a pool to requests in flight (``analysis.in_flight``), which the
load generator's samples give any service.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

POOL_SERIES = frozenset({"busy_workers", "max_workers"})
"""The canonical series read from a worker pool."""

IN_FLIGHT = (
    "requests in flight (in_flight.max, in_flight.p50) are its concurrency; a gauge of its own "
    "can still be read with metrics.map"
)


@dataclass(frozen=True)
class Server:
    """A server told by the prefixes of the series it exposes."""

    name: str
    signs: tuple[str, ...]
    """Series name prefixes only this server exposes (any one is enough)."""
    pool: bool
    note: str | None
    """What a pool series not measured means on it; None: the preset's own note holds."""


SERVERS: tuple[Server, ...] = (
    # Spring Boot binds Tomcat's session gauges whatever the MBean registry: its threads'
    # series then need server.tomcat.mbeanregistry.enabled=true (the preset's note).
    Server("Tomcat", ("tomcat_",), pool=True, note=None),
    Server(
        "Jetty",
        ("jetty_",),
        pool=True,
        note="the service runs on Jetty, not Tomcat: map busy_workers to jetty_threads_busy and "
        "max_workers to jetty_threads_config_max",
    ),
    Server(
        "Reactor Netty",
        ("reactor_netty_http_server_", "spring_cloud_gateway_"),
        pool=False,
        note="the service runs on Reactor Netty (Spring WebFlux): a request waiting on a call "
        "holds no thread, so there is no worker pool to read and no Tomcat setting applies; "
        + IN_FLIGHT,
    ),
    Server(
        "Node.js",
        ("nodejs_",),
        pool=False,
        note="the service runs on Node.js: one event loop serves every request and a request "
        "waiting on a call holds nothing, so there is no worker pool to read; " + IN_FLIGHT,
    ),
)
"""Known servers, the ones with a pool first: a Tomcat service that also has a reactive
client's metrics is still Tomcat."""

SPRING_SIGN = "http_server_requests_"
"""Spring Boot's server observation, on every web stack it runs on."""
NOT_TOMCAT = (
    "the service exposes no tomcat_* series, which Spring Boot shows on Tomcat even without "
    "the MBean registry (tomcat_sessions_*): it runs on another server, where no Tomcat "
    "setting applies; on Netty (WebFlux) a request waiting on a call holds no thread and there "
    "is no worker pool to read: " + IN_FLIGHT
)


def server_of(names: Collection[str]) -> Server | None:
    """The server the exposed series ``names`` show, None when they show none."""
    for server in SERVERS:
        if any(name.startswith(server.signs) for name in names):
            return server
    return None


def pool_note(names: Collection[str], series: str, preset_note: str | None) -> str | None:
    """Why pool series ``series`` is not measured, from the series the service exposed
    (``names``): its server's words when they show one without a pool or another than the
    preset's, else the preset's note. Other series keep the preset's."""
    if series not in POOL_SERIES:
        return preset_note
    server = server_of(names)
    if server is not None:
        return server.note or preset_note
    if any(name.startswith(SPRING_SIGN) for name in names):
        return NOT_TOMCAT
    return preset_note
