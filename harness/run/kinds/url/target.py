"""The ``url`` target: a service already running, which the harness neither starts nor stops.

It is health-checked, loaded and scraped where the scenario says. It cannot
be told where the gateway is, so the scenario fixes the gateway's port
(``pg.port``) and the user points the service at it. Addresses are loopback
only unless the scenario and the command line both allow others
(``refuse_remote``, the kind's ``check_remote``).
"""

from __future__ import annotations

from pathlib import Path

from harness.run.kinds.service import ServiceTarget
from harness.run.targets import Kind, Launch, TargetContext
from harness.scenario.builds.url import UrlBuild, remote


class UrlTarget(ServiceTarget[UrlBuild]):
    """A ``url`` build: nothing to start; it must already answer its health check."""

    def prepare(self, ctx: TargetContext) -> Launch:
        return self.launch(
            self.build.url,
            self.build.scrape_url,
            hint=(
                "The harness does not start a url build: start the service first, with its "
                f"gateway URL set to {ctx.pg_url} (pg.port)."
            ),
        )

    def collect(self, build_dir: Path) -> None:
        """Nothing to collect: the service keeps its own records."""


def refuse_remote(name: str, build: UrlBuild, scenario_allows: bool, allowed: bool) -> list[str]:
    """Every address of the build off this machine that the scenario and the command line do
    not both allow, each in words (``allowed``: the command line's ``--allow-remote``)."""
    found: list[str] = []
    for key, url in build.addresses().items():
        if not remote(url):
            continue
        if not scenario_allows:
            found.append(
                f"build {name!r}: {key} {url} is not on this machine; the scenario must "
                "say allow-remote: true (and harness run be given --allow-remote)"
            )
        elif not allowed:
            found.append(
                f"build {name!r}: {key} {url} is not on this machine; the scenario allows "
                "it (allow-remote: true), and the command line must too: add --allow-remote"
            )
    return found


KIND = Kind("url", UrlBuild, UrlTarget, check_remote=refuse_remote)
"""A service already running: loaded where the scenario says, loopback unless allowed."""
