"""Build kinds: what a scenario's ``builds:`` may be, one module of settings per kind.

A build is exactly one kind, told by its keys (``build_kind``):

- ``profile`` (``target: shop``, the default): the reference shop (``shop``);
- ``command:`` a process the harness starts, stops, and logs to ``<build>/target.log``
  (``command``);
- ``jar:`` a Spring Boot jar run with the build's own Spring properties (``jar``);
- ``docker:`` an image the harness runs (or builds first) on a Docker Engine (``docker``);
- ``url:`` a service already running, which the harness only health-checks,
  loads and scrapes (``url``).

The last four share ``health:`` (what "ready" means) and ``metrics:`` (where the
Prometheus text is and how its series map to the canonical ones): ``service``.
Each kind's model is a ``base.BuildSettings``; ``Build`` below is the one list of
them the scenario validates against. The code that runs each kind is its
sub-package of ``harness.run.kinds`` (registered in ``harness.run.kinds.registry``).

Checks that need the scenario's folder or other top-level keys (``cwd``
exists, ``pg.port`` given for url builds, loopback only) are each kind's
``BuildSettings`` hooks, which ``build_problems`` and ``folder_problems`` (run by
the loader) ask of every build.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, get_args

from pydantic import BaseModel, BeforeValidator, Discriminator, Tag

from harness.scenario.builds.base import BuildSettings, YamlPath
from harness.scenario.builds.command import CommandBuild
from harness.scenario.builds.docker import DockerBuild
from harness.scenario.builds.jar import JarBuild
from harness.scenario.builds.shop import ShopBuild
from harness.scenario.builds.url import UrlBuild

__all__ = [
    "KIND_KEYS",
    "SETTINGS",
    "Build",
    "BuildSettings",
    "CommandBuild",
    "DockerBuild",
    "JarBuild",
    "ShopBuild",
    "UrlBuild",
    "build_kind",
    "build_problems",
    "build_tag",
    "folder_problems",
    "kind_settings",
    "one_kind",
]

KIND_KEYS = ("command", "jar", "docker", "url")
"""The key that makes a build of each non-shop kind; a build with none of them is a shop."""

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
        raise ValueError("a build is a mapping of keys (profile, command, jar, docker or url ...)")
    given = [k for k in ("profile", "target") if k in value][:1] + [
        k for k in KIND_KEYS if k in value
    ]
    if not given:
        raise ValueError(
            "a build needs one of: profile (the reference shop), command (a process the "
            "harness starts), jar (a Spring Boot jar it runs), docker (an image it runs) or "
            "url (a service already running)"
        )
    if len(given) > 1:
        raise ValueError(
            f"a build is exactly one kind, but this one gives {' and '.join(given)}: keep one"
        )
    return value


Build = Annotated[
    Annotated[ShopBuild, Tag("<shop>")]
    | Annotated[CommandBuild, Tag("<command>")]
    | Annotated[JarBuild, Tag("<jar>")]
    | Annotated[DockerBuild, Tag("<docker>")]
    | Annotated[UrlBuild, Tag("<url>")],
    Discriminator(build_tag),
    BeforeValidator(one_kind),
]
"""One variant of the service under test, exactly one kind (see the module)."""

SETTINGS: tuple[type[BuildSettings], ...] = tuple(
    get_args(variant)[0] for variant in get_args(get_args(Build)[0])
)
"""Every kind's settings model, read from ``Build``: the one list of them."""


def kind_settings(value: Any) -> type[BuildSettings]:
    """The settings model of a build's kind (``build_kind``: a YAML mapping or a validated
    build), whose declarations say what the harness can do with it."""
    kind = build_kind(value)
    return next(settings for settings in SETTINGS if settings.kind == kind)


# ---------------------------------------------------------------- checks beyond one build


def build_problems(
    builds: Mapping[str, object], *, pg_port: int | None, allow_remote: bool
) -> list[tuple[YamlPath, str]]:
    """What the builds get wrong given the rest of the scenario: ``(yaml path, message)``.

    Each kind says its own (``BuildSettings.scenario_problems``): a url build needs
    ``pg.port``; its addresses are loopback unless ``allow_remote``.
    """
    found: list[tuple[YamlPath, str]] = []
    for name, build in builds.items():
        if isinstance(build, BuildSettings):
            found += build.scenario_problems(
                ("builds", name), pg_port=pg_port, allow_remote=allow_remote
            )
    return found


def folder_problems(builds: Mapping[str, object], base_dir: Path) -> list[tuple[YamlPath, str]]:
    """Folders the builds name that do not exist, relative to ``base_dir`` (the file's folder).

    Checked before a run and by ``harness validate``, not when a run's own copy
    of the scenario is read back (its folder is the run's).
    """
    found: list[tuple[YamlPath, str]] = []
    for name, build in builds.items():
        if isinstance(build, BuildSettings):
            found += build.folder_problems(("builds", name), base_dir)
    return found
