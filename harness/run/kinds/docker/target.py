"""The ``docker`` target: an image the harness runs (or builds first) on a Docker Engine.

How a container lives and dies with the run. The orchestrator does not hold
the container itself: it starts ``python -m harness.run.kinds.docker.runner`` like
any other process of a build (in the run's ``ProcessGroup``, under the orphan
guard), and that small process owns the container through the Docker SDK:
it creates and starts it (``init=True``, so a Node PID 1 gets its SIGTERM),
streams its logs to its own stdout (``<build>/target.log``), serves the
Engine's CPU and memory stats of it as Prometheus gauges, and on SIGTERM or
SIGINT stops and removes it, in a ``finally``. So a container stops when
the build stops, and when ``harness run`` dies, even by ``kill -9`` (the
guard sends the runner SIGTERM). Only if the runner itself is SIGKILLed
too (a cancelled CI job killing every process at once) is a container left;
each carries labels (``harness.run``, ``harness.build``, the orchestrator's
identity and host), and ``harness clean`` (also run at the start of every
``harness run`` that has docker builds) removes the containers whose
orchestrator is gone (``cleanup``). ``collect`` removes what is
left of a build's container once its processes stopped.

Before any build of the run starts (``preflight``, before the run folder and
the gateway): the Engine must answer (exit 3, saying how to start one), an
``image`` must be on it (the harness never pulls: exit 2 when it is not),
and a ``build`` is built now (host networking, as the Engines here have no
bridge; a failure is exit 3 with the end of the build's log). A built image
is tagged ``harness-<scenario>-<build>:<12 hex of its id>``: the same
content gets the same tag, run after run. The manifest records the image
(``builds.<name>.image``: id, tags, and the registry digest, ``null`` with the
reason for an image that never came from a registry).

The container gets the same placeholders as a ``command`` build (``{port}``,
``{metrics_port}``, ``{pg_url}``, ``{run_dir}``, ``{build}``): with host
networking (the default) it shares the host's loopback with the gateway.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import cast

from harness.core.errors import InputError, RunError
from harness.core.net import LOOPBACK, listener, port_of
from harness.core.selectors import CONTAINER_SOURCE
from harness.results.io import write_text_atomic
from harness.run.kinds.docker.caps import ContainerCapper
from harness.run.kinds.docker.cleanup import CONTAINERS
from harness.run.kinds.docker.engine import (
    LABEL_BUILD,
    LABEL_HOST,
    LABEL_ORCHESTRATOR,
    LABEL_RUN,
    LABEL_RUN_DIR,
    LABEL_SCENARIO,
    STOP_TIMEOUT_S,
    build_image,
    build_labels,
    check_bridge,
    connect,
    container_name,
    find_image,
    image_record,
    remove_container,
    repository,
    run_containers,
)
from harness.run.kinds.docker.runner import DOCKER_SPEC, DockerSpec
from harness.run.kinds.service import ServiceTarget, metrics_url, placeholder_values
from harness.run.manifest import process_identity
from harness.run.targets import Kind, Launch, PreflightContext, TargetContext
from harness.scenario.builds.docker import DockerBuild
from harness.scenario.placeholders import fill


class DockerTarget(ServiceTarget[DockerBuild]):
    """A ``docker`` build: its container, run by ``harness.run.kinds.docker.runner``."""

    def __init__(self, build: DockerBuild) -> None:
        super().__init__(build)
        self.image: dict[str, object] | None = None
        """The image to run as the manifest records it (``image_record``), once checked."""
        self.build_log: list[str] = []
        self.container: str | None = None
        """The container's name, once prepared."""

    def preflight(self, ctx: PreflightContext) -> None:
        """The Engine answers, and the image is there (``image``) or built now (``build``)."""
        spec = self.build.docker
        client = connect()
        try:
            if spec.network == "bridge":
                check_bridge(client)
            if spec.build is not None:
                context = (ctx.scenario_dir / spec.build.context).resolve()
                if not (context / spec.build.dockerfile).is_file():
                    raise InputError(
                        f"docker.build: no {spec.build.dockerfile} in {context} (the context "
                        "is relative to the scenario file's folder)"
                    )
                image, self.build_log = build_image(
                    client, context, spec.build, repository(ctx.scenario, ctx.build)
                )
                built = {
                    "context": str(context),
                    "dockerfile": spec.build.dockerfile,
                    "args": dict(spec.build.args),
                }
                self.image = image_record(image, built)
            else:
                assert spec.image is not None
                self.image = image_record(find_image(client, spec.image))
        finally:
            client.close()

    def prepare(self, ctx: TargetContext) -> Launch:
        if self.image is None:  # not checked by a run's preflight: check now
            self.preflight(
                PreflightContext(
                    build=ctx.build_dir.name.split(".")[0],
                    scenario=ctx.build_dir.parent.parent.name,
                    scenario_dir=ctx.scenario_dir,
                )
            )
        assert self.image is not None
        build, spec = self.build, self.build.docker
        values = placeholder_values(ctx, build.port)
        env = {name: fill(value, values) for name, value in spec.env.items()}
        env.setdefault("HARNESS_RUN_ID", ctx.run_id)
        command = None if spec.command is None else [fill(a, values) for a in spec.command]
        ports = {
            (p if "/" in p else f"{p}/tcp"): int(fill(v, values) if isinstance(v, str) else v)
            for p, v in spec.ports.items()
        }
        run_dir = ctx.build_dir.parent.resolve()
        labels = {
            LABEL_RUN: ctx.run_id,
            LABEL_BUILD: ctx.build_dir.name,
            LABEL_SCENARIO: run_dir.parent.name,
            LABEL_RUN_DIR: str(run_dir),
            LABEL_HOST: socket.gethostname(),
            LABEL_ORCHESTRATOR: json.dumps(process_identity(), sort_keys=True),
        }
        name = self.container = container_name(ctx.run_id, ctx.build_dir.name)
        if self.build_log:
            write_text_atomic(ctx.build_dir / "docker-build.log", "\n".join(self.build_log) + "\n")
        stats = listener(backlog=16)  # the runner serves the container's stats here
        stats_url = f"http://{LOOPBACK}:{port_of(stats)}/metrics"
        stats_fd = stats.detach()
        try:
            record: DockerSpec = {
                "kind": build.kind,
                "image": str(self.image["id"]),
                "image_tags": cast(list[str], self.image["tags"]),
                "name": name,
                "labels": labels,
                "env": env,
                "command": command,
                "network": spec.network,
                "ports": ports,
                "stats_fd": stats_fd,
                "stop_timeout_s": STOP_TIMEOUT_S,
            }
            path = ctx.build_dir / "target.json"
            write_text_atomic(path, DOCKER_SPEC.text(record))
        except BaseException:
            os.close(stats_fd)
            raise
        url = f"http://{LOOPBACK}:{values['port']}"
        network = (
            "with host networking it must listen on the port given as {port} "
            f"({values['port']}) itself"
            if spec.network == "host"
            else "with bridge networking its port must be published to {port} in docker.ports"
        )
        return self.launch(
            url,
            metrics_url(build, values),
            argv=(sys.executable, "-m", "harness.run.kinds.docker.runner", "--spec", str(path)),
            pass_fds=(stats_fd,),
            hint=f"The container {name} runs image {self.image['id']}; {network}.",
            extra_metrics={CONTAINER_SOURCE: stats_url},
            record={"image": dict(self.image), "container": name},
        )

    def capper(self) -> ContainerCapper:
        """A phase's caps go through the Engine's live update of the container."""
        if self.container is None:
            raise RunError("the docker build is capped before it was prepared")
        return ContainerCapper(self.container)

    def collect(self, build_dir: Path) -> None:
        """Remove the build's container if its runner could not (it was killed first).

        Its logs are ``target.log`` already. Without an Engine to ask, nothing is done:
        ``harness clean`` removes such a leftover once the Engine is back.
        """
        try:
            client = connect(timeout_s=10)
        except RunError:
            return
        try:
            for container in run_containers(client, build_labels(build_dir)):
                remove_container(container)
        finally:
            client.close()


KIND = Kind("docker", DockerBuild, DockerTarget, leftovers=CONTAINERS)
"""An image run (or built first) on a Docker Engine; its containers may outlive a kill -9."""
