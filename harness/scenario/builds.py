"""Build kinds besides the reference shop: ``command``, ``docker`` and ``url``.

A build is exactly one kind, told by its keys (``build_kind``):

- ``profile`` (``target: shop``, the default): the reference shop,
  ``harness.scenario.schema.ShopBuild``;
- ``command:`` a process the harness starts, stops, and logs to ``<build>/target.log``;
- ``docker:`` an image the harness runs (or builds first) on a Docker Engine;
- ``url:`` a service already running, which the harness only health-checks,
  loads and scrapes.

The three share ``health:`` (what "ready" means) and ``metrics:`` (where the
Prometheus text is and how its series map to the canonical ones).

**Placeholders** (``{port}``, ``{pg_url}`` ...) in a command's arguments and
environment are filled when the build starts: ``harness.scenario.placeholders``.

Checks that need the scenario's folder or other top-level keys (``cwd``
exists, ``pg.port`` given for url builds, loopback only) are in
``build_problems``, which the loader runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, model_validator

from harness.core.catalogue import CANONICAL_SERIES
from harness.core.durations import Duration
from harness.core.net import is_loopback
from harness.core.selectors import parse_selector
from harness.core.yamlmodel import StrictModel
from harness.scenario.placeholders import (
    Argv,
    Env,
    as_text,
    no_placeholders,
    placeholders_in,
)

KIND_KEYS = ("command", "docker", "url")
"""The key that makes a build of each non-shop kind; a build with none of them is a shop."""

PRESET_NAMES = ("shop", "spring-boot", "opossum", "none")
"""Metric presets (``harness.analysis.series.PRESETS``); ``none``: only what ``map`` gives."""

PresetName = Literal["shop", "spring-boot", "opossum", "none"]

YamlPath = tuple[str | int, ...]

# ---------------------------------------------------------------- health and metrics


class Health(StrictModel):
    """When a build is ready: ``GET path`` answers ``status`` (polled until ``timeout``)."""

    path: str = Field("/health", pattern=r"^/", max_length=2000)
    status: int = Field(200, ge=100, le=599)
    timeout: Duration = Field(60.0, gt=0, le=3600, description="give up (exit 3) after this")


def _selector(text: str) -> str:
    parse_selector(text)
    return text


def _port_choice(value: object) -> object:
    if value in ("{port}", "{metrics_port}"):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535:
        return value
    raise ValueError('expected "{port}", "{metrics_port}" or a port number 1-65535')


PortChoice = Annotated[int | str, BeforeValidator(_port_choice)]
"""A port: ``"{port}"``, ``"{metrics_port}"`` (filled when the build starts) or a fixed number."""


def _canonical(name: str) -> str:
    if name not in CANONICAL_SERIES:
        raise ValueError(
            f"{name!r} is not a canonical series; known: {', '.join(CANONICAL_SERIES)}"
        )
    return name


class BuildMetrics(StrictModel):
    """Where a build's Prometheus text is and how its series map to the canonical ones."""

    path: Annotated[str, Field(pattern=r"^/", max_length=2000)] | None = Field(
        "/metrics", description="null: scrape nothing"
    )
    port: PortChoice | None = Field(
        None,
        description='"{port}" (the service port), "{metrics_port}" (a second one the harness '
        'picks) or a fixed number; default "{metrics_port}" if the command uses it, else "{port}"',
    )
    preset: PresetName = Field("none", description="the series names of a known stack")
    map: dict[
        Annotated[str, AfterValidator(_canonical)], Annotated[str, AfterValidator(_selector)]
    ] = Field(
        default_factory=dict,
        description='canonical series -> selector (name{label="v"}); overrides the preset',
    )
    breaker: str | None = Field(
        None, min_length=1, max_length=200, description="the breaker's name label, if several"
    )


class ServiceBuild(StrictModel):
    """What every non-shop build shares: its health check and its metrics."""

    kind: ClassVar[str]
    health: Health = Field(default_factory=Health)
    metrics: BuildMetrics = Field(default_factory=BuildMetrics)

    @property
    def profile(self) -> str:
        """How reports label the build (the shop's is its resilience profile)."""
        return self.kind

    def templated(self) -> Iterator[str]:
        """Every text in which placeholders are filled."""
        return iter(())

    def uses(self, name: str) -> bool:
        """Whether placeholder ``{name}`` appears in the build's command or environment."""
        return any(name in placeholders_in(text) for text in self.templated())

    @property
    def metrics_on_side_port(self) -> bool:
        """Metrics are served on ``{metrics_port}`` (explicitly, or because the command uses it)."""
        port = self.metrics.port
        return port == "{metrics_port}" or (port is None and self.uses("metrics_port"))

    def _check_port_given(self, port: int | None, where: str) -> None:
        if port is None and not self.uses("port"):
            raise ValueError(
                f"the service is never told where to listen: pass {{port}} in {where} (the "
                "harness picks a free loopback port), or give port: N if its port is fixed"
            )


# ---------------------------------------------------------------- command


class CommandBuild(ServiceBuild):
    """A process the harness starts in its own process group and stops at the end."""

    kind: ClassVar[str] = "command"
    command: Argv = Field(description="argv list, or a string split like a shell would")
    cwd: Annotated[str, AfterValidator(no_placeholders)] = Field(
        ".", min_length=1, description="working folder, relative to the scenario file's folder"
    )
    env: Env = Field(default_factory=dict)
    port: int | None = Field(
        None, ge=1, le=65535, description="fixed port the service listens on; default: {port}"
    )

    def templated(self) -> Iterator[str]:
        yield from self.command
        yield from self.env.values()

    @model_validator(mode="after")
    def _told_where_to_listen(self) -> CommandBuild:
        self._check_port_given(self.port, "command or env")
        return self


