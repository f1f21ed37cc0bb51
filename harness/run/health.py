"""Readiness: wait until a build answers its health check, and check its metrics are there.

Both run before any load starts, so a build that is not answering, answers
the wrong status, exits at once, or serves no metrics where the scenario says
fails with a message that says which (``RunError``, exit 3) and, for a
process the harness started, the last lines of its log. A process told which
ports to listen on (``Launch.listen_ports``) whose processes listen on others
instead is said as that (``listens on 127.0.0.1:8080, not on the port it was
given (server.port=N)``), without waiting out the health timeout.
"""

from __future__ import annotations

import time

import httpx

from harness.analysis.series import parse_text
from harness.core.errors import ProcessDied, RunError
from harness.run.listening import listened_ports, listening_in_session, shown
from harness.run.processes import Child, ProcessGroup
from harness.run.targets import LOG_TAIL_LINES, Launch

METRICS_WAIT_S = 10.0
"""How long a healthy build's metrics endpoint may take to accept connections."""
PORTS_SETTLE_S = 5.0
"""How long a process may listen elsewhere, none of its given ports open, before that is
its answer (a JVM opens its ports seconds apart); and how long a healthy one may take
to open the rest of its given ports."""


def child_named(group: ProcessGroup, name: str) -> Child | None:
    """The group's child called ``name``, if it started one."""
    return next((c for c in group.children if c.name == name), None)


def log_tail(group: ProcessGroup, name: str = "target") -> str | None:
    """The last ``LOG_TAIL_LINES`` lines of a child's log; ``None`` if there is no such child."""
    child = child_named(group, name)
    return None if child is None else child.log_tail(LOG_TAIL_LINES)


def _with_log(message: str, child: Child | None) -> str:
    if child is None:
        return message
    tail = child.log_tail(LOG_TAIL_LINES)
    if not tail:
        return f"{message}\n{child.log_path} is empty."
    return f"{message}\nLast {LOG_TAIL_LINES} lines of {child.log_path}:\n{tail}"


def _attempt(url: str, status: int, timeout_s: float) -> str | None:
    """``None`` when ``url`` answers ``status``; else what happened, in words."""
    try:
        answer = httpx.get(url, timeout=timeout_s)
    except httpx.ConnectError:
        return "connection refused"
    except httpx.TimeoutException:
        return f"no answer within {timeout_s:g}s"
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    if answer.status_code == status:
        return None
    return f"answered {answer.status_code}, expected {status}"


def misplaced(child: Child, ports: dict[int, str] | None, *, none_open: bool) -> str | None:
    """Why ``child``'s processes are not where they were told to listen (``ports``: number
    -> how it was told), or ``None``: when they listen on no other port, or ``/proc``
    cannot tell. ``none_open``: only when none of ``ports`` is open yet."""
    if not ports:
        return None
    mine = listening_in_session(child.popen.pid)
    anyone = listened_ports()
    if not mine or anyone is None:
        return None
    missing = {port: told for port, told in ports.items() if port not in anyone}
    others = {address for address in mine if address[1] not in ports}
    if not missing or not others or (none_open and len(missing) < len(ports)):
        return None
    given = ", ".join(f"{told}={port}" for port, told in sorted(missing.items()))
    one = "the port" if len(missing) == 1 else "the ports"
    return f"listens on {shown(others)}, not on {one} it was given ({given})"


def _check_listening(launch: Launch, child: Child | None, name: str) -> None:
    """After its health check passed: every given port open, unless it listens elsewhere."""
    if child is None or not launch.listen_ports:
        return
    deadline = time.monotonic() + PORTS_SETTLE_S
    while True:
        said = misplaced(child, dict(launch.listen_ports), none_open=False)
        if said is None:
            return
        if time.monotonic() >= deadline:
            raise RunError(_with_log(f"the {name} {said}", child))
        time.sleep(0.2)


def wait_healthy(launch: Launch, group: ProcessGroup, name: str = "target") -> None:
    """Poll each of ``launch.health_urls`` until it answers ``launch.health_status``.

    Fails fast if the build's process exits; gives up after
    ``launch.health_timeout_s`` in all. Either way the error carries the last
    lines of the process's log and the launch's hint.
    """
    child = child_named(group, name)
    deadline = time.monotonic() + launch.health_timeout_s
    hint = f"\n{launch.hint}" if launch.hint else ""
    elsewhere: tuple[str, float] | None = None  # what it listens on instead, since when
    next_look = 0.0
    for url in launch.health_urls:
        while True:
            code = None if child is None else child.popen.poll()
            if code is not None:
                raise ProcessDied(
                    _with_log(
                        f"the {name} exited with code {code} before it answered at {url}{hint}",
                        child,
                    )
                )
            left = deadline - time.monotonic()
            outcome = _attempt(url, launch.health_status, max(0.2, min(2.0, left)))
            if outcome is None:
                break
            if child is not None and launch.listen_ports and time.monotonic() >= next_look:
                next_look = time.monotonic() + 1.0  # /proc is read once a second at most
                said = misplaced(child, dict(launch.listen_ports), none_open=True)
                if said is None or elsewhere is None or elsewhere[0] != said:
                    elsewhere = None if said is None else (said, time.monotonic())
                elif time.monotonic() - elsewhere[1] >= PORTS_SETTLE_S:
                    raise RunError(_with_log(f"the {name} {said}", child))
            if time.monotonic() >= deadline:
                raise RunError(
                    _with_log(
                        f"the {name} was not healthy within {launch.health_timeout_s:g}s: "
                        f"GET {url}: {outcome}{hint}",
                        child,
                    )
                )
            time.sleep(0.1)
    _check_listening(launch, child, name)


SPRING_NOT_EXPOSED = (
    "Spring Boot's actuator does not expose its prometheus endpoint: add prometheus to "
    "management.endpoints.web.exposure.include (e.g. "
    "--management.endpoints.web.exposure.include=health,prometheus), and have "
    "io.micrometer:micrometer-registry-prometheus on the classpath (or give metrics: "
    "{path: null} to scrape nothing)"
)
"""Why a spring-boot build's ``/actuator/prometheus`` answers 404: Actuator serves only the
endpoints it exposes (by default health alone), and prometheus only with Micrometer's registry."""


def check_metrics(url: str, wait_s: float = METRICS_WAIT_S, preset: str | None = None) -> None:
    """Fail unless ``url`` serves Prometheus text now (scraped all run long, so checked first).

    ``preset``: the build's metrics preset, for a hint in its own terms (``spring-boot``).
    """
    deadline = time.monotonic() + wait_s
    while True:
        try:
            answer = httpx.get(url, timeout=5.0)
            break
        except httpx.HTTPError as exc:
            if time.monotonic() >= deadline:
                raise RunError(f"metrics: GET {url}: {type(exc).__name__}: {exc}") from None
            time.sleep(0.2)
    if answer.status_code == 404 and preset == "spring-boot" and url.endswith("/prometheus"):
        raise RunError(f"metrics: GET {url} answered 404. {SPRING_NOT_EXPOSED}")
    if answer.status_code != 200:
        raise RunError(
            f"metrics: GET {url} answered {answer.status_code}, so there are no Prometheus "
            "metrics to scrape there. Check the build's metrics.path and metrics.port "
            "(Spring Boot: path /actuator/prometheus), or give metrics: {path: null} "
            "to scrape nothing"
        )
    try:
        parse_text(answer.text, 0.0, "target")
    except ValueError as exc:
        raise RunError(f"metrics: GET {url} is not Prometheus text: {exc}") from None
