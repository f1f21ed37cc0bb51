"""Which ``Target`` runs a build: one factory per build kind.

A build's kind comes from its keys (``harness.scenario.builds.build_kind``):
``profile`` makes a shop (with ``replicas``, several behind nginx), ``command:``,
``docker:`` and ``url:`` the others.
Each factory takes the validated build of its own kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.core.errors import RunError
from harness.run.target_command import CommandTarget
from harness.run.target_docker import DockerTarget
from harness.run.target_replicas import shop_target
from harness.run.target_url import UrlTarget
from harness.run.targets import Target
from harness.scenario.schema import Build

TargetFactory = Callable[[Any], Target]
"""Makes the target of one build; it is given only builds of its own kind."""

TARGETS: dict[str, TargetFactory] = {
    "shop": shop_target,  # replicas: 1, the shop alone; more, behind nginx
    "command": CommandTarget,
    "docker": DockerTarget,
    "url": UrlTarget,
}
"""Kinds of target by the kind of a scenario's build."""


def target_for(build: Build) -> Target:
    """The target that runs ``build``."""
    factory = TARGETS.get(build.kind)
    if factory is None:
        raise RunError(
            f"{build.kind} builds cannot run yet: this harness has targets for "
            f"{', '.join(sorted(TARGETS))}"
        )
    return factory(build)
