"""What the builds of the user's own service share: ``health:`` and ``metrics:``.

The ``command``, ``docker`` and ``url`` kinds (a module each here) are the
user's service, started by the harness or already running; each is a
``ServiceBuild``, so what it says of its health check (what "ready" means) and
of its metrics (where the Prometheus text is and how its series map to the
canonical ones) is read the same way whatever starts it.

**Placeholders** (``{port}``, ``{pg_url}`` ...) in a command's arguments and
environment are filled when the build starts: ``harness.scenario.placeholders``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field

from harness.core.catalogue import CANONICAL_SERIES
from harness.core.durations import Duration
from harness.core.selectors import parse_selector
from harness.core.yamlmodel import StrictModel
from harness.scenario.builds.base import BuildSettings
from harness.scenario.placeholders import placeholders_in

PRESET_NAMES = ("shop", "spring-boot", "opossum", "none")
"""Metric presets (``harness.analysis.series.PRESETS``); ``none``: only what ``map`` gives."""

PresetName = Literal["shop", "spring-boot", "opossum", "none"]

# ---------------------------------------------------------------- health and metrics


def _port_choice(value: object) -> object:
    if value in ("{port}", "{metrics_port}"):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535:
        return value
    raise ValueError('expected "{port}", "{metrics_port}" or a port number 1-65535')


PortChoice = Annotated[int | str, BeforeValidator(_port_choice)]
"""A port: ``"{port}"``, ``"{metrics_port}"`` (filled when the build starts) or a fixed number."""


class Health(StrictModel):
    """When a build is ready: ``GET path`` answers ``status`` (polled until ``timeout``)."""

    path: str = Field("/health", pattern=r"^/", max_length=2000)
    status: int = Field(200, ge=100, le=599)
    timeout: Duration = Field(60.0, gt=0, le=3600, description="give up (exit 3) after this")
    port: PortChoice | None = Field(
        None,
        description='"{port}" (the service port, the default), "{metrics_port}" (a second '
        "one the harness picks: a management port) or a fixed number",
    )


def _selector(text: str) -> str:
    parse_selector(text)
    return text


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


class ServiceBuild(BuildSettings):
    """What every non-shop build shares: its health check and its metrics."""

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

    def ports_to_listen(self) -> dict[str, str]:
        """The placeholders of the ports the service is told to listen on, each with how it
        is told (``{port}`` -> ``server.port``): the harness checks its processes do."""
        return {name: "{" + name + "}" for name in ("port", "metrics_port") if self.uses(name)}

    def _check_port_given(self, port: int | None, where: str) -> None:
        if self.health.port == "{metrics_port}" and not self.uses("metrics_port"):
            raise ValueError(
                'health.port is "{metrics_port}", but the service is never told that port: '
                f"pass {{metrics_port}} in {where}"
            )
        if port is None and not self.uses("port"):
            raise ValueError(
                f"the service is never told where to listen: pass {{port}} in {where} (the "
                "harness picks a free loopback port), or give port: N if its port is fixed"
            )
