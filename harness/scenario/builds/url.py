"""The ``url`` kind's settings: a service already running, which the harness only
health-checks, loads and scrapes.

The code that runs it is ``harness.run.kinds.url``.
"""

from __future__ import annotations

from typing import Annotated, ClassVar
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, model_validator

from harness.core.net import is_loopback
from harness.scenario.builds.base import Recommendation, SimulatorModel, YamlPath
from harness.scenario.builds.service import ServiceBuild


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
    recommendation: ClassVar[Recommendation] = Recommendation.BUILD_KEYS
    simulator_model: ClassVar[SimulatorModel] = SimulatorModel.NONE
    cappable: ClassVar[bool] = False  # the harness neither starts nor runs it
    url: HttpUrl = Field(description="base URL the traffic is sent to")
    metrics_url: HttpUrl | None = Field(None, description="default: url + metrics.path")

    @model_validator(mode="after")
    def _metrics_url_not_port(self) -> UrlBuild:
        if self.metrics.port is not None:
            raise ValueError("metrics.port is for builds the harness starts; give metrics-url")
        if self.health.port is not None:
            raise ValueError("health.port is for builds the harness starts; its health is at url")
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

    def scenario_problems(
        self, at: YamlPath, *, pg_port: int | None, allow_remote: bool
    ) -> list[tuple[YamlPath, str]]:
        """It needs ``pg.port``; its addresses are loopback unless ``allow_remote``."""
        found: list[tuple[YamlPath, str]] = []
        if pg_port is None:
            found.append(
                (
                    (*at, "url"),
                    "a url build needs pg.port: the harness does not start this service, so it "
                    "cannot tell it where the gateway is. Set pg: {port: N} and point the "
                    "service's gateway URL at http://127.0.0.1:N",
                )
            )
        for key, url in self.addresses().items():
            if remote(url) and not allow_remote:
                found.append(
                    (
                        (*at, key),
                        f"{url} is not on this machine; only loopback addresses (127.0.0.0/8, "
                        "::1, localhost) unless the scenario says allow-remote: true and "
                        "harness run is given --allow-remote",
                    )
                )
        return found


def remote(url: str) -> bool:
    """Whether ``url`` points off this machine (not loopback)."""
    return not is_loopback(urlsplit(url).hostname)
