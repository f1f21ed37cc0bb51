"""Runs one ``docker`` build's container for as long as the process lives, then removes it.

``python -m harness.run.kinds.docker.runner --spec <build>/target.json``, started by the
orchestrator in the build's process group (``harness.run.kinds.docker.target`` writes
the spec: image id, name, labels, environment, command, network, ports, and
the descriptor of a bound loopback listener). It

- creates and starts the container (``init=True``: Docker's init is PID 1 and
  passes SIGTERM on, which a Node or Java PID 1 would ignore);
- copies the container's output, as it comes, to its own stdout
  (``<build>/target.log``);
- serves ``/metrics`` on the listener it was given: ``container_cpu_percent``
  and ``container_memory_bytes``, from the Engine's stats stream (one sample a
  second), which the run's scraper reads as the source ``container``;
- on SIGTERM or SIGINT (the build stops, or the orphan guard saw ``harness
  run`` die) stops the container (``STOP_TIMEOUT_S``, then SIGKILL) and removes
  it: always, in a ``finally``, by name even if it was being created when the
  signal came;
- when the container exits by itself, exits with its code (the run then
  fails with the end of ``target.log``).

It imports only the standard library, the Docker SDK and ``harness.core``.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TypedDict

from harness.core.handoff import Handoff, HandoffError
from harness.core.net import inherited_socket
from harness.core.selectors import RESOURCE_SERIES

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container


class DockerSpec(TypedDict):
    """The runner's hand-off (``target.json``), as ``harness.run.kinds.docker.target`` writes it."""

    kind: str
    image: str
    """The image's id."""
    image_tags: list[str]
    name: str
    """The container's name."""
    labels: dict[str, str]
    env: dict[str, str]
    command: list[str] | None
    """``None``: the image's own."""
    network: str
    """``host`` or ``bridge``."""
    ports: dict[str, int]
    """Container port (``8080/tcp``) -> loopback port it is published on (bridge only)."""
    stats_fd: int
    """The bound listener the runner serves the container's stats on."""
    stop_timeout_s: int


DOCKER_SPEC: Handoff[DockerSpec] = Handoff(
    "docker-spec", 1, tuple(sorted(DockerSpec.__required_keys__))
)
"""A docker build's ``target.json`` (``harness.core.handoff``)."""

STALE_S = 5.0
"""A stats sample older than this is not served (the stream stalled or the container is gone)."""


