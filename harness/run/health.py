"""Readiness: wait until a build answers its health check, and check its metrics are there.

Both run before any load starts, so a build that is not answering, answers
the wrong status, exits at once, or serves no metrics where the scenario says
fails with a message that says which (``RunError``, exit 3) and, for a
process the harness started, the last lines of its log.
"""

from __future__ import annotations

import time

import httpx

from harness.analysis.series import parse_text
from harness.core.errors import ProcessDied, RunError
from harness.run.processes import Child, ProcessGroup
from harness.run.targets import LOG_TAIL_LINES, Launch

METRICS_WAIT_S = 10.0
"""How long a healthy build's metrics endpoint may take to accept connections."""


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


def wait_healthy(launch: Launch, group: ProcessGroup, name: str = "target") -> None:
    """Poll each of ``launch.health_urls`` until it answers ``launch.health_status``.

    Fails fast if the build's process exits; gives up after
    ``launch.health_timeout_s`` in all. Either way the error carries the last
    lines of the process's log and the launch's hint.
    """
    child = child_named(group, name)
    deadline = time.monotonic() + launch.health_timeout_s
    hint = f"\n{launch.hint}" if launch.hint else ""
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
            if time.monotonic() >= deadline:
                raise RunError(
                    _with_log(
                        f"the {name} was not healthy within {launch.health_timeout_s:g}s: "
                        f"GET {url}: {outcome}{hint}",
                        child,
                    )
                )
            time.sleep(0.1)


def check_metrics(url: str, wait_s: float = METRICS_WAIT_S) -> None:
    """Fail unless ``url`` serves Prometheus text now (scraped all run long, so checked first)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            answer = httpx.get(url, timeout=5.0)
            break
        except httpx.HTTPError as exc:
            if time.monotonic() >= deadline:
                raise RunError(f"metrics: GET {url}: {type(exc).__name__}: {exc}") from None
            time.sleep(0.2)
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
