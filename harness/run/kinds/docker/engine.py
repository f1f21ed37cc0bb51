"""The Docker Engine as the ``docker`` kind uses it: reached, asked for images, containers found.

Every container the harness starts carries labels (``LABEL_*``): which run and
build it belongs to, and the ``harness run`` that started it, so a leftover can
be told from a live one (``harness.run.kinds.docker.cleanup``). The Engine is
reached through the Docker SDK, imported only when a docker build needs it.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.errors import InputError, RunError
from harness.run.targets import LOG_TAIL_LINES
from harness.scenario.builds.docker import DockerImageBuild

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