class Stop(Exception):
    """SIGTERM or SIGINT: stop the container and exit."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise Stop(signal.Signals(signum).name)


def say(text: str) -> None:
    """A line of the runner's own in ``target.log``, told apart from the container's."""
    sys.stdout.write(f"[harness docker] {text}\n")
    sys.stdout.flush()


def cpu_percent(stats: Mapping[str, Any]) -> float | None:
    """CPU of one stats sample as ``docker stats`` shows it: % of one core (200 = two cores).

    (container CPU time delta / system CPU time delta) x online CPUs x 100, between
    this sample and the previous one the Engine puts beside it (``precpu_stats``);
    ``None`` for the first sample, which has no previous one.
    """
    cpu, pre = stats.get("cpu_stats") or {}, stats.get("precpu_stats") or {}
    try:
        used = cpu["cpu_usage"]["total_usage"] - pre["cpu_usage"]["total_usage"]
        system = cpu["system_cpu_usage"] - pre["system_cpu_usage"]
    except (KeyError, TypeError):
        return None
    cpus = cpu.get("online_cpus") or len(cpu["cpu_usage"].get("percpu_usage") or ()) or 1
    if system <= 0 or used < 0:
        return None
    return float(used) / float(system) * float(cpus) * 100.0


def memory_bytes(stats: Mapping[str, Any]) -> float | None:
    """Memory in use less the inactive page cache, as ``docker stats`` counts it.

    cgroup v1 names the cache ``total_inactive_file``, cgroup v2 ``inactive_file``.
    """
    memory = stats.get("memory_stats") or {}
    usage = memory.get("usage")
    if not isinstance(usage, int | float):
        return None
    detail = memory.get("stats") or {}
    inactive = detail.get("total_inactive_file", detail.get("inactive_file", 0)) or 0
    return float(max(0, usage - inactive))


class Gauges:
    """The newest stats sample, as Prometheus text (``exposition``)."""

    def __init__(self) -> None:
        self.values: dict[str, float] = {}
        self.at = 0.0
        self.lock = threading.Lock()

    def update(self, stats: Mapping[str, Any]) -> None:
        read = {
            RESOURCE_SERIES["cpu_pct"]: cpu_percent(stats),
            RESOURCE_SERIES["memory_bytes"]: memory_bytes(stats),
        }
        with self.lock:
            self.values = {k: v for k, v in read.items() if v is not None}
            self.at = time.monotonic()

    def exposition(self) -> str:
        with self.lock:
            values = dict(self.values) if time.monotonic() - self.at <= STALE_S else {}
        helps = {
            RESOURCE_SERIES["cpu_pct"]: "CPU of the build's container, % of one core "
            "(Docker Engine stats)",
            RESOURCE_SERIES["memory_bytes"]: "Memory of the build's container less its inactive "
            "page cache, bytes (Docker Engine stats)",
        }
        lines = []
        for name, value in values.items():
            lines += [f"# HELP {name} {helps[name]}", f"# TYPE {name} gauge", f"{name} {value!r}"]
        return "\n".join(lines) + "\n" if lines else ""


def serve(fd: int, gauges: Gauges) -> ThreadingHTTPServer:
    """Serve ``GET /metrics`` on the inherited listener ``fd``, on a daemon thread."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            body = gauges.exposition().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: ``target.log`` is the container's."""

    sock = inherited_socket(fd, "stats_fd")
    server = ThreadingHTTPServer(sock.getsockname()[:2], Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server


def _copy_logs(container: Container) -> None:
    out = sys.stdout.buffer
    with contextlib.suppress(Exception):  # the container is gone: its stream ends
        stream: Iterator[bytes] = container.logs(stream=True, follow=True)
        for chunk in stream:
            out.write(chunk)
            out.flush()


def _follow_stats(container: Container, gauges: Gauges) -> None:
    with contextlib.suppress(Exception):
        for sample in container.stats(stream=True, decode=True):
            if isinstance(sample, dict):
                gauges.update(sample)


def start_container(client: DockerClient, spec: DockerSpec) -> Container:
    """Create and start the container the spec describes (not yet following it)."""
    network = spec["network"]
    options: dict[str, Any] = {
        "name": spec["name"],
        "labels": dict(spec["labels"]),
        "environment": dict(spec["env"]),
        "network_mode": network,
        "init": True,
        "detach": True,
    }
    if spec["command"] is not None:
        options["command"] = list(spec["command"])
    if network != "host" and spec["ports"]:
        options["ports"] = {
            cport: ("127.0.0.1", int(hport)) for cport, hport in spec["ports"].items()
        }
    container = client.containers.create(spec["image"], **options)
    container.start()
    return container


def remove(client: DockerClient | None, name: str, container: Container | None, grace: int) -> None:
    """Stop (SIGTERM, ``grace`` s, SIGKILL) and remove the container; by name if need be."""
    if client is None:
        return
    import docker

    try:
        if container is None:
            container = client.containers.get(name)
        with contextlib.suppress(docker.errors.APIError):
            container.stop(timeout=grace)
        container.remove(force=True)
        say(f"container {name} removed")
    except docker.errors.NotFound:
        pass  # never created, or gone already
    except Exception as exc:
        say(f"could not remove container {name}: {type(exc).__name__}: {exc}")


def run(spec: DockerSpec) -> int:
    """Run the container until it exits (its code) or a signal comes (0)."""
    import docker

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    name = spec["name"]
    client: DockerClient | None = None
    container: Container | None = None
    gauges = Gauges()
    server = serve(spec["stats_fd"], gauges)
    try:
        client = docker.from_env(timeout=60)
        container = start_container(client, spec)
        say(f"container {name} started from {spec['image']} ({spec['network']} network)")
        logs = threading.Thread(target=_copy_logs, args=(container,), name="logs", daemon=True)
        logs.start()
        threading.Thread(
            target=_follow_stats, args=(container, gauges), name="stats", daemon=True
        ).start()
        # Each stream has a connection of its own from the client's pool; wait() has no read
        # timeout (the SDK passes none), so a container may run for hours.
        code = int(container.wait()["StatusCode"])
        logs.join(timeout=2)
        say(f"the container exited with code {code} before the harness stopped it")
        return code
    except Stop as stop:
        say(f"{stop}: stopping container {name}")
        return 0
    except docker.errors.DockerException as exc:
        say(f"cannot run container {name}: {exc}")
        return 1
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)  # the removal must not be cut short
        remove(client, name, container, spec["stop_timeout_s"])
        server.server_close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", required=True, type=Path, help="the build's target.json")
    args = parser.parse_args(argv)
    try:
        spec = DOCKER_SPEC.read(args.spec)
    except HandoffError as exc:  # said in target.log, which the harness shows
        say(str(exc))
        sys.exit(2)
    sys.exit(run(spec))


if __name__ == "__main__":
    main()
