"""The ``docker`` target: an image the harness runs (or builds first) on a Docker Engine.

How a container lives and dies with the run. The orchestrator does not hold
the container itself: it starts ``python -m harness.run.docker_runner`` like
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
orchestrator is gone (``harness.run.cleanup``). ``collect`` removes what is
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
import re
import socket
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

from harness.core.errors import InputError, RunError
from harness.core.net import LOOPBACK, listener, port_of
from harness.core.selectors import CONTAINER_SOURCE
from harness.results.io import write_text_atomic
from harness.run.docker_runner import DOCKER_SPEC, DockerSpec
from harness.run.health import LOG_TAIL_LINES
from harness.run.manifest import process_identity
from harness.run.target_command import metrics_url, placeholder_values
from harness.run.targets import Launch, PreflightContext, ServiceTarget, TargetContext
from harness.scenario.builds import DockerBuild, DockerImageBuild
from harness.scenario.placeholders import fill

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container
    from docker.models.images import Image

LABEL_RUN = "harness.run"
"""The run id (the run folder's name): which run a container belongs to."""
LABEL_BUILD = "harness.build"
"""The build's key in the run (``after``, or ``after.r2`` with ``--repeat``)."""
LABEL_SCENARIO = "harness.scenario"
LABEL_RUN_DIR = "harness.run-dir"
LABEL_HOST = "harness.host"
"""The host of the ``harness run`` that started it: only that host can tell whether it lives."""
LABEL_ORCHESTRATOR = "harness.orchestrator"
"""The ``harness run`` process as ``manifest.process_identity`` (JSON): gone means a leftover."""

BUILD_TIMEOUT_S = 1800
"""How long an image build may go without a word from the Engine before it is given up."""
ENGINE_TIMEOUT_S = 30
"""How long one call to the Engine may take (checks, listing, removal)."""
STOP_TIMEOUT_S = 1
"""Seconds a container has between SIGTERM and SIGKILL when its build stops. Short: the
orphan guard gives the runner 3 s in all once ``harness run`` died."""

START_HINT = (
    "Start one: `sudo dockerd --iptables=false --bridge=none &` (no bridge network: builds "
    "run with host networking), or `bash .ci/docker-engine.sh`, which also builds the base "
    "image harness-base:bookworm; or point DOCKER_HOST at a running engine"
)

NO_DIGEST = (
    "no registry digest: the image was built or loaded on this engine, never pushed to or "
    "pulled from a registry (the id is what identifies it)"
)


def engine_address() -> str:
    """Where the Docker SDK looks for the Engine: ``DOCKER_HOST``, else its default socket."""
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def connect(timeout_s: int = ENGINE_TIMEOUT_S) -> DockerClient:
    """A client of a Docker Engine that answers; ``RunError`` (exit 3) saying how to start one."""
    try:
        import docker
    except ImportError:  # pragma: no cover - a dependency of the harness
        raise RunError(
            "docker builds need the Docker SDK for Python: pip install 'docker>=7'"
        ) from None
    address = engine_address()
    if address.startswith("unix://"):
        # Knock first: the SDK leaks the socket of a refused connect (a stale socket file
        # left by an Engine that died), and its message says less than this one.
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.settimeout(timeout_s)
                probe.connect(address.removeprefix("unix://"))
        except OSError as exc:
            raise RunError(
                f"no Docker Engine answers at {address} ({exc.strerror or exc}). {START_HINT}"
            ) from None
    client = None
    try:
        client = docker.from_env(timeout=timeout_s)
        client.ping()
    except Exception as exc:  # DockerException, or requests' own (a refused TCP DOCKER_HOST)
        if client is not None:
            client.close()
        name = "" if isinstance(exc, docker.errors.DockerException) else f"{type(exc).__name__}: "
        raise RunError(
            f"no Docker Engine answers at {address} ({name}{_short(exc)}). {START_HINT}"
        ) from None
    return client


def _short(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def repository(scenario: str, build: str) -> str:
    """``harness-<scenario>-<build>`` in the characters an image repository allows."""
    raw = f"harness-{scenario}-{build}".lower()
    name = re.sub(r"[^a-z0-9._-]+", "-", raw)
    name = re.sub(r"[._-]{2,}", "-", name).strip("._-")
    return name[:200]


def image_record(image: Image, built: Mapping[str, object] | None = None) -> dict[str, object]:
    """What the manifest says of an image: id, tags, registry digest (or why there is none)."""
    digests = list(image.attrs.get("RepoDigests") or [])
    record: dict[str, object] = {
        "id": image.id,
        "tags": list(image.tags),
        "digest": digests[0] if digests else None,
    }
    if not digests:
        record["digest_note"] = NO_DIGEST
    if built is not None:
        record["built_from"] = dict(built)
    return record


def find_image(client: DockerClient, name: str) -> Image:
    """The image ``name`` as the Engine has it; ``InputError`` (exit 2) if it has none."""
    import docker

    try:
        return client.images.get(name)
    except docker.errors.ImageNotFound:
        raise InputError(
            f"docker.image {name!r}: no such image on the Docker Engine at {engine_address()}. "
            "The harness runs images the engine has and never pulls one: build it first "
            f"(docker build -t {name} .), or give docker.build: {{context: <folder>}} to let "
            "the harness build it"
        ) from None
    except docker.errors.APIError as exc:
        if exc.status_code is not None and 400 <= exc.status_code < 500:
            raise InputError(f"docker.image {name!r}: {_short(exc)}") from None
        raise RunError(f"docker.image {name!r}: the Docker Engine: {_short(exc)}") from None


def build_image(
    client: DockerClient, context: Path, spec: DockerImageBuild, repo: str
) -> tuple[Image, list[str]]:
    """Build the image of ``spec`` from ``context`` (host networking); the image and its log.

    A failure is a ``RunError`` (exit 3) with the end of the build's log. The image is
    tagged ``<repo>:<12 hex of its id>``; intermediate containers are removed even when
    the build fails.
    """
    import docker

    log: list[str] = []
    image_id: str | None = None
    error: str | None = None
    try:
        stream = client.api.build(
            path=str(context),
            dockerfile=spec.dockerfile,
            buildargs=dict(spec.args),
            network_mode="host",  # the Engines here have no bridge: RUN steps need the host's
            rm=True,
            forcerm=True,
            decode=True,
            timeout=BUILD_TIMEOUT_S,
        )
        for chunk in stream:
            if not isinstance(chunk, dict):
                continue
            text = chunk.get("stream")
            if isinstance(text, str):
                log.extend(line for line in text.splitlines() if line.strip())
                found = re.search(r"Successfully built ([0-9a-f]{12,64})", text)
                if found:
                    image_id = found.group(1)
            aux = chunk.get("aux")
            if isinstance(aux, dict) and isinstance(aux.get("ID"), str):
                image_id = aux["ID"]
            if "error" in chunk:
                error = str(chunk["error"]).strip()
                log.append(error)
    except docker.errors.DockerException as exc:
        error = _short(exc)
    except Exception as exc:  # requests' timeout or a broken connection mid-build
        error = f"{type(exc).__name__}: {_short(exc)}"
    if error is None and image_id is None:
        error = "the Engine did not say which image it built"
    if error is not None:
        tail = "\n".join(log[-LOG_TAIL_LINES:]) or "(the build wrote nothing)"
        raise RunError(
            f"docker build of {context} ({spec.dockerfile}) failed: {error}\n"
            f"Last {LOG_TAIL_LINES} lines of the build:\n{tail}"
        )
    assert image_id is not None
    try:
        image = client.images.get(image_id)
        image.tag(repo, tag=str(image.id).split(":")[-1][:12])
        image.reload()
    except docker.errors.DockerException as exc:
        raise RunError(f"docker build of {context}: the built image: {_short(exc)}") from None
    return image, log


def check_bridge(client: DockerClient) -> None:
    """``network: bridge`` needs the Engine's ``bridge`` network; ``RunError`` (exit 3) when the
    Engine was started without one (``dockerd --bridge=none``, as on the machines here)."""
    import docker

    try:
        found = client.networks.list(names=["bridge"])
    except docker.errors.DockerException as exc:
        raise RunError(f"docker.network bridge: the Docker Engine: {_short(exc)}") from None
    if not any(getattr(net, "name", None) == "bridge" for net in found):
        raise RunError(
            f"docker.network bridge: the Docker Engine at {engine_address()} has no bridge "
            "network (started with --bridge=none?). Use network: host (the default: the "
            "container shares this machine's loopback), or start dockerd with a bridge"
        )


def run_containers(
    client: DockerClient, labels: Mapping[str, str] | None = None
) -> list[Container]:
    """Containers (running or not) the harness labelled, with every label of ``labels``."""
    wanted = [LABEL_RUN] + [f"{k}={v}" for k, v in (labels or {}).items()]
    return list(client.containers.list(all=True, filters={"label": wanted}))


def remove_container(container: Container) -> None:
    """Remove a container whatever its state (SIGKILL if it runs); gone already is fine, and
    so is a removal already in progress (its runner, at the same moment)."""
    import docker

    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code != 409:  # 409: "removal of container ... is already in progress"
            raise


def container_labels(container: Container) -> dict[str, str]:
    labels = container.labels
    return {str(k): str(v) for k, v in (labels or {}).items()}


class DockerTarget(ServiceTarget[DockerBuild]):
    """A ``docker`` build: its container, run by ``harness.run.docker_runner``."""

    def __init__(self, build: DockerBuild) -> None:
        super().__init__(build)
        self.image: dict[str, object] | None = None
        """The image to run as the manifest records it (``image_record``), once checked."""
        self.build_log: list[str] = []

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
        name = container_name(ctx.run_id, ctx.build_dir.name)
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
            argv=(sys.executable, "-m", "harness.run.docker_runner", "--spec", str(path)),
            pass_fds=(stats_fd,),
            hint=f"The container {name} runs image {self.image['id']}; {network}.",
            extra_metrics={CONTAINER_SOURCE: stats_url},
            record={"image": dict(self.image), "container": name},
        )

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


def build_labels(build_dir: Path) -> dict[str, str]:
    """The labels that pick one build's container out of a run's (``harness.run`` and build)."""
    return {LABEL_RUN: build_dir.parent.name, LABEL_BUILD: build_dir.name}


def container_name(run_id: str, key: str) -> str:
    """``harness-<run id>-<build key>``, in the characters a container name allows."""
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", f"harness-{run_id}-{key}")[:200]


def iter_labelled(client: DockerClient) -> Iterator[tuple[Container, dict[str, str]]]:
    """Every container the harness labelled (any run), with its labels."""
    for container in run_containers(client):
        yield container, container_labels(container)