# ---------------------------------------------------------------- docker


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

    context: Annotated[str, AfterValidator(no_placeholders)] = Field(
        min_length=1, description="folder, relative to the scenario file's folder"
    )
    dockerfile: str = Field("Dockerfile", min_length=1, description="relative to the context")
    args: dict[str, Annotated[str, BeforeValidator(as_text)]] = Field(
        default_factory=dict, description="build arguments (ARG)"
    )


class DockerSpec(StrictModel):
    """``docker:``: the container to run (an ``image``, or one ``build`` makes)."""

    image: str | None = Field(None, min_length=1, pattern=r"^\S+$")
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


# ---------------------------------------------------------------- url


def _http_url(text: str) -> str:
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{text!r}: expected an http:// or https:// URL with a host")
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}") from None
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError(f"{text!r}: no query, fragment or credentials here")
    return text.rstrip("/") if parts.path in ("", "/") else text


HttpUrl = Annotated[str, Field(max_length=2000), AfterValidator(_http_url)]


class UrlBuild(ServiceBuild):
    """A service already running: the harness neither starts nor stops it."""

    kind: ClassVar[str] = "url"
    url: HttpUrl = Field(description="base URL the traffic is sent to")
    metrics_url: HttpUrl | None = Field(None, description="default: url + metrics.path")

    @model_validator(mode="after")
    def _metrics_url_not_port(self) -> UrlBuild:
        if self.metrics.port is not None:
            raise ValueError("metrics.port is for builds the harness starts; give metrics-url")
        return self

    @property
    def scrape_url(self) -> str | None:
        """Where its metrics are scraped; ``None`` when ``metrics.path`` is null."""
        if self.metrics_url is not None:
            return self.metrics_url
        return None if self.metrics.path is None else self.url.rstrip("/") + self.metrics.path

    def addresses(self) -> dict[str, str]:
        """``{key: url}`` of every address the harness sends to (traffic, health, metrics)."""
        found = {"url": self.url}
        if self.metrics_url is not None:
            found["metrics-url"] = self.metrics_url
        return found


def remote(url: str) -> bool:
    """Whether ``url`` points off this machine (not loopback)."""
    return not is_loopback(urlsplit(url).hostname)


# ---------------------------------------------------------------- which kind


def build_kind(value: Any) -> str:
    """The kind of a build: from its keys in YAML, from its model once validated."""
    if isinstance(value, dict):
        return next((k for k in KIND_KEYS if k in value), "shop")
    return str(getattr(value, "kind", "shop"))


def build_tag(value: Any) -> str:
    """The union tag of a build's kind; never a YAML key, so error locations skip it."""
    return f"<{build_kind(value)}>"


def one_kind(value: Any) -> Any:
    """Refuse a build that is no kind, or several, before its keys are checked."""
    if isinstance(value, BaseModel):
        return value
    if not isinstance(value, dict):
        raise ValueError("a build is a mapping of keys (profile, command, docker or url ...)")
    given = [k for k in ("profile", "target") if k in value][:1] + [
        k for k in KIND_KEYS if k in value
    ]
    if not given:
        raise ValueError(
            "a build needs one of: profile (the reference shop), command (a process the "
            "harness starts), docker (an image it runs) or url (a service already running)"
        )
    if len(given) > 1:
        raise ValueError(
            f"a build is exactly one kind, but this one gives {' and '.join(given)}: keep one"
        )
    return value


# ---------------------------------------------------------------- checks beyond one build


def build_problems(
    builds: Mapping[str, object], *, pg_port: int | None, allow_remote: bool
) -> list[tuple[YamlPath, str]]:
    """What the builds get wrong given the rest of the scenario: ``(yaml path, message)``.

    A url build needs ``pg.port``; its addresses are loopback unless ``allow_remote``.
    """
    found: list[tuple[YamlPath, str]] = []
    for name, build in builds.items():
        if not isinstance(build, UrlBuild):
            continue
        if pg_port is None:
            found.append(
                (
                    ("builds", name, "url"),
                    "a url build needs pg.port: the harness does not start this service, so it "
                    "cannot tell it where the gateway is. Set pg: {port: N} and point the "
                    "service's gateway URL at http://127.0.0.1:N",
                )
            )
        for key, url in build.addresses().items():
            if remote(url) and not allow_remote:
                found.append(
                    (
                        ("builds", name, key),
                        f"{url} is not on this machine; only loopback addresses (127.0.0.0/8, "
                        "::1, localhost) unless the scenario says allow-remote: true and "
                        "harness run is given --allow-remote",
                    )
                )
    return found


def folder_problems(builds: Mapping[str, object], base_dir: Path) -> list[tuple[YamlPath, str]]:
    """Folders the builds name that do not exist, relative to ``base_dir`` (the file's folder).

    Checked before a run and by ``harness validate``, not when a run's own copy
    of the scenario is read back (its folder is the run's).
    """
    found: list[tuple[YamlPath, str]] = []
    for name, build in builds.items():
        at: YamlPath = ("builds", name)
        if isinstance(build, CommandBuild):
            folder = base_dir / build.cwd
            if not folder.is_dir():
                found.append(((*at, "cwd"), f"{build.cwd!r} is not a folder (looked for {folder})"))
        elif isinstance(build, DockerBuild) and build.docker.build is not None:
            spec = build.docker.build
            context = base_dir / spec.context
            if not context.is_dir():
                found.append(
                    (
                        (*at, "docker", "build", "context"),
                        f"{spec.context!r} is not a folder (looked for {context})",
                    )
                )
            elif not (context / spec.dockerfile).is_file():
                found.append(
                    ((*at, "docker", "build", "dockerfile"), f"no {spec.dockerfile} in {context}")
                )
    return found
