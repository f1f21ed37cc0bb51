"""The ``docker`` kind's settings: an image the harness runs (or builds first) on a Docker Engine.

The code that runs it is ``harness.run.kinds.docker``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from harness.core.yamlmodel import StrictModel
from harness.scenario.builds.base import Recommendation, SimulatorModel, YamlPath
from harness.scenario.builds.service import PortChoice, ServiceBuild
from harness.scenario.placeholders import Argv, Env, Plain, as_text, no_nul


def _port_keys(value: object) -> object:
    if isinstance(value, dict):
        return {str(k) if isinstance(k, int) else k: v for k, v in value.items()}
    return value


def _container_port(text: str) -> str:
    if not re.fullmatch(r"\d{1,5}(/(tcp|udp))?", text) or not 1 <= int(text.split("/")[0]) <= 65535:
        raise ValueError(f"container port {text!r}: expected a number such as 8080 or 8080/tcp")
    return text


class DockerImageBuild(StrictModel):
    """``docker.build``: build the image first, from a folder with a Dockerfile."""

    context: Plain = Field(
        min_length=1, description="folder, relative to the scenario file's folder"
    )
    dockerfile: Annotated[str, AfterValidator(no_nul)] = Field(
        "Dockerfile", min_length=1, description="relative to the context"
    )
    args: dict[
        Annotated[str, AfterValidator(no_nul)],
        Annotated[str, BeforeValidator(as_text), AfterValidator(no_nul)],
    ] = Field(default_factory=dict, description="build arguments (ARG)")


class DockerSpec(StrictModel):
    """``docker:``: the container to run (an ``image``, or one ``build`` makes)."""

    image: Annotated[str, AfterValidator(no_nul)] | None = Field(
        None, min_length=1, pattern=r"^\S+$"
    )
    build: DockerImageBuild | None = None
    env: Env = Field(default_factory=dict)
    command: Argv | None = Field(None, description="overrides the image's CMD")
    network: Literal["host", "bridge"] = Field(
        "host", description="host: the container shares loopback with the gateway"
    )
    ports: Annotated[
        dict[Annotated[str, AfterValidator(_container_port)], PortChoice],
        BeforeValidator(_port_keys),
    ] = Field(default_factory=dict, description='bridge only: container port -> "{port}" or N')

    @model_validator(mode="after")
    def _image_or_build(self) -> DockerSpec:
        if (self.image is None) == (self.build is None):
            raise ValueError(
                "give exactly one of image (an image to run) or build (a folder to build it from)"
            )
        if self.ports and self.network == "host":
            raise ValueError(
                "ports apply with network: bridge only; with host networking the service "
                "listens on the host's ports itself (pass it {port})"
            )
        return self


class DockerBuild(ServiceBuild):
    """A container the harness runs on a Docker Engine, labelled with the run id and removed."""

    kind: ClassVar[str] = "docker"
    recommendation: ClassVar[Recommendation] = Recommendation.BUILD_KEYS
    simulator_model: ClassVar[SimulatorModel] = SimulatorModel.NONE
    docker: DockerSpec
    port: int | None = Field(
        None, ge=1, le=65535, description="fixed port the service listens on; default: {port}"
    )

    def templated(self) -> Iterator[str]:
        yield from self.docker.command or ()
        yield from self.docker.env.values()
        yield from (p for p in self.docker.ports.values() if isinstance(p, str))

    @model_validator(mode="after")
    def _told_where_to_listen(self) -> DockerBuild:
        self._check_port_given(self.port, "docker.env, docker.command or docker.ports")
        return self

    def folder_problems(self, at: YamlPath, base_dir: Path) -> list[tuple[YamlPath, str]]:
        spec = self.docker.build
        if spec is None:
            return []
        context = base_dir / spec.context
        if not context.is_dir():
            return [
                (
                    (*at, "docker", "build", "context"),
                    f"{spec.context!r} is not a folder (looked for {context})",
                )
            ]
        if not (context / spec.dockerfile).is_file():
            return [((*at, "docker", "build", "dockerfile"), f"no {spec.dockerfile} in {context}")]
        return []
